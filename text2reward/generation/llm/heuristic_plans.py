"""The heuristic backend's rules for a first reward: read the task's text and view, pick a plan.

Part of the rule-based `heuristic` backend (heuristic.py), not a language model: fixed word
patterns classify the task (reach, pick-and-place, push, articulated part, tool use, forward
locomotion, flips, leg raise, lie down) and each archetype has a plan of bounded, gated terms.
"""


from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sim_envs.errors import ConfigError
from text2reward.generation.llm import primitives as P

if TYPE_CHECKING:
    from sim_envs.task import Task

HEADER = "Composed by text2reward's rule-based heuristic backend (no language model) for {task_id}"

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
    fields: dict[str, str] | None = None
    """The view's readable paths (for the success bonus)."""
    hand: bool = False
    """No pads, no finger width, no openness: a dexterous hand (Adroit, Shadow), whose grasp is judged by the object rising."""

    @classmethod
    def of(cls, fields: dict[str, str]) -> Arm:
        pads = "self.robot.left_pad_position" in fields and "self.robot.right_pad_position" in fields
        width_full = None
        if not pads and "self.robot.gripper_width" in fields:
            width_full, _ = number(r"(\d*\.\d+)\s*(?:m\s*)?fully open", fields["self.robot.gripper_width"], 0.1)
        hand = not pads and width_full is None and "self.robot.gripper_openness" not in fields
        return cls(pads, width_full, "self.obj.velocity" in fields, fields, hand)


SUCCESS_DISTANCE = r"(?:within|less than) (\d*\.?\d+) m (?:of|from)"
"""The stated success rule's distance ("`obj.position` within 0.03 m of `goal_position`")."""


def success_radius(plan: P.Plan, text: TaskText) -> str:
    radius, stated = number(SUCCESS_DISTANCE, text.success, 0.05)
    why = "the success rule's distance" if stated else "goal distance counted as at the goal (no distance stated)"
    return plan.param("SUCCESS_RADIUS", radius, f"m, {why}", jitter=False)


def add_success_bonus(plan: P.Plan, fields: dict[str, str] | None, fallback: str | Callable[[], str], comment: str,
                      weight: float = 5.0) -> None:
    """The bonus on the view's `task_success` (exactly the judged test) when it has one, else on `fallback`
    (a condition, or a function making one, so that its constants are declared only when used)."""
    if fields is None or "self.task_success" in fields:
        P.add_success(plan, "self.task_success", weight, comment + " (the task's own success test)")
    else:
        P.add_success(plan, fallback if isinstance(fallback, str) else fallback(), weight, comment)


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
    add_success_bonus(plan, arm.fields, lambda: f"d_goal < {success_radius(plan, text)}", "bonus while the gripper is at the goal")
    return plan


def tool_plan(archetype: str, reason: str, task: Task, text: TaskText, arm: Arm) -> P.Plan:
    plan = P.Plan(archetype, reason, ["reach the tool", "grasp it", "lift it", "bring it to the target", "move the target to the goal", "success"])
    plan.prelude.append("target = np.asarray(self.obj2.position, dtype=float) if self.obj2 is not None else np.asarray(self.obj.position, dtype=float)")
    P.arm_prelude(plan, with_object=True, target="target")
    P.add_reach(plan, "d_reach", "gripper to the tool (obj)", 10.0, 1.0)
    P.add_grasp(plan, arm.pads, arm.width_full, 1.0, arm.hand)
    deliver_k = plan.param("K_DELIVER", 8.0, "1/m, sharpness of the 'deliver' kernel")
    P.add_lift(plan, 0.03, deliver_k, 0.5)
    plan.prelude.append("d_tool = float(np.linalg.norm(obj - target))  # tool to the target object")
    P.add_goal_term(plan, "approach", "d_tool", "grasped", 5.0, 1.0, "bring the held tool to the target object (obj2)")
    radius = success_radius(plan, text)
    P.add_goal_term(plan, "deliver", "d_goal", f"grasped or d_goal < {radius}", 8.0, 3.0, "target object (obj2) to the goal, while the tool is held")
    add_success_bonus(plan, arm.fields, f"d_goal < {radius}", "bonus while the target object is at the goal")
    return plan


def pick_place_plan(archetype: str, reason: str, task: Task, text: TaskText, arm: Arm) -> P.Plan:
    plan = P.Plan(archetype, reason, ["reach the object", "grasp it", "lift it", "place it at the goal", "success"])
    P.arm_prelude(plan, with_object=True)
    P.add_reach(plan, "d_reach", "gripper to the object", 10.0, 1.0)
    P.add_grasp(plan, arm.pads, arm.width_full, 1.0, arm.hand)
    place_k = plan.param("K_PLACE", 8.0, "1/m, sharpness of the 'place' kernel")
    P.add_lift(plan, 0.05, place_k, 1.0)
    radius = success_radius(plan, text)
    P.add_goal_term(plan, "place", "d_goal", f"grasped or d_goal < {radius}", 8.0, 3.0, "object to the goal, while it is held (or already there)")
    add_success_bonus(plan, arm.fields, f"d_goal < {radius}", "bonus while the object is at the goal")
    add_settle_if_asked(plan, task, text, arm.obj_velocity)
    return plan


