"""Reward reflection: what training did to each reward component (sampled over training, with tips).

Why from the training record: the next prompt needs numbers the model can act on, and they must come
from what really happened in training, never from the reward's own claims.
"""

from __future__ import annotations

import math
from dataclasses import is_dataclass
from typing import Any

import numpy as np

from policies.curve import CurvePoint
from policies.formatting import evaluations_of
from policies.score import progress_clause
from policies.stats import Rate
from text2reward.runs.records import ComponentStats, ComponentWindow, TrainingResult, read, write

SAMPLES = 10
"""Points per component trajectory in the reflection (enough to see a trend, short enough to read)."""
DOMINANCE = 0.8
"""A component above this share of the summed component magnitudes drowns the others."""
CONSTANT_RTOL = 1e-3
NOISE_SIGMAS = 2.0
"""A change in mean evaluation return is reported only when it exceeds this many standard errors of the difference."""


# --------------------------------------------------------------------------- reward reflection


def as_training_result(train_result: Any) -> TrainingResult:
    """A training result as the records type it: a candidate's kept one as it is, a worker's `TrainResult` (or its
    result.json) read once through the records' codec."""
    if isinstance(train_result, TrainingResult):
        return train_result
    return read(TrainingResult, write(train_result) if is_dataclass(train_result) else dict(train_result), "a training result")


def _sample_indices(n: int, k: int = SAMPLES) -> list[int]:
    """Up to k evenly spaced indices into a series of length n, first and last included."""
    if n <= k:
        return list(range(n))
    return sorted({int(round(i)) for i in np.linspace(0, n - 1, k)})


def _fmt(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value:.3g}" if value != 0 else "0"


def _component_series(history: list[ComponentWindow]) -> dict[str, list[tuple[int, ComponentStats]]]:
    series: dict[str, list[tuple[int, ComponentStats]]] = {}
    for window in history:
        for name, stats in window.components.items():
            series.setdefault(name, []).append((window.steps, stats))
    return series


def component_stats(train_result: Any) -> dict[str, dict[str, float]]:
    """{name: {mean, min, max, first, last, share}} over the whole of training.

    `mean` averages the per-window means; `first`/`last` are the first and last window means;
    `share` is |mean| over the summed |mean| of all components (what drowns what).
    """
    history = as_training_result(train_result).components
    stats: dict[str, dict[str, float]] = {}
    for name, points in _component_series(history).items():
        means = [s.mean for _, s in points]
        stats[name] = {
            "mean": float(np.mean(means)),
            "min": float(min(s.min for _, s in points)),
            "max": float(max(s.max for _, s in points)),
            "first": means[0],
            "last": means[-1],
        }
    magnitude = sum(abs(s["mean"]) for s in stats.values())
    for s in stats.values():
        s["share"] = abs(s["mean"]) / magnitude if magnitude > 0 else 0.0
    return stats


def _is_constant(s: dict[str, float]) -> bool:
    return s["max"] - s["min"] <= 1e-9 + CONSTANT_RTOL * max(abs(s["max"]), abs(s["min"]))


def _point_rate(point: CurvePoint, episodes: int) -> Rate:
    return Rate.of(point.success_rate, point.episodes or episodes)


def comparable_points(curve: list[CurvePoint], episodes: int) -> list[CurvePoint]:
    """The evaluations of the curve that ran as many episodes as its first: a trend is read on like with like (a
    final evaluation of 30 episodes appended to 5-episode ones is never compared with them)."""
    if not curve:
        return []
    count = curve[0].episodes or episodes
    return [p for p in curve if (p.episodes or episodes) == count]


def _noise(points: list[CurvePoint], series: list[CurvePoint], episodes: int) -> float:
    """`NOISE_SIGMAS` standard errors of the difference between two evaluations' mean returns (from their spread of
    episode returns, `std_return`); a curve that does not record it falls back on how much it jumps between evaluations."""
    spreads = [p.std_return for p in points]
    if all(spread is not None for spread in spreads):
        errors = [float(spread or 0.0) / math.sqrt(max(p.episodes or episodes, 1)) for spread, p in zip(spreads, points)]
        return NOISE_SIGMAS * math.hypot(*errors)
    steps = np.diff([p.mean_return for p in series])
    return NOISE_SIGMAS * float(np.std(steps)) if len(steps) >= 2 else math.inf


