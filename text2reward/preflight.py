"""Checks before a run or a training job starts: every mistake a person can make in a command line is
found here, as one line naming the problem and the fix, before a run folder exists or a model is asked.

Why one place: a typo in `--hp`, a CUDA device on a CPU machine, a model server that is not running or a
task that does not exist would otherwise surface minutes later, as a traceback inside a worker or as a
run that ends "finished" with nothing trained.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import socket
from pathlib import Path
from typing import Any

from policies.config import TrainConfig
from sim_envs import get_task, load_task_file
from sim_envs.task import Task
from text2reward.errors import ConfigError
from text2reward.runs.store import EXECUTORS, RAY_MISSING, RunConfig


def check_train_config(config: TrainConfig, device_here: bool = True) -> Task:
    """The task, the numbers, the device and every `--hp` key of one training job. `device_here=False`: the job
    trains on other machines (a Ray cluster), which have the GPUs it asks for, not this one."""
    from policies.algorithms import configure_jax
    from policies.her import BUILT_IN_REWARDS, check_learning_starts, resolve_her
    from policies.hyperparams import load_hyperparams
    from policies.reward_modes import require_program
    from policies.train import resolve_device

    task = get_task(config.task_id)
    for name, flag in (("steps", "--steps"), ("eval_freq", "--eval-freq"), ("eval_episodes", "--eval-episodes"),
                       ("n_envs", "--hp n_envs")):
        value = getattr(config, name)
        if value is not None and value < 1:
            raise ConfigError(f"{flag} must be at least 1, got {value}")
    if config.stop_at_success is not None and not 0.0 < config.stop_at_success <= 1.0:
        raise ConfigError(f"--stop-at-success must be in (0, 1], got {config.stop_at_success}")
    require_program(config.reward_mode, config.reward)
    configure_jax(config.torch_threads)  # before the checks import JAX: `t2r train` trains in this process
    params = load_hyperparams(task.family, config.algo, config.overrides)
    if resolve_her(config.her, params.her, task, params.algo, config.reward in BUILT_IN_REWARDS, config.reward_mode):
        check_learning_starts(params.algo, params.algo_kwargs, task, config.n_envs or params.n_envs)
    if device_here:
        resolve_device(config.device, params.algo)  # the library that will train must see the GPU
    elif config.device not in ("auto", "cpu") and not config.device.startswith("cuda"):
        raise ConfigError(f"unknown device {config.device!r}; use auto, cpu or cuda")
    return task


SHORT_BUDGET_FRACTION = 0.1
"""A budget under this share of the task's default is a smoke test, not an attempt to learn the task."""


def budget_warning(task: Task, steps: int | None) -> str | None:
    """One warning when `--steps` is far below what the task usually needs, so a low success is not a surprise."""
    if steps is None or steps >= SHORT_BUDGET_FRACTION * task.default_steps:
        return None
    return (f"warning: --steps {steps} is far below {task.id}'s usual budget of {task.default_steps:,} steps: "
            "expect little or no success (fine for a smoke test)")


def resolve_run_config(config: RunConfig) -> RunConfig:
    """The run's settings with what the environment supplies filled in (model and endpoint from OPENAI_MODEL /
    OPENAI_BASE_URL), so config.json records what the run really used. The API key is never recorded."""
    if config.backend != "openai":
        return config
    return dataclasses.replace(
        config,
        model=config.model or os.environ.get("OPENAI_MODEL") or None,
        base_url=config.base_url or os.environ.get("OPENAI_BASE_URL") or None,
    )


def check_run_config(config: RunConfig, backend_given: bool = False) -> RunConfig:
    """Everything `t2r run` can check before it creates a run folder; returns the resolved settings.
    `backend_given`: the caller hands the loop a backend object, so the configured one is not built."""
    config = resolve_run_config(config)
    config.validate()
    if config.task_file:
        load_task_file(config.task_file)
    task = get_task(config.task_id)
    if config.reward_source != "code" and task.keypoints is None:
        raise ConfigError(f"--reward-source {config.reward_source} needs keypoints, which task {task.id} has no setup for: "
                          "use a metaworld, fetch or franka task, or --reward-source code")
    joins_cluster = config.executor == "ray" and bool(config.ray_address)  # whose GPUs are the workers', not this machine's
    check_train_config(config.train_config(task.id, out_dir=_NOWHERE, reward="code", seed=config.seed), device_here=not joins_cluster)
    check_executor(config)
    if not backend_given:
        check_backend(config, task)
    return config


def check_executor(config: RunConfig) -> None:
    """The executor exists and can run here: `--executor ray` without Ray installed is refused before a model is asked."""
    if config.executor not in EXECUTORS:
        raise ConfigError(f"unknown --executor {config.executor!r}: choose local (worker processes on this machine) or ray (a Ray cluster)")
    if config.executor == "ray" and importlib.util.find_spec("ray") is None:
        raise ConfigError(RAY_MISSING)
    if config.executor == "ray" and config.ray_address:
        check_ray_address(config.ray_address)


def check_ray_address(address: str) -> None:
    """A cluster that is not there fails now, in seconds, with one line (joining it would wait for minutes)."""
    host, colon, port = address.split("://")[-1].rpartition(":")
    if not colon or not port.isdigit():
        return  # `auto` and the like: Ray finds the cluster this machine belongs to
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=5):
            pass
    except OSError as exc:
        raise ConfigError(f"no Ray cluster answers at {address} ({exc.strerror or exc}): start one there with "
                          "`ray start --head`, or fix --ray-address / RAY_ADDRESS") from exc


def check_backend(config: RunConfig, task: Task) -> None:
    """The backend can be built from these settings, and a model endpoint answers."""
    from text2reward.generation.llm import make_backend

    if config.backend == "heuristic":
        from text2reward.generation.llm.heuristic_plans import build_plan

        build_plan(task)  # a task the rules cannot plan for is refused now, not after a round of nothing
        return
    if config.backend == "file":
        if config.reply_files:
            make_backend("file", paths=config.reply_files)  # every file exists and can be listed
        return
    backend: Any = make_backend("openai", **backend_options(config))  # key, model and URL are present
    from text2reward.generation.llm.openai_backend import check_endpoint

    check_endpoint(backend.base_url, os.environ.get("OPENAI_API_KEY") or None, backend.model)


def backend_options(config: RunConfig) -> dict[str, Any]:
    """The openai backend's settings from a run's settings (None means the backend's own default)."""
    return {
        "model": config.model, "base_url": config.base_url, "vision": config.vision, "timeout": config.timeout,
        "max_retries": config.max_retries, "concurrency": config.concurrency,
    }


def check_port(port: int) -> None:
    if not 1 <= port <= 65535:
        raise ConfigError(f"--port must be between 1 and 65535, got {port}")


_NOWHERE = Path(os.devnull)
"""A training config needs an out_dir; the checks never write to it."""
