"""Per-family training settings, read from `policies/hyperparams/<family>.yml`, or from the file a task file's tasks
name for their own family (`Task.hyperparams_file`).

Why YAML files: people tune these without touching code, as in rl-zoo3; flags override them.
"""

from __future__ import annotations

import copy
import difflib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from policies.algorithms import get_algorithm
from policies.signatures import constructor_arguments, policy_arguments
from sim_envs.errors import ConfigError
from sim_envs.registry import family_hyperparams_file

HYPERPARAMS_DIR = Path(__file__).parent / "hyperparams"


@dataclass
class Hyperparams:
    algo: str
    policy: str = "MlpPolicy"
    n_envs: int = 1
    vec_env: str = "dummy"
    """Where the `n_envs` training envs step: `dummy` in the training process, `subproc` each in its own process with
    its own jailed reward (policies.vec_envs; it pays with many envs on many cores, benchmarks/RESULTS.md)."""
    eval_freq: int = 2000
    eval_episodes: int = 5
    final_eval_episodes: int = 30
    """Episodes of the evaluation after training, the one candidates are ranked by (at least `eval_episodes`; an
    `--eval-episodes` flag sets every evaluation, this one included, unless `--hp final_eval_episodes` is given).
    30 by benchmarks/feedback_fidelity.py's rank agreement; it costs a few % of a training run (RESULTS.md)."""
    checkpoint_freq: int = 10000
    algo_kwargs: dict[str, Any] = field(default_factory=dict)
    policy_kwargs: dict[str, Any] = field(default_factory=dict)
    her: bool = False
    """Hindsight experience replay by default for a multi-goal family (`t2r train --her / --no-her` decide; policies.her).
    In result.json's hyperparams it is what the training used."""
    her_kwargs: dict[str, Any] = field(default_factory=dict)
    """SB3's HerReplayBuffer settings (n_sampled_goal, goal_selection_strategy) when HER is on."""


def load_hyperparams(family: str, algo: str | None = None, overrides: dict[str, Any] | None = None) -> Hyperparams:
    """The family's settings; `algo` switches algorithm. Another implementation of the same algorithm
    (`sac` for `sbx-sac`) keeps the settings it accepts; another algorithm starts from its library's defaults."""
    path = hyperparams_path(family)
    params = _read(path)
    accepted = constructor_keys(params.algo)
    for key in params.algo_kwargs:
        if key not in accepted:
            close = difflib.get_close_matches(key, accepted, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"hyper-parameter file {path}: algo_kwargs {key!r} is not a setting of {params.algo.upper()}{hint}; "
                              f"valid keys: {', '.join(accepted)}")
    if algo is not None and algo != params.algo:
        if get_algorithm(algo).family == get_algorithm(params.algo).family:
            params = carry_settings(params, algo)
        else:
            params = Hyperparams(algo=algo, n_envs=params.n_envs, vec_env=params.vec_env, eval_freq=params.eval_freq,
                                 eval_episodes=params.eval_episodes, final_eval_episodes=params.final_eval_episodes)
    check_overrides(params.algo, overrides or {})
    for key, value in (overrides or {}).items():
        if hasattr(params, key):
            setattr(params, key, value)
        else:
            params.algo_kwargs[key] = value
    return params


def hyperparams_path(family: str) -> Path:
    """The family's YAML file: the one its tasks name (a family defined in a task file), else the package's own."""
    own = family_hyperparams_file(family)
    if own is not None:
        return own
    path = HYPERPARAMS_DIR / f"{family}.yml"
    if not path.is_file():
        raise ConfigError(f"no hyper-parameters for family {family!r}; name a YAML file in its task "
                          f"(Task(..., hyperparams_file=Path(__file__).with_name('{family}.yml'))) or add {path}")
    return path


def _read(path: Path) -> Hyperparams:
    """A settings file, with a one-line error for what a hand-written file gets wrong."""
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read hyper-parameter file {path}: {' '.join(str(exc).split())}") from None
    known = [f.name for f in fields(Hyperparams)]
    unknown = sorted(set(raw) - set(known)) if isinstance(raw, dict) else []
    if not isinstance(raw, dict) or "algo" not in raw or unknown:
        what = f"unknown setting {unknown[0]!r}" if unknown else "it needs a mapping with at least `algo:`"
        raise ConfigError(f"hyper-parameter file {path}: {what}; the settings are {', '.join(known)}")
    return Hyperparams(**copy.deepcopy(raw))


def carry_settings(params: Hyperparams, algo: str) -> Hyperparams:
    """`params` for another implementation of its algorithm, without the keys that one does not take."""
    accepted = constructor_arguments(algo)  # from the cache file: a `t2r run --algo sac` driver imports no torch for it
    policy_accepts = policy_arguments(algo, params.policy)
    return Hyperparams(
        algo=algo, policy=params.policy, n_envs=params.n_envs, vec_env=params.vec_env, eval_freq=params.eval_freq,
        eval_episodes=params.eval_episodes,
        final_eval_episodes=params.final_eval_episodes, checkpoint_freq=params.checkpoint_freq,
        algo_kwargs={key: value for key, value in params.algo_kwargs.items() if key in accepted},
        policy_kwargs={key: value for key, value in params.policy_kwargs.items() if key in policy_accepts},
        her=params.her, her_kwargs=dict(params.her_kwargs),
    )


SET_BY_TRAINING = frozenset({"self", "policy", "env", "seed", "device", "verbose", "tensorboard_log", "_init_setup_model"})
"""SB3 constructor arguments that training sets itself: an override of one would be ignored or fight it."""
SET_BY_FLAGS = {"her": "--her / --no-her"}
"""Settings of ours that a flag sets, not `--hp` (one way to say each thing)."""


def constructor_keys(algo: str) -> list[str]:
    """The SB3 (or SBX) constructor's own arguments that a settings file or `--hp` may set for `algo`."""
    return sorted(name for name in constructor_arguments(algo) if name not in SET_BY_TRAINING)


def valid_override_keys(algo: str) -> list[str]:
    """What `--hp KEY=VALUE` may name for `algo`: our settings plus the SB3 constructor's own arguments."""
    ours = [f.name for f in fields(Hyperparams) if f.name not in ("algo", "algo_kwargs", *SET_BY_FLAGS)]
    return sorted(set(ours) | set(constructor_keys(algo)))


def check_overrides(algo: str, overrides: dict[str, Any]) -> None:
    """A typo in `--hp` is a one-line error naming the valid keys, before any environment is built."""
    valid = valid_override_keys(algo)
    for key in overrides:
        if key in SET_BY_FLAGS:
            raise ConfigError(f"--hp {key} is set with {SET_BY_FLAGS[key]}, not --hp")
        if key not in valid:
            close = difflib.get_close_matches(key, valid, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"--hp {key} is not a setting of {algo.upper()}{hint}; valid keys: {', '.join(valid)}")
