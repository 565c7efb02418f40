"""The offline `heuristic` backend: a rule-based composer of staged dense rewards (no language model).

Why it exists: the toolkit must run end to end with no model and no network, and a loop needs a
baseline that any model's rewards should beat. It reads the task's text (description, view notes,
success test) and its state view's fields, picks a plan by fixed rules (reach, pick-and-place, push,
operate an articulated part, tool use, forward locomotion, flips, leg raise, lie down, or a
documented fallback), and writes a program of bounded, gated terms. Every program says in its first
line that rules, not a model, composed it; replies carry `rule_based=True`.

Samples of one round differ in weights, kernel scales and kernel shape, drawn by an RNG seeded with
(seed, task id, round, sample index), so reruns are reproducible. Feedback (component statistics,
success rate, a human critique) changes the next round's constants by deterministic rules, and each
rule that fired is written into the program as a comment.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import re
import time
import typing
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim_envs.errors import ConfigError
from sim_envs.registry import get_task
from sim_envs.task import Task
from text2reward.generation.llm import primitives as P
from text2reward.generation.llm.base import GenerationRequest, Reply

NAME = "heuristic"
MODEL = "rule-based-v1"
HEADER = "Composed by text2reward's rule-based heuristic backend (no language model) for {task_id}"
BASE_SIGMA = 0.3
"""Log-normal spread of a sample's constants around the base, at temperature 1."""
WEIGHT_CAP = 20.0
"""Feedback rules never raise a weight past this, however many rounds keep asking for more."""


# --- what the task offers: view fields and text ---


def view_fields(view_class: type, prefix: str = "self") -> dict[str, str]:
    """Every readable attribute path of a view and its documented meaning."""
    out: dict[str, str] = {}
    try:
        hints = typing.get_type_hints(view_class)
    except Exception:  # a user view whose annotations do not resolve: fall back to the raw types
        hints = {}
    for f in dataclasses.fields(view_class):
        path = f"{prefix}.{f.name}"
        out[path] = str(f.metadata.get("doc", ""))
        annotation = hints.get(f.name, f.type)
        for candidate in typing.get_args(annotation) or (annotation,):
            if dataclasses.is_dataclass(candidate) and isinstance(candidate, type):
                out.update(view_fields(candidate, path))
    return out


@dataclass(frozen=True)
class TaskText:
    """The words the rules read, lower-cased: what the user asked for, and what the task notes say."""

    description: str
    notes: str
    success: str

    @classmethod
    def of(cls, task: Task) -> TaskText:
        return cls(task.description.lower(), (task.view_notes or "").lower(), (task.success_doc or "").lower())

    @property
    def all(self) -> str:
        return " ".join([self.description, self.notes, self.success])


def header_for(task_id: str) -> str:
    """The program's first line (without '# '): how a reader, and the next round, recognise it."""
    return HEADER.format(task_id=one_line(task_id, 200))


def find(pattern: str, text: str) -> str | None:
    match = re.search(pattern, text)
    return match.group(0) if match else None


def number(pattern: str, text: str, default: float) -> tuple[float, bool]:
    """The first number captured by `pattern` in `text`, and whether it came from the text."""
    match = re.search(pattern, text)
    return (float(match.group(1)), True) if match else (default, False)


