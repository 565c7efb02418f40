"""Rich progress bars for training jobs, fed by each worker's `progress.json` (its latest evaluation)."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from text2reward.training.job import TrainJob
from text2reward.training.pool import job_done, job_progress


class TrainingBars:
    """One bar per job: env steps done of the budget, and the last evaluated success rate."""

    def __init__(self, console: Console, refresh_seconds: float = 1.0):
        self.console = console
        self.refresh_seconds = refresh_seconds
        self._progress: Progress | None = None
        self._bars: list[tuple[TaskID, TrainJob]] = []
        self._last = 0.0

    def start(self, labelled_jobs: list[tuple[str, TrainJob]]) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[note]}"),
            TimeElapsedColumn(), console=self.console, transient=False,
        )
        self._bars = [(self._progress.add_task(label, total=job.train.steps or 1, note=""), job) for label, job in labelled_jobs]
        self._progress.start()

    def poll(self) -> None:
        if self._progress is None or time.monotonic() - self._last < self.refresh_seconds:
            return
        self._last = time.monotonic()
        for bar, job in self._bars:
            done = job_done(job.out_dir)
            point = (done or {}).get("result") or job_progress(job.out_dir)
            if point:
                total = point.get("total_steps") or self._progress.tasks[bar].total
                note = f"success {point['success_rate']:.2f}" + (" done" if done else "")
                self._progress.update(bar, completed=point["steps"], total=total, note=note)
            elif (Path(job.out_dir) / "worker.pid").is_file():
                self._progress.update(bar, note="starting")

    def stop(self) -> None:
        if self._progress is not None:
            self._last = 0.0
            self.poll()
            self._progress.stop()
            self._progress = None
