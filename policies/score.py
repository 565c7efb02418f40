"""A candidate's score from the task's own success test, that still separates rewards when success is rare.

    score = area under the success curve + final progress toward the success rule

- **area**: the mean success rate over the training curve's evaluations (sooner and steadier success scores higher).
- **final progress**: the final evaluation's mean, over episodes, of each episode's progress toward the task's success
  rule (`SuccessRule.progress`, sim_envs.success_progress: 1 exactly when the rule holds, else how far the rule's
  measured distance or angle is from its threshold; an episode's is its best step for "any" tasks, its last step for
  "final" ones).

Both come from the simulator's state through the task's own rule, never from the candidate's reward, so a reward
cannot raise its own score. The score lies in [0, 2]; it is stated with its noise, a standard error over episodes
(the area's from each evaluation's binomial variance, the progress's from its episodes' spread, added as
independent). Ranking uses it after the final success rate and before the native return (text2reward.runs.ranking);
a record from before progress was measured has no progress, and its score is its area alone, which ranks as before.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from policies.curve import CurvePoint

DEFAULT_EPISODES = 5
"""Episodes of a curve point that does not say (older curves)."""


def mean_and_se(values: Iterable[float]) -> tuple[float, float]:
    """(mean, standard error of the mean) of `values`; (0, 0) for none, standard error 0 for one."""
    data = [float(v) for v in values]
    if not data:
        return 0.0, 0.0
    mean = sum(data) / len(data)
    if len(data) < 2:
        return mean, 0.0
    variance = sum((v - mean) ** 2 for v in data) / (len(data) - 1)
    return mean, math.sqrt(variance / len(data))


def curve_area(curve: Sequence[CurvePoint]) -> tuple[float, float]:
    """(mean success rate over the curve's evaluations, its standard error from each evaluation's binomial variance)."""
    if not curve:
        return 0.0, 0.0
    rates = [(p.success_rate, p.episodes or DEFAULT_EPISODES) for p in curve]
    area = sum(rate for rate, _ in rates) / len(rates)
    variance = sum(rate * (1 - rate) / max(n, 1) for rate, n in rates) / len(rates) ** 2
    return area, math.sqrt(variance)


@dataclass(frozen=True)
class Score:
    """Area under the success curve plus final progress toward the success rule, with its standard error."""

    area: float
    area_se: float
    progress: float | None
    """The final evaluation's mean progress; None for records from before it was measured."""
    progress_se: float = 0.0

    @property
    def value(self) -> float:
        return self.area + (self.progress if self.progress is not None else 0.0)

    @property
    def se(self) -> float:
        return math.hypot(self.area_se, self.progress_se if self.progress is not None else 0.0)

    def text(self) -> str:
        """`score 0.74 ± 0.06 (success-curve area 0.12, progress toward the success rule 0.62 ± 0.05)`."""
        if self.progress is None:
            return f"success-curve area {self.area:.2f} ± {self.area_se:.2f} (no progress measured)"
        return (f"score {self.value:.2f} ± {self.se:.2f} (success-curve area {self.area:.2f}, "
                f"{progress_text(self.progress, self.progress_se)})")


def progress_text(progress: float, se: float) -> str:
    """The one clause a prompt or report gives: `progress toward the success rule 0.62 ± 0.05`."""
    return f"progress toward the success rule {progress:.2f} ± {se:.2f}"


def progress_clause(progress: tuple[float, float] | None) -> str:
    """`; progress toward the success rule 0.62 ± 0.05` after a success figure, or "" when it was not measured."""
    return f"; {progress_text(*progress)}" if progress is not None else ""


def score_of(curve: Sequence[CurvePoint], progress: float | None, progress_se: float | None = None) -> Score:
    """The score of a training curve and its final evaluation's progress (None: not measured)."""
    area, area_se = curve_area(curve)
    return Score(area, area_se, None if progress is None else float(progress), float(progress_se or 0.0))