def one_line(text: str, limit: int = 160) -> str:
    """Safe inside a `#` comment: one line, bounded."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# --- manipulation plans ---

REACH_WORDS = (
    r"\b(move|bring|put|place|position|get|send|take)s? (the |its |your )?(gripper|hand|end[- ]effector|arm|fingers?|fingertips)\b"
    r"|\breach(es)? (for |to )?(the |a )?(goal|target|point)\b|\btouch(es)? the (goal|target|point)\b"
)
PICK_WORDS = r"\b(pick(s|ed|ing)?( up| out)?|lift(s|ed|ing)?|grasp(s|ed|ing)?|grab(s|bed|bing)?|carry|carries|dunk(s)?|hold(s)?)\b"
ARTICULATED_WORDS = (
    r"\b(doors?|drawers?|windows?|buttons?|handles?|levers?|dials?|knobs?|faucets?|taps?|switch(es)?|valves?)\b"
    r"|\b(press(es)?|turn(s)?|unlock(s)?|lock(s)?|rotate(s)?|twist(s)?)\b"
)
PUSH_WORDS = r"\b(push(es)?|pull(s)?|slide(s)?|sweep(s)?|shove(s)?|drag(s)?|kick(s)?|roll(s)?|nudge(s)?|insert(s)?|move(s)?|bring(s)?|put(s)?)\b"
IN_AIR_WORDS = r"\bin the air\b|\babove the table\b"
STRIKE_WORDS = r"\b(strike|struck|hit|throw|shoot|flick)\b|out of (the )?(gripper'?s |arm'?s |robot'?s )?reach|beyond (the )?(gripper'?s |arm'?s |robot'?s )?reach"
SETTLE_WORDS = r"\b(stops?|stays?|rests?|settles?|comes? to rest)\b"


def classify_manipulation(text: TaskText, fields: dict[str, str]) -> tuple[str, str]:
    """(archetype, why) for an arm task, by ordered rules on the description and the view notes."""
    has_obj = "self.obj.position" in fields
    desc = text.description
    if not has_obj:
        return "reach", "the view has no object, only the gripper and a goal"
    if word := find(REACH_WORDS, desc):
        return "reach", f'the task text says "{word}"'
    if "ignores" in text.notes:
        return "reach", 'the task notes say the object is ignored ("ignores")'
    pick = find(PICK_WORDS, desc)
    if pick and "self.obj2.position" in fields and re.search(r"\bobj2\b", text.notes):
        return "tool", f'the task text says "{pick}" and the notes name a second object (obj2) to act on'
    if pick:
        return "pick_place", f'the task text says "{pick}"'
    if word := find(ARTICULATED_WORDS, desc):
        return "articulate", f'the task text names an articulated part or motion ("{word}")'
    if word := find(PUSH_WORDS, desc):
        if air := find(IN_AIR_WORDS, desc + " " + text.notes):
            return "pick_place", f'the task text says "{word}" with a goal "{air}", which needs lifting'
        return "push", f'the task text says "{word}" (move the object without lifting it)'
    return "fallback_reach", "no rule matched the task text"


@dataclass(frozen=True)
class Arm:
    """What the view says about the gripper and the object, for the manipulation primitives."""

    pads: bool
    """Finger-pad positions exist (MetaWorld): a grasp needs the object between them."""
    width_full: float | None
    """Only a finger width exists (Fetch): its fully-open value, read from the field's doc."""
    obj_velocity: bool

    @classmethod
    def of(cls, fields: dict[str, str]) -> Arm:
        pads = "self.robot.left_pad_position" in fields and "self.robot.right_pad_position" in fields
        width_full = None
        if not pads and "self.robot.gripper_width" in fields:
            width_full, _ = number(r"(\d*\.\d+)\s*(?:m\s*)?fully open", fields["self.robot.gripper_width"], 0.1)
        return cls(pads, width_full, "self.obj.velocity" in fields)


def success_radius(plan: P.Plan) -> str:
    return plan.param("SUCCESS_RADIUS", 0.05, "m, goal distance that earns the success bonus", jitter=False)


def reach_plan(archetype: str, reason: str, task: Task, text: TaskText, arm: Arm) -> P.Plan:
    plan = P.Plan(archetype, reason, ["reach the goal", "success"])
    P.arm_prelude(plan, with_object=False)
    if archetype == "fallback_reach":
        plan.notes.append("Fallback: no rule matched the task text, so this is the documented generic reward:")
        plan.notes.append("bring the gripper to the goal position. Edit the task text or use a model backend for more.")
    # One term carries the whole task, so it gets the weight a staged plan spreads over its stages
    # (per-step reward up to 10, MetaWorld's scale): with weights 1 and 2, SAC on reach-v3 reached
    # 0.2 success by 16k steps; with 5 and 5, 0.6 (one seed each).
    P.add_reach(plan, "d_goal", "gripper to the goal", 5.0, 5.0)
    P.add_success(plan, f"d_goal < {success_radius(plan)}", 5.0, "bonus while the gripper is at the goal")
    return plan


def tool_plan(archetype: str, reason: str, task: Task, text: TaskText, arm: Arm) -> P.Plan:
    plan = P.Plan(archetype, reason, ["reach the tool", "grasp it", "lift it", "bring it to the target", "move the target to the goal", "success"])
    plan.prelude.append("target = np.asarray(self.obj2.position, dtype=float) if self.obj2 is not None else np.asarray(self.obj.position, dtype=float)")
    P.arm_prelude(plan, with_object=True, target="target")
    P.add_reach(plan, "d_reach", "gripper to the tool (obj)", 10.0, 1.0)
    P.add_grasp(plan, arm.pads, arm.width_full, 1.0)
    deliver_k = plan.param("K_DELIVER", 8.0, "1/m, sharpness of the 'deliver' kernel")
    P.add_lift(plan, 0.03, deliver_k, 0.5)
    plan.prelude.append("d_tool = float(np.linalg.norm(obj - target))  # tool to the target object")
    P.add_goal_term(plan, "approach", "d_tool", "grasped", 5.0, 1.0, "bring the held tool to the target object (obj2)")
    radius = success_radius(plan)
    P.add_goal_term(plan, "deliver", "d_goal", f"grasped or d_goal < {radius}", 8.0, 3.0, "target object (obj2) to the goal, while the tool is held")
    P.add_success(plan, f"d_goal < {radius}", 5.0, "bonus while the target object is at the goal")
    return plan


