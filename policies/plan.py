"""A training's plan: its budget, evaluation interval, algorithm, hyper-parameters, device, envs and seeds, resolved
once from the flags and the family's YAML, checked, and then only read.

Why one function: the rule "the flag, or the task's default" was written in four places (the worker, the early
stopper, tuning, the progress bar), and one copy looked the hyper-parameters up without `--algo`, so a run could pass
its checks and fail in its first training. The loop resolves a plan, writes it into each job.json, and gives the same
object to the early stopper; the worker trains by it; a job.json without one (runs from before) resolves it here.
This module imports neither SB3 nor torch: the loop's process plans, the worker's trains.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any

from policies.algorithms import configure_jax, get_algorithm
from policies.config import VEC_ENVS, TrainConfig
from policies.hyperparams import Hyperparams, load_hyperparams
from sim_envs.errors import ConfigError
from sim_envs.task import Task

DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class TrainingPlan:
    """What one training does, as resolved. `hyperparams` are the family's with `--algo` and every flag over them (what
    result.json records, before HER adapts them to the reward); `device` is the requested one, spelling checked, which
    the machine that trains places (`auto` is a GPU there when it has one)."""

    steps: int
    eval_freq: int
    eval_episodes: int
    final_eval_episodes: int
    algo: str
    hyperparams: Mapping[str, Any]
    device: str = "auto"
    n_envs: int = 1
    seeds: tuple[int, ...] = (0,)
    """This training's seed (one: a candidate on `--candidate-seeds S` is S jobs, each with its own plan and seed)."""

    def __post_init__(self) -> None:  # a read-only view: a frozen plan whose settings could still change is no plan
        object.__setattr__(self, "hyperparams", MappingProxyType(copy.deepcopy(dict(self.hyperparams))))
        object.__setattr__(self, "seeds", tuple(self.seeds))

    @property
    def seed(self) -> int:
        return self.seeds[0]

    def params(self) -> Hyperparams:
        """A fresh, mutable copy of the hyper-parameters, for the training that adapts them (HER, the buffer size)."""
        return Hyperparams(**copy.deepcopy(dict(self.hyperparams)))



def resolve_training_plan(config: TrainConfig, task: Task) -> TrainingPlan:
    """The one place a training's settings are derived: the budget (`--steps`, else the task's default), the family's
    hyper-parameters under `--algo` and `--hp`, the evaluation flags, n_envs and its vector env, the device's spelling;
    each checked."""
    configure_jax(config.torch_threads)  # before the hyper-parameters' check imports JAX (an SBX algorithm)
    steps = config.steps if config.steps is not None else task.default_steps
    if isinstance(steps, bool) or not isinstance(steps, int) or steps <= 0:
        raise ConfigError(f"--steps must be positive, got {steps}")
    params = load_hyperparams(task.family, config.algo, config.overrides)
    if config.n_envs is not None:  # flags override the family's YAML
        params.n_envs = config.n_envs
    if config.eval_freq is not None:
        params.eval_freq = config.eval_freq
    if config.eval_episodes is not None:
        params.eval_episodes = config.eval_episodes
    for flag, value in (("--eval-freq", params.eval_freq), ("--eval-episodes", params.eval_episodes), ("--hp n_envs", params.n_envs)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"{flag} must be a positive whole number, got {value!r}")
    problem = vec_env_problem(params.vec_env, sys.platform)
    if problem is not None:
        raise ConfigError(f"--hp vec_env={params.vec_env!r} {problem}")
    check_device_spelling(config.device)
    keep_update_ratio(params, "gradient_steps" in config.overrides)
    return TrainingPlan(steps=steps, eval_freq=params.eval_freq, eval_episodes=params.eval_episodes,
                        final_eval_episodes=final_eval_episodes(config, params), algo=params.algo, hyperparams=asdict(params),
                        device=config.device, n_envs=params.n_envs, seeds=(config.seed,))


def vec_env_problem(kind: object, platform: str) -> str | None:
    """What is wrong with `--hp vec_env=KIND` on `platform` (`sys.platform`), or None. `subproc` needs Linux: its env
    processes die with the training through prctl's parent-death signal (policies.vec_envs), which Linux alone has."""
    if kind not in VEC_ENVS:
        return ("is not a vector env; use --hp vec_env=dummy (every env in the training process) or --hp vec_env=subproc "
                "(each env in its own process)")
    if kind == "subproc" and not platform.startswith("linux"):
        return (f"needs Linux (its env processes die with the training through Linux's parent-death signal), not {platform}; "
                "use --hp vec_env=dummy")
    return None


def check_device_spelling(device: str) -> None:
    """`auto`, `cpu`, `cuda` or `cuda:N`; whether a GPU is there is the training machine's to say (policies.train)."""
    if device not in DEVICES and not device.startswith("cuda:"):
        raise ConfigError(f"unknown device {device!r}; use auto, cpu or cuda")


def keep_update_ratio(params: Hyperparams, chosen: bool) -> None:
    """With n_envs > 1, an off-policy algorithm takes `gradient_steps` x n_envs updates per vector step, so the updates
    per environment step (the update-to-data ratio the family's settings were tuned at) stay what one env had; SBX runs
    them as one compiled call. Why: at one update per vector step, n_envs envs buy speed with sample efficiency (half
    the updates per env step at 2 envs), and success tracks the number of updates. A `--hp gradient_steps` the user
    chose, or SB3's -1 (as many as the steps collected: already per transition), is left as it is."""
    if params.n_envs <= 1 or chosen or get_algorithm(params.algo).on_policy:
        return
    base = params.algo_kwargs.get("gradient_steps", 1)
    if isinstance(base, int) and not isinstance(base, bool) and base >= 1:
        params.algo_kwargs["gradient_steps"] = base * params.n_envs


def final_eval_episodes(config: TrainConfig, params: Hyperparams) -> int:
    """Episodes of the final evaluation: `--hp final_eval_episodes` when given; else an `--eval-episodes` flag (which
    sets every evaluation, this one included); else the family's `final_eval_episodes`, never fewer than its
    `eval_episodes`."""
    if "final_eval_episodes" in config.overrides:
        episodes = params.final_eval_episodes
    elif config.eval_episodes is not None:
        episodes = config.eval_episodes
    else:
        episodes = max(params.final_eval_episodes, params.eval_episodes)
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes <= 0:
        raise ConfigError(f"--hp final_eval_episodes must be a positive whole number, got {episodes!r}")
    return episodes

