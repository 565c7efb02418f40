"""The heuristic backend's feedback rules: the previous round's results change the next constants.

Part of the rule-based `heuristic` backend (heuristic.py), not a language model: deterministic
rules on component statistics, success rate and a person's critique; each rule that fires is
written into the program as a comment.
"""


from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from text2reward.generation.llm import primitives as P
from text2reward.generation.llm.heuristic_plans import ensure_control, ensure_settle, header_for, one_line, view_fields
from text2reward.runs.records import PromptContext

if TYPE_CHECKING:
    from sim_envs.task import Task

WEIGHT_CAP = 20.0
"""Feedback rules never raise a weight past this, however many rounds keep asking for more."""


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


def apply_feedback(plan: P.Plan, task: Task, context: PromptContext, kernel: list[str]) -> Feedback:
    """Change the plan by fixed rules on the context; return the comments that say what fired and why."""
    fb = Feedback([])
    fields = view_fields(task.view_class)
    has_obj_velocity = "self.obj.velocity" in fields
    arm = "self.robot.ee_position" in fields
    previous = context.previous_best_code
    if isinstance(previous, str) and previous.strip():
        _start_from_previous_best(fb, plan, task, previous, kernel, arm, has_obj_velocity)
    _apply_component_stats(fb, plan, context.component_stats or {})
    rate = context.success_rate
    if isinstance(rate, (int, float)) and math.isfinite(rate):
        _apply_success_rate(fb, plan, rate)
    critique = context.critique
    if isinstance(critique, str) and critique.strip():
        fb.rules.extend(apply_critique(plan, critique, arm, has_obj_velocity))
    return fb


def _start_from_previous_best(fb: Feedback, plan: P.Plan, task: Task, previous: str, kernel: list[str], arm: bool,
                              has_obj_velocity: bool) -> None:
    """Rule previous-best: a program this backend composed for this task is the base (its constants, terms and kernel)."""
    lines = previous.strip().splitlines()
    if lines[0].strip() != "# " + header_for(task.id):
        fb.rules.append("rule previous-best: the previous best program was not composed by this backend for this task; the rules start from their nominal constants")
        return
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


def _apply_component_stats(fb: Feedback, plan: P.Plan, stats: dict) -> None:
    """Rules constant (a component that never varied: widen its gate or kernel) and dominating (one component over 60%
    of the reward's magnitude is down-weighted)."""
    terms = {t.name: t for t in plan.terms}
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
        name = max(means, key=means.__getitem__)
        share = means[name] / total
        if share > 0.6 and terms[name].role not in ("final", "success"):
            change = scale_param(plan, terms[name].weight_param, 0.6)
            fb.rules.append(f"rule dominating: component '{name}' was {share:.0%} of the reward's magnitude -> down-weighted: {change}")


def _apply_success_rate(fb: Feedback, plan: P.Plan, rate: float) -> None:
    """Rules low-success (the final stage and success bonus up) and high-success (samples closer to the base)."""
    if rate < 0.3:
        changes = [scale_param(plan, t.weight_param, 1.5) for t in plan.terms if t.role in ("final", "success")]
        fb.rules.append(f"rule low-success: success rate {rate:.2f} < 0.30 -> final stage and success bonus up: {'; '.join(c for c in changes if c)}")
    elif rate >= 0.8:
        fb.sigma_factor = 0.5
        fb.rules.append(f"rule high-success: success rate {rate:.2f} >= 0.80 -> samples stay closer to the base (half the spread)")


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