def pick_place_plan(archetype: str, reason: str, task: Task, text: TaskText, arm: Arm) -> P.Plan:
    plan = P.Plan(archetype, reason, ["reach the object", "grasp it", "lift it", "place it at the goal", "success"])
    P.arm_prelude(plan, with_object=True)
    P.add_reach(plan, "d_reach", "gripper to the object", 10.0, 1.0)
    P.add_grasp(plan, arm.pads, arm.width_full, 1.0)
    place_k = plan.param("K_PLACE", 8.0, "1/m, sharpness of the 'place' kernel")
    P.add_lift(plan, 0.05, place_k, 1.0)
    radius = success_radius(plan)
    P.add_goal_term(plan, "place", "d_goal", f"grasped or d_goal < {radius}", 8.0, 3.0, "object to the goal, while it is held (or already there)")
    P.add_success(plan, f"d_goal < {radius}", 5.0, "bonus while the object is at the goal")
    add_settle_if_asked(plan, task, text, arm.obj_velocity)
    return plan


def articulate_plan(archetype: str, reason: str, task: Task, text: TaskText, arm: Arm) -> P.Plan:
    plan = P.Plan(archetype, reason, ["reach the part", "move it to its goal position (while in contact)", "success"])
    P.arm_prelude(plan, with_object=True)
    P.add_reach(plan, "d_reach", "gripper to the part's tracked point", 8.0, 1.0)
    contact = plan.param("CONTACT_RADIUS", 0.15, "m, the gripper counts as working the part within this of its tracked point", jitter=False)
    plan.prelude.append(f"engaged = d_reach < {contact}")
    P.add_goal_term(plan, "operate", "d_goal", "engaged", 8.0, 3.0, "part's tracked point to its goal position, while the gripper is at it", gate_param=contact)
    P.add_success(plan, f"d_goal < {success_radius(plan)}", 5.0, "bonus while the part is at its goal position")
    return plan


def push_plan(archetype: str, reason: str, task: Task, text: TaskText, arm: Arm) -> P.Plan:
    """Push, pull, slide, sweep: move the object along the table without needing to lift it."""
    strike = find(STRIKE_WORDS, text.description + " " + text.notes)
    stages = ["reach behind the object", "push it to the goal (while in contact)"] + (["strike it towards the goal"] if strike else []) + ["success"]
    plan = P.Plan(archetype, reason, stages)
    P.arm_prelude(plan, with_object=True)
    offset = plan.param("PUSH_OFFSET", 0.03, "m behind the object (away from the goal) where the gripper should push from", jitter=False)
    plan.prelude += [
        "push_direction = unit(goal - obj)",
        f"d_behind = float(np.linalg.norm(ee - (obj - {offset} * push_direction)))  # gripper to the pushing spot",
    ]
    P.add_reach(plan, "d_behind", "gripper to the spot behind the object", 10.0, 1.0)
    contact = plan.param("CONTACT_RADIUS", 0.07, "m, the gripper counts as in contact within this of the object", jitter=False)
    radius = success_radius(plan)
    if strike and arm.obj_velocity:
        moved = plan.param("MOVED_MIN", 0.02, "m, the object counts as set in motion once this far from its start", jitter=False)
        plan.prelude.append(f"engaged = d_reach < {contact} or float(np.linalg.norm(obj - np.asarray(self.obj.init_position, dtype=float))) > {moved}")
        plan.notes.append(f'The text says "{strike}": the object leaves the gripper, so the push stage also pays once it has moved.')
    else:
        plan.prelude.append(f"engaged = d_reach < {contact}")
        if strike:
            plan.notes.append(f'The text says "{strike}" but the view has no object velocity: no strike term.')
    P.add_goal_term(plan, "push", "d_goal", f"engaged or d_goal < {radius}", 8.0, 3.0, "object to the goal, while the gripper is in contact (or it is already there)", gate_param=contact)
    if strike and arm.obj_velocity:
        P.add_strike(plan, "push_direction", radius, 1.0)
    P.add_success(plan, f"d_goal < {radius}", 5.0, "bonus while the object is at the goal")
    add_settle_if_asked(plan, task, text, arm.obj_velocity)
    return plan


MANIPULATION_PLANS = {
    "reach": reach_plan,
    "fallback_reach": reach_plan,
    "tool": tool_plan,
    "pick_place": pick_place_plan,
    "articulate": articulate_plan,
    "push": push_plan,
}


def manipulation_plan(task: Task, text: TaskText, fields: dict[str, str]) -> P.Plan:
    archetype, reason = classify_manipulation(text, fields)
    return MANIPULATION_PLANS[archetype](archetype, reason, task, text, Arm.of(fields))


