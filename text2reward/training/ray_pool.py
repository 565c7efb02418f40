"""Run training jobs as Ray tasks, on this machine or across a cluster, with the local pool's semantics.

Why Ray: people who train RL at scale already run it (RLlib, Tune, KubeRay), so a run can point at their
cluster. Why this shape: the job protocol stays files in a job folder, scheduled by `pool.schedule` (the local
pool's path: jobs in flight, finished jobs skipped, early stopping), but a worker never sees the driver's disk.
A task gets the job, the reward code and the task file inline, runs `job.execute` in a temporary folder of its
own, and returns that folder's files as bytes; the driver writes them into the real job folder, `done.json`
last, each atomically, so the run store reads exactly as after the local pool.

While a job runs, a thread in its task posts each new `progress.json` and its pid to a small actor (the board);
the driver mirrors them into the job folder, where progress bars, the dashboard and the early stopper read them,
and passes each stop file the early stopper writes to the board, whose answer to the task's pending `wait_stop`
the thread turns into the job's own stop file (within a few tenths of a second, as a local worker sees its own).

Faults: a worker process or node that dies mid-job is retried by Ray (`max_retries`), then the job fails with
Ray's reason; an exception inside the job is already `error.json` (never retried: it would fail again). A driver
that dies takes its tasks with it (Ray ends an owner's tasks); `t2r resume` retrains what has no `done.json`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from policies.io import current_umask, write_json_atomic, write_text_atomic
from policies.scratch import scratch_dir
from sim_envs.codec import read, write
from text2reward.errors import ConfigError
from text2reward.runs.statuses import FailureCause
from text2reward.training.early_stop import EarlyStopper, StopDecision
from text2reward.training.job import (
    DONE_FILE,
    ERROR_FILE,
    JOB_FILE,
    PID_FILE,
    PROGRESS_FILE,
    TRAIN_DIR,
    WORKER_LOG,
    TrainJob,
    execute,
    read_job,
)
from text2reward.training.pool import JobOutcome, job_outcome, job_progress, schedule

LOOPBACK = "127.0.0.1"
MAX_RETRIES = 2
"""Times Ray reruns a job whose worker process or node died (not one whose code raised: that is error.json)."""
GPU_SHARE = 0.25
"""A job's share of a GPU with `--device cuda`: four candidates share one (Ray gives the task that GPU as its CUDA
device 0). They take turns on it: on an H100, four 16-env SBX jobs ran 174 steps/s each, 700 in all, against 530-645
for one alone (benchmarks/RESULTS.md), so a round's GPU time is about what it would be one job at a time, and under
1 GB of GPU memory a job is no limit. `--device auto` reserves none."""
REPORT_PERIOD_S = 0.1
"""How often a running task looks at its progress file (it posts only changes) and its pending stop request."""
STOP_POLL_S = 10.0
"""How long one pending `wait_stop` call waits on the board before the task asks again."""
FORWARDED_ENV = ("MUJOCO_GL",)
"""The driver's environment a task takes with it (with every T2R_* variable): rendering and sandbox settings."""
RAY_MISSING = "--executor ray needs Ray, an optional extra: pip install -e '.[ray]'"
"""The one line for `--executor ray` where ray is not installed (the checks and the Ray executor both say it)."""
_SINGLE_MACHINE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch for a single-machine instance: with it at 0 Ray takes 127.0.0.1 as the node's address and every
server it starts (GCS, raylet, agents, workers) binds there; otherwise they listen on every interface."""


def import_ray() -> Any:
    """Ray, or the one-line error naming the extra (ray is optional: the local pool needs nothing of it)."""
    try:
        import ray  # optional (the `ray` extra), ~0.4 s to import: only the Ray executor loads it
    except ImportError as exc:
        raise ConfigError(RAY_MISSING) from exc
    return ray


# --- the Ray instance ----------------------------------------------------------------------------------------


@contextmanager
def ray_session(address: str | None = None, num_cpus: int | None = None) -> Iterator[str]:
    """Ray for the block: the cluster at `address` joined, or a local instance on 127.0.0.1 only started and
    stopped here (`num_cpus`: its size; all cores by default). Inside a Ray this process already runs (an outer
    session, a caller's `ray.init`) nothing is started or stopped. Yields a line saying what it runs on."""
    ray = import_ray()
    if ray.is_initialized():
        yield describe_cluster(ray, "the Ray instance already open")
        return
    restore = _single_machine(ray) if not address or _is_loopback(address) else None
    try:
        started = time.monotonic()
        quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
        if address:
            ray.init(address=address, **quiet)
            where = f"the cluster at {address}"
        else:
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # a local instance reports to nobody
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, _node_ip_address=LOOPBACK, **quiet)
            where = f"a local Ray instance on {LOOPBACK}"
        try:
            if not address and ray.util.get_node_ip_address() != LOOPBACK:
                raise RuntimeError(f"the local Ray instance took address {ray.util.get_node_ip_address()}, not {LOOPBACK}: "
                                   "it would listen beyond this machine")
            yield describe_cluster(ray, f"{where} (up in {time.monotonic() - started:.1f} s)")
        finally:
            ray.shutdown()
    finally:
        if restore is not None:
            restore()


