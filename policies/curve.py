"""A training curve's evaluation point, typed: what every reader of a curve (score, early stopping, seed pooling,
tuning, reflection, report, dashboard) reads by attribute.

Why here: the curve is policies' own product (policies.callbacks evaluates, policies.score scores it); text2reward's
records read result.json's curve into these points through their codec (sim_envs.codec), so the names below
are result.json's keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CurvePoint:
    """One evaluation during training (or the final one, appended as the curve's last point)."""

    steps: int
    success_rate: float
    episodes: int | None = None
    """The evaluation's episodes; None in older curves that did not say (readers take the run's default)."""
    mean_return: float = 0.0
    std_return: float | None = None
    """The spread of the episodes' returns; None in older curves."""
    mean_native_return: float | None = None
    mean_length: float | None = None
    wall_seconds: float | None = None
    mean_progress: float | None = None
    """The episodes' mean progress toward the success rule (policies.score); None where it was not measured."""
    progress_se: float | None = None
    seeds: int | None = None
    """A point pooled over a candidate's seeds (text2reward.runs.seed_scores): how many; None for one seed's."""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    """Figures a newer text2reward records that this one does not know: kept, and written back as they were."""
