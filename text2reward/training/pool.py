"""Run training jobs in W parallel worker processes (local pool), surviving crashes and kills.

Why subprocesses rather than a multiprocessing pool: each job's outcome is decided from files
(`done.json` or `error.json`) and the exit status, so a killed worker is noticed, named, and costs
only its own job; a rerun (`t2r resume`) skips every job that has `done.json`.

`schedule` is the one scheduling path (jobs in flight, skipping finished work, early stopping); a `Launcher`
says where jobs run: `LocalLauncher` here, a Ray cluster in `ray_pool`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from policies.config import switched_on
from policies.cpu_affinity import HOLD_VARIABLE
from policies.curve import CurvePoint
from policies.io import write_json_atomic
from policies.proc_stat import stat_fields
from text2reward.runs.records import DoneRecord, JobError, ProgressFile, RecordError, read, write
from text2reward.runs.statuses import FailureCause
from text2reward.training.early_stop import EarlyStopper
from text2reward.training.job import DONE_FILE, ERROR_FILE, JOB_FILE, PID_FILE, PROGRESS_FILE, WORKER_LOG, TrainJob
from text2reward.training.preloaded import ForkServer, ServerGone, fork_server, job_environment

PIN_VARIABLE = "T2R_PIN_JOBS"
"""`0` keeps the launcher's jobs from holding a core each (the OS places them, as it places every other process)."""

Say = Callable[[str], None]


@dataclass
class JobOutcome:
    job: TrainJob
    ok: bool
    record: DoneRecord | None
    """The worker's done.json, when it finished."""
    reason: str | None
    interrupted: bool = False
    """True when the worker died without reporting (killed): the job is retried on resume."""
    cause: FailureCause | None = None
    """Why a failed job failed: its own code, the machine, an error (see job.failure_cause), or a worker that died."""
    numbers: str = ""
    """For a reward call the sandbox stopped: the kernel's account of it (CPU, blocked, wall, waiting), for people."""

    @property
    def retryable(self) -> bool:
        """Failed for a cause other than the reward's own: another attempt may succeed."""
        return not self.ok and self.cause != FailureCause.REWARD


def job_progress(out_dir: str | Path) -> ProgressFile | None:
    """The job's progress.json (its latest evaluation, or what it does now), if any yet; None where it does not read
    (a display never fails on the worker's file)."""
    path = Path(out_dir) / PROGRESS_FILE
    try:
        return read(ProgressFile, json.loads(path.read_text()), str(path))
    except (OSError, ValueError, RecordError):
        return None


def job_done(out_dir: str | Path) -> DoneRecord | None:
    """The job's done.json, read once into its record (a malformed one is a RecordError naming the file)."""
    path = Path(out_dir) / DONE_FILE
    return read(DoneRecord, json.loads(path.read_text()), str(path)) if path.is_file() else None


def published_point(job: TrainJob) -> CurvePoint | None:
    """A running job's latest evaluation as it published it (progress.json); None before its first, between phases, or
    where the file holds no evaluation (the worker's own file: read as a record, never trusted further)."""
    progress = job_progress(job.out_dir)
    if progress is None or progress.phase is not None:
        return None
    try:
        return read(CurvePoint, write(progress), str(Path(job.out_dir) / PROGRESS_FILE))
    except RecordError:
        return None


def _supervise(stopper: EarlyStopper, running: dict[int, TrainJob], names: list[str]) -> None:
    """Feed the running jobs' latest evaluations to the stopper; write a stop file for each job it stops."""
    for index, job in running.items():
        point = published_point(job)
        if point is not None:
            stopper.add_point(names[index], point)
    by_name = {names[index]: job for index, job in running.items()}
    for name, decision in stopper.decide(list(by_name)).items():
        stop_file = by_name[name].train.stop_file
        if stop_file and not Path(stop_file).exists():
            write_json_atomic(Path(stop_file), write(decision))


def job_outcome(job: TrainJob, how: str) -> JobOutcome:
    """The job's outcome from its folder's files; `how` says how a worker that left neither file ended."""
    out = Path(job.out_dir)
    record = job_done(out)
    if record is not None:
        return JobOutcome(job, True, record, None)
    error = out / ERROR_FILE
    if error.is_file():
        failed = read(JobError, json.loads(error.read_text()), str(error))
        return JobOutcome(job, False, None, failed.reason, cause=failed.cause, numbers=failed.numbers)
    return JobOutcome(job, False, None, f"training worker {how} before finishing; `t2r resume` retrains it", interrupted=True,
                      cause=FailureCause.INTERRUPTED)