def describe_cluster(ray: Any, where: str) -> str:
    resources = ray.cluster_resources()
    gpus = f", {resources['GPU']:g} GPU(s)" if resources.get("GPU") else ""
    return f"{where}: {len(ray.nodes())} node(s), {resources.get('CPU', 0):g} CPU(s){gpus}"


def _is_loopback(address: str) -> bool:
    host = address.split("://")[-1].rsplit(":", 1)[0]
    return host in ("localhost", LOOPBACK, "[::1]")


def _single_machine(ray: Any) -> Callable[[], None]:
    """Keep this process's Ray on 127.0.0.1 (see `_SINGLE_MACHINE_ENV`); returns what undoes it, so the same
    process can join a real cluster later. Ray reads the switch when first imported, hence the constant too."""
    from ray._private import ray_constants  # optional: the Ray executor only (import_ray has checked it is there)

    before_env, before_constant = os.environ.get(_SINGLE_MACHINE_ENV), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[_SINGLE_MACHINE_ENV] = "0"  # the processes Ray starts read it from their environment
    ray_constants.ENABLE_RAY_CLUSTER = False

    def restore() -> None:
        ray_constants.ENABLE_RAY_CLUSTER = before_constant
        if before_env is None:
            os.environ.pop(_SINGLE_MACHINE_ENV, None)
        else:
            os.environ[_SINGLE_MACHINE_ENV] = before_env

    return restore


# --- the task's side -----------------------------------------------------------------------------------------


class Board:
    """A Ray actor (asynchronous): what running tasks publish (latest progress, pid), and the stops the driver asks
    for, which a task's pending `wait_stop` receives at once."""

    def __init__(self) -> None:
        self.posts: dict[str, dict[str, Any]] = {}
        self.stops: dict[str, dict[str, Any]] = {}
        self.stop_events: dict[str, asyncio.Event] = {}

    def _event(self, key: str) -> asyncio.Event:
        return self.stop_events.setdefault(key, asyncio.Event())

    async def post(self, key: str, progress: dict[str, Any] | None, pid: int) -> None:
        self.posts[key] = {"progress": progress, "pid": pid}

    async def snapshot(self) -> dict[str, dict[str, Any]]:
        return self.posts

    async def request_stop(self, key: str, decision: dict[str, Any]) -> None:
        self.stops[key] = decision
        self._event(key).set()

    async def wait_stop(self, key: str, timeout: float) -> dict[str, Any] | None:
        """The stop decision for `key`, as soon as there is one (None after `timeout` seconds without)."""
        try:
            await asyncio.wait_for(self._event(key).wait(), timeout)
        except asyncio.TimeoutError:
            pass
        return self.stops.get(key)


class Reporter(threading.Thread):
    """In a task: posts the job's progress to the board when it changes, and writes the job's stop file when the
    driver asks for one. A stop applies once the job reaches the rung it was judged at, so a retried attempt is
    stopped where the first one was, not at its start."""

    def __init__(self, board: Any, key: str, out: Path, stop_file: str | None):
        super().__init__(name=f"t2r-board-{key}", daemon=True)
        self.ray = import_ray()
        self.board, self.key, self.out = board, key, out
        self.stop_file = Path(stop_file) if stop_file else None
        self.finished = threading.Event()
        self.posted: tuple[Any, ...] | None = None
        self.decision: dict[str, Any] | None = None
        self.waiting: Any = None

    def run(self) -> None:
        while not self.finished.wait(REPORT_PERIOD_S):
            self.report()

    def report(self) -> None:
        read_back = job_progress(self.out)
        progress = write(read_back) if read_back is not None else None
        if (progress, os.getpid()) != self.posted:  # calls from one caller reach the actor in order: no reply needed
            self.board.post.remote(self.key, progress, os.getpid())
            self.posted = (progress, os.getpid())
        if self.stop_file is None:
            return
        if self.decision is None:
            if self.waiting is None:
                self.waiting = self.board.wait_stop.remote(self.key, STOP_POLL_S)
            ready, _ = self.ray.wait([self.waiting], timeout=0)
            if ready:
                try:
                    self.decision = self.ray.get(self.waiting)
                except Exception:  # a departed driver: the job goes on (Ray ends it with its driver)
                    pass
                self.waiting = None
        steps = read_back.steps if read_back is not None else 0
        if self.decision is not None and steps >= read(StopDecision, self.decision, "a stop decision").steps and not self.stop_file.exists():
            write_json_atomic(self.stop_file, self.decision)

    def close(self) -> None:
        self.finished.set()
        self.join()


