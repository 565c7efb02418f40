"""Early stopping across a round's candidates: successive halving on the evaluations they publish.

Why: every candidate costs a full training run, and a reward that is clearly losing at half the budget rarely
wins at the end. At rungs of the budget (by default one, at 1/2), a candidate clearly
behind the round's leader at the same number of steps is stopped and its worker goes to the next queued
candidate (asynchronous successive halving, as in ASHA: whoever reaches a rung first is compared with
those that already passed it, nobody waits). "Clearly behind" is on the task's own success rate; where
no candidate succeeds yet, on the progress toward the task's own success rule (policies.score; every evaluation
records it), relative to the leader's; curves from before progress was recorded fall back to the environment's
native return (the expert reward's return, recorded at every evaluation but never trained on).

Why several evaluations: a training-time evaluation is 5 episodes, and one reading is mostly noise (on
soccer-v3 a leader read 9.7 / 120.7 / 6.3 native return at 6k / 8k / 10k steps, and a candidate stopped on the
spike at 8k). So a decision pools the last `window` evaluations at or before the rung (at least
`min_evaluations` of them on both sides): success as one rate over all their episodes, whose 95% Wilson
intervals must separate besides the margin; progress (or native return) as the window's median, and only when every
reading of the candidate's window is below every reading of the leader's. A candidate that has succeeded
at any evaluation is never stopped as behind: it has shown the reward can teach the task.

Pure functions over curves ({steps, success_rate, mean_native_return} points): the pool feeds them what
workers publish and turns a decision into a stop file the worker looks for every few dozen steps.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from policies.curve import CurvePoint
from policies.stats import Rate
from text2reward.runs.seed_scores import point_rate, pooled_curve

Curve = Sequence[CurvePoint]


@dataclass(frozen=True)
class EarlyStopRule:
    """When a candidate counts as clearly behind."""

    rungs: tuple[float, ...] = (0.5,)
    """Fractions of the step budget where candidates are compared. One rung, at half the budget: replayed on
    refinement_gain's full-budget 20k-step MetaWorld curves (benchmarks/early_stop_replay.py, RESULTS.md), a rung at
    1/4 as well stopped late starters that would have ranked above their leader at the full budget (19 of 123 stops
    wrong with it, 3 of them beyond noise; 10 of 97 without, none beyond noise; six tasks, 2,449 pairings; 2.27x and
    2.0x of the stopped candidates' budgets saved). With the sixth task's heuristic run: 10 of 114, none beyond noise."""
    success_margin: float = 0.3
    """Stop when the leader's success rate at the rung exceeds the candidate's by at least this. 0.5 read fewer wrong
    stops on the curves it was chosen after (4 of 43 against 10 of 62); on three tasks' fresh curves it made none wrong
    either way and 5 stops instead of 12, so the margin stays (RESULTS.md, early_stop_replay)."""
    native_margin: float = 0.5
    """With no success anywhere: stop when the candidate's progress toward the success rule (or, in older curves, its
    native return) trails the leader's by at least this fraction of the larger magnitude of the two (returns may be
    negative, as Fetch's are)."""
    window: int = 3
    """Evaluations pooled per candidate at a rung: the last `window` at or before it."""
    min_evaluations: int = 2
    """Fewer evaluations than this in either window: no decision at that rung (never on one reading)."""


@dataclass(frozen=True)
class StopDecision:
    rung: int
    """Index of the rung (0 for the first)."""
    steps: int
    """The rung's step count: the evaluation the comparison used is at or before it."""
    reason: str
    leader: str | None = None
    """The candidate it trailed: the ranking never puts a stopped candidate above the one that stopped it."""


@dataclass(frozen=True)
class Behind:
    """Why a candidate is clearly behind at a rung, and whom it trails."""

    reason: str
    leader: str


