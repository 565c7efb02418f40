"""Reward reflection: what training did to each reward component (sampled over training, with tips).

Why from the training record: the next prompt needs numbers the model can act on, and they must come
from what really happened in training, never from the reward's own claims.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

SAMPLES = 10
"""Points per component trajectory in the reflection (enough to see a trend, short enough to read)."""
DOMINANCE = 0.8
"""A component above this share of the summed component magnitudes drowns the others."""
CONSTANT_RTOL = 1e-3


# --------------------------------------------------------------------------- reward reflection


def _as_dict(train_result: Any) -> dict[str, Any]:
    return train_result.to_dict() if hasattr(train_result, "to_dict") else dict(train_result)


def _sample_indices(n: int, k: int = SAMPLES) -> list[int]:
    """Up to k evenly spaced indices into a series of length n, first and last included."""
    if n <= k:
        return list(range(n))
    return sorted({int(round(i)) for i in np.linspace(0, n - 1, k)})


def _fmt(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value:.3g}" if value != 0 else "0"


def _component_series(history: list[dict[str, Any]]) -> dict[str, list[tuple[int, dict[str, float]]]]:
    series: dict[str, list[tuple[int, dict[str, float]]]] = {}
    for window in history:
        for name, stats in window.get("components", {}).items():
            series.setdefault(name, []).append((int(window.get("steps", 0)), stats))
    return series


def component_stats(train_result: Any) -> dict[str, dict[str, float]]:
    """{name: {mean, min, max, first, last, share}} over the whole of training.

    `mean` averages the per-window means; `first`/`last` are the first and last window means;
    `share` is |mean| over the summed |mean| of all components (what drowns what).
    """
    history = _as_dict(train_result).get("components", [])
    stats: dict[str, dict[str, float]] = {}
    for name, points in _component_series(history).items():
        means = [float(s["mean"]) for _, s in points]
        stats[name] = {
            "mean": float(np.mean(means)),
            "min": float(min(s["min"] for _, s in points)),
            "max": float(max(s["max"] for _, s in points)),
            "first": means[0],
            "last": means[-1],
        }
    magnitude = sum(abs(s["mean"]) for s in stats.values())
    for s in stats.values():
        s["share"] = abs(s["mean"]) / magnitude if magnitude > 0 else 0.0
    return stats


def _is_constant(s: dict[str, float]) -> bool:
    return s["max"] - s["min"] <= 1e-9 + CONSTANT_RTOL * max(abs(s["max"]), abs(s["min"]))


def reflection_tips(train_result: Any) -> list[str]:
    """The usual ways a dense reward fails, detected from the training record."""
    data = _as_dict(train_result)
    stats = component_stats(data)
    curve = data.get("curve", [])
    tips: list[str] = []
    for name, s in stats.items():
        if _is_constant(s):
            why = "its condition was never met" if s["max"] == 0 else "it never changed"
            tips.append(
                f"'{name}' was {_fmt(s['mean'])} at every training step ({why}): a (nearly) constant component "
                "cannot guide learning; make it depend on the state, rescale it, or remove it."
            )
    varying = {name: abs(s["mean"]) for name, s in stats.items() if not _is_constant(s)}  # constants: flagged above
    magnitude = sum(varying.values())
    if len(varying) >= 2 and magnitude > 0:
        for name, size in varying.items():
            if size / magnitude > DOMINANCE:
                others = ", ".join(f"'{o}'" for o in varying if o != name)
                tips.append(
                    f"'{name}' makes up {size / magnitude:.0%} of the summed magnitude of the components: it drowns "
                    f"{others}; scale it down or scale the others up so each stage matters."
                )
    successes = [float(p.get("success_rate", 0.0)) for p in curve]
    if curve and max(successes) == 0.0:
        tips.append(
            "The success rate was 0 at every evaluation: the policy never completed the task, so the final "
            "stage was never reached; reward progress towards it more clearly (intermediate stages, a larger "
            "completion bonus) and check that the condition for the final stage can actually be met."
        )
        returns = [float(p.get("mean_return", 0.0)) for p in curve]
        rise = returns[-1] - returns[0] if len(returns) >= 2 else 0.0
        if rise > 1e-6 + 0.1 * abs(returns[0]):
            tips.append(
                f"Evaluation returns rose from {_fmt(returns[0])} to {_fmt(returns[-1])} while success stayed 0: "
                "the policy learns to collect reward without doing the task (the reward is being hacked); "
                "find the component that grows and make sure it cannot be earned without real progress."
            )
    elif curve and max(successes) - successes[-1] >= 0.3:
        tips.append(
            f"Success peaked at {max(successes):.2f} but ended at {successes[-1]:.2f}: the policy drifted away "
            "from the solution; make the reward highest when the task is done (no terms that keep growing "
            "after success, no penalties that success itself triggers)."
        )
    return tips


def reward_reflection(train_result: Any) -> str:
    """Each component's mean over training (~10 samples, with min/mean/max) and the success curve."""
    data = _as_dict(train_result)
    history = data.get("components", [])
    curve = data.get("curve", [])
    lines = [
        f"Reward reflection: the policy trained for {int(data.get('steps', 0)):,} steps with this reward. "
        "Each component below is its mean per step over a window of training, sampled at up to "
        f"{SAMPLES} evenly spaced points, then its min, mean and max over all of training."
    ]
    if history:
        picks = _sample_indices(len(history))
        lines.append("training steps: " + ", ".join(str(int(history[i].get("steps", 0))) for i in picks))
        stats = component_stats(data)
        for name, points in _component_series(history).items():
            idx = _sample_indices(len(points))
            samples = ", ".join(_fmt(float(points[i][1]["mean"])) for i in idx)
            s = stats[name]
            lines.append(
                f"{name}: [{samples}]  min {_fmt(s['min'])}, mean {_fmt(s['mean'])}, max {_fmt(s['max'])}"
            )
        if any("step_success" in w for w in history):
            fractions = [float(history[i].get("step_success", 0.0)) for i in picks]
            lines.append("fraction of training steps meeting the success test: [" + ", ".join(_fmt(f) for f in fractions) + "]")
    else:
        lines.append("(no reward components were recorded during training)")
    if curve:
        idx = _sample_indices(len(curve))
        lines.append("evaluation steps: " + ", ".join(str(int(curve[i].get("steps", 0))) for i in idx))
        lines.append("success rate: [" + ", ".join(f"{float(curve[i].get('success_rate', 0.0)):.2f}" for i in idx) + "]")
        lines.append("mean episode return: [" + ", ".join(_fmt(float(curve[i].get("mean_return", 0.0))) for i in idx) + "]")
    tips = reflection_tips(data)
    lines.append("Tips:" if tips else "Tips: none of the usual problems (constant or dominating components, no success) were found.")
    lines.extend(f"- {tip}" for tip in tips)
    return "\n".join(lines)
