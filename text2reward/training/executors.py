"""Where training jobs run, as typed specs: the local pool of worker processes, or Ray tasks; one dispatch for the
loop and `t2r tune`.

Why a spec: a run chooses its executor by name (`--executor`), the checks before a run refuse one that cannot work
here, and the loop and the tuner both need "run these jobs, W at a time" bound to the run's resources (a Ray session
opened once, closed when the run ends). A new executor is a module with its `ExecutorSpec` plus one
`register_executor` line; its `open` returns a `JobRunner` over `training.pool.schedule` with its own `Launcher`
(what pool.py and ray_pool.py do), so outcomes, files and early stopping are the same on every executor:

    register_executor(ExecutorSpec(name="inline", summary="(one job at a time, here)",
                                   open=lambda settings, resources, say: my_runner))
"""

from __future__ import annotations

import importlib.util
import socket
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from policies.choices import Registry
from text2reward.errors import ConfigError

if TYPE_CHECKING:
    from text2reward.training.early_stop import EarlyStopper
    from text2reward.training.job import TrainJob
    from text2reward.training.pool import JobOutcome

Say = Callable[[str], None]


class JobRunner(Protocol):
    """Run `jobs` (skipping those with done.json) at most the executor's workers at a time; the outcome of each."""

    def __call__(self, jobs: list[TrainJob], *, on_done: Callable[[JobOutcome], None] | None = None,
                 on_poll: Callable[[], None] | None = None, early_stopper: EarlyStopper | None = None,
                 names: list[str] | None = None) -> list[JobOutcome]: ...


@dataclass(frozen=True)
class ExecutorSettings:
    """What a run tells its executor."""

    workers: int = 1
    address: str | None = None
    """A cluster to join (Ray: `--ray-address` / RAY_ADDRESS); None: start what is needed on this machine."""


def _nothing_to_check(settings: ExecutorSettings) -> None:
    return None


def _here(settings: ExecutorSettings) -> bool:
    return True


@dataclass(frozen=True)
class ExecutorSpec:
    """One executor: how it opens for a run, what it needs, and where its jobs' devices are."""

    name: str
    """What `--executor` takes and config.json records."""
    summary: str
    open: Callable[[ExecutorSettings, ExitStack, Say], JobRunner]
    """A job runner for one run (or one tuning): what it must hold open (a cluster session) goes on the stack, which
    the caller closes when the run ends."""
    check: Callable[[ExecutorSettings], None] = _nothing_to_check
    """Before a run folder exists: the executor can run here (its library is installed, its cluster answers)."""
    trains_here: Callable[[ExecutorSettings], bool] = _here
    """Whether jobs train on this machine (so `--device cuda` needs this machine's GPU) or on a cluster's."""
    jobs_may_fork: bool = True
    """Whether a job may fork its env processes (`--hp vec_env=subproc`, policies.vec_envs): true where a job runs in a
    process of ours; false where it runs inside a process whose own threads a fork would copy mid-work (a Ray worker)."""


EXECUTORS: Registry[ExecutorSpec] = Registry(
    "executor", lambda name, specs: f"unknown --executor {name!r}: choose {' or '.join(f'{s.name} {s.summary}' for s in specs)}")
"""Every executor by name (policies.choices: one rule set for every pluggable choice)."""


def register_executor(spec: ExecutorSpec, replace_existing: bool = False) -> ExecutorSpec:
    return EXECUTORS.register(spec, replace=replace_existing)


def unregister_executor(name: str) -> ExecutorSpec:
    return EXECUTORS.unregister(name)


def executor_specs() -> list[ExecutorSpec]:
    return EXECUTORS.specs()


def executor_spec(name: str) -> ExecutorSpec:
    """The registered executor `name`, or one line naming the choices."""
    return EXECUTORS.get(name)


# --- the local pool ---


def _open_local(settings: ExecutorSettings, resources: ExitStack, say: Say) -> JobRunner:
    """Jobs forked from this driver's fork server (training/preloaded.py), started now so that its imports overlap the
    round's generation and checks."""
    from text2reward.training.pool import run_jobs  # the pool loads the worker's code (gymnasium, SB3's helpers): not at `t2r` start
    from text2reward.training.preloaded import warm_up  # with the pool, only when a run opens its executor

    warm_up()

    def runner(jobs: list[TrainJob], **options: Any) -> list[JobOutcome]:
        return run_jobs(jobs, settings.workers, say=say, **options)

    return runner


LOCAL = ExecutorSpec(name="local", summary="(worker processes on this machine)", open=_open_local)


# --- Ray ---

def _check_ray(settings: ExecutorSettings) -> None:
    """Ray is installed, and a cluster named by address answers (in seconds, not after minutes of joining)."""
    if importlib.util.find_spec("ray") is None:
        from text2reward.training.ray_pool import RAY_MISSING  # deferred: ray_pool loads asyncio and ssl (~20 ms of every CLI start)

        raise ConfigError(RAY_MISSING)
    if settings.address:
        check_ray_address(settings.address)


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


def _open_ray(settings: ExecutorSettings, resources: ExitStack, say: Say) -> JobRunner:
    """Ray joined (or started on 127.0.0.1) when jobs first train, and left when the run ends (`resources` closes)."""
    from text2reward.training.ray_pool import ray_session, run_jobs_on_ray  # deferred: see _check_ray

    opened: list[bool] = []

    def runner(jobs: list[TrainJob], **options: Any) -> list[JobOutcome]:
        if not opened:
            say(f"training on Ray: {resources.enter_context(ray_session(settings.address))}")
            opened.append(True)
        return run_jobs_on_ray(jobs, settings.workers, address=settings.address, **options)

    return runner


RAY = ExecutorSpec(name="ray", summary="(a Ray cluster)", open=_open_ray, check=_check_ray,
                   trains_here=lambda settings: not settings.address, jobs_may_fork=False)

register_executor(LOCAL)
register_executor(RAY)
