"""What a run reports while it works, as typed events: a round started, a candidate was checked, an evaluation came
in, a candidate stopped early, a round ended, the final comparison ended...

Why typed events rather than lines of prose: a program driving text2reward (the Python front door's callbacks, SB3's
`BaseCallback` style) reads fields, never parses sentences; the CLI prints each event's `text`, which is the line it
always printed. The loop and its stages emit them through an `Emit` function (`emit(RoundStarted(...))`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from policies.formatting import format_success
from text2reward.runs.records import Candidate, FinalSummary, RoundSummary, short_reason
from text2reward.runs.statuses import CandidateStatus, RunStatus


@dataclass(frozen=True)
class RunEvent:
    """Every event; `text` is the line a person reads (empty: nothing to print, e.g. an evaluation the bars show)."""

    @property
    def text(self) -> str:
        return ""


Emit = Callable[[RunEvent], None]


def ignore(event: RunEvent) -> None:
    """An `Emit` that drops everything (a loop nobody watches)."""


@dataclass(frozen=True)
class Note(RunEvent):
    """Anything worth a line that has no fields of its own: a warning, a lock taken over, a step skipped and why."""

    message: str

    @property
    def text(self) -> str:
        return self.message


@dataclass(frozen=True)
class RoundStarted(RunEvent):
    round: int
    author: str | None
    """Who is asked (the backend's label); None when the round's candidate is written from the keypoints."""
    samples: int

    @property
    def text(self) -> str:
        if self.author is None:
            return f"round {self.round}: the reward written from the keypoints is the round's candidate (no model is asked)"
        return f"round {self.round}: asking {self.author} for {self.samples} reward(s)"


@dataclass(frozen=True)
class FixRequested(RunEvent):
    """A reply was rejected (no code, invalid, screened out) and goes back to the model with its error."""

    candidate: str
    error: str

    @property
    def text(self) -> str:
        first = self.error.splitlines()[0][:100] if self.error else ""
        return f"{self.candidate}: {first} -> asking for a fix"


def success_text(candidate: Candidate) -> str:
    """A trained candidate's final success with its episodes and interval (`0.27 (8 of 30 episodes, ...)`)."""
    return format_success(candidate.success, candidate.training.episodes if candidate.training is not None else None)


def describe(candidate: Candidate) -> str:
    """A candidate's outcome in a few words: its success, where it stopped, or why it did not train."""
    trained = [seed for seed in candidate.seeds if seed.training is not None]
    per_seed = f" pooled over {len(trained)} seeds ({' / '.join(f'{s.training.success_rate:.2f}' for s in trained if s.training)})" if len(trained) > 1 else ""
    if candidate.status == CandidateStatus.TRAINED:
        return f"success {success_text(candidate)}{per_seed}"
    if candidate.status == CandidateStatus.STOPPED_EARLY:
        stop = candidate.stopped_early
        steps = stop.steps if stop is not None and stop.steps is not None else "?"
        reason = short_reason(stop.reason, 100) if stop is not None else ""
        return f"stopped early at {steps} steps, success {success_text(candidate)}{per_seed} ({reason})"
    numbers = f"; {candidate.failure_numbers}" if candidate.failure_numbers else ""
    return f"{candidate.status.value} ({short_reason(candidate.reason or '', 160)}{numbers}; in full in its candidate.json)"


@dataclass(frozen=True)
class CandidateChecked(RunEvent):
    """A candidate's code was extracted, validated and screened: it may train (`status` pending_training) or it ended
    (no_code, invalid, screened_out, failed), with the reason."""

    candidate: Candidate

    @property
    def ok(self) -> bool:
        return self.candidate.status == CandidateStatus.PENDING_TRAINING

    @property
    def text(self) -> str:
        if self.ok or self.candidate.status != CandidateStatus.FAILED:
            return ""  # a rejected reply's reason is in the round's line; a failure before training is said at once
        reason = self.candidate.reason or ""
        return f"{self.candidate.id}: failed before training: {short_reason(reason.splitlines()[0], 200) if reason else ''}"


@dataclass(frozen=True)
class TrainingStarted(RunEvent):
    round: int
    candidates: tuple[str, ...]
    workers: int

    @property
    def text(self) -> str:
        return f"round {self.round}: training {len(self.candidates)} candidate(s) on {min(self.workers, len(self.candidates))} worker(s)"


@dataclass(frozen=True)
class Evaluation(RunEvent):
    """A training job evaluated its policy with the task's success test (every `eval_freq` steps)."""

    job: str
    """The candidate's id, or the final comparison's "final best seed 3"."""
    steps: int
    success_rate: float
    episodes: int
    mean_return: float | None = None


@dataclass(frozen=True)
class CandidateTrained(RunEvent):
    """A candidate's training ended: trained, failed, or interrupted (`candidate.status`)."""

    candidate: Candidate

    @property
    def text(self) -> str:
        return f"{self.candidate.id}: {describe(self.candidate)}"


@dataclass(frozen=True)
class CandidateStoppedEarly(CandidateTrained):
    """The run's early stopping stopped it, clearly behind the round's leader; it keeps its partial result."""


@dataclass(frozen=True)
class RoundDone(RunEvent):
    summary: RoundSummary
    candidates: tuple[Candidate, ...]

    @property
    def text(self) -> str:
        line = f"round {self.summary.round}: " + ", ".join(f"{c.id} {describe(c)}" for c in self.candidates)
        if self.summary.best and self.summary.tied:  # a pick the evaluations cannot tell apart is said as such
            line += (f"; best {self.summary.best}, tied within noise with {', '.join(self.summary.tied)} "
                     "(first by the tie-break; report.md says what such a pick is worth)")
        return line


@dataclass(frozen=True)
class ThresholdReached(RunEvent):
    candidate: str
    success_rate: float

    @property
    def text(self) -> str:
        return f"success {self.success_rate:.2f} reached the threshold: stopping early"


@dataclass(frozen=True)
class Retrying(RunEvent):
    """A job that failed for a cause not the reward's own trains again."""

    job: str
    cause: str
    reason: str

    @property
    def text(self) -> str:
        return f"{self.job}: trying again ({self.cause}: {short_reason(self.reason, 120)})"


@dataclass(frozen=True)
class FinalStarted(RunEvent):
    best: str
    seeds: tuple[int, ...]
    with_expert: bool

    @property
    def text(self) -> str:
        return (f"final: re-training the best reward ({self.best}) on {len(self.seeds)} seed(s)"
                + (" beside the expert reward" if self.with_expert else ""))


@dataclass(frozen=True)
class FinalDone(RunEvent):
    summary: FinalSummary


@dataclass(frozen=True)
class WaitingForReplies(RunEvent):
    needed: int
    prompt: str
    """The prompt file a person answers."""

    @property
    def text(self) -> str:
        return f"waiting for {self.needed} reply(ies) to the prompt in {self.prompt}"


@dataclass(frozen=True)
class RunEnded(RunEvent):
    run_id: str
    status: RunStatus
    best: str | None = None
    best_success: float | None = None
    unfinished: tuple[str, ...] = field(default=())
    """Trainings a resume finishes (status incomplete)."""
