"""How far a state is from meeting its task's success rule: a number in [0, 1] that is 1 exactly when the rule holds.

Why: at the budgets users can afford, success is often 0 of 30 for every candidate, and a success rate alone cannot
tell the rewards apart. The task's own rule still can: a policy that brings the object to 0.10 m of a goal that
needs 0.05 m is further along than one that leaves it at 0.40 m. This quantity is read from the simulator's view,
never from a candidate's reward, so a reward cannot score itself.

Each success predicate (`test(view, **constants)`) gets a companion registered with `@progress_of(test)`, taking the
same constants, so the number and the rule read the same quantities with the same thresholds. The companion only
grades; `SuccessRule.progress` decides 1.0 by running the predicate itself, so "1 exactly when the rule holds" is
true by construction and the predicates stay untouched (their booleans bit-identical).

Normalisation, one per kind of condition, chosen so it needs no per-task constant beyond the rule's own:
- "x <= LIMIT" (a distance, an angle error, a height, a speed): `LIMIT / x`, the threshold in units of the value:
  0.5 means twice as far as the rule allows, 0.1 ten times. Scale-free, so 0.05 m and 0.1 rad read alike.
- "x >= TARGET" from a start (a travel, a lift, a turn, an angle): `(x - start) / (TARGET - start)`, the share of the
  required change made.
- several conditions: their mean. Why not the minimum or the product: a state that meets one of two conditions
  is further along than one that meets none, and the minimum and the product (one factor at 0) cannot see it; the
  mean is 1 only when every condition's part is 1, so the "exactly when the rule holds" property is kept.
A predicate without a companion (a user's own rule) grades as 1 when it holds and 0 otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

BELOW_ONE = math.nextafter(1.0, 0.0)
"""The largest progress of a state where the rule does not hold (its companion may read 1 at a strict threshold)."""

_COMPANIONS: dict[Callable[..., Any], Callable[..., float]] = {}


def progress_of(test: Callable[..., Any]) -> Callable[[Callable[..., float]], Callable[..., float]]:
    """Register the decorated function as `test`'s progress companion (same arguments: the view and the constants)."""

    def register(companion: Callable[..., float]) -> Callable[..., float]:
        _COMPANIONS[test] = companion
        return companion

    return register


def companion(test: Callable[..., Any]) -> Callable[..., float] | None:
    """The progress companion of a success predicate, None when it has none."""
    return _COMPANIONS.get(test)


def within(value: float, limit: float) -> float:
    """Progress towards "value <= limit" for a non-negative value (a distance, an error): `limit / value`, at most 1."""
    value, limit = float(value), float(limit)
    if value <= limit:
        return 1.0
    return clip(limit / value) if math.isfinite(value) else 0.0


def reaching(value: float, target: float, start: float = 0.0) -> float:
    """Progress towards "value >= target" from `start`: the share of the change from `start` to `target` made."""
    value, target, start = float(value), float(target), float(start)
    if value >= target:
        return 1.0
    span = target - start
    return clip((value - start) / span) if span > 0 and math.isfinite(value) else 0.0


def holds(condition: Any) -> float:
    """A yes-or-no condition's part: 1 when it holds, 0 otherwise."""
    return 1.0 if bool(condition) else 0.0


def mean_of(parts: Iterable[float]) -> float:
    """Several conditions' progress as one: their mean (1 only when every part is 1)."""
    values = [clip(p) for p in parts]
    return sum(values) / len(values) if values else 0.0


def clip(value: float) -> float:
    """`value` within [0, 1] (NaN: 0)."""
    value = float(value)
    return 0.0 if not math.isfinite(value) and not value > 0 else min(1.0, max(0.0, value))