def add_settle_if_asked(plan: P.Plan, task: Task, text: TaskText, has_obj_velocity: bool) -> None:
    """A settle penalty when the text asks the object to stop, or success is judged at the last step."""
    word = find(SETTLE_WORDS, text.description)
    if word or task.success_mode == "final":
        why = f'the text says "{word}"' if word else "success is judged at the episode's last step"
        plan.notes.append(f"Settle term: {why}, so motion near the goal is penalised.")
        ensure_settle(plan, has_obj_velocity)


def ensure_settle(plan: P.Plan, has_obj_velocity: bool) -> None:
    if plan.has("settle"):
        return
    scale = next((t.scale_param for t in plan.terms if t.role == "final" and t.scale_param), None)
    if scale is None:
        scale = plan.param("K_SETTLE", 8.0, "1/m, how close to the goal motion starts to be penalised")
    P.add_settle(plan, has_obj_velocity, scale, 0.5 if has_obj_velocity else 0.2)


def ensure_control(plan: P.Plan, weight: float) -> None:
    if not plan.has("control"):
        P.add_control(plan, weight)


# --- locomotion plans ---

FLIP_WORDS = r"\b(front|forward|back|backward|backwards)?[ -]?(flip|somersault)s?\b"
LEG_WORDS = r"\b(wave|waves|raise|raises|lift|lifts|kick|kicks)\b.*\b(leg|foot|feet|paw)\b"
LIE_WORDS = r"\b(lie|lies|lying|lay|crouch|crouches|belly|flat on)\b"
FORWARD_WORDS = r"\b(forward|run|runs|walk|walks|hop|hops|move|moves|go|goes|travel|sprint|gallop|backward|backwards)\b"
LEG_NAME = r"\b(front|back|rear|hind)[ _-]?(left|right)\b"


@dataclass(frozen=True)
class Body:
    """Expressions for the torso, from the view's fields: planar walkers have a pitch, the Ant an up vector."""

    ant: bool
    height: str = "float(self.torso.position[2])"
    init_height: str = "float(self.torso.init_position[2])"

    @property
    def upright(self) -> str:
        return "float(self.torso.up_vector[2])" if self.ant else "math.cos(float(self.torso.pitch))"

    @property
    def upright_doc(self) -> str:
        return "torso up-vector z (1 upright)" if self.ant else "cos(pitch): 1 when the torso is level"


def flip_plan(word: str, text: TaskText, fields: dict[str, str], body: Body) -> P.Plan:
    direction = -1.0 if re.search(r"\bback(ward|wards)?[ -]?(flip|somersault)|\bbackflip", text.description) else 1.0
    pitch = "float(self.torso.pitch)" if "self.torso.pitch" in fields else None
    pitch_velocity = "float(self.torso.pitch_velocity)" if "self.torso.pitch_velocity" in fields else "float(self.torso.angular_velocity[1])"
    reason = f'the task text says "{word.strip()}" ({"backward" if direction < 0 else "forward"})'
    plan = P.Plan("flip", reason, ["get airborne", "spin in the flip's direction", "accumulate one full turn", "success"])
    P.add_flip(plan, direction, pitch, pitch_velocity, body.height, body.init_height, {"spin": 1.0, "rotation": 2.0, "height": 0.5})
    P.add_control(plan, 0.01)
    if pitch is not None:
        P.add_success(plan, f"DIRECTION * {pitch} >= 2.0 * math.pi", 5.0, "bonus once one full turn is done")
    return plan


def leg_raise_plan(word: str, text: TaskText, fields: dict[str, str], body: Body) -> P.Plan:
    leg, leg_note = leg_index(text.description, fields)
    hip = 2 * leg if any("[hip, ankle] per leg" in doc for doc in fields.values()) else None
    foot_target, _ = number(r"at least (\d+(?:\.\d+)?) m high", text.success, 0.3)
    hip_speed, _ = number(r"(\d+(?:\.\d+)?) rad/s", text.success, 1.0)
    up_min, _ = number(r"z >= (\d+(?:\.\d+)?)", text.success, 0.7)
    wave = bool(re.search(r"\bwave", text.description)) and hip is not None
    stages = ["stay upright", "raise the named foot"] + (["swing its hip"] if wave else []) + ["success"]
    plan = P.Plan("leg_raise", f'the task text says "{one_line(word, 40)}"', stages)
    plan.notes.append(leg_note)
    plan.notes.append(f"Targets (success test's numbers, else defaults): foot {foot_target} m, hip {hip_speed} rad/s, up-vector z {up_min}.")
    P.add_upright(plan, body.upright, body.upright_doc, 1.0)
    P.add_leg_raise(plan, leg, hip if wave else None, foot_target, hip_speed, body.upright, up_min, {"foot_up": 2.0, "wave": 1.0})
    P.add_control(plan, 0.05)
    condition = f"foot_height >= FOOT_TARGET and {body.upright} >= UPRIGHT_MIN"
    if wave:
        condition += f" and abs(float(self.joint_velocities[{hip}])) >= HIP_SPEED"
    P.add_success(plan, condition, 5.0, "bonus while the success test's conditions hold")
    return plan


