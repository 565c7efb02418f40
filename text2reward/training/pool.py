"""Run training jobs in W parallel worker processes (local pool), surviving crashes and kills.

Why subprocesses rather than a multiprocessing pool: each job's outcome is decided from files
(`done.json` or `error.json`) and the exit status, so a killed worker is noticed, named, and costs
only its own job; a rerun (`t2r resume`) skips every job that has `done.json`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policies.io import write_json_atomic
from text2reward.training.early_stop import EarlyStopper
from text2reward.training.job import DONE_FILE, ERROR_FILE, JOB_FILE, PROGRESS_FILE, TrainJob


@dataclass
class JobOutcome:
    job: TrainJob
    ok: bool
    record: dict[str, Any] | None
    reason: str | None
    interrupted: bool = False
    """True when the worker died without reporting (killed): the job is retried on resume."""


def job_progress(out_dir: str | Path) -> dict[str, Any] | None:
    """The job's latest evaluation point ({steps, success_rate, total_steps, ...}), if any yet."""
    path = Path(out_dir) / PROGRESS_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def job_done(out_dir: str | Path) -> dict[str, Any] | None:
    path = Path(out_dir) / DONE_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def _supervise(stopper: EarlyStopper, running: dict[int, TrainJob], names: list[str]) -> None:
    """Feed the running jobs' latest evaluations to the stopper; write a stop file for each job it stops."""
    for index, job in running.items():
        point = job_progress(job.out_dir)
        if point and "steps" in point and "success_rate" in point:
            stopper.add_point(names[index], point)
    by_name = {names[index]: job for index, job in running.items()}
    for name, decision in stopper.decide(list(by_name)).items():
        stop_file = by_name[name].train.stop_file
        if stop_file and not Path(stop_file).exists():
            write_json_atomic(Path(stop_file), decision.to_dict())


def _outcome(job: TrainJob, returncode: int) -> JobOutcome:
    out = Path(job.out_dir)
    record = job_done(out)
    if record is not None:
        return JobOutcome(job, True, record, None)
    error = out / ERROR_FILE
    if error.is_file():
        return JobOutcome(job, False, None, json.loads(error.read_text())["reason"])
    how = f"killed by signal {-returncode}" if returncode < 0 else f"exited with status {returncode}"
    return JobOutcome(job, False, None, f"training worker {how} before finishing; `t2r resume` retrains it", interrupted=True)


def run_jobs(
    jobs: list[TrainJob],
    workers: int,
    on_done: Callable[[JobOutcome], None] | None = None,
    on_poll: Callable[[], None] | None = None,
    early_stopper: EarlyStopper | None = None,
    names: list[str] | None = None,
) -> list[JobOutcome]:
    """Run jobs, at most `workers` at a time; finished jobs (done.json present) are not rerun.

    `on_poll` is called about five times a second while jobs run (progress displays). With an
    `early_stopper`, every evaluation a worker publishes is fed to it (by `names`, e.g. candidate ids), and
    a job it judges clearly behind gets its stop file: it stops within a few dozen steps and finishes
    normally with its partial result, freeing the worker for the next queued job."""
    names = names or [str(i) for i in range(len(jobs))]
    outcomes: dict[int, JobOutcome] = {}
    pending = list(enumerate(jobs))
    running: dict[int, subprocess.Popen] = {}
    logs: dict[int, Any] = {}

    def observe_done(index: int, record: dict[str, Any]) -> None:
        if early_stopper is not None:
            early_stopper.observe(names[index], (record.get("result") or {}).get("curve") or [])

    try:
        while pending or running:
            while pending and len(running) < workers:
                index, job = pending.pop(0)
                record = job_done(job.out_dir)
                if record is not None:
                    observe_done(index, record)
                    outcomes[index] = JobOutcome(job, True, record, None)
                    if on_done:
                        on_done(outcomes[index])
                    continue
                Path(job.out_dir).mkdir(parents=True, exist_ok=True)
                (Path(job.out_dir) / ERROR_FILE).unlink(missing_ok=True)
                if job.train.stop_file:  # a stop asked of an earlier, killed attempt: this attempt is judged afresh
                    Path(job.train.stop_file).unlink(missing_ok=True)
                job.write()
                log = open(Path(job.out_dir) / "worker.log", "w")  # noqa: SIM115 (closed below)
                logs[index] = log
                running[index] = subprocess.Popen(
                    [sys.executable, "-m", "text2reward.training.job", str(Path(job.out_dir) / JOB_FILE)],
                    stdout=log, stderr=subprocess.STDOUT,
                )
            for index, process in list(running.items()):
                code = process.poll()
                if code is None:
                    continue
                del running[index]
                logs.pop(index).close()
                outcomes[index] = _outcome(jobs[index], code)
                if outcomes[index].record is not None:
                    observe_done(index, outcomes[index].record or {})
                if on_done:
                    on_done(outcomes[index])
            if early_stopper is not None and running:
                _supervise(early_stopper, {index: jobs[index] for index in running}, names)
            if on_poll:
                on_poll()
            time.sleep(0.2)
    finally:
        for process in running.values():
            process.kill()
        for log in logs.values():
            log.close()
    return [outcomes[i] for i in range(len(jobs))]