class JobDisplay(Protocol):
    """Shows training jobs while they run (the CLI draws progress bars; tests pass none): the loop's rounds and
    the tuner's trials alike."""

    def start(self, labelled_jobs: list[tuple[str, TrainJob]]) -> None: ...

    def poll(self) -> None: ...

    def stop(self) -> None: ...


class Launcher(Protocol):
    """Where jobs run (local worker processes, a Ray cluster): the scheduling around them is `schedule`'s."""

    def start(self, index: int, job: TrainJob) -> None:
        """Start a job whose folder holds its job.json (a fresh attempt: no error file, no stale stop file)."""

    def collect(self) -> list[tuple[int, JobOutcome]]:
        """The jobs that ended since the last call, with their outcomes (their files are in their folders by now)."""

    def mirror(self) -> None:
        """Bring what running jobs publish (progress, pid) into their folders, where the early stopper, progress bars
        and the dashboard read it (a local worker writes there itself)."""

    def relay_stops(self) -> None:
        """Pass the stop files the early stopper just wrote on to the running jobs (a local worker reads its own)."""

    def abort(self) -> None:
        """Stop every job still running (the driver is leaving)."""


def schedule(
    jobs: list[TrainJob],
    workers: int,
    launcher: Launcher,
    on_done: Callable[[JobOutcome], None] | None = None,
    on_poll: Callable[[], None] | None = None,
    early_stopper: EarlyStopper | None = None,
    names: list[str] | None = None,
) -> list[JobOutcome]:
    """At most `workers` jobs in flight; finished jobs (done.json present) are not rerun. One path for every
    executor, so early stopping, progress and skipping finished work behave the same on each."""
    names = names or [str(i) for i in range(len(jobs))]
    outcomes: dict[int, JobOutcome] = {}
    pending = list(enumerate(jobs))
    running: set[int] = set()

    def finish(index: int, outcome: JobOutcome) -> None:
        outcomes[index] = outcome
        if outcome.record is not None and early_stopper is not None:
            early_stopper.observe(names[index], outcome.record.result.curve)
        if on_done:
            on_done(outcome)

    try:
        while pending or running:
            while pending and len(running) < workers:
                index, job = pending.pop(0)
                record = job_done(job.out_dir)
                if record is not None:
                    finish(index, JobOutcome(job, True, record, None))
                    continue
                Path(job.out_dir).mkdir(parents=True, exist_ok=True)
                (Path(job.out_dir) / ERROR_FILE).unlink(missing_ok=True)
                if job.train.stop_file:  # a stop asked of an earlier, killed attempt: this attempt is judged afresh
                    Path(job.train.stop_file).unlink(missing_ok=True)
                job.write()
                launcher.start(index, job)
                running.add(index)
            for index, outcome in launcher.collect():
                running.discard(index)
                finish(index, outcome)
            if running:
                launcher.mirror()
                if early_stopper is not None:
                    _supervise(early_stopper, {index: jobs[index] for index in running}, names)
                    launcher.relay_stops()
            if on_poll:
                on_poll()
            time.sleep(0.2)
    finally:
        launcher.abort()
    return [outcomes[i] for i in range(len(jobs))]


def running_worker(job: TrainJob) -> int | None:
    """The pid of a live worker process already training `job` (named by its folder's worker.pid, and writing to this
    job's worker.log), or None. Why: a driver killed outright leaves its workers training; a resumed run adopts them
    rather than starting a second writer on the same folder."""
    out = Path(job.out_dir)
    try:
        pid = int((out / PID_FILE).read_text())
    except (OSError, ValueError):
        return None
    return pid if _is_worker(pid, out) else None


def _is_worker(pid: int, out: Path) -> bool:
    """Whether `pid` is alive and the worker of the job in `out`: its stdout is that job's worker.log. Why its stdout,
    not its command line: a worker forked by the fork server has the server's command line, a fresh one the job's;
    both write to their job's log, and no other process does."""
    try:
        state = stat_fields(pid)[0]
        stdout = os.readlink(f"/proc/{pid}/fd/1")
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X") and os.path.realpath(stdout) == os.path.realpath(out / WORKER_LOG)


def _say_on_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _how(code: int) -> str:
    return f"killed by signal {-code}" if code < 0 else f"exited with status {code}"


