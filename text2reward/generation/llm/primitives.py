"""Reward primitives for the rule-based `heuristic` backend, and the renderer that writes them out.

Why code-as-text from small parts: the heuristic backend must hand the rest of the toolkit the same
thing a model would, a `compute_dense_reward(self, action)` program, so it goes through the same
sandbox, training and feedback. A `Plan` is a list of named constants (weights, kernel scales,
thresholds) and `Term`s (code lines that compute one bounded raw value, a weight, an optional
gate); rendering it gives a readable program whose constants the next round can parse back.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field
from typing import Literal

from policies.reward_modes import DENSE, RewardModeSpec
from sim_envs.errors import ConfigError

Role = Literal["stage", "final", "success", "velocity", "upright", "penalty"]
"""What a term is for; feedback rules act on roles (raise the final stage, the upright term...)."""


@dataclass
class Param:
    """A module-level constant of the program: `NAME = value  # doc`."""

    name: str
    value: float
    doc: str
    jitter: bool = True
    """Whether samples of a round draw it around its base value (thresholds of physics stay put)."""


@dataclass
class Term:
    """One reward component: lines that set `r_<name>` (a raw value), weighted and optionally gated."""

    name: str
    role: Role
    comment: str
    lines: list[str]
    gate: str | None = None
    """A boolean expression: the term pays only while it holds (earlier stages met)."""
    scale_param: str | None = None
    """The kernel-scale constant a 'constant component' feedback rule widens."""
    gate_param: str | None = None
    """The radius constant a 'gate never opened' feedback rule widens."""

    @property
    def weight_param(self) -> str:
        return f"W_{self.name.upper()}"


@dataclass
class Plan:
    """Everything a program is made of: the rule that chose it, constants, shared lines and terms."""

    archetype: str
    reason: str
    stages: list[str]
    params: dict[str, Param] = field(default_factory=dict)
    prelude: list[str] = field(default_factory=list)
    terms: list[Term] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def param(self, name: str, value: float, doc: str, jitter: bool = True) -> str:
        self.params.setdefault(name, Param(name, float(value), doc, jitter))
        return name

    def add(self, term: Term, weight: float) -> Term:
        if keyword.iskeyword(term.name) or not term.name.isidentifier():
            raise ValueError(f"term name {term.name!r} cannot be a Python variable; rename the primitive")
        self.param(term.weight_param, weight, f"weight of '{term.name}': {term.comment}")
        self.terms.append(term)
        return term

    def has(self, name: str) -> bool:
        return any(t.name == name for t in self.terms)

    def uses(self, function: str) -> bool:
        """Whether any line calls `function` (a helper is only written out when it is used)."""
        lines = self.prelude + [line for t in self.terms for line in t.lines]
        return any(f"{function}(" in line for line in lines)

    @property
    def gated(self) -> bool:
        return any(t.gate for t in self.terms)


# --- helper functions a program may include (module level, numpy/math only) ---

KERNELS = {
    "tanh": ('"""Bounded shaping: 1 at distance 0, falling smoothly to 0 far away (1 - tanh)."""', "return 1.0 - math.tanh(scale * max(distance, 0.0))"),
    "exp": ('"""Bounded shaping: 1 at distance 0, decaying exponentially towards 0 far away."""', "return math.exp(-scale * max(distance, 0.0))"),
}

HELPERS = {
    "clip01": [
        "def clip01(value):",
        '    """Clamp to [0, 1] so every raw term stays on the same scale."""',
        "    return float(min(max(value, 0.0), 1.0))",
    ],
    "between_pads": [
        "def between_pads(point, left, right):",
        '    """True when `point` lies between the two finger pads: the fingers straddle it."""',
        "    axis = left - right",
        "    length2 = float(np.dot(axis, axis))",
        "    if length2 < 1e-9:",
        "        return False",
        "    t = float(np.dot(point - right, axis)) / length2",
        "    off_axis = float(np.linalg.norm(point - (right + t * axis)))",
        "    return 0.0 < t < 1.0 and off_axis < PAD_TOLERANCE",
    ],
    "unit": [
        "def unit(vector):",
        '    """The direction of `vector` (zeros when it is too short to have one)."""',
        "    norm = float(np.linalg.norm(vector))",
        "    return vector / norm if norm > 1e-9 else np.zeros_like(vector)",
    ],
}


def kernel_helper(kind: str) -> list[str]:
    doc, body = KERNELS[kind]
    return ["def closeness(distance, scale):", f"    {doc}", f"    {body}"]


def format_number(value: float) -> str:
    """Short, exact-enough literals: the next round parses them back as the base of its refinement."""
    text = format(float(value), ".4g")
    return text if any(c in text for c in ".en") else text + ".0"


def render_program(plan: Plan, header: list[str], kernel: str, mode: RewardModeSpec = DENSE) -> str:
    """The program text: header comments, imports, constants, helpers, and the mode's function (its name, parameters
    and docstring from the mode's spec, policies.reward_modes).

    A mode whose function takes no action (a potential, a progress) scores states, so terms that read the action
    (penalties) are left out; a mode with a value range (a progress) gets the weighted share of the remaining terms,
    held to the range, so it lies in [0, 1] and is 1 only when every stage, success included, holds."""
    if mode.heuristic_doc is None:
        raise ConfigError(f"the heuristic backend cannot write --reward-mode {mode.name} programs (its spec gives no "
                          "heuristic_doc); use --llm openai or --llm file")
    definition, docstring = f"def {mode.signature}:", mode.heuristic_doc
    terms = plan.terms if mode.takes_action else [t for t in plan.terms if not any("action" in line for line in t.lines)]
    body = ["    " + line if line else "" for line in plan.prelude]
    for term in terms:
        body.append(f"    # {term.name}: {term.comment}")
        body += ["    " + line for line in term.lines]
        sign = "-" if term.role == "penalty" else ""
        value = f"{sign}{term.weight_param} * r_{term.name}"
        if term.gate:
            body.append(f"    {term.name} = {value} if ({term.gate}) else 0.0")
        else:
            body.append(f"    {term.name} = {value}")
    names = [t.name for t in terms]
    body.append("    components = {" + ", ".join(f'"{n}": float({n})' for n in names) + "}")
    if mode.value_range is not None:
        low, high = (format_number(bound) for bound in mode.value_range)
        value = mode.value_noun if mode.value_noun.isidentifier() else "value"
        body.append("    weights = " + " + ".join(t.weight_param for t in terms))
        body.append(f"    {value} = min(max(float(sum(components.values())) / weights, {low}), {high})  # a signed term (a velocity) can dip below 0")
        body.append(f"    return {value}, components")
    else:
        body.append("    total = float(sum(components.values()))")
        body.append("    return total, components")
    text = "\n".join(body)
    helpers: list[str] = []
    for name in ["clip01", "unit", "between_pads"]:
        if plan.uses(name):
            helpers += ["", ""] + HELPERS[name]
    if plan.uses("closeness"):
        helpers += ["", ""] + kernel_helper(kernel)
    read = text + "\n".join(helpers)
    out = [f"# {line}" if line else "#" for line in header]
    out += ["import math", "", "import numpy as np", ""]
    if plan.uses("closeness"):
        out.append(f"# kernel: {kernel}")
    for param in plan.params.values():
        if mode.takes_action or re.search(rf"\b{param.name}\b", read):  # a constant only a left-out term read is left out too
            out.append(f"{param.name} = {format_number(param.value)}  # {param.doc}")
    out += helpers
    out += ["", "", definition, f'    """{docstring}"""', text]
    return "\n".join(out) + "\n"


# --- manipulation primitives (an arm with an end effector, maybe an object and a goal) ---


def arm_prelude(plan: Plan, with_object: bool, target: str = "obj") -> None:
    """Shared quantities: gripper, goal, object, and the two distances every stage reads."""
    plan.prelude += [
        "ee = np.asarray(self.robot.ee_position, dtype=float)",
        "goal = np.asarray(self.goal_position, dtype=float)",
    ]
    if with_object:
        plan.prelude += [
            "obj = np.asarray(self.obj.position, dtype=float)",
            "d_reach = float(np.linalg.norm(ee - obj))  # gripper to the object",
            f"d_goal = float(np.linalg.norm({target} - goal))  # {'object' if target == 'obj' else 'target object'} to the goal",
        ]
    else:
        plan.prelude.append("d_goal = float(np.linalg.norm(ee - goal))  # gripper to the goal")


def add_reach(plan: Plan, distance: str, what: str, scale: float, weight: float) -> Term:
    k = plan.param("K_REACH", scale, "1/m, sharpness of the reach kernel")
    return plan.add(Term("reach", "stage", what, [f"r_reach = closeness({distance}, {k})"], scale_param=k), weight)


def add_grasp(plan: Plan, pads: bool, width_doc_full: float | None, weight: float, hand: bool = False) -> Term:
    """Close the fingers around the object; pays only within GRASP_RADIUS (stage 1 met).

    With finger pads, a grasp needs the object between them; with only a finger width (Fetch), it
    needs the fingers stopped part-way by the object (fully shut means they missed it). A dexterous hand
    (Adroit, Shadow) has no single opening to read: its grasp counts once the object rises off its start
    with the palm at it, and pays for that rise.
    """
    if hand:
        radius = plan.param("GRASP_RADIUS", 0.06, "m, the palm counts as at the object within this", jitter=False)
        lifted = plan.param("LIFTED_ABOVE", 0.02, "m the object must rise off its start to count as held", jitter=False)
        plan.prelude += [
            f"near = d_reach < {radius}",
            "rise = float(obj[2] - np.asarray(self.obj.init_position, dtype=float)[2])  # how far the object rose",
            f"grasped = near and rise > {lifted}",
        ]
        lines = [f"r_grasp = clip01(rise / {lifted})"]
        return plan.add(Term("grasp", "stage", "lift the object off its start with the palm at it (a hand has no opening to read)",
                             lines, gate="near", gate_param=radius), weight)
    radius = plan.param("GRASP_RADIUS", 0.04 if pads else 0.03, "m, the gripper counts as at the object within this", jitter=False)
    if width_doc_full is None:
        plan.prelude.append("openness = float(self.robot.gripper_openness)  # 0 closed, 1 open")
        closed = plan.param("CLOSED_BELOW", 0.8, "openness under which the fingers count as closed", jitter=False)
    else:
        full = plan.param("GRIPPER_FULL_WIDTH", width_doc_full, "m, finger distance when fully open", jitter=False)
        plan.prelude.append(f"openness = clip01(float(self.robot.gripper_width) / {full})  # 0 closed, 1 open")
        closed = plan.param("CLOSED_BELOW", 0.65, "openness under which the fingers count as closed", jitter=False)
    plan.prelude.append(f"near = d_reach < {radius}")
    if pads:
        plan.param("PAD_TOLERANCE", 0.03, "m, how far off the line between the pads the object may be", jitter=False)
        plan.prelude += [
            "left = np.asarray(self.robot.left_pad_position, dtype=float)",
            "right = np.asarray(self.robot.right_pad_position, dtype=float)",
            f"grasped = near and openness < {closed} and between_pads(obj, left, right)",
        ]
    else:
        held = plan.param("HELD_ABOVE", 0.2, "openness above which closed fingers must be stopped by the object", jitter=False)
        plan.prelude.append(f"grasped = near and {held} < openness < {closed}")
    lines = [f"r_grasp = 0.5 * clip01((1.0 - openness) / (1.0 - {closed})) + (0.5 if grasped else 0.0)"]
    return plan.add(Term("grasp", "stage", "close the fingers on the object (only once the gripper is at it)", lines, gate="near", gate_param=radius), weight)


def add_lift(plan: Plan, height: float, place_scale: str, weight: float) -> Term:
    h = plan.param("LIFT_HEIGHT", height, "m above its start at which the object counts as lifted")
    lines = [f"r_lift = max(clip01((obj[2] - float(self.obj.init_position[2])) / {h}), closeness(d_goal, {place_scale}))"]
    comment = "raise the grasped object off the table (counts as met near the goal, so lowering onto a low goal is not punished)"
    return plan.add(Term("lift", "stage", comment, lines, gate="grasped"), weight)


def add_goal_term(plan: Plan, name: str, distance: str, gate: str | None, scale: float, weight: float, comment: str, gate_param: str | None = None) -> Term:
    k = plan.param(f"K_{name.upper()}", scale, f"1/m, sharpness of the '{name}' kernel")
    return plan.add(Term(name, "final", comment, [f"r_{name} = closeness({distance}, {k})"], gate=gate, scale_param=k, gate_param=gate_param), weight)


def add_success(plan: Plan, condition: str, weight: float, comment: str) -> Term:
    return plan.add(Term("success", "success", comment, [f"r_success = 1.0 if ({condition}) else 0.0"]), weight)


def add_strike(plan: Plan, direction: str, radius: str, weight: float) -> Term:
    """Pay object speed towards the goal while it is still away from it: for things that must be struck."""
    speed = plan.param("STRIKE_SPEED", 1.0, "m/s of object speed towards the goal that earns the full strike term")
    lines = [
        "obj_velocity = np.asarray(self.obj.velocity, dtype=float)",
        f"r_strike = clip01(float(np.dot(obj_velocity, {direction})) / {speed})",
    ]
    return plan.add(Term("strike", "stage", "send the object towards the goal (only while it is not there yet)", lines, gate=f"d_goal > {radius}"), weight)


def add_settle(plan: Plan, has_obj_velocity: bool, scale: str, weight: float) -> Term:
    """Penalise motion near the goal, so the object stops there instead of passing through."""
    if has_obj_velocity:
        lines = [f"r_settle = float(np.linalg.norm(np.asarray(self.obj.velocity, dtype=float))) * closeness(d_goal, {scale})"]
        comment = "object speed near the goal (penalty), so it stops at the goal"
    else:
        lines = [f"r_settle = float(np.linalg.norm(np.asarray(action, dtype=float)[:3])) * closeness(d_goal, {scale})"]
        comment = "hand motion near the goal (penalty; the view has no object velocity), so it stops at the goal"
    return plan.add(Term("settle", "penalty", comment, lines), weight)


def add_control(plan: Plan, weight: float) -> Term:
    lines = ["r_control = float(np.sum(np.square(np.asarray(action, dtype=float))))"]
    return plan.add(Term("control", "penalty", "squared action size (penalty): smooth, economical motion", lines), weight)


# --- locomotion primitives (a torso, joints, maybe feet) ---


def add_forward(plan: Plan, velocity: str, direction: float, weight: float) -> Term:
    d = plan.param("DIRECTION", direction, f"+1 rewards motion along +x, -1 along -x; range: {direction:g}..{direction:g} (a sign, never tuned)", jitter=False)
    v = plan.param("V_MAX", 10.0, "m/s, forward velocity is clipped here so one burst cannot dominate", jitter=False)
    lines = [f"r_forward = float(np.clip({d} * {velocity}, -{v}, {v}))"]
    return plan.add(Term("forward", "velocity", "velocity along the requested direction (m/s)", lines), weight)


def add_healthy(plan: Plan, height: str, low: float, high: float | None, tilt: str | None, max_tilt: float | None, weight: float) -> Term:
    lo = plan.param("MIN_HEIGHT", low, "m, torso height under which the robot counts as fallen", jitter=False)
    condition = f"{height} > {lo}"
    if high is not None:
        hi = plan.param("MAX_HEIGHT", high, "m, torso height over which the robot counts as unhealthy", jitter=False)
        condition += f" and {height} < {hi}"
    if tilt is not None and max_tilt is not None:
        t = plan.param("MAX_TILT", max_tilt, "rad, torso tilt over which the robot counts as fallen", jitter=False)
        condition += f" and abs({tilt}) < {t}"
    lines = [f"r_healthy = 1.0 if ({condition}) else 0.0"]
    return plan.add(Term("healthy", "upright", "alive bonus while the torso is in its healthy range", lines), weight)


def add_upright(plan: Plan, expression: str, comment: str, weight: float) -> Term:
    return plan.add(Term("upright", "upright", comment, [f"r_upright = clip01({expression})"]), weight)


def add_flip(plan: Plan, direction: float, pitch: str | None, pitch_velocity: str, height: str, init_height: str, weights: dict[str, float]) -> None:
    """Spin in the requested direction, accumulate rotation, and get airborne to have room for it."""
    d = plan.param("DIRECTION", direction, f"+1 pitches forward (nose down), -1 backward; range: {direction:g}..{direction:g} (a sign, never tuned)", jitter=False)
    spin = plan.param("SPIN_SCALE", 6.0, "rad/s of pitch velocity at which the spin term is about 0.76")
    plan.add(Term("spin", "velocity", "pitch velocity in the flip's direction (bounded)", [f"r_spin = math.tanh({d} * {pitch_velocity} / {spin})"]), weights["spin"])
    if pitch is not None:
        plan.add(Term("rotation", "final", "progress of the total rotation towards one full turn", [f"r_rotation = clip01({d} * {pitch} / (2.0 * math.pi))"]), weights["rotation"])
    h = plan.param("HEIGHT_SCALE", 0.3, "m above the start height at which the height term is about 0.76")
    plan.add(Term("height", "stage", "torso above its start height: airtime for the flip", [f"r_height = math.tanh(max({height} - {init_height}, 0.0) / {h})"]), weights["height"])


def add_leg_raise(plan: Plan, leg: int, hip: int | None, foot_target: float, hip_speed: float, upright: str, upright_min: float, weights: dict[str, float]) -> None:
    """Raise one foot (and swing its hip) while the torso stays upright: both pay only while upright."""
    target = plan.param("FOOT_TARGET", foot_target, "m, foot height that earns the full raise term", jitter=False)
    up_min = plan.param("UPRIGHT_MIN", upright_min, "torso up-vector z under which the leg terms do not pay", jitter=False)
    plan.prelude.append(f"foot_height = float(self.foot_positions[{leg}, 2])  # the named leg's foot tip")
    plan.add(Term("foot_up", "final", "height of the named foot, towards the target", [f"r_foot_up = clip01(foot_height / {target})"], gate=f"{upright} >= {up_min}"), weights["foot_up"])
    if hip is not None:
        speed = plan.param("HIP_SPEED", hip_speed, "rad/s of hip speed at which the wave term is about 0.76")
        lines = [f"r_wave = math.tanh(abs(float(self.joint_velocities[{hip}])) / {speed})"]
        plan.add(Term("wave", "velocity", "swing the named leg's hip (pays once the foot is half way up)", lines, gate=f"{upright} >= {up_min} and foot_height >= 0.5 * {target}"), weights["wave"])


def add_lie_down(plan: Plan, height: str, target_height: float, upright: str, upright_min: float, still: bool, weights: dict[str, float]) -> None:
    target = plan.param("TARGET_HEIGHT", target_height, "m, torso height to get down to", jitter=False)
    k = plan.param("K_LOW", 10.0, "1/m, sharpness of the low-torso kernel")
    up_min = plan.param("UPRIGHT_MIN", upright_min, "torso up-vector z under which lying low does not count (belly down, not on its back)", jitter=False)
    plan.add(Term("low", "final", "torso down to the target height, belly down", [f"r_low = closeness({height} - {target}, {k})"], gate=f"{upright} >= {up_min}", scale_param=k), weights["low"])
    if still:
        lines = ["r_still = math.exp(-float(np.linalg.norm(np.asarray(self.torso.velocity, dtype=float))))"]
        plan.add(Term("still", "stage", "little torso motion, so it stays down", lines, gate=f"{height} <= {target}"), weights["still"])