def return_rise(curve: list[CurvePoint], episodes: int) -> tuple[float, float]:
    """(the highest mean evaluation return minus the first, over evaluations of equal episode counts; the noise it must
    exceed: `NOISE_SIGMAS` standard errors of that difference)."""
    points = comparable_points(curve, episodes)
    if len(points) < 2:
        return 0.0, math.inf
    returns = [p.mean_return for p in points]
    top = int(np.argmax(returns[1:])) + 1
    return returns[top] - returns[0], _noise([points[0], points[top]], points, episodes)


def reflection_tips(train_result: Any) -> list[str]:
    """The usual ways a dense reward fails, detected from the training record; a tip about a change in success or
    return fires only when the change is larger than the evaluations' noise, and compares evaluations of equal size."""
    data = as_training_result(train_result)
    stats = component_stats(data)
    curve = data.curve
    during, final_episodes = data.episodes
    ever_succeeded = any((w.step_success or 0.0) > 0 for w in data.components) or any(
        p.success_rate > 0 for p in curve) or (data.success_rate or 0.0) > 0
    dominance = _dominance_tips(stats)
    return (_constant_tips(stats, ever_succeeded) + dominance + ([] if dominance else _negligible_tips(stats))
            + _success_tips(data, curve, during, final_episodes))


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


NEGLIGIBLE = 0.01
"""A varying component below this share of the summed magnitudes barely moves the reward."""


def _negligible_tips(stats: dict[str, dict[str, float]]) -> list[str]:
    """A varying component far smaller than the others: whatever it rewards, the policy hardly feels it."""
    varying = {name: abs(s["mean"]) for name, s in stats.items() if not _is_constant(s)}
    magnitude = sum(varying.values())
    if len(varying) < 2 or magnitude <= 0:
        return []
    return [f"'{name}' averaged {_fmt(stats[name]['mean'])} per step, {size / magnitude:.1%} of the summed magnitude of the "
            "components: it barely moves the reward; scale it up if what it rewards matters for the task."
            for name, size in varying.items() if size / magnitude < NEGLIGIBLE]


def _final_rate(data: TrainingResult, curve: list[CurvePoint], during: int, final_episodes: int) -> Rate | None:
    if data.success_rate is not None:
        return Rate.of(data.success_rate, final_episodes)
    return _point_rate(curve[-1], during) if curve else None


def _success_tips(data: TrainingResult, curve: list[CurvePoint], during: int, final_episodes: int) -> list[str]:
    """No success at any evaluation (and returns that rose anyway: the reward is being hacked), or a success that
    peaked and fell by more than the evaluations' noise."""
    final = _final_rate(data, curve, during, final_episodes)
    if final is None:
        return []
    curve = comparable_points(curve, during)  # the evaluations during training, without a final one appended to them
    successes = [p.success_rate for p in curve]
    tips = []
    never = "the success test was never met, so the final stage was never reached"
    advice = ("reward progress towards it more clearly (intermediate stages, a larger completion bonus) and check that the "
              "condition for the final stage can actually be met.")
    if final.successes == 0 and max(successes, default=0.0) == 0.0:
        where = f"at every evaluation during training ({len(curve)}) and at the final one ({final.text()})" if curve else f"at the final evaluation ({final.text()})"
        tips.append(f"The success rate was 0 {where}: {never}; {advice}")
    elif final.successes == 0:
        top = int(np.argmax(successes))
        tips.append(f"The final evaluation succeeded in none of its episodes ({final.text()}), though the evaluation at step "
                    f"{curve[top].steps:,} reached {_point_rate(curve[top], during).text()}: the policy did "
                    f"not keep what it found; {advice}")
    elif curve and max(successes) == 0.0:
        tips.append(f"Success was 0 at every evaluation during training ({evaluations_of(len(curve), during)}) and only the "
                    f"final evaluation saw any ({final.text()}): the policy is only beginning to complete the task; "
                    f"{advice}")
    tips += _hacking_tips(curve, during, final)
    if max(successes, default=0.0) > 0:
        peak_index = int(np.argmax(successes))
        peak = _point_rate(curve[peak_index], during)
        if peak.rate > final.rate and not peak.ties(final):
            tips.append(
                f"Success peaked at {peak.text()} at step {curve[peak_index].steps:,} but ended at "
                f"{final.text()}: beyond the evaluations' noise, the policy drifted away from the solution; make the reward "
                "highest when the task is done (no terms that keep growing after success, no penalties that success "
                "itself triggers)."
            )
    return tips


