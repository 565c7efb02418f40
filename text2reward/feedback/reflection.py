"""Reward reflection: what training did to each reward component (sampled over training, with tips).

Why from the training record: the next prompt needs numbers the model can act on, and they must come
from what really happened in training, never from the reward's own claims.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from policies.score import progress_clause, result_progress
from policies.stats import Rate
from text2reward.runs.records import DEFAULT_EVAL_EPISODES, component_history

SAMPLES = 10
"""Points per component trajectory in the reflection (enough to see a trend, short enough to read)."""
DOMINANCE = 0.8
"""A component above this share of the summed component magnitudes drowns the others."""
CONSTANT_RTOL = 1e-3
NOISE_SIGMAS = 2.0
"""A change in mean evaluation return is reported only when it exceeds this many standard errors of the difference."""


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
        for name, stats in window["components"].items():
            series.setdefault(name, []).append((window["steps"], stats))
    return series


def component_stats(train_result: Any) -> dict[str, dict[str, float]]:
    """{name: {mean, min, max, first, last, share}} over the whole of training.

    `mean` averages the per-window means; `first`/`last` are the first and last window means;
    `share` is |mean| over the summed |mean| of all components (what drowns what).
    """
    history = component_history(_as_dict(train_result))
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


def evaluation_episodes(train_result: Any) -> tuple[int, int]:
    """(episodes per evaluation during training, episodes of the final evaluation), from a result.json (older
    ones that do not say: `DEFAULT_EVAL_EPISODES`, the fewest any family uses, so the widest intervals)."""
    data = _as_dict(train_result)
    during = int(data.get("eval_episodes") or DEFAULT_EVAL_EPISODES)
    final = int(data.get("final_eval_episodes") or len((data.get("final_eval") or {}).get("episodes") or []) or during)
    return during, final


def _point_rate(point: dict[str, Any], episodes: int) -> Rate:
    return Rate.of(float(point.get("success_rate", 0.0)), int(point.get("episodes") or episodes))


def return_rise(curve: list[dict[str, Any]], episodes: int) -> tuple[float, float]:
    """(last minus first mean evaluation return, the noise it must exceed: `NOISE_SIGMAS` standard errors of that
    difference). The standard errors come from each evaluation's spread of episode returns (`std_return`); a curve
    that does not record it (older results) falls back on how much the curve jumps from one evaluation to the next."""
    returns = [float(p.get("mean_return", 0.0)) for p in curve]
    if len(returns) < 2:
        return 0.0, math.inf
    first, last = curve[0], curve[-1]
    if "std_return" in first and "std_return" in last:
        errors = [float(p["std_return"]) / math.sqrt(max(int(p.get("episodes") or episodes), 1)) for p in (first, last)]
        noise = math.hypot(*errors)
    else:
        steps = np.diff(returns)
        noise = float(np.std(steps)) if len(steps) >= 2 else math.inf
    return returns[-1] - returns[0], NOISE_SIGMAS * noise


def reflection_tips(train_result: Any) -> list[str]:
    """The usual ways a dense reward fails, detected from the training record; a tip about a change in success or
    return fires only when the change is larger than the evaluations' noise."""
    data = _as_dict(train_result)
    stats = component_stats(data)
    curve = data.get("curve", [])
    during, final_episodes = evaluation_episodes(data)
    ever_succeeded = any(w.get("step_success", 0.0) > 0 for w in component_history(data)) or any(
        float(p.get("success_rate", 0.0)) > 0 for p in curve)
    return _constant_tips(stats, ever_succeeded) + _dominance_tips(stats) + _success_tips(data, curve, during, final_episodes)


def _constant_tips(stats: dict[str, dict[str, float]], ever_succeeded: bool) -> list[str]:
    """A component that never changed cannot guide learning (one that never fired is never called useless)."""
    tips = []
    for name, s in stats.items():
        if not _is_constant(s):
            continue
        if s["max"] == 0:  # it never fired: maybe a success or stage bonus that was simply never reached; never say remove
            reached = ("" if ever_succeeded else
                       "; the task's success test was never met in training either, so if it pays for success it simply "
                       "has not fired yet: keep it, and reward the progress that leads to it")
            tips.append(
                f"'{name}' was 0 at every training step (its condition was never met{reached}). Until it fires it "
                "cannot guide learning: check that its condition can be met, and add terms that lead towards it."
            )
        else:
            tips.append(
                f"'{name}' was {_fmt(s['mean'])} at every training step (it never changed): a constant component "
                "cannot guide learning; make it depend on the state, rescale it, or remove it."
            )
    return tips