def lie_down_plan(word: str, text: TaskText, fields: dict[str, str], body: Body) -> P.Plan:
    target, from_text = number(r"at most (\d+(?:\.\d+)?) m high", text.success, 0.35)
    up_min, _ = number(r"z >= (\d+(?:\.\d+)?)", text.success, 0.8)
    still = bool(re.search(r"\b(stay|stays|remain|hold|still)\b", text.description)) and "self.torso.velocity" in fields
    plan = P.Plan("lie_down", f'the task text says "{word}"', ["stay belly down", "get the torso low"] + (["stay still"] if still else []) + ["success"])
    plan.notes.append(f"Target height {target} m ({'from the success test' if from_text else 'default'}); upright means up-vector z >= {up_min}.")
    P.add_upright(plan, body.upright, body.upright_doc, 1.0)
    P.add_lie_down(plan, body.height, target, body.upright, up_min, still, {"low": 2.0, "still": 0.5})
    P.add_control(plan, 0.05)
    P.add_success(plan, f"{body.height} <= TARGET_HEIGHT and {body.upright} >= UPRIGHT_MIN", 5.0, "bonus while low and belly down")
    return plan


def forward_plan(word: str | None, text: TaskText, fields: dict[str, str], body: Body) -> P.Plan:
    """Forward locomotion, and the documented fallback when no rule matched (`word` None)."""
    desc = text.description
    direction = -1.0 if re.search(r"\bbackwards?\b|-x\b", desc) else 1.0
    reason = f'the task text says "{word}"' if word else "no rule matched the task text"
    plan = P.Plan("forward" if word else "fallback_forward", reason, ["stay healthy/upright", "move along the direction", "success"])
    if not word:
        plan.notes.append("Fallback: no rule matched the task text, so this is the documented generic reward:")
        plan.notes.append("move forward (+x) while staying upright. Edit the task text or use a model backend for more.")
    fast = find(r"\b(fast|quickly|quick|speed|sprint)\b", desc)
    if fast:
        plan.notes.append(f'The text says "{fast}": forward weight 1.5 instead of 1.')
    P.add_forward(plan, "float(self.torso.x_velocity)", direction, 1.5 if fast else 1.0)
    falls = find(r"\b(without falling|fall|falls|falling|upright)\b", desc)
    low, has_low = number(r"below (\d+(?:\.\d+)?) m", text.notes, 0.0)
    tilt, has_tilt = number(r"tilted over (\d+(?:\.\d+)?) rad", text.notes, 0.0)
    band = re.search(r"(\d+(?:\.\d+)?)\s*-\s*(\d+(?:\.\d+)?) m height band", text.notes)
    if band:
        P.add_healthy(plan, body.height, float(band.group(1)), float(band.group(2)), None, None, 1.0)
        plan.notes.append(f"Healthy band {band.group(1)}-{band.group(2)} m read from the task notes.")
    elif has_low:
        pitch = "float(self.torso.pitch)" if has_tilt and "self.torso.pitch" in fields else None
        P.add_healthy(plan, body.height, low, None, pitch, tilt if pitch else None, 1.0)
        plan.notes.append(f"Healthy range (torso above {low} m{f', tilt under {tilt} rad' if pitch else ''}) read from the task notes.")
    upright_weight = (0.5 if body.ant else 0.2) * (2.0 if falls and not plan.has("healthy") else 1.0)
    if falls and not plan.has("healthy"):
        plan.notes.append(f'The text says "{falls}" and the notes give no healthy range: the upright weight is doubled.')
    P.add_upright(plan, body.upright, body.upright_doc, upright_weight)
    P.add_control(plan, 0.05)
    distance, has_distance = number(r"at least (\d+(?:\.\d+)?) m forward", text.success, 0.0)
    if has_distance:
        d = plan.param("SUCCESS_DISTANCE", distance, "m travelled along the direction that earns the success bonus", jitter=False)
        travelled = "DIRECTION * (float(self.torso.position[0]) - float(self.torso.init_position[0]))"
        P.add_success(plan, f"{travelled} >= {d}", 1.0, "bonus once the success test's distance is covered")
    return plan


def locomotion_plan(task: Task, text: TaskText, fields: dict[str, str]) -> P.Plan:
    """Ordered rules: flip, leg raise (needs feet in the view), lie down, else forward (or its fallback)."""
    desc, body = text.description, Body(ant="self.torso.up_vector" in fields)
    if word := find(FLIP_WORDS, desc):
        return flip_plan(word, text, fields, body)
    if (word := find(LEG_WORDS, desc)) and "self.foot_positions" in fields:
        return leg_raise_plan(word, text, fields, body)
    if word := find(LIE_WORDS, desc):
        return lie_down_plan(word, text, fields, body)
    return forward_plan(find(FORWARD_WORDS, desc), text, fields, body)