def _hacking_tips(curve: list[CurvePoint], during: int, final: Rate) -> list[str]:
    """Returns that rose beyond noise (first evaluation to the curve's highest, equal episode counts) while success
    did not rise beyond noise: the same test for every candidate, whatever one lucky evaluation said."""
    points = comparable_points(curve, during)
    rise, noise = return_rise(curve, during)
    if len(points) < 2:
        return []
    returns = [p.mean_return for p in points]
    first = _point_rate(points[0], during)
    success_rose = final.rate > first.rate and not final.ties(first)
    if success_rose or not (rise > 1e-6 + 0.1 * abs(returns[0]) and rise > noise):
        return []
    top = int(np.argmax(returns[1:])) + 1
    n = points[0].episodes or during
    return [
        f"Evaluation returns rose from {_fmt(returns[0])} (step {points[0].steps:,}) to a peak of "
        f"{_fmt(returns[top])} (step {points[top].steps:,}) and ended at {_fmt(returns[-1])}, comparing the "
        f"{evaluations_of(len(points), n)}; the rise is more than {NOISE_SIGMAS:g} standard errors "
        f"({_fmt(noise)}), while success did not rise beyond noise (first evaluation {first.text()}, final "
        f"{final.text()}): the policy learns to collect reward without doing the task (the reward is being hacked); "
        "find the component that grows and make sure it cannot be earned without real progress."
    ]


def success_windows(history: list[ComponentWindow]) -> str:
    """Where the success test held in training, over every window (the samples above can miss a short one)."""
    held = [w for w in history if (w.step_success or 0.0) > 0]
    if not held:
        return f"over all {len(history)} windows of training it never held"
    top = max(held, key=lambda w: w.step_success or 0.0)
    steps = ", ".join(f"{w.steps:,}" for w in held[:12]) + (f" and {len(held) - 12} more" if len(held) > 12 else "")
    windows = "the window ending at step" if len(held) == 1 else "the windows ending at steps"
    return (f"over all {len(history)} windows of training it held in {len(held)} ({windows} {steps}), "
            f"at most in {_fmt(top.step_success or 0.0)} of a window's steps (at step {top.steps:,})")


def reward_reflection(train_result: Any) -> str:
    """Each component's mean over training (~10 samples, with min/mean/max) and the success curve."""
    data = as_training_result(train_result)
    history = data.components
    curve = data.curve
    lines = [
        f"Reward reflection: the policy trained for {data.steps:,} steps with this reward. "
        "Each component below is its mean per step over a window of training, sampled at up to "
        f"{SAMPLES} points spread over training (the steps listed), then its min, mean and max over all of training."
    ]
    if history:
        picks = _sample_indices(len(history))
        lines.append("training steps: " + ", ".join(str(history[i].steps) for i in picks))
        stats = component_stats(data)
        for name, points in _component_series(history).items():
            idx = _sample_indices(len(points))
            samples = ", ".join(_fmt(points[i][1].mean) for i in idx)
            s = stats[name]
            lines.append(
                f"{name}: [{samples}]  min {_fmt(s['min'])}, mean {_fmt(s['mean'])}, max {_fmt(s['max'])}"
            )
        if any(w.step_success is not None for w in history):
            fractions = [history[i].step_success or 0.0 for i in picks]
            lines.append("fraction of training steps meeting the success test: [" + ", ".join(_fmt(f) for f in fractions) + "]; "
                         + success_windows(history))
    else:
        lines.append("(no reward components were recorded during training)")
    if curve:
        idx = _sample_indices(len(curve))
        during, final_episodes = data.episodes
        one = 1 / during
        lines.append(f"Each evaluation during training ran {during} episode{'s' if during != 1 else ''} (one success moves its "
                     f"rate by {one:.2f}); the final one ran {final_episodes}.")
        if data.success_rate is not None:
            lines.append("final evaluation success: " + Rate.of(data.success_rate, final_episodes).text()
                         + progress_clause(data.progress))
        lines.append("evaluation steps: " + ", ".join(str(curve[i].steps) for i in idx))
        lines.append("success rate: [" + ", ".join(f"{curve[i].success_rate:.2f}" for i in idx) + "]")
        lines.append("mean episode return: [" + ", ".join(_fmt(curve[i].mean_return) for i in idx) + "]")
    tips = reflection_tips(data)
    lines.append("Tips:" if tips else "Tips: none of the usual problems (constant or dominating components, no success, "
                 "changes beyond the evaluations' noise) were found.")
    lines.extend(f"- {tip}" for tip in tips)
    return "\n".join(lines)