def articulate_plan(archetype: str, reason: str, task: Task, text: TaskText, arm: Arm) -> P.Plan:
    plan = P.Plan(archetype, reason, ["reach the part", "move it to its goal position (while in contact)", "success"])
    P.arm_prelude(plan, with_object=True)
    P.add_reach(plan, "d_reach", "gripper to the part's tracked point", 8.0, 1.0)
    contact = plan.param("CONTACT_RADIUS", 0.15, "m, the gripper counts as working the part within this of its tracked point", jitter=False)
    plan.prelude.append(f"engaged = d_reach < {contact}")
    P.add_goal_term(plan, "operate", "d_goal", "engaged", 8.0, 3.0, "part's tracked point to its goal position, while the gripper is at it", gate_param=contact)
    add_success_bonus(plan, arm.fields, lambda: f"d_goal < {success_radius(plan, text)}", "bonus while the part is at its goal position")
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
    radius = success_radius(plan, text)
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
    add_success_bonus(plan, arm.fields, f"d_goal < {radius}", "bonus while the object is at the goal")
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
UP_MIN = r"(?:up_vector\[2\]` at least|z >=) (\d+(?:\.\d+)?)"
"""The up-vector bound of a stated success rule (or of an older `z >= 0.7` wording)."""


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
    if pitch is not None or "self.task_success" in fields:
        add_success_bonus(plan, fields, f"DIRECTION * {pitch} >= 2.0 * math.pi", "bonus once one full turn is done")
    return plan


def leg_raise_plan(word: str, text: TaskText, fields: dict[str, str], body: Body) -> P.Plan:
    leg, leg_note = leg_index(text.description, fields)
    hip = 2 * leg if any("[hip, ankle] per leg" in doc for doc in fields.values()) else None
    foot_target, _ = number(r"(?:height\)? at least|at least) (\d+(?:\.\d+)?) m(?: high)?", text.success, 0.3)
    hip_speed, _ = number(r"(\d+(?:\.\d+)?) rad/s", text.success, 1.0)
    up_min, _ = number(UP_MIN, text.success, 0.7)
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
    add_success_bonus(plan, fields, condition, "bonus while the success test's conditions hold")
    return plan


def lie_down_plan(word: str, text: TaskText, fields: dict[str, str], body: Body) -> P.Plan:
    target, from_text = number(r"(?:position\[2\]` at most|at most) (\d+(?:\.\d+)?) m", text.success, 0.35)
    up_min, _ = number(UP_MIN, text.success, 0.8)
    still = bool(re.search(r"\b(stay|stays|remain|hold|still)\b", text.description)) and "self.torso.velocity" in fields
    plan = P.Plan("lie_down", f'the task text says "{word}"', ["stay belly down", "get the torso low"] + (["stay still"] if still else []) + ["success"])
    plan.notes.append(f"Target height {target} m ({'from the success test' if from_text else 'default'}); upright means up-vector z >= {up_min}.")
    P.add_upright(plan, body.upright, body.upright_doc, 1.0)
    P.add_lie_down(plan, body.height, target, body.upright, up_min, still, {"low": 2.0, "still": 0.5})
    P.add_control(plan, 0.05)
    add_success_bonus(plan, fields, f"{body.height} <= TARGET_HEIGHT and {body.upright} >= UPRIGHT_MIN", "bonus while low and belly down")
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
    distance, has_distance = number(r"(?:moved forward.*?at least|at least) (\d+(?:\.\d+)?) m(?: forward)?", text.success, 0.0)
    if has_distance:
        d = plan.param("SUCCESS_DISTANCE", distance, "m travelled along the direction that earns the success bonus", jitter=False)
        travelled = "DIRECTION * (float(self.torso.position[0]) - float(self.torso.init_position[0]))"
        add_success_bonus(plan, fields, f"{travelled} >= {d}", "bonus once the success test's distance is covered", weight=1.0)
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


FINGERS = ("thumb", "index", "middle", "ring", "little")


def fingertips_plan(task: Task, text: TaskText, fields: dict[str, str]) -> P.Plan:
    """A hand whose goal is a position for each fingertip (Shadow reach): one term on all five errors together."""
    plan = P.Plan("fingertips_reach", "the view has a goal position for each fingertip", ["bring the fingertips to their goals", "success"])
    tips = ", ".join(f"self.robot.fingertips.{finger}" for finger in FINGERS)
    goals = ", ".join(f"self.goal_fingertips.{finger}" for finger in FINGERS)
    plan.prelude += [
        f"tips = np.concatenate([{tips}])",
        f"goals = np.concatenate([{goals}])",
        "d_goal = float(np.linalg.norm(tips - goals))  # the five fingertips to their goals, as one distance",
    ]
    P.add_reach(plan, "d_goal", "fingertips to their goals", 20.0, 5.0)
    add_success_bonus(plan, fields, lambda: f"d_goal < {success_radius(plan, text)}", "bonus while the fingertips are at their goals")
    return plan


# --- choosing a plan ---


def build_plan(task: Task) -> P.Plan:
    """The nominal plan for a task: rules on its text and its view's fields."""
    fields = view_fields(task.view_class)
    text = TaskText.of(task)
    if "self.robot.ee_position" in fields and "self.goal_position" in fields:
        return manipulation_plan(task, text, fields)
    if "self.torso.position" in fields:
        return locomotion_plan(task, text, fields)
    if "self.robot.fingertips" in fields and "self.goal_fingertips" in fields:
        return fingertips_plan(task, text, fields)
    raise ConfigError(
        f"the heuristic backend has no reward primitives for {task.view_class.__name__} (task {task.id}); "
        "use a model (--llm openai --model NAME) or give your own reply with --llm file --reply-file REPLY.md"
    )