def leg_index(description: str, fields: dict[str, str]) -> tuple[int, str]:
    """The index of the leg the text names, in the leg order the view's field docs give."""
    order = None
    for doc in fields.values():
        if m := re.search(r"legs in the order ([a-z_]+(?:, [a-z_]+)+)", doc):
            order = [name.strip() for name in m.group(1).split(",")]
            break
    named = re.search(LEG_NAME, description)
    if order is None or named is None:
        return 0, "No leg named in the text (or no leg order in the view): the first leg (index 0) is used."
    side = {"rear": "back", "hind": "back"}.get(named.group(1), named.group(1))
    name = f"{side}_{named.group(2)}"
    if name not in order:
        return 0, f"The text names the {name} leg, which the view does not list: the first leg (index 0) is used."
    return order.index(name), f"The text names the {name.replace('_', '-')} leg: index {order.index(name)} in the view's leg order."


# --- choosing a plan ---


def build_plan(task: Task) -> P.Plan:
    """The nominal plan for a task: rules on its text and its view's fields."""
    fields = view_fields(task.view_class)
    text = TaskText.of(task)
    if "self.robot.ee_position" in fields and "self.goal_position" in fields:
        return manipulation_plan(task, text, fields)
    if "self.torso.position" in fields:
        return locomotion_plan(task, text, fields)
    raise ConfigError(
        f"the heuristic backend has no reward primitives for {task.view_class.__name__} (task {task.id}); "
        "use a model backend (--backend openai) or paste a reward with --backend file"
    )


# --- feedback: deterministic rules on the previous round's results ---

CRITIQUE_RULES: list[tuple[str, str, str]] = [
    # (rule id, pattern, what it does; the action is in `apply_critique`)
    ("speed", r"\b(slow|slowly|faster|speed|quicker|too long|sluggish)\b", "raise the velocity terms"),
    ("upright", r"\b(falls?|fell|falling|upright|tips? over|topples?|flips? over|on its back)\b", "raise the upright/healthy terms"),
    ("overshoot", r"\b(overshoots?|overshot|past the goal|too far|beyond the goal|misses the goal)\b", "penalise motion near the goal"),
    ("drop", r"\b(drops?|dropped|dropping|slips?|loses? (its |the )?grip)\b", "raise the grasp and lift terms"),
    ("no_grasp", r"(does ?n[o']t|never|fails? to|can'?t) (grasp|grab|pick|hold|close)", "widen the grasp radius and raise the grasp term"),
    ("no_reach", r"(does ?n[o']t|never|fails? to|can'?t) (reach|touch|get to|approach)", "raise and widen the reach term"),
    ("jerky", r"\b(jitter\w*|shak\w*|jerk\w*|violent\w*|flail\w*|smooth\w*|wobbl\w*)\b", "raise the control cost"),
    ("higher", r"\b(higher|not high enough|too low)\b", "raise the lift / height terms"),
]


@dataclass
class Feedback:
    """The rule comments that fired, and the spread to draw samples with."""

    rules: list[str]
    sigma_factor: float = 1.0


def scale_param(plan: P.Plan, name: str, factor: float, low: float | None = None, high: float | None = None) -> str | None:
    param = plan.params.get(name)
    if param is None:
        return None
    old = param.value
    value = old * factor
    if high is None and name.startswith("W_"):
        high = WEIGHT_CAP
    if low is not None:
        value = max(value, low)
    if high is not None:
        value = min(value, high)
    param.value = value
    return f"{name} {P.format_number(old)} -> {P.format_number(value)}"


