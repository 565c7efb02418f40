"""The constants' search space in Optuna's terms: what a trial suggests, and the parent's values as a first trial.

Why magnitudes for one-signed constants: Optuna's log-uniform distributions need positive bounds, and a
penalty searched as -|x| keeps its sign whatever the sampler proposes. Each Optuna parameter is named after
its constant, so a study reads as the program does.
"""

from __future__ import annotations

from typing import Any

from text2reward.tuning.constants import Constant, round_significant


def _sign(constant: Constant) -> int:
    """-1 when the constant is searched on its magnitude with a minus sign (log bounds below zero)."""
    assert constant.low is not None and constant.high is not None
    return -1 if constant.log and constant.high < 0 else 1


def _param_bounds(constant: Constant) -> tuple[float, float]:
    """Bounds of the Optuna parameter: the magnitude's for a negative log space, else the value's."""
    assert constant.low is not None and constant.high is not None
    if _sign(constant) < 0:
        return -constant.high, -constant.low
    return constant.low, constant.high


def suggest(trial: Any, constants: list[Constant]) -> dict[str, float | int]:
    """The trial's value for each tunable constant (an `optuna.Trial`; floats rounded as they will be written)."""
    values: dict[str, float | int] = {}
    for constant in constants:
        low, high = _param_bounds(constant)
        if constant.is_int:
            raw: float | int = trial.suggest_int(constant.name, int(low), int(high), log=constant.log)
            values[constant.name] = _sign(constant) * int(raw)
        else:
            raw = trial.suggest_float(constant.name, low, high, log=constant.log)
            values[constant.name] = round_significant(_sign(constant) * float(raw))
    return values


def baseline_params(constants: list[Constant]) -> dict[str, float | int]:
    """The parent's own values as Optuna parameters, for those inside their search space: the study's first trial
    is the parent under the tuning budget, so the winner is never worse than it by the study's own measure."""
    params: dict[str, float | int] = {}
    for constant in constants:
        low, high = _param_bounds(constant)
        param = _sign(constant) * constant.value
        if low <= param <= high:
            params[constant.name] = int(param) if constant.is_int else float(param)
    return params
