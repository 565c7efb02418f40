"""A training job's outcome, read from its folder, written into its candidate's record (the one place a candidate's
training fields are set) and into the final comparison's arms.

Why beside the jobs: the outcome's files (done.json and the result inside it, error.json) are the training's own;
the loop only says which candidate a job trained.
"""

from __future__ import annotations

from pathlib import Path

from text2reward.runs.records import Candidate, FailedSeed, FinalArm, SeedRun, TrainingSummary
from text2reward.runs.seed_scores import pooled_summary
from text2reward.runs.statuses import CandidateStatus, FailureCause
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
    assert record is not None  # an ok outcome carries the worker's done.json, read by the pool (training.pool.job_done)
    result = record.result
    directory = Path(outcome.job.out_dir)
    candidate.status = CandidateStatus.STOPPED_EARLY if result.stopped_behind else CandidateStatus.TRAINED
    candidate.training = TrainingSummary.of_result(result)
    candidate.training_result = result.kept()
    candidate.feedback_file = store.relative(directory / FEEDBACK_FILE) if (directory / FEEDBACK_FILE).is_file() else None
    candidate.behaviour_text = record.behaviour_text
    candidate.facts = dict(record.facts)
    candidate.video_file = store.relative(directory / VIDEO_FILE) if (directory / VIDEO_FILE).is_file() else None
    candidate.keyframes = [store.relative(Path(k)) for k in (record.video.keyframes if record.video is not None else [])]
    candidate.warnings = list(record.warnings)
    candidate.reason = candidate.failure_cause = candidate.failure_numbers = None
    candidate.stopped_early = result.stopped_early if result.stopped_behind else None
    return candidate


def seed_run(seed: int, outcome: JobOutcome, store: RunStore) -> SeedRun:
    """One seed's part of a candidate trained on several: its figures, or why it did not train."""
    job = store.relative(Path(outcome.job.out_dir))
    if not outcome.ok or outcome.record is None:
        return SeedRun(seed=seed, job=job, reason=outcome.reason or "did not train")
    result = outcome.record.result
    return SeedRun(seed=seed, job=job, training=TrainingSummary.of_result(result), stopped_early=result.stopped_behind)


def record_seed_outcomes(candidate: Candidate, outcomes: list[tuple[int, JobOutcome]], store: RunStore) -> Candidate:
    """A candidate trained on several seeds (`--candidate-seeds`), once every seed has an outcome: each seed's figures
    in `seeds`, and its `training` pooled over the seeds that trained (runs/seed_scores.py). Its analysis, feedback,
    video and curve for the reflection are its first trained seed's (the run's own seed, unless that one failed). A
    seed cut short makes the candidate interrupted (a resume trains that seed; the others' done.json stand); no seed
    trained is the first failure's status; a seed stopped as behind (the stopper stops a candidate's seeds together)
    makes it stopped early; a seed that failed while others trained is a warning, and the score pools the others."""
    seeds = [seed_run(seed, outcome, store) for seed, outcome in outcomes]
    trained = [outcome for _, outcome in outcomes if outcome.ok and outcome.record is not None]
    cut = next((outcome for _, outcome in outcomes if not outcome.ok and outcome.interrupted), None)
    if cut is not None or not trained:
        candidate = record_outcome(candidate, cut or next(o for _, o in outcomes if not o.ok), store)
        candidate.seeds = seeds
        return candidate
    candidate = record_outcome(candidate, trained[0], store)
    candidate.training = pooled_summary([seed.training for seed in seeds if seed.training is not None])
    stopped = next((outcome for (_, outcome), seed in zip(outcomes, seeds) if seed.stopped_early), None)
    if stopped is not None and stopped.record is not None:
        candidate.status = CandidateStatus.STOPPED_EARLY
        candidate.stopped_early = stopped.record.result.stopped_early
    candidate.warnings += [f"seed {seed.seed} did not train ({seed.reason}); its score pools the other seeds"
                           for seed in seeds if seed.training is None]
    candidate.seeds = seeds
    return candidate


def final_arm(jobs: list[tuple[TrainJob, JobOutcome, int]]) -> FinalArm | None:
    """One arm of the final comparison from its seeds' jobs (job, last outcome, attempts); None when it has none."""
    results = [outcome.record.result for _, outcome, _ in jobs if outcome.ok and outcome.record is not None]
    failed = [FailedSeed(seed=job.train.seed, reason=outcome.reason or "", cause=outcome.cause or FailureCause.ERROR, attempts=tries)
              for job, outcome, tries in jobs if not outcome.ok]
    if not results and not failed:
        return None
    return FinalArm.of(results, failed)
