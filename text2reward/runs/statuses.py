"""The names a run's records use for where things stand: a run's status, a candidate's, why a job failed.

Why enums of strings: the records are JSON that people read and other tools parse, so each value is the plain string
it always was (`StrEnum` members are `str`s and serialise as themselves); in the code each is a name mypy checks, so a
misspelt status is a type error instead of a branch that never runs.
"""

from __future__ import annotations

import sys
from enum import Enum

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # Python 3.10: the same behaviour, written out (a member formats as its value)

    class StrEnum(str, Enum):
        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return format(str(self.value), spec)


class RunStatus(StrEnum):
    """state.json's `status`."""

    CREATED = "created"
    RUNNING = "running"
    FINISHED = "finished"
    NO_RESULT = "no_result"
    """Nothing trained: the state's `untrained` says why, candidate by candidate."""
    INCOMPLETE = "incomplete"
    """Some training was interrupted; `t2r resume` finishes it."""
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    """Recorded when a run is stopped (Ctrl-C), and read so for a live status whose process is gone."""
    WAITING_FOR_REPLIES = "waiting_for_replies"
    FEEDBACK_PENDING = "feedback_pending"
    UNKNOWN = "unknown"
    """A state.json that names no status (a run folder made by hand, or one just being created)."""

    @property
    def words(self) -> str:
        """For people: "no result", "waiting for replies"."""
        return self.value.replace("_", " ")

    @property
    def live(self) -> bool:
        """Only a working process keeps these: without one holding the run's lock they are stale."""
        return self in (RunStatus.CREATED, RunStatus.RUNNING)

    @classmethod
    def read(cls, value: object) -> RunStatus:
        """A recorded status; an unknown string (a newer text2reward's) reads as UNKNOWN rather than failing a listing."""
        try:
            return cls(str(value))
        except ValueError:
            return cls.UNKNOWN


class CandidateStatus(StrEnum):
    """candidate.json's `status`."""

    NO_CODE = "no_code"
    INVALID = "invalid"
    SCREENED_OUT = "screened_out"
    PENDING_TRAINING = "pending_training"
    TRAINED = "trained"
    STOPPED_EARLY = "stopped_early"
    """Stopped by the run's early stopping; it keeps its partial result and still ranks."""
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    @property
    def words(self) -> str:
        return self.value.replace("_", " ")

    @property
    def has_training(self) -> bool:
        """A training result exists (a stopped candidate keeps its partial curve and result)."""
        return self in (CandidateStatus.TRAINED, CandidateStatus.STOPPED_EARLY)

    @property
    def needs_training(self) -> bool:
        """Training is still to do (never started, or cut short by a dead worker)."""
        return self in (CandidateStatus.PENDING_TRAINING, CandidateStatus.INTERRUPTED)


class FailureCause(StrEnum):
    """Whose doing a failed training was (training/job.failure_cause); only the reward's own is its fault."""

    REWARD = "reward"
    """Its code broke the contract or a limit."""
    MACHINE = "machine"
    """Its process was stopped or killed from outside (the sandbox's wall backstop, the OOM killer): retried."""
    ERROR = "error"
    """Anything else (a library error): retried in the final comparison."""
    INTERRUPTED = "interrupted"
    """The worker died before it wrote an outcome."""

    @classmethod
    def read(cls, value: object) -> FailureCause:
        try:
            return cls(str(value))
        except ValueError:
            return cls.ERROR


class StopKind(StrEnum):
    """Why a training ended before its budget by choice (policies.train's `stopped_early.kind`)."""

    SUCCESS = "success"
    """It reached the run's success threshold."""
    BEHIND = "behind"
    """The run's early stopping judged it clearly behind the round's leader at a rung of the budget."""
