"""Validation of a candidate reward: the static pass, then a smoke run on real states in the sandbox.

Every failed check becomes one message that says what is wrong and how to fix it, because this
report is what the model sees in the execution-error prompt.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from policies.reward_modes import runnable_source
from sim_envs.task import Task
from text2reward.sandbox.hints import attribute_hint
from text2reward.sandbox.limits import Limits
from text2reward.sandbox.runner import RunResult, run_reward
from text2reward.sandbox.states import Sample, collect_states
from text2reward.sandbox.static import static_check

CHECKS = ("static", "runs", "output", "finite_total", "finite_components", "not_constant", "deterministic", "time_per_call")
"""Every report lists these, in this order; a check after a failed one is marked skipped."""


@dataclass
class ValidationReport:
    ok: bool
    errors: list[str]
    checks: dict[str, dict[str, Any]]
    """name -> {"ok": True | False | None (skipped), "detail": str, ...figures}."""
    seconds: float = 0.0
    n_states: int = 0
    isolation: str = ""
    component_names: list[str] = field(default_factory=list)
    """Every component name the reward returned on the validation's states (a valid name each, at most
    `MAX_COMPONENTS`): the set its training may use (sandbox.reward.SandboxedReward refuses a new one)."""


def validate(code: str, task: Task, samples: list[Sample] | None = None, limits: Limits | None = None,
             mode: str = "dense") -> ValidationReport:
    """Static pass, then (if it passes) a smoke run on `samples` (default: `collect_states(task)`). In a potential
    or progress mode the program's value is checked like a reward's total (finite, not constant, deterministic)."""
    limits = limits or Limits()
    started = time.monotonic()
    checks: dict[str, dict[str, Any]] = {}
    problems = static_check(code, mode)
    checks["static"] = _check(not problems, "; ".join(problems) if problems else "imports, names and attributes are allowed")
    if problems:
        return _report(checks, {"static": problems}, started, 0, "")
    states = collect_states(task) if samples is None else samples
    result = run_reward(runnable_source(code, mode), states, limits, repeats=2)
    checks.update(smoke_checks(result, limits))
    if result.failed_index is not None and checks.get("runs", {}).get("ok") is False:
        hint = attribute_hint(checks["runs"]["detail"], states[result.failed_index % len(states)][0])
        if hint:
            checks["runs"]["detail"] += f"\n{hint}"
    by_check = {name: [c["detail"]] for name, c in checks.items() if c["ok"] is False}
    report = _report(checks, by_check, started, len(states), result.isolation)
    report.component_names = sorted({name for run in result.passes for _, components in run for name in components})
    return report


def smoke_checks(result: RunResult, limits: Limits) -> dict[str, dict[str, Any]]:
    """The runtime checks on a run with two passes over the same states."""
    checks: dict[str, dict[str, Any]] = {}
    if not result.ok:
        output_broken = result.error_kind == "output"
        checks["runs"] = _check(output_broken, "ran without raising" if output_broken else _run_error(result))
        checks["output"] = _check(False, _run_error(result)) if output_broken else _skipped()
        return checks
    checks["runs"] = _check(True, f"ran on {len(result.outputs)} states, twice")
    checks["output"] = _check(True, "returns (float, {name: float})")
    totals = [total for total, _ in result.outputs]
    bad = [i for i, value in enumerate(totals) if not math.isfinite(value)]
    checks["finite_total"] = _check(
        not bad,
        f"the total is {totals[bad[0]]} on {len(bad)} of {len(totals)} states (first: state {bad[0]}); guard divisions, "
        "logs and exponentials (e.g. np.clip, + 1e-8)" if bad else "finite on every state",
    )
    checks["finite_components"] = _finite_components(result)
    spread = max(totals) - min(totals) if totals else 0.0
    constant = not totals or not math.isfinite(spread) or spread <= 1e-12 * max(1.0, abs(totals[0]))
    checks["not_constant"] = _check(
        not constant,
        f"the total is {totals[0] if totals else 'missing'} on all {len(totals)} states, so it gives the agent no signal; "
        "make it depend on the distances and positions in the view" if constant else f"varies by {spread:.4g} across states",
        spread=spread,
    )
    checks["deterministic"] = _determinism(result)
    # the reward's own time per call, from the kernel's clocks of the child, read by this process: the child's word
    # never moves it, and a busy machine does not either. It is read on the second pass over the states, once the first
    # has warmed what libraries build on a first call (runner.RunResult.seconds). The CPU is judged on its mean over the
    # pass, which is exact (the kernel counts it; calls are pipelined, calls.CallChannel.stream, so one call's share may
    # hold a moment of its neighbour's, which leaves the sum whole). Blocked time is what is left of a wall clock: on a busy machine
    # the stolen time of a virtual CPU, or this process reading a reply late, lands on a few calls, so it is judged
    # on its median, robust to those, as training's windowed median is. (A late read also lumps the next calls' shares
    # into its own, which biases the median low: a reward asleep on every call hides only behind stalls longer than its
    # sleep on half its calls.) A reward that sleeps on a minority of calls passes here and meets training's blocked
    # budget (Limits.total_blocked_seconds).
    if len(result.seconds) != len(result.outputs) or not result.seconds:  # no kernel reading for some call: no verdict
        checks["time_per_call"] = _check(False, f"the time per call could not be read from the kernel for "
                                                f"{len(result.outputs) - len(result.seconds)} of {len(result.outputs)} calls, so it "
                                                "cannot be judged (the sandbox reads the reward process's own clocks)")
        return checks
    cpu_us = statistics.fmean(cost.cpu for cost in result.seconds) * 1e6
    blocked_us = statistics.median(cost.blocked for cost in result.seconds) * 1e6
    own_us = cpu_us + blocked_us
    slow = own_us > limits.max_call_us
    checks["time_per_call"] = _check(
        not slow,
        f"{own_us:.0f} us per call is over the {limits.max_call_us:.0f} us limit ({cpu_us:.0f} us computing, "
        f"{blocked_us:.0f} us blocked); " + ("compute with vectorised numpy, without loops over many elements"
                                           if cpu_us >= blocked_us else "reward code must only compute, never sleep or wait")
        if slow else f"{own_us:.1f} us per call ({cpu_us:.1f} us CPU, mean; {blocked_us:.1f} us blocked, median)",
        us_per_call=own_us,
        cpu_mean_us=cpu_us,
        blocked_median_us=blocked_us,
        limit_us=limits.max_call_us,
    )
    return checks


def _finite_components(result: RunResult) -> dict[str, Any]:
    for index, (_, components) in enumerate(result.outputs):
        for name, value in components.items():
            if not math.isfinite(value):
                return _check(False, f"component '{name}' is {value} on state {index}; guard divisions, logs and exponentials")
    return _check(True, "every component is finite on every state")


def _determinism(result: RunResult) -> dict[str, Any]:
    first, second = result.passes[0], result.passes[1] if len(result.passes) > 1 else result.passes[0]
    for index, (a, b) in enumerate(zip(first, second)):
        if not _same(a, b):
            return _check(
                False,
                f"the same state {index} gave {a[0]!r} then {b[0]!r}; a reward must depend only on `self` and `action` "
                "(no random numbers, clocks or values kept between calls)",
            )
    return _check(True, "the same state gives the same reward")


def _same(a: tuple[float, dict[str, float]], b: tuple[float, dict[str, float]]) -> bool:
    def eq(x: float, y: float) -> bool:
        return x == y or (math.isnan(x) and math.isnan(y))

    return eq(a[0], b[0]) and a[1].keys() == b[1].keys() and all(eq(a[1][k], b[1][k]) for k in a[1])


def _run_error(result: RunResult) -> str:
    where = f" (on state {result.failed_index})" if result.failed_index is not None else ""
    return f"{result.error}{where}"


def _check(ok: bool | None, detail: str, **figures: Any) -> dict[str, Any]:
    return {"ok": ok, "detail": detail, **figures}


def _skipped() -> dict[str, Any]:
    return _check(None, "skipped after an earlier failure")


def _report(checks: dict[str, dict[str, Any]], by_check: dict[str, list[str]], started: float, n_states: int, isolation: str) -> ValidationReport:
    for name in CHECKS:
        checks.setdefault(name, _skipped())
    ordered = {name: checks[name] for name in CHECKS}
    errors = [message for name in CHECKS for message in by_check.get(name, [])]
    ok = all(c["ok"] is True for c in ordered.values())
    return ValidationReport(ok, errors, ordered, time.monotonic() - started, n_states, isolation)
