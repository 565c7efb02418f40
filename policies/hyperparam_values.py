"""`--hp` values checked by the algorithm's own constructor, on a throw-away env, before anything trains.

Why the constructor itself: a value's validity is whatever SB3 or SBX accepts (a learning rate must be a number or a
schedule, a network a list of widths...), and a copy of those rules here would drift from the libraries; building the
model once is the check that cannot. It costs the env's creation and the model's (about a second), and it runs only
when `--hp` names something.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from policies.algorithms import get_algorithm
from policies.hyperparams import Hyperparams, load_hyperparams
from policies.reward_program import SparseReward
from policies.scratch import scratch_dir
from policies.task_env import make_task_env
from sim_envs.errors import ConfigError
from sim_envs.task import Task

COUNTS = ("n_envs", "eval_freq", "eval_episodes", "final_eval_episodes", "checkpoint_freq")
"""Settings of ours (not the library's) that `--hp` may set: each a positive whole number."""
SIZES = {"batch_size": 1, "buffer_size": 1, "n_steps": 1, "n_epochs": 1, "train_freq": 1, "learning_starts": 0}
"""The library's sizes its constructor takes without checking (SB3's SAC accepts `batch_size=-1`, PPO `n_epochs=0`; the
first update then fails with "negative dimensions are not allowed", naming no setting): each a whole number at least this.
`gradient_steps` is checked beside them (-1, "as many as steps collected", or at least 1)."""
PROBE_BUFFER = 1000
"""A replay buffer is allocated whole by the constructor: the check builds it this small (its size's type still checked)."""
OFF_POLICY_STORED = frozenset({"batch_size", "buffer_size", "learning_starts", "gradient_steps"})
"""Sizes that SB3's and SBX's off-policy constructors only store (read in their sources: the buffer is built at the probe's
size anyway): `check_sizes` is their whole check, so an off-policy `--hp` naming only these and `COUNTS` skips the
throw-away build, which would cost a `t2r run` driver, which trains nothing itself, the import of SB3 and torch (and JAX)."""
OFF_POLICY_WHOLE_NUMBERS = frozenset({"train_freq"})
"""Sizes those constructors only pair with a unit when given a whole number (`train_freq=4` becomes `(4, "step")`: SB3's
`_convert_train_freq`, read in its source), which `check_sizes` checks: given so, they skip the build too (it cost a
driver ~4 s of CPU). A pair (`[4, "episode"]`) still goes to the build, which knows the units."""


def _probe(params: Hyperparams) -> Hyperparams:
    kwargs = dict(params.algo_kwargs)
    size = kwargs.get("buffer_size")
    if isinstance(size, int) and not isinstance(size, bool) and size > PROBE_BUFFER:
        kwargs["buffer_size"] = PROBE_BUFFER
    return replace(params, algo_kwargs=kwargs, n_envs=1, her=False)  # HER's buffer needs the dict env: its kwargs go unchecked


def _build(task: Task, params: Hyperparams) -> None:
    from stable_baselines3.common.vec_env import DummyVecEnv  # SB3 (and torch) load here only when --hp asks for the check

    from policies.train import build_algorithm

    probe = _probe(params)  # without HER: the flat env its policy reads
    env = DummyVecEnv([lambda: make_task_env(task, SparseReward(), seed=0, flatten=not probe.her)])
    try:
        with scratch_dir("t2r-hp-check-") as folder:
            build_algorithm(probe, env, 0, "cpu", str(folder))  # type: ignore[arg-type]
    finally:
        env.close()


def check_override_values(task: Task, params: Hyperparams, overrides: dict[str, Any]) -> None:
    """Build the algorithm with `params` (the family's settings with `overrides` applied); a value it refuses is one line
    naming the `--hp` that carries it (found by trying each alone) and the library's own complaint."""
    if not overrides:
        return
    for key in COUNTS:
        value = getattr(params, key)
        if key in overrides and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise ConfigError(f"--hp {key}={overrides[key]!r} must be a positive whole number")
    check_sizes(params.algo_kwargs, overrides)
    if not get_algorithm(params.algo).on_policy and all(_only_stored(key, params.algo_kwargs) for key in overrides):
        return
    try:
        _build(task, params)
    except Exception as exc:
        culprit = next((key for key in overrides if _refuses(task, params, key, overrides)), None)
        named = f"--hp {culprit}={overrides[culprit]!r}" if culprit else "--hp " + " ".join(f"{k}={v!r}" for k, v in overrides.items())
        raise ConfigError(f"{named} is refused by {params.algo.upper()}: {type(exc).__name__}: {_line(exc)}; "
                          "give a value of the type its documentation names (e.g. --hp learning_rate=0.0003)") from None


def _only_stored(key: str, algo_kwargs: dict[str, Any]) -> bool:
    """Whether an off-policy constructor does nothing with `key`'s value that `check_sizes` has not checked."""
    value = algo_kwargs.get(key)
    whole = isinstance(value, int) and not isinstance(value, bool)
    return key in OFF_POLICY_STORED or key in COUNTS or key == "vec_env" or (key in OFF_POLICY_WHOLE_NUMBERS and whole)


def check_sizes(algo_kwargs: dict[str, Any], overrides: dict[str, Any]) -> None:
    """The sizes the constructor does not check (`SIZES`, `gradient_steps`), each one line naming its `--hp`."""
    for key, least in SIZES.items():
        if key not in overrides or key not in algo_kwargs:
            continue
        value = algo_kwargs[key]
        number = value[0] if key == "train_freq" and isinstance(value, (list, tuple)) and value else value  # (4, "step")
        if isinstance(number, bool) or not isinstance(number, int) or number < least:
            bound = "a positive whole number" if least == 1 else "a whole number, 0 or more"
            raise ConfigError(f"--hp {key}={overrides[key]!r} must be {bound} (e.g. --hp {key}={max(least, 1) * 64 if key == 'batch_size' else max(least, 1)})")
    steps = algo_kwargs.get("gradient_steps")
    if "gradient_steps" in overrides and (isinstance(steps, bool) or not isinstance(steps, int) or (steps < 1 and steps != -1)):
        raise ConfigError(f"--hp gradient_steps={overrides['gradient_steps']!r} must be a positive whole number, or -1 "
                          "(as many as the steps collected)")


def _refuses(task: Task, params: Hyperparams, key: str, overrides: dict[str, Any]) -> bool:
    """Whether `key`'s value alone (the others at the family's defaults) is refused."""
    try:
        _build(task, load_hyperparams(task.family, params.algo, {key: overrides[key]}))
    except Exception:
        return True
    return False


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return (text[:200] + "...") if len(text) > 200 else (text or "(no message)")