def rung_steps(budget: int, eval_freq: int, rule: EarlyStopRule) -> list[int]:
    """The first evaluation at or after each rung fraction of the budget (rungs at the budget's end dropped)."""
    steps = sorted({max(eval_freq, math.ceil(fraction * budget / eval_freq) * eval_freq) for fraction in rule.rungs})
    return [s for s in steps if s < budget]


def reached(curve: Curve, steps: int) -> bool:
    return any(point.steps >= steps for point in curve)


def window_at(curve: Curve, steps: int, size: int) -> list[CurvePoint]:
    """The curve's last `size` evaluations at or before `steps`, oldest first."""
    return [point for point in curve if point.steps <= steps][-size:]


def has_succeeded(curve: Curve, steps: int | None = None) -> bool:
    """Whether any evaluation (at or before `steps`) saw a success."""
    return any(p.success_rate > 0 for p in curve if steps is None or p.steps <= steps)


def _readings(points: Sequence[CurvePoint], key: str = "mean_native_return") -> list[float]:
    values = [getattr(p, key) for p in points]
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def no_success_figure(windows: Sequence[Sequence[CurvePoint]]) -> tuple[str, str]:
    """(curve key, words) of what decides when nobody succeeds: the progress toward the task's success rule where
    every evaluation compared measured it (policies.score: the task's own test, not the expert reward's return), else
    the native return (curves from before progress was measured)."""
    if all(p.mean_progress is not None for points in windows for p in points):
        return "mean_progress", "progress toward the success rule"
    return "mean_native_return", "native return"


def judge_at_rung(name: str, curves: Mapping[str, Curve], steps: int, rule: EarlyStopRule) -> Behind | None:
    """Why `name` is clearly behind at `steps`, or None. Compared only with candidates whose curves reach the rung,
    each on its last `rule.window` evaluations at or before it."""
    if has_succeeded(curves[name], steps):
        return None
    own = window_at(curves[name], steps, rule.window)
    if len(own) < rule.min_evaluations:
        return None
    peers = {other: window_at(curve, steps, rule.window) for other, curve in curves.items()
             if other != name and reached(curve, steps)}
    peers = {other: points for other, points in peers.items() if len(points) >= rule.min_evaluations}
    if not peers:
        return None
    own_rate = Rate.pooled(point_rate(p) for p in own)
    leader, lead_rate = max(((other, Rate.pooled(point_rate(p) for p in points)) for other, points in peers.items()),
                           key=lambda item: item[1].rate)
    if lead_rate.rate - own_rate.rate >= rule.success_margin - 1e-9 and not own_rate.ties(lead_rate):
        return Behind(f"success {own_rate.text()} over its last {len(own)} evaluations to {steps} steps, {rule.success_margin:g} "
                      f"or more behind {leader}'s {lead_rate.text()} and outside its interval", leader)
    if any(has_succeeded(points) for points in peers.values()):
        return None  # someone succeeds, not clearly enough: success decides, and it does not yet
    key, figure = no_success_figure([own, *peers.values()])
    own_readings = _readings(own, key)
    readings = {other: values for other, points in peers.items() if len(values := _readings(points, key)) >= rule.min_evaluations}
    if not readings or len(own_readings) < rule.min_evaluations:
        return None
    leader, lead_readings = max(readings.items(), key=lambda item: statistics.median(item[1]))
    own_median, lead_median = statistics.median(own_readings), statistics.median(lead_readings)
    scale = max(abs(lead_median), abs(own_median))
    separated = max(own_readings) < min(lead_readings)
    if scale > 0 and separated and (lead_median - own_median) / scale >= rule.native_margin:
        return Behind(f"no candidate succeeds yet; {figure} (median of its last {len(own_readings)} evaluations to "
                      f"{steps} steps) {own_median:.3g} trails {leader}'s {lead_median:.3g} by "
                      f"{100 * (lead_median - own_median) / scale:.0f}% (stop at {100 * rule.native_margin:.0f}%), "
                      f"every reading below every one of {leader}'s", leader)
    return None


