"""Checks before a training job starts: every mistake a person can make in a training command line is found here, as
one line naming the problem and the fix, before anything trains (a run's own checks, which also ask its backend and
executor, are text2reward.settings.check_run_config).

Why one place: a typo in `--hp`, a CUDA device on a CPU machine, a model server that is not running or a
task that does not exist would otherwise surface minutes later, as a traceback inside a worker or as a
run that ends "finished" with nothing trained.
"""

from __future__ import annotations

from policies.config import TrainConfig
from policies.her import BUILT_IN_REWARDS, check_learning_starts, resolve_her
from policies.hyperparam_values import check_override_values
from policies.plan import resolve_training_plan
from policies.reward_modes import require_program
from sim_envs import get_task
from sim_envs.task import Task
from text2reward.errors import ConfigError


def check_train_config(config: TrainConfig, device_here: bool = True, fork_refused_by: str | None = None) -> Task:
    """The task, the numbers, the device and every `--hp` key of one training job. `device_here=False`: the job
    trains on other machines (a Ray cluster), which have the GPUs it asks for, not this one. `fork_refused_by`: the
    executor whose jobs run inside a worker whose threads a fork would copy mid-work (`ExecutorSpec.jobs_may_fork`),
    which `--hp vec_env=subproc` (forked env processes, policies.vec_envs) is refused on."""
    task = get_task(config.task_id)
    for name, flag in (("steps", "--steps"), ("eval_freq", "--eval-freq"), ("eval_episodes", "--eval-episodes"),
                       ("n_envs", "--hp n_envs")):
        value = getattr(config, name)
        if value is not None and value < 1:
            raise ConfigError(f"{flag} must be at least 1, got {value}")
    if config.stop_at_success is not None and not 0.0 < config.stop_at_success <= 1.0:
        raise ConfigError(f"--stop-at-success must be in (0, 1], got {config.stop_at_success}")
    require_program(config.reward_mode, config.reward)
    plan = resolve_training_plan(config, task)  # the plan the job will train by: its budget, algorithm, flags, device's spelling
    params = plan.params()
    if resolve_her(config.her, params.her, task, params.algo, config.reward in BUILT_IN_REWARDS, config.reward_mode):
        check_learning_starts(params.algo, params.algo_kwargs, task, plan.n_envs)
    if fork_refused_by is not None and params.vec_env == "subproc":
        raise ConfigError(f"--hp vec_env=subproc forks each env from the training's process, which on --executor {fork_refused_by} "
                          "runs inside a worker whose threads a fork would copy mid-work: use --executor local for it, or "
                          f"--hp vec_env=dummy on {fork_refused_by}")
    if device_here and plan.device.startswith("cuda"):  # `auto` and `cpu` cannot be refused: only a GPU asked for is looked for
        from policies.train import resolve_device  # SB3 and torch (~1.8 s): a `t2r run` driver trains nothing itself

        resolve_device(plan.device, plan.algo)  # the library that will train must see the GPU
    check_override_values(task, params, config.overrides)  # values too, by the algorithm's own constructor
    return task


SHORT_BUDGET_FRACTION = 0.1
"""A budget under this share of the task's default is a smoke test, not an attempt to learn the task."""


def budget_warning(task: Task, steps: int | None) -> str | None:
    """One warning when `--steps` is far below what the task usually needs, so a low success is not a surprise."""
    if steps is None or steps >= SHORT_BUDGET_FRACTION * task.default_steps:
        return None
    return (f"warning: --steps {steps} is far below {task.id}'s usual budget of {task.default_steps:,} steps: "
            "expect little or no success (fine for a smoke test)")


def check_port(port: int) -> None:
    if not 1 <= port <= 65535:
        raise ConfigError(f"--port must be between 1 and 65535, got {port}")

