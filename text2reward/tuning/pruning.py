"""Optuna's pruner fed by the training pool: each trial's evaluations become its intermediate values, and a
trial the pruner gives up on gets the pool's stop file.

Why through the pool's early-stopping hook rather than a polling loop of our own: the pool already reads every
running job's published evaluations, writes the stop file a worker looks for every few dozen steps, and relays
it to a Ray task; a pruned trial then stops and finishes like a candidate stopped by a round's early stopping
(its partial result kept, `stopped_early.kind` "behind"). So this class speaks the stopper's interface.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from policies.curve import CurvePoint
from text2reward.training.early_stop import Curve, EarlyStopper, StopDecision


class TrialPruner(EarlyStopper):
    """Reports evaluations to Optuna trials (by job name) and asks their pruner whether to stop them."""

    def __init__(self, trials: Mapping[str, Any], score: Callable[[Sequence[CurvePoint]], float]):
        super().__init__(budget=1, eval_freq=1)  # no rungs: Optuna's pruner decides when to judge
        self.trials = dict(trials)
        """Job name -> the `optuna.Trial` it trains."""
        self.score = score
        """The objective of a curve so far (the tuner's, over the evaluations up to the latest)."""
        self.points: dict[str, dict[int, CurvePoint]] = {name: {} for name in self.trials}
        self.reported: dict[str, dict[int, float]] = {name: {} for name in self.trials}
        self.fresh: set[str] = set()
        """Trials with an intermediate value the pruner has not been asked about."""
        self.pruned: dict[str, StopDecision] = {}

    def _report(self, name: str, point: CurvePoint) -> None:
        if name not in self.trials:
            return
        step = point.steps
        if step in self.reported[name]:
            return
        self.points[name][step] = point
        value = self.score([p for s, p in sorted(self.points[name].items()) if s <= step])
        self.trials[name].report(value, step)
        self.reported[name][step] = value
        self.fresh.add(name)

    def observe(self, name: str, curve: Curve) -> None:
        """A finished job's whole curve: report the evaluations the polls missed (before its trial is told)."""
        super().observe(name, curve)
        for point in curve:
            self._report(name, point)

    def add_point(self, name: str, point: CurvePoint) -> None:
        super().add_point(name, point)
        self._report(name, point)

    def decide(self, running: Sequence[str]) -> dict[str, StopDecision]:
        decisions: dict[str, StopDecision] = {}
        for name in running:
            if name not in self.fresh or name in self.pruned:
                continue
            self.fresh.discard(name)
            if not self.trials[name].should_prune():
                continue
            step = max(self.reported[name])
            decisions[name] = self.pruned[name] = StopDecision(
                rung=len(self.reported[name]) - 1, steps=step,
                reason=f"pruned by the tuner: objective {self.reported[name][step]:.3f} at {step} steps is below "
                       "the median of the finished trials there")
        return decisions
