"""What a trial is scored by: the area under its success curve, with progress toward the success rule as a tie-breaker.

Why the area and not the final evaluation: a final evaluation is E episodes at one moment, and two trainings of
the same reward on different seeds often differ there by several of them; the area averages every evaluation
(K x E episodes), and it prefers constants that reach success sooner and keep it, which is what a shorter or
longer budget will reward too. Each evaluation's value holds for the steps since the one before it; a trial that
stopped at the run's success threshold keeps its last value to the end of the budget.

Why success first: it is the task's own test, the figure every candidate is ranked by (runs/ranking.py).
Why a tie-breaker: with a short budget many trials end at the same success rate (often 0), and the sampler
then learns nothing from them. The tie-breaker is what ranks candidates after success (runs/ranking.py,
policies.score): each evaluation's mean progress toward the task's own success rule, in [0, 1], measured from the
simulator and never from the trial's reward. An evaluation from before progress was measured falls back to the
native return (the task's expert reward, recorded at every evaluation and never trained on), squashed by
sign(x)*log1p(|x|) and an arctangent: monotone, bounded, and still sensitive across tasks whose returns differ by
orders of magnitude (Fetch's lie in -50..0, MetaWorld's in 0..5000). Why it can never outweigh success: success
rates move in steps of 1/E (E evaluation episodes), and the tie-breaker lies in [0, 1] times a weight of 1/(2E),
so two trials' tie-breakers differ by at most half a success step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from policies.curve import CurvePoint


def squash(native_return: float | None) -> float:
    """A monotone map of any real return into (0, 1); 0.5 for an unknown return."""
    if native_return is None or not math.isfinite(float(native_return)):
        return 0.5
    x = float(native_return)
    return 0.5 + math.atan(math.copysign(math.log1p(abs(x)), x)) / math.pi


def tie_weight(eval_episodes: int) -> float:
    """The tie-breaker's weight: half of one success step."""
    return 0.5 / max(1, int(eval_episodes))


def tie_breaker(point: CurvePoint) -> float:
    """In [0, 1]: the evaluation's mean progress toward the success rule, or its squashed native return where
    progress was not measured (older curves, tasks without a graded rule)."""
    progress = point.mean_progress
    if progress is not None and math.isfinite(progress):
        return min(1.0, max(0.0, float(progress)))
    return squash(point.mean_native_return)


def objective(point: CurvePoint, eval_episodes: int) -> float:
    """The score of an evaluation ({success_rate, mean_progress, mean_native_return}) or of a training's final result."""
    return point.success_rate + tie_weight(eval_episodes) * tie_breaker(point)


def curve_objective(curve: Sequence[CurvePoint], eval_episodes: int, budget: int | None = None) -> float:
    """The step-weighted mean of `objective` over a training's evaluations ({steps, success_rate,
    mean_native_return}), over `budget` steps when given (the last value held to it), else to the last evaluation.
    A curve without evaluations scores 0."""
    points = sorted(curve, key=lambda p: p.steps)
    if not points:
        return 0.0
    end = max(points[-1].steps, int(budget or 0))
    if end <= 0:
        return objective(points[-1], eval_episodes)
    area, previous = 0.0, 0
    for point in points:
        steps = point.steps
        area += objective(point, eval_episodes) * (steps - previous)
        previous = steps
    area += objective(points[-1], eval_episodes) * (end - previous)
    return area / end