def _dominance_tips(stats: dict[str, dict[str, float]]) -> list[str]:
    """A varying component above `DOMINANCE` of the varying components' summed magnitude drowns the others."""
    varying = {name: abs(s["mean"]) for name, s in stats.items() if not _is_constant(s)}  # constants: _constant_tips
    magnitude = sum(varying.values())
    tips = []
    if len(varying) >= 2 and magnitude > 0:
        for name, size in varying.items():
            if size / magnitude > DOMINANCE:
                others = ", ".join(f"'{o}'" for o in varying if o != name)
                tips.append(
                    f"'{name}' makes up {size / magnitude:.0%} of the summed magnitude of the components: it drowns "
                    f"{others}; scale it down or scale the others up so each stage matters."
                )
    return tips


def _success_tips(data: dict[str, Any], curve: list[dict[str, Any]], during: int, final_episodes: int) -> list[str]:
    """No success at any evaluation (and returns that rose anyway: the reward is being hacked), or a success that
    peaked and fell by more than the evaluations' noise."""
    if not curve:
        return []
    successes = [float(p.get("success_rate", 0.0)) for p in curve]
    tips = []
    if max(successes) == 0.0:
        tips.append(
            "The success rate was 0 at every evaluation: the policy never completed the task, so the final "
            "stage was never reached; reward progress towards it more clearly (intermediate stages, a larger "
            "completion bonus) and check that the condition for the final stage can actually be met."
        )
        returns = [float(p.get("mean_return", 0.0)) for p in curve]
        rise, noise = return_rise(curve, during)
        if rise > 1e-6 + 0.1 * abs(returns[0]) and rise > noise:
            tips.append(
                f"Evaluation returns rose from {_fmt(returns[0])} to {_fmt(returns[-1])} (more than {NOISE_SIGMAS:g} "
                f"standard errors, {_fmt(noise)}) while success stayed 0: the policy learns to collect reward without "
                "doing the task (the reward is being hacked); find the component that grows and make sure it cannot "
                "be earned without real progress."
            )
        return tips
    peak_index = int(np.argmax(successes))
    peak = _point_rate(curve[peak_index], during)
    end = Rate.of(float(data.get("success_rate", successes[-1])), final_episodes) if "success_rate" in data else _point_rate(curve[-1], during)
    if peak.rate > end.rate and not peak.ties(end):
        tips.append(
            f"Success peaked at {peak.text()} at step {int(curve[peak_index].get('steps', 0)):,} but ended at "
            f"{end.text()}: beyond the evaluations' noise, the policy drifted away from the solution; make the reward "
            "highest when the task is done (no terms that keep growing after success, no penalties that success "
            "itself triggers)."
        )
    return tips


def reward_reflection(train_result: Any) -> str:
    """Each component's mean over training (~10 samples, with min/mean/max) and the success curve."""
    data = _as_dict(train_result)
    history = component_history(data)
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
        during, final_episodes = evaluation_episodes(data)
        one = 1 / during
        lines.append(f"Each evaluation during training ran {during} episode{'s' if during != 1 else ''} (one success moves its "
                     f"rate by {one:.2f}); the final one ran {final_episodes}.")
        if "success_rate" in data:
            lines.append("final evaluation success: " + Rate.of(float(data["success_rate"]), final_episodes).text()
                         + progress_clause(result_progress(data)))
        lines.append("evaluation steps: " + ", ".join(str(int(curve[i].get("steps", 0))) for i in idx))
        lines.append("success rate: [" + ", ".join(f"{float(curve[i].get('success_rate', 0.0)):.2f}" for i in idx) + "]")
        lines.append("mean episode return: [" + ", ".join(_fmt(float(curve[i].get("mean_return", 0.0))) for i in idx) + "]")
    tips = reflection_tips(data)
    lines.append("Tips:" if tips else "Tips: none of the usual problems (constant or dominating components, no success, "
                 "changes beyond the evaluations' noise) were found.")
    lines.extend(f"- {tip}" for tip in tips)
    return "\n".join(lines)
