"""Per-family training settings, read from `policies/hyperparams/<family>.yml`.

Why YAML files: people tune these without touching code, as in rl-zoo3; flags override them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sim_envs.errors import ConfigError

HYPERPARAMS_DIR = Path(__file__).parent / "hyperparams"
ALGORITHMS = ("sac", "ppo")


@dataclass
class Hyperparams:
    algo: str
    policy: str = "MlpPolicy"
    n_envs: int = 1
    eval_freq: int = 2000
    eval_episodes: int = 5
    checkpoint_freq: int = 10000
    algo_kwargs: dict[str, Any] = field(default_factory=dict)
    policy_kwargs: dict[str, Any] = field(default_factory=dict)


def load_hyperparams(family: str, algo: str | None = None, overrides: dict[str, Any] | None = None) -> Hyperparams:
    """The family's settings; `algo` switches algorithm (dropping the other's kwargs)."""
    path = HYPERPARAMS_DIR / f"{family}.yml"
    if not path.is_file():
        raise ConfigError(f"no hyper-parameters for family {family!r}; add {path}")
    raw = yaml.safe_load(path.read_text()) or {}
    params = Hyperparams(**copy.deepcopy(raw))
    if algo is not None and algo != params.algo:
        if algo not in ALGORITHMS:
            raise ConfigError(f"unknown algorithm {algo!r}; use one of {', '.join(ALGORITHMS)}")
        params = Hyperparams(algo=algo, n_envs=params.n_envs, eval_freq=params.eval_freq, eval_episodes=params.eval_episodes)
    for key, value in (overrides or {}).items():
        if hasattr(params, key):
            setattr(params, key, value)
        else:
            params.algo_kwargs[key] = value
    return params