@contextmanager
def output_to(path: Path) -> Iterator[None]:
    """The job's stdout and stderr (its own, SB3's, the jail's) into worker.log, as a local worker has them."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with open(path, "w") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            try:
                yield
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
    finally:
        os.close(saved[0])
        os.close(saved[1])


def localise(payload: dict[str, Any], root: Path) -> TrainJob:
    """The job with every path moved under `root` (this worker's own folder), its inputs written there."""
    job = read_job(payload["job"], "a Ray task's job")
    out, inputs = root / "job", root / "inputs"
    out.mkdir()
    inputs.mkdir()
    stop_file = str(out / Path(job.train.stop_file).name) if job.train.stop_file else None
    job.train = replace(job.train, out_dir=out / TRAIN_DIR, stop_file=stop_file)
    job.resumable = False  # a retried task starts in a fresh folder: a checkpoint here would cost time and never be read
    if payload.get("code") is not None:
        job.code_path = str(inputs / "reward.py")
        Path(job.code_path).write_text(payload["code"])
    if payload.get("task_file") is not None:
        job.task_file = str(inputs / payload["task_file"]["name"])
        Path(job.task_file).write_text(payload["task_file"]["text"])
    return job


def gather(out: Path, real_out: str) -> dict[str, bytes]:
    """Every file the job wrote, by path relative to its folder; paths inside JSON files point at the real folder."""
    files: dict[str, bytes] = {}
    old, new = json.dumps(str(out))[1:-1], json.dumps(real_out)[1:-1]
    for path in sorted(out.rglob("*")):
        if not path.is_file() or path.name == JOB_FILE:
            continue
        data = path.read_bytes()
        if path.suffix == ".json":
            data = data.decode().replace(old, new).encode()
        files[str(path.relative_to(out))] = data
    return files


def train_on_worker(payload: dict[str, Any], board: Any, key: str) -> dict[str, bytes]:
    """The Ray task: one job, run in a temporary folder of this worker; returns what it wrote."""
    os.environ.update(payload["env"])
    with scratch_dir("t2r-job-") as tmp:  # a worker killed mid-job leaves it to the next task here to remove
        job = localise(payload, tmp)
        out = Path(job.out_dir)
        reporter = Reporter(board, key, out, job.train.stop_file)
        reporter.start()
        try:
            with output_to(out / WORKER_LOG):
                execute(job)
        finally:
            reporter.close()
        return gather(out, payload["job_dir"])


# --- the driver's side ---------------------------------------------------------------------------------------


def payload_of(job: TrainJob) -> dict[str, Any]:
    """Everything a task needs, inline: a worker shares no filesystem with the driver."""
    env = {k: v for k, v in os.environ.items() if k in FORWARDED_ENV or k.startswith("T2R_")}
    task_file = None
    if job.task_file:
        task_file = {"name": Path(job.task_file).name, "text": Path(job.task_file).read_text()}
    return {"job": write(job), "job_dir": job.out_dir, "env": env, "task_file": task_file,
            "code": Path(job.code_path).read_text() if job.code_path else None}


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """policies.io's atomic write, for bytes (a model, a video)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            os.fchmod(handle.fileno(), 0o666 & ~current_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def store_files(job_dir: Path, files: dict[str, bytes]) -> None:
    """A finished task's files into the job's folder; the outcome last, so a driver killed while copying leaves
    no done.json beside a half-copied job (resume then retrains it)."""
    root = job_dir.resolve()
    for name in sorted(files, key=lambda name: name in (DONE_FILE, ERROR_FILE)):
        target = (root / name).resolve()
        if root not in target.parents:
            raise ValueError(f"a training task returned a file outside its folder: {name!r}")
        write_bytes_atomic(target, files[name])


def failure_reason(exc: BaseException, retries: int) -> str:
    """One line on why Ray gave up on a job."""
    first = " ".join(str(exc).split())[:300]
    ray = import_ray()
    if isinstance(exc, ray.exceptions.RayTaskError):
        return f"the Ray training task raised: {first}"
    return f"the training worker died {retries + 1} time(s) (Ray retried it {retries}); Ray says {type(exc).__name__}: {first}"


class RayLauncher:
    """Jobs as Ray tasks (one CPU each, a share of a GPU with --device cuda) beside one board actor."""

    def __init__(self, max_retries: int = MAX_RETRIES):
        self.ray = import_ray()
        self.max_retries = max_retries
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # optional: as import_ray

        here = NodeAffinitySchedulingStrategy(node_id=self.ray.get_runtime_context().get_node_id(), soft=True)
        self.board = self.ray.remote(num_cpus=0)(Board).options(scheduling_strategy=here).remote()
        # max_calls=1: a fresh process per job, as the local pool's (no torch, JAX or task state carried over)
        self.task = self.ray.remote(max_calls=1)(train_on_worker)
        self.running: dict[int, tuple[TrainJob, Any]] = {}
        self.mirrored: dict[int, tuple[Any, Any]] = {}
        self.stops_posted: set[int] = set()

    def start(self, index: int, job: TrainJob) -> None:
        gpus = GPU_SHARE if job.train.device.startswith("cuda") else 0
        if gpus and not self.ray.cluster_resources().get("GPU"):  # Ray would wait forever for one
            raise ConfigError(f"--device {job.train.device} on Ray needs a GPU in the cluster, and it has none (`ray status` lists its resources)")
        options = {"num_cpus": 1, "num_gpus": gpus,
                   "max_retries": self.max_retries, "retry_exceptions": False, "name": f"t2r-train {Path(job.out_dir).name}"}
        ref = self.task.options(**options).remote(payload_of(job), self.board, str(index))
        self.running[index] = (job, ref)
        self.mirrored.pop(index, None)
        self.stops_posted.discard(index)

    def collect(self) -> list[tuple[int, JobOutcome]]:
        if not self.running:
            return []
        by_ref = {ref: index for index, (_, ref) in self.running.items()}
        ready, _ = self.ray.wait(list(by_ref), num_returns=len(by_ref), timeout=0)
        ended = []
        for ref in ready:
            index = by_ref[ref]
            job, _ = self.running.pop(index)
            try:
                files = self.ray.get(ref)
            except self.ray.exceptions.RayError as exc:
                ended.append((index, JobOutcome(job, False, None, failure_reason(exc, self.max_retries), cause=FailureCause.MACHINE)))
                continue
            store_files(Path(job.out_dir), files)
            ended.append((index, job_outcome(job, "ended its Ray task without an outcome file")))
        return ended

    def mirror(self) -> None:
        """Running tasks' progress and pids, as the board holds them, into their job folders."""
        try:
            posts = self.ray.get(self.board.snapshot.remote(), timeout=5)
        except self.ray.exceptions.GetTimeoutError:
            return
        for index, (job, _) in self.running.items():
            post = posts.get(str(index))
            if post is None:
                continue
            progress, pid = self.mirrored.get(index, (None, None))
            if post["progress"] and post["progress"] != progress:
                write_json_atomic(Path(job.out_dir) / PROGRESS_FILE, post["progress"])
            if post["pid"] != pid:
                write_text_atomic(Path(job.out_dir) / PID_FILE, str(post["pid"]))
            self.mirrored[index] = (post["progress"], post["pid"])

    def relay_stops(self) -> None:
        """Stop files the early stopper wrote in the job folders, to the board (once per attempt)."""
        for index, (job, _) in self.running.items():
            stop_file = job.train.stop_file
            if stop_file and index not in self.stops_posted and Path(stop_file).is_file():
                self.board.request_stop.remote(str(index), json.loads(Path(stop_file).read_text()))
                self.stops_posted.add(index)

    def abort(self) -> None:
        for _, ref in self.running.values():
            self.ray.cancel(ref, force=True)
        self.running.clear()
        self.ray.kill(self.board)


def run_jobs_on_ray(
    jobs: list[TrainJob],
    workers: int,
    on_done: Callable[[JobOutcome], None] | None = None,
    on_poll: Callable[[], None] | None = None,
    early_stopper: EarlyStopper | None = None,
    names: list[str] | None = None,
    address: str | None = None,
    max_retries: int = MAX_RETRIES,
) -> list[JobOutcome]:
    """`pool.run_jobs` on Ray: `workers` jobs in flight as tasks of the cluster at `address` (a local instance on
    127.0.0.1 when None and no Ray is open in this process), the same outcomes, files and early stopping."""
    with ray_session(address):
        return schedule(jobs, workers, RayLauncher(max_retries), on_done=on_done, on_poll=on_poll,
                        early_stopper=early_stopper, names=names)