def parse_constants(code: str) -> dict[str, float]:
    """Module-level UPPER_CASE numeric constants of a program (the base of the next round)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    out: dict[str, float] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
                continue
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, SyntaxError):
                continue
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out[name] = float(value)
    return out


def apply_feedback(plan: P.Plan, task: Task, context: dict[str, Any], kernel: list[str]) -> Feedback:
    """Change the plan by fixed rules on the context; return the comments that say what fired and why."""
    fb = Feedback([])
    fields = view_fields(task.view_class)
    has_obj_velocity = "self.obj.velocity" in fields
    arm = "self.robot.ee_position" in fields
    previous = context.get("previous_best_code")
    if isinstance(previous, str) and previous.strip():
        lines = previous.strip().splitlines()
        if lines[0].strip() == "# " + header_for(task.id):
            constants = parse_constants(previous)
            if "W_SETTLE" in constants and arm:
                ensure_settle(plan, has_obj_velocity)
            if "W_CONTROL" in constants:
                ensure_control(plan, constants["W_CONTROL"])
            used = [name for name in constants if name in plan.params]
            for name in used:
                plan.params[name].value = constants[name]
            if m := re.search(r"^# kernel: (tanh|exp)$", previous, re.M):
                kernel[0] = m.group(1)
            fb.rules.append(f"rule previous-best: the previous best program's {len(used)} constants and '{kernel[0]}' kernel are this round's base")
        else:
            fb.rules.append("rule previous-best: the previous best program was not composed by this backend for this task; the rules start from their nominal constants")

    terms = {t.name: t for t in plan.terms}
    stats = context.get("component_stats") or {}
    means: dict[str, float] = {}
    for name, s in stats.items():
        term = terms.get(name)
        if term is None or not isinstance(s, dict):
            continue
        try:
            lo, hi, mean = float(s.get("min", 0.0)), float(s.get("max", 0.0)), float(s.get("mean", 0.0))
        except (TypeError, ValueError):
            continue
        means[name] = abs(mean)
        if term.role == "success" or hi - lo > 1e-6 * max(1.0, abs(hi)):
            continue
        if abs(hi) < 1e-9 and term.gate_param:
            change = scale_param(plan, term.gate_param, 1.5, high=0.3)
            fb.rules.append(f"rule constant: component '{name}' was always 0 (its gate never opened) -> gate widened: {change}")
        elif term.scale_param:
            change = scale_param(plan, term.scale_param, 0.5, low=0.5)
            fb.rules.append(f"rule constant: component '{name}' was constant ({P.format_number(hi)}) -> wider kernel: {change}")
        else:
            fb.rules.append(f"rule constant: component '{name}' was constant ({P.format_number(hi)}) and has no scale to widen; left as is")
    total = sum(means.values())
    if len(means) >= 2 and total > 0:
        name = max(means, key=means.get)
        share = means[name] / total
        if share > 0.6 and terms[name].role not in ("final", "success"):
            change = scale_param(plan, terms[name].weight_param, 0.6)
            fb.rules.append(f"rule dominating: component '{name}' was {share:.0%} of the reward's magnitude -> down-weighted: {change}")

    rate = context.get("success_rate")
    if isinstance(rate, (int, float)) and math.isfinite(rate):
        if rate < 0.3:
            changes = [scale_param(plan, t.weight_param, 1.5) for t in plan.terms if t.role in ("final", "success")]
            fb.rules.append(f"rule low-success: success rate {rate:.2f} < 0.30 -> final stage and success bonus up: {'; '.join(c for c in changes if c)}")
        elif rate >= 0.8:
            fb.sigma_factor = 0.5
            fb.rules.append(f"rule high-success: success rate {rate:.2f} >= 0.80 -> samples stay closer to the base (half the spread)")

    critique = context.get("critique")
    if isinstance(critique, str) and critique.strip():
        fb.rules.extend(apply_critique(plan, critique, arm, has_obj_velocity))
    return fb


def apply_critique(plan: P.Plan, critique: str, arm: bool, has_obj_velocity: bool) -> list[str]:
    said = critique.lower()
    out: list[str] = []
    for rule, pattern, action in CRITIQUE_RULES:
        match = re.search(pattern, said)
        if not match:
            continue
        changes: list[str | None] = []
        if rule == "speed":
            velocity = [t for t in plan.terms if t.role == "velocity"]
            targets = velocity or [t for t in plan.terms if t.role == "success"]
            changes = [scale_param(plan, t.weight_param, 1.5) for t in targets]
            if not velocity:
                action = "no velocity term here: raise the success bonus, so finishing sooner pays more"
        elif rule == "upright":
            changes = [scale_param(plan, t.weight_param, 2.0) for t in plan.terms if t.role == "upright"]
            if not changes:
                action = "no upright term in this plan; nothing to raise"
        elif rule == "overshoot":
            if arm:
                existed = plan.has("settle")
                ensure_settle(plan, has_obj_velocity)
                changes = [scale_param(plan, "W_SETTLE", 2.0)] if existed else ["settle term added"]
            else:
                changes = [scale_param(plan, t.weight_param, 0.7) for t in plan.terms if t.role == "velocity"]
                action = "lower the velocity terms"
        elif rule == "drop":
            changes = [scale_param(plan, "W_GRASP", 1.5), scale_param(plan, "W_LIFT", 1.5)]
        elif rule == "no_grasp":
            changes = [scale_param(plan, "GRASP_RADIUS", 1.3, high=0.1), scale_param(plan, "W_GRASP", 1.5)]
        elif rule == "no_reach":
            changes = [scale_param(plan, "W_REACH", 1.5), scale_param(plan, "K_REACH", 0.7, low=0.5)]
        elif rule == "jerky":
            existed = plan.has("control")
            ensure_control(plan, 0.05)
            changes = [scale_param(plan, "W_CONTROL", 2.0)] if existed else ["control term added"]
        elif rule == "higher":
            changes = [scale_param(plan, "LIFT_HEIGHT", 1.5), scale_param(plan, "W_LIFT", 1.5), scale_param(plan, "W_HEIGHT", 1.5), scale_param(plan, "W_FOOT_UP", 1.5)]
        done = [c for c in changes if c]
        summary = "; ".join(done) if done else "no matching constant in this plan"
        out.append(f'rule critique-{rule}: the critique says "{match.group(0)}" -> {action}: {summary}')
    if not out:
        out.append("rule critique: the critique matched no rule; the program is unchanged by it")
    out.insert(0, f'critique: "{one_line(critique)}"')
    return out


# --- samples ---


def sample_rng(seed: int, task_id: str, round_index: int, sample_index: int, attempt: int = 0) -> np.random.Generator:
    """Reproducible across processes: a stable hash of the task id, never Python's salted `hash`."""
    words = [seed & 0xFFFFFFFF, zlib.crc32(task_id.encode()), round_index & 0xFFFFFFFF, sample_index & 0xFFFFFFFF, attempt]
    return np.random.default_rng(words)


