"""A reward's score over several training seeds: success pooled over every seed's final-evaluation episodes (one
Wilson interval), and how much the same reward varies between seeds.

Why pooled: one training seed is one draw of the training's luck (measured on soccer-v3: one reward read 0.30 / 0.00 /
0.03 on three seeds), so best-of-K and "best so far" on one seed choose the luckiest seed. Pooling the seeds' episodes
gives one rate whose interval every reader (ranking, best so far, the prompt, the report, the final comparison) states
the same way as a one-seed rate; the between-seed spread (min-max and standard deviation of the per-seed rates) is
stated beside it, since the pooled interval counts episodes, not seeds, and says nothing of how seeds differ.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from policies.curve import CurvePoint
from policies.stats import Rate
from text2reward.runs.records import DEFAULT_EVAL_EPISODES, Candidate, SeedRun, TrainingSummary


def point_rate(point: CurvePoint) -> Rate:
    """An evaluation point's success as a rate over its episodes (`DEFAULT_EVAL_EPISODES` where an older point does
    not say)."""
    return Rate.of(point.success_rate, point.episodes or DEFAULT_EVAL_EPISODES)


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else float("-inf")


def pooled_curve(curves: Sequence[Sequence[CurvePoint]]) -> list[CurvePoint]:
    """The seeds' curves as one: a point at each step count every curve has evaluated, its success pooled over the
    seeds' episodes (`episodes` their sum), its returns the seeds' mean. One curve is returned as it is."""
    if len(curves) == 1:
        return list(curves[0])
    by_steps = [{p.steps: p for p in curve} for curve in curves]
    shared = sorted(set.intersection(*(set(points) for points in by_steps))) if by_steps else []
    pooled: list[CurvePoint] = []
    for steps in shared:
        points = [points[steps] for points in by_steps]
        rate = Rate.pooled(point_rate(p) for p in points)
        native = [p.mean_native_return for p in points if p.mean_native_return is not None]
        pooled.append(CurvePoint(steps=steps, success_rate=rate.rate, episodes=rate.episodes, seeds=len(points),
                                 mean_return=_mean([p.mean_return for p in points]), mean_native_return=_mean(native) if native else None))
    return pooled


def pooled_summary(summaries: Sequence[TrainingSummary]) -> TrainingSummary:
    """A candidate's training figures over its seeds: final success pooled over every seed's final-evaluation episodes,
    the curve pooled point by point, returns, steps and time the seeds' means (time per step their sum's rate)."""
    rate = Rate.pooled(Rate.of(s.success_rate, s.episodes) for s in summaries)
    n = len(summaries)
    wall = sum(s.wall_seconds for s in summaries)
    return TrainingSummary(
        success_rate=rate.rate, best_success_rate=max(s.best_success_rate for s in summaries),
        mean_return=_mean([s.mean_return for s in summaries]), mean_native_return=_mean([s.mean_native_return for s in summaries]),
        steps=round(sum(s.steps for s in summaries) / n), wall_seconds=round(wall, 1),
        steps_per_second=sum(s.steps for s in summaries) / wall if wall > 0 else 0.0,
        curve=pooled_curve([s.curve for s in summaries]), episodes=rate.episodes,
        eval_episodes=sum(s.eval_episodes for s in summaries), pooled_seeds=n)


@dataclass(frozen=True)
class SeedSpread:
    """A candidate's per-seed final success, pooled, and the spread between its seeds."""

    seeds: tuple[int, ...]
    rates: tuple[Rate, ...]
    """Per trained seed, in the order of `seeds`."""

    @property
    def pooled(self) -> Rate:
        return Rate.pooled(self.rates)

    @property
    def low(self) -> float:
        return min(r.rate for r in self.rates)

    @property
    def high(self) -> float:
        return max(r.rate for r in self.rates)

    @property
    def std(self) -> float:
        """The population standard deviation of the per-seed rates (0 for one seed)."""
        return statistics.pstdev([r.rate for r in self.rates]) if len(self.rates) > 1 else 0.0

    def text(self) -> str:
        """`success per seed 0.30 / 0.00 / 0.03 (seeds 0, 1000, 2000), pooled 0.11 (10 of 90 episodes, 95% interval
        0.06-0.19); between seeds 0.00-0.30, standard deviation 0.13`."""
        per_seed = " / ".join(f"{r.rate:.2f}" for r in self.rates)
        return (f"success per seed {per_seed} (seeds {', '.join(str(s) for s in self.seeds)}), pooled {self.pooled.text()}; "
                f"between seeds {self.low:.2f}-{self.high:.2f}, standard deviation {self.std:.2f}")


def seed_spread(candidate: Candidate) -> SeedSpread | None:
    """The spread of a candidate trained on more than one seed (None for one seed, or an older record)."""
    trained = [s for s in candidate.seeds if s.training is not None]
    if len(trained) < 2:
        return None
    return SeedSpread(tuple(s.seed for s in trained), tuple(_seed_rate(s) for s in trained))


def _seed_rate(seed: SeedRun) -> Rate:
    assert seed.training is not None
    return Rate.of(seed.training.success_rate, seed.training.episodes)
