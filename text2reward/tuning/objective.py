"""What a trial is scored by: the task's success rate, with the native return as a tie-breaker.

Why success first: it is the task's own test, the figure every candidate is ranked by (runs/ranking.py).
Why a tie-breaker: with a short budget many trials end at the same success rate (often 0), and the sampler
then learns nothing from them; the native return (the task's expert reward, recorded at every evaluation
and never trained on) still says which got closer. Why it can never outweigh success: success rates move in
steps of 1/E (E evaluation episodes), and the tie-breaker lies in (0, 1) times a weight of 1/(2E), so two
trials' tie-breakers differ by less than half a success step. The native return is squashed by
sign(x)*log1p(|x|) and an arctangent: monotone, bounded, and still sensitive across tasks whose returns
differ by orders of magnitude (Fetch's lie in -50..0, MetaWorld's in 0..5000).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def squash(native_return: float | None) -> float:
    """A monotone map of any real return into (0, 1); 0.5 for an unknown return."""
    if native_return is None or not math.isfinite(float(native_return)):
        return 0.5
    x = float(native_return)
    return 0.5 + math.atan(math.copysign(math.log1p(abs(x)), x)) / math.pi


def tie_weight(eval_episodes: int) -> float:
    """The tie-breaker's weight: half of one success step."""
    return 0.5 / max(1, int(eval_episodes))


def objective(point: Mapping[str, Any], eval_episodes: int) -> float:
    """The score of an evaluation ({success_rate, mean_native_return}) or of a training's final result."""
    return float(point["success_rate"]) + tie_weight(eval_episodes) * squash(point.get("mean_native_return"))