def core_environment() -> dict[str, str]:
    """What a local job's environment adds: hold a free core of its own (policies/cpu_affinity.py), unless
    `T2R_PIN_JOBS=0`."""
    return {HOLD_VARIABLE: "1"} if switched_on(PIN_VARIABLE, default=True) else {}


class LocalLauncher:
    """One process per job on this machine: forked from the driver's fork server, which has the heavy libraries
    imported already (training/forkserver.py, preloaded.py: the job's first step ~1 s after its start instead of ~6 s),
    or, where the server is switched off (`T2R_FORKSERVER=0`, `preload=False`) or cannot serve, a fresh
    `python -m text2reward.training.job`. Either way the job is a process of its own whose output goes to worker.log,
    whose pid is in worker.pid, and whose exit status is reported as a `Popen`'s would be. A job whose worker from an
    earlier driver still runs is adopted: watched by its pid until it ends."""

    def __init__(self, say: Say | None = None, preload: bool = True) -> None:
        self.processes: dict[int, tuple[TrainJob, subprocess.Popen]] = {}
        self.forked: dict[int, tuple[TrainJob, ForkServer, int]] = {}
        self.adopted: dict[int, tuple[TrainJob, int]] = {}
        self.say = say or _say_on_stderr
        self.preload = preload

    def start(self, index: int, job: TrainJob) -> None:
        pid = running_worker(job)
        if pid is not None:
            self.adopted[index] = (job, pid)
            return
        job_file, log = str(Path(job.out_dir) / JOB_FILE), str(Path(job.out_dir) / WORKER_LOG)
        env = core_environment()
        server = fork_server(self.say) if self.preload else None
        if server is not None:
            try:
                self.forked[index] = (job, server, server.fork(job_file, log, env))
                return
            except (ServerGone, ValueError) as exc:
                self.say(f"training job {job.out_dir} starts as a fresh process: {exc}")
        with open(log, "w") as output:  # the worker holds its own copy
            process = subprocess.Popen([sys.executable, "-m", "text2reward.training.job", job_file], stdout=output,
                                       stderr=subprocess.STDOUT, env={**job_environment(), **env})
        self.processes[index] = (job, process)

    def collect(self) -> list[tuple[int, JobOutcome]]:
        ended = []
        for index, (job, pid) in list(self.adopted.items()):
            if running_worker(job) != pid:
                del self.adopted[index]
                ended.append((index, job_outcome(job, f"left running by an earlier driver (pid {pid}) ended")))
        for index, (job, server, pid) in list(self.forked.items()):
            code = server.returncode(pid)
            if code is not None:
                how = _how(code)
            elif not server.alive() and not _is_worker(pid, Path(job.out_dir)):
                how = f"(pid {pid}) ended after its fork server had stopped, its exit status unseen,"
            else:
                continue
            del self.forked[index]
            ended.append((index, job_outcome(job, how)))
        for index, (job, process) in list(self.processes.items()):
            code = process.poll()
            if code is None:
                continue
            del self.processes[index]
            ended.append((index, job_outcome(job, _how(code))))
        return ended

    def mirror(self) -> None:
        return None

    def relay_stops(self) -> None:
        return None

    def abort(self) -> None:
        for _, process in self.processes.values():
            process.kill()
            process.wait()
        for job, server, pid in self.forked.values():
            # a child the live server has not reported ended is unreaped: its pid cannot have been reused
            if server.returncode(pid) is None and (server.alive() or _is_worker(pid, Path(job.out_dir))):
                os.kill(pid, signal.SIGKILL)
        self.forked.clear()
        for job, pid in self.adopted.values():
            if running_worker(job) == pid:
                os.kill(pid, signal.SIGKILL)


def run_jobs(
    jobs: list[TrainJob],
    workers: int,
    on_done: Callable[[JobOutcome], None] | None = None,
    on_poll: Callable[[], None] | None = None,
    early_stopper: EarlyStopper | None = None,
    names: list[str] | None = None,
    say: Say | None = None,
) -> list[JobOutcome]:
    """Run jobs in local worker processes, at most `workers` at a time; finished jobs (done.json present) are not rerun.

    `on_poll` is called about five times a second while jobs run (progress displays). With an
    `early_stopper`, every evaluation a worker publishes is fed to it (by `names`, e.g. candidate ids), and
    a job it judges clearly behind gets its stop file: it stops within a few dozen steps and finishes
    normally with its partial result, freeing the worker for the next queued job."""
    return schedule(jobs, workers, LocalLauncher(say), on_done=on_done, on_poll=on_poll, early_stopper=early_stopper, names=names)
