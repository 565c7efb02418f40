"""A batch of training jobs on a run's executor: shown while they run, their evaluations reported as events, and
those that failed for a cause other than the reward's own tried again.

Why one place: a round's candidates, the final comparison and the tuner's trials all run labelled jobs this way; the
loop only says which jobs, how many attempts, and what to do with each outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from text2reward.runs.run_events import Emit, Evaluation, Retrying
from text2reward.runs.statuses import FailureCause
from text2reward.training.early_stop import EarlyStopper
from text2reward.training.executors import JobRunner
from text2reward.training.job import TrainJob
from text2reward.training.pool import JobDisplay, JobOutcome, published_point

LabelledJob = tuple[str, TrainJob]
OTHERS_CAUSES = (FailureCause.MACHINE, FailureCause.INTERRUPTED, FailureCause.ERROR)
"""Causes that are not the reward's own: the final comparison tries those jobs again."""


class EvaluationWatch:
    """Each job's new evaluation points, read from its progress file, as `Evaluation` events."""

    def __init__(self, labelled_jobs: Sequence[LabelledJob], emit: Emit):
        self.jobs, self.emit = list(labelled_jobs), emit
        self.seen: dict[str, int] = {}

    def poll(self) -> None:
        for label, job in self.jobs:
            point = published_point(job)
            if point is None or point.steps <= self.seen.get(job.out_dir, -1):
                continue
            self.seen[job.out_dir] = point.steps
            self.emit(Evaluation(job=label, steps=point.steps, success_rate=point.success_rate, episodes=point.episodes or 0,
                                 mean_return=point.mean_return))


class JobSession:
    """Labelled jobs on one runner, with the run's display and events."""

    def __init__(self, runner: JobRunner, display: JobDisplay | None, emit: Emit):
        self.runner, self.display, self.emit = runner, display, emit

    def run(self, labelled_jobs: Sequence[LabelledJob], on_done: Callable[[JobOutcome], None] | None = None,
            early_stopper: EarlyStopper | None = None) -> list[JobOutcome]:
        """The jobs once, shown (bars in a terminal) and watched (evaluation events)."""
        jobs, names = [job for _, job in labelled_jobs], [label for label, _ in labelled_jobs]
        watch = EvaluationWatch(labelled_jobs, self.emit)
        display = self.display

        def poll() -> None:
            watch.poll()
            if display is not None:
                display.poll()

        if display is not None:
            display.start(list(labelled_jobs))
        try:
            return self.runner(jobs, on_done=on_done, on_poll=poll, early_stopper=early_stopper, names=names)
        finally:
            if display is not None:
                display.stop()

    def run_retrying(self, labelled_jobs: Sequence[LabelledJob], attempts: int, on_done: Callable[[JobOutcome], None] | None = None,
                     early_stopper: EarlyStopper | None = None,
                     causes: tuple[FailureCause, ...] = OTHERS_CAUSES) -> tuple[list[JobOutcome], list[int]]:
        """The jobs, and again (up to `attempts` in all) those that failed for one of `causes`, never the reward's own:
        the machine stopped or killed its process, a worker died, a library failed. A job that trained is never rerun
        (its done.json stands). Returns the last outcome of each job and how many attempts it took."""
        outcomes = self.run(labelled_jobs, on_done, early_stopper)
        tries = [1] * len(outcomes)
        for _ in range(attempts - 1):
            again = [i for i, outcome in enumerate(outcomes) if outcome.retryable and outcome.cause in causes]
            if not again:
                break
            for i in again:
                self.emit(Retrying(labelled_jobs[i][0], str(outcomes[i].cause), outcomes[i].reason or ""))
            for i, outcome in zip(again, self.run([labelled_jobs[i] for i in again], on_done, early_stopper)):
                outcomes[i], tries[i] = outcome, tries[i] + 1
        return outcomes, tries
