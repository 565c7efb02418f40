"""Early stopping across a round's candidates: successive halving on the evaluations they publish.

Why: every candidate costs a full training run, and a reward that is clearly losing at a quarter of the
budget rarely wins at the end. At rungs of the budget (by default 1/4 and 1/2), a candidate clearly
behind the round's leader at the same number of steps is stopped and its worker goes to the next queued
candidate (asynchronous successive halving, as in ASHA: whoever reaches a rung first is compared with
those that already passed it, nobody waits). "Clearly behind" is on the task's own success rate; where
no candidate succeeds yet, on the environment's native return (the expert reward's return, recorded at
every evaluation but never trained on), relative to the leader's.

Pure functions over curves ({steps, success_rate, mean_native_return} points): the pool feeds them what
workers publish and turns a decision into a stop file the worker looks for every few dozen steps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Curve = Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class EarlyStopRule:
    """When a candidate counts as clearly behind."""

    rungs: tuple[float, ...] = (0.25, 0.5)
    """Fractions of the step budget where candidates are compared."""
    success_margin: float = 0.3
    """Stop when the leader's success rate at the rung exceeds the candidate's by at least this."""
    native_margin: float = 0.5
    """With no success anywhere: stop when the candidate's native return trails the leader's by at least
    this fraction of the larger magnitude of the two (returns may be negative, as Fetch's are)."""


@dataclass(frozen=True)
class StopDecision:
    rung: int
    """Index of the rung (0 for the first)."""
    steps: int
    """The rung's step count: the evaluation the comparison used is at or before it."""
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"rung": self.rung, "steps": self.steps, "reason": self.reason}


def rung_steps(budget: int, eval_freq: int, rule: EarlyStopRule) -> list[int]:
    """The first evaluation at or after each rung fraction of the budget (rungs at the budget's end dropped)."""
    steps = sorted({max(eval_freq, math.ceil(fraction * budget / eval_freq) * eval_freq) for fraction in rule.rungs})
    return [s for s in steps if s < budget]


def point_at(curve: Curve, steps: int) -> Mapping[str, Any] | None:
    """The curve's last evaluation at or before `steps` (None when it has none yet)."""
    best = None
    for point in curve:
        if int(point["steps"]) <= steps:
            best = point
    return best


def reached(curve: Curve, steps: int) -> bool:
    return any(int(point["steps"]) >= steps for point in curve)


def _native(point: Mapping[str, Any]) -> float | None:
    value = point.get("mean_native_return")
    return None if value is None or not math.isfinite(float(value)) else float(value)


def judge_at_rung(name: str, curves: Mapping[str, Curve], steps: int, rule: EarlyStopRule) -> str | None:
    """Why `name` is clearly behind at `steps`, or None. Compared only with candidates whose curves reach the rung."""
    own = point_at(curves[name], steps)
    if own is None:
        return None
    peers = {other: point_at(curve, steps) for other, curve in curves.items() if other != name and reached(curve, steps)}
    peers_points = {other: point for other, point in peers.items() if point is not None}
    if not peers_points:
        return None
    leader, lead = max(peers_points.items(), key=lambda item: float(item[1]["success_rate"]))
    own_success, lead_success = float(own["success_rate"]), float(lead["success_rate"])
    if lead_success - own_success >= rule.success_margin - 1e-9:
        return (f"success {own_success:.2f} at {steps} steps, {rule.success_margin:g} or more behind "
                f"{leader}'s {lead_success:.2f}")
    if lead_success > 0 or own_success > 0:
        return None
    natives = {other: value for other, point in peers_points.items() if (value := _native(point)) is not None}
    own_native = _native(own)
    if not natives or own_native is None:
        return None
    leader, lead_native = max(natives.items(), key=lambda item: item[1])
    scale = max(abs(lead_native), abs(own_native))
    if scale > 0 and (lead_native - own_native) / scale >= rule.native_margin:
        return (f"no candidate succeeds yet; native return {own_native:.3g} at {steps} steps trails {leader}'s "
                f"{lead_native:.3g} by {100 * (lead_native - own_native) / scale:.0f}% (stop at {100 * rule.native_margin:.0f}%)")
    return None


class EarlyStopper:
    """The pool's view of a round: each job's curve so far, and which rungs each running job has passed."""

    def __init__(self, budget: int, eval_freq: int, rule: EarlyStopRule | None = None):
        self.rule = rule or EarlyStopRule()
        self.rungs = rung_steps(budget, eval_freq, self.rule)
        self.curves: dict[str, list[dict[str, Any]]] = {}
        self._judged: dict[str, set[int]] = {}
        """Per job, the rungs it was judged at (each once)."""

    def observe(self, name: str, curve: Curve) -> None:
        """A job's curve so far (a finished job's whole curve, or a running job's points as published)."""
        self.curves[name] = [dict(point) for point in curve]

    def add_point(self, name: str, point: Mapping[str, Any]) -> None:
        curve = self.curves.setdefault(name, [])
        if not curve or int(curve[-1]["steps"]) != int(point["steps"]):
            curve.append(dict(point))

    def decide(self, running: Sequence[str]) -> dict[str, StopDecision]:
        """Running jobs to stop now. A job is judged at a rung once, as soon as it and at least one other job
        have both reached it (comparing their evaluations at the rung's step count, whenever that happens)."""
        decisions: dict[str, StopDecision] = {}
        for name in running:
            curve = self.curves.get(name, [])
            judged = self._judged.setdefault(name, set())
            for index, steps in enumerate(self.rungs):
                if index in judged or not reached(curve, steps):
                    continue
                if not any(reached(other, steps) for peer, other in self.curves.items() if peer != name):
                    continue  # nobody to compare with yet: judged when a peer gets there
                judged.add(index)
                reason = judge_at_rung(name, self.curves, steps, self.rule)
                if reason is not None:
                    decisions[name] = StopDecision(index, steps, reason)
                    break
        return decisions
