"""Progress of training jobs, fed by each worker's `progress.json` (its latest evaluation, or what it does now).

In a terminal: one Rich bar per job, with the last evaluation's success rate and return, and the phase
after training (final evaluation, analysis, filming). Elsewhere (a log file, CI, `| tee`): a plain line per
evaluation and per phase, never a hard-wrapped bar, and a line at least every `heartbeat_seconds` so a
person tailing the log knows the run is alive.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from text2reward.runs.records import ProgressFile
from text2reward.training.job import TrainJob
from text2reward.training.pool import job_done, job_progress

HEARTBEAT_SECONDS = 30.0


def describe_point(point: ProgressFile, done: bool) -> str:
    """`success 0.40, return 12.3` of the latest evaluation, then the phase or `done`."""
    parts = []
    if point.success_rate is not None:
        parts.append(f"success {point.success_rate:.2f}")
    if point.mean_return is not None:
        parts.append(f"return {point.mean_return:.4g}")
    note = ", ".join(parts)
    if done:
        return f"{note} done".strip()
    if point.phase:
        return f"{note} · {point.phase}..." if note else f"{point.phase}..."
    return note


def latest_point(job: TrainJob) -> tuple[ProgressFile | None, bool]:
    """(the job's latest figures, whether it is done): its result once done.json is there, else its progress.json."""
    done = job_done(job.out_dir)
    if done is None:
        return job_progress(job.out_dir), False
    result = done.result
    return ProgressFile(steps=result.steps, success_rate=result.success_rate, mean_return=result.mean_return), True


class TrainingBars:
    """Shows training jobs while they run: bars in a terminal, lines in a log."""

    def __init__(self, console: Console, refresh_seconds: float = 1.0, heartbeat_seconds: float = HEARTBEAT_SECONDS):
        self.console = console
        self.refresh_seconds = refresh_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self._progress: Progress | None = None
        self._bars: list[tuple[TaskID, TrainJob]] = []
        self._jobs: list[tuple[str, TrainJob]] = []
        self._said: dict[str, str] = {}
        self._last = 0.0
        self._last_line = 0.0
        self._started = 0.0

    @property
    def as_lines(self) -> bool:
        return not self.console.is_terminal

    def start(self, labelled_jobs: list[tuple[str, TrainJob]]) -> None:
        self._jobs, self._said = list(labelled_jobs), {}
        self._started = self._last_line = time.monotonic()
        if self.as_lines:
            return
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[note]}"),
            TimeElapsedColumn(), console=self.console, transient=False,
        )
        self._bars = [(self._progress.add_task(label, total=job.train.steps or 1, note=""), job) for label, job in labelled_jobs]
        self._progress.start()

    def poll(self) -> None:
        if time.monotonic() - self._last < self.refresh_seconds:
            return
        self._last = time.monotonic()
        if self.as_lines:
            self._print_lines()
            return
        if self._progress is None:
            return
        for bar, job in self._bars:
            point, done = latest_point(job)
            if point is not None:
                total = point.total_steps or self._progress.tasks[bar].total
                self._progress.update(bar, completed=point.steps, total=total, note=describe_point(point, done))
            elif (Path(job.out_dir) / "worker.pid").is_file():
                self._progress.update(bar, note="starting")

    def _print_lines(self) -> None:
        for label, job in self._jobs:
            point, done = latest_point(job)
            if point is None:
                continue
            total = point.total_steps or job.train.steps
            line = f"{label}: {point.steps}/{total or '?'} steps, {describe_point(point, done)}".rstrip(", ")
            if self._said.get(label) != line:
                self._said[label] = line
                self._say(line)
        if time.monotonic() - self._last_line >= self.heartbeat_seconds:
            running = [label for label, job in self._jobs if not job_done(job.out_dir)]
            self._say(f"training {', '.join(running) or 'jobs'}: {time.monotonic() - self._started:.0f} s elapsed")

    def _say(self, line: str) -> None:
        self.console.print(line, highlight=False, markup=False, soft_wrap=True)
        self._last_line = time.monotonic()

    def stop(self) -> None:
        self._last = 0.0
        self.poll()
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