def jitter(plan: P.Plan, rng: np.random.Generator, sigma: float) -> None:
    for param in plan.params.values():
        if param.jitter:
            param.value = float(param.value * math.exp(rng.normal(0.0, sigma)))


def compose(task: Task, seed: int, round_index: int, index: int, n: int, temperature: float, context: dict[str, Any], attempt: int = 0) -> tuple[str, P.Plan]:
    """One program: nominal plan -> feedback rules -> (samples after the first) jitter -> text."""
    plan = build_plan(task)
    kernel = ["tanh"]
    fb = apply_feedback(plan, task, context, kernel)
    sigma = BASE_SIGMA * min(max(float(temperature), 0.1), 2.0) * fb.sigma_factor
    if index == 0 and attempt == 0:
        sample_line = f"Sample 1 of {n} (round {round_index}): the base constants, undisturbed."
    else:
        rng = sample_rng(seed, task.id, round_index, index, attempt)
        if rng.random() < 0.5:
            kernel[0] = "exp" if kernel[0] == "tanh" else "tanh"
        jitter(plan, rng, sigma)
        shape = f" and the '{kernel[0]}' kernel" if plan.uses("closeness") else ""
        sample_line = (
            f"Sample {index + 1} of {n} (round {round_index}, seed {seed}): constants drawn around the base "
            f"(log-normal spread {sigma:.2f}){shape}, by an RNG seeded with (seed, task id, round, sample index)."
        )
    header = [
        header_for(task.id),
        f"Rule-based program (backend '{NAME}', model '{MODEL}'): written by fixed rules, not by a language model.",
        f'Task: "{one_line(task.description)}"',
        f"Plan: {plan.archetype}, because {plan.reason}.",
        "Stages: " + " -> ".join(plan.stages) + ".",
        *(["Gated terms pay only once the stage before them holds (see each term's condition)."] if plan.gated else []),
        "Every raw term is bounded (in [0, 1]; velocities clipped) before its weight, so the scales stay comparable.",
        *[one_line(note, 200) for note in plan.notes],
        sample_line,
    ]
    if fb.rules:
        header.append("Feedback rules that fired:")
        header += ["- " + one_line(rule, 200) for rule in fb.rules]
    return P.render_program(plan, header, kernel[0]), plan


def reply_text(task: Task, plan: P.Plan, program: str, index: int, n: int) -> str:
    return (
        f"Rule-based reward from text2reward's heuristic backend (no language model was used), sample {index + 1} of {n}.\n"
        f"Plan for {task.id}: {plan.archetype} ({plan.reason}).\n\n"
        f"```python\n{program}```\n"
    )


class HeuristicBackend:
    """The `Backend` that composes rewards by rules; its replies say so (`rule_based=True`)."""

    name = NAME
    model = MODEL
    rule_based = True

    def __init__(self, seed: int = 0):
        self.seed = int(seed)

    def generate(self, request: GenerationRequest) -> list[Reply]:
        task = get_task(request.task_id)
        context = dict(request.context or {})
        replies: list[Reply] = []
        seen: set[str] = set()
        for index in range(max(int(request.n), 0)):
            start = time.perf_counter()
            program, plan = compose(task, self.seed, request.round, index, request.n, request.temperature, context)
            attempt = 0
            while program in seen and attempt < 20:  # identical draws are vanishingly rare; never hand back duplicates
                attempt += 1
                program, plan = compose(task, self.seed, request.round, index, request.n, request.temperature, context, attempt)
            seen.add(program)
            replies.append(
                Reply(
                    text=reply_text(task, plan, program, index, request.n),
                    backend=NAME,
                    model=MODEL,
                    latency_seconds=time.perf_counter() - start,
                    rule_based=True,
                )
            )
        return replies