class EarlyStopper:
    """The pool's view of a round: each job's curve so far, and which rungs each running candidate has passed.

    A candidate trained on several seeds (`--candidate-seeds`) is several jobs, named to their candidate by `groups`;
    it is judged as one: its seeds' curves pooled into one (`runs.seed_scores.pooled_curve`: a point where every seed
    has evaluated, success over all the seeds' episodes, the seeds' mean native return), which reaches a rung when
    every seed has, compared with the other candidates' pooled curves by the same rule; a stop stops all its running
    seeds and names the candidate it trailed. Why pooled rather than each seed against the leader: the decision is then
    about the reward (the statistic it is ranked on), on S times the episodes, and a candidate's seeds cannot be split."""

    def __init__(self, budget: int, eval_freq: int, rule: EarlyStopRule | None = None, groups: Mapping[str, str] | None = None):
        self.rule = rule or EarlyStopRule()
        self.rungs = rung_steps(budget, eval_freq, self.rule)
        self.curves: dict[str, list[CurvePoint]] = {}
        self.groups = dict(groups or {})
        """Job name -> its candidate; a job not named is a candidate of its own (one seed)."""
        self._judged: dict[str, set[int]] = {}
        """Per candidate, the rungs it was judged at (each once)."""
        self._stopped: dict[str, StopDecision] = {}
        """Candidates judged behind, and the decision each of their jobs is stopped with."""
        self._told: set[str] = set()
        """Jobs already given their stop."""

    def candidate(self, name: str) -> str:
        return self.groups.get(name, name)

    def candidate_curves(self) -> dict[str, list[CurvePoint]]:
        """Each candidate's curve: its one job's, or its seeds' pooled (a candidate some of whose seeds have not
        published yet has no points)."""
        members: dict[str, list[str]] = {}
        for name in [*self.groups, *self.curves]:
            group = members.setdefault(self.candidate(name), [])
            if name not in group:
                group.append(name)
        pooled: dict[str, list[CurvePoint]] = {}
        for candidate, names in members.items():
            if len(names) == 1:
                if names[0] in self.curves:
                    pooled[candidate] = self.curves[names[0]]
            elif all(name in self.curves for name in names):
                pooled[candidate] = pooled_curve([self.curves[name] for name in names])
        return pooled

    def observe(self, name: str, curve: Curve) -> None:
        """A job's curve so far (a finished job's whole curve, or a running job's points as published)."""
        self.curves[name] = list(curve)

    def add_point(self, name: str, point: CurvePoint) -> None:
        curve = self.curves.setdefault(name, [])
        if not curve or curve[-1].steps != point.steps:
            curve.append(point)

    def decide(self, running: Sequence[str]) -> dict[str, StopDecision]:
        """Running jobs to stop now. A candidate is judged at a rung once, as soon as it and at least one other
        candidate have both reached it (comparing their evaluations at the rung's step count, whenever that happens).
        A stopped candidate's running jobs (its seeds) stop together, each once it has reached the rung its candidate was
        judged at (every seed has, for its pooled curve to reach a rung; a seed that already finished stays finished)."""
        curves = self.candidate_curves()
        for name in running:
            candidate = self.candidate(name)
            if candidate in self._stopped:
                continue
            curve = curves.get(candidate, [])
            judged = self._judged.setdefault(candidate, set())
            for index, steps in enumerate(self.rungs):
                if index in judged or not reached(curve, steps):
                    continue
                if not any(reached(other, steps) for peer, other in curves.items() if peer != candidate):
                    continue  # nobody to compare with yet: judged when a peer gets there
                judged.add(index)
                behind = judge_at_rung(candidate, curves, steps, self.rule)
                if behind is not None:
                    self._stopped[candidate] = StopDecision(index, steps, behind.reason, behind.leader)
                    break
        decisions: dict[str, StopDecision] = {}
        for name in running:
            decision = self._stopped.get(self.candidate(name))
            if decision is not None and name not in self._told and reached(self.curves.get(name, []), decision.steps):
                decisions[name] = decision
                self._told.add(name)
        return decisions
