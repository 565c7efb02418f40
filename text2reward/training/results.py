"""A training job's outcome, read from its folder, written into its candidate's record (the one place a candidate's
training fields are set) and into the final comparison's arms.

Why beside the jobs: the outcome's files (done.json and the result inside it, error.json) are the training's own;
the loop only says which candidate a job trained.
"""

from __future__ import annotations

from pathlib import Path

from text2reward.runs.records import Candidate, EarlyStop, FailedSeed, FinalArm, TrainingSummary, kept_training_result
from text2reward.runs.statuses import CandidateStatus, FailureCause, StopKind
from text2reward.runs.store import RunStore
from text2reward.training.job import TrainJob
from text2reward.training.pool import JobOutcome

FEEDBACK_FILE = "feedback.md"
VIDEO_FILE = "rollout.mp4"


def record_outcome(candidate: Candidate, outcome: JobOutcome, store: RunStore) -> Candidate:
    """The candidate with its training's outcome: trained (or stopped early, keeping its partial result) with its
    curve, feedback, behaviour, facts, video and warnings; or failed (or interrupted) with the reason and cause."""
    if not outcome.ok:
        assert outcome.reason is not None  # a failed outcome says why
        candidate.status = CandidateStatus.INTERRUPTED if outcome.interrupted else CandidateStatus.FAILED
        candidate.reason = outcome.reason
        candidate.failure_cause = outcome.cause or FailureCause.ERROR
        if outcome.numbers:  # the kernel's account of a stopped call: for people, never for the model
            candidate.failure_numbers = outcome.numbers
        return candidate
    record = outcome.record
    assert record is not None  # an ok outcome carries the worker's done.json
    result = record["result"]
    directory = Path(outcome.job.out_dir)
    stopped = result.get("stopped_early") or {}
    behind = stopped.get("kind") == StopKind.BEHIND
    candidate.status = CandidateStatus.STOPPED_EARLY if behind else CandidateStatus.TRAINED
    candidate.training = TrainingSummary.of_result(result)
    candidate.training_result = kept_training_result(result)
    candidate.feedback_file = store.relative(directory / FEEDBACK_FILE) if (directory / FEEDBACK_FILE).is_file() else None
    candidate.behaviour_text = record.get("behaviour_text", "")
    candidate.facts = {str(k): float(v) for k, v in (record.get("facts") or {}).items()}
    candidate.video_file = store.relative(directory / VIDEO_FILE) if (directory / VIDEO_FILE).is_file() else None
    candidate.keyframes = [store.relative(Path(k)) for k in (record.get("video") or {}).get("keyframes", [])]
    candidate.warnings = [str(w) for w in record.get("warnings") or []]
    candidate.reason = candidate.failure_cause = candidate.failure_numbers = None
    candidate.stopped_early = EarlyStop.from_dict(stopped) if behind else None
    return candidate


def final_arm(jobs: list[tuple[TrainJob, JobOutcome, int]]) -> FinalArm | None:
    """One arm of the final comparison from its seeds' jobs (job, last outcome, attempts); None when it has none."""
    results = [outcome.record["result"] for _, outcome, _ in jobs if outcome.ok and outcome.record is not None]
    failed = [FailedSeed(seed=job.train.seed, reason=outcome.reason or "", cause=outcome.cause or FailureCause.ERROR, attempts=tries)
              for job, outcome, tries in jobs if not outcome.ok]
    if not results and not failed:
        return None
    return FinalArm.of(results, failed)
