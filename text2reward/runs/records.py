"""The run's records, one schema each: what a candidate, a round, the final comparison and the run's
state hold on disk. The store (store.py) is the one place that reads and writes them.

Why typed dicts rather than dataclasses: the records are JSON files people open, diff and feed to
other tools, and the loop extends a candidate stage by stage (validated, screened, trained); a
TypedDict names every field and its type for readers and type checkers while the file stays the
plain JSON it always was. Every record carries `schema`; `upgrade` turns a record written by an
older layout into the current one, and refuses one written by a newer text2reward.
"""

from __future__ import annotations

import textwrap
from typing import Any, TypedDict

from sim_envs.errors import ConfigError

SCHEMA_VERSION = 2
"""1: runs written before records were versioned (no `schema` field); 2: versioned. The fields are
the same; a change to a record's fields raises the version and adds a step to `upgrade`. Optional fields
that a reader may ignore (a tuned candidate's `parent` and `tuned`) are no such change: every record without
them still reads as before, and an older reader never lists tuned candidates (they live under `tune/`)."""


class Tokens(TypedDict):
    prompt: int
    completion: int


class TrainingSummary(TypedDict, total=False):
    """A trained candidate's figures, copied from policies.train's result.json."""

    success_rate: float
    best_success_rate: float
    mean_return: float
    mean_native_return: float
    steps: int
    wall_seconds: float
    steps_per_second: float
    curve: list[dict[str, Any]]
    episodes: int  # of the final evaluation (`success_rate`); absent in older records (then read as 5, `episodes_of`)
    eval_episodes: int  # of each evaluation during training (the curve's points)


DEFAULT_EVAL_EPISODES = 5
"""What an older record that does not say how many episodes an evaluation had is read as (the default of every
family but Fetch, and the fewest: the widest interval)."""


def episodes_of(training: TrainingSummary | dict[str, Any]) -> int:
    """How many episodes a candidate's final success rate is a mean of."""
    return int(training.get("episodes") or training.get("eval_episodes") or DEFAULT_EVAL_EPISODES)


class ConstantChange(TypedDict):
    """One constant of a tuned candidate: its parent's value, the tuned one, and tuned/parent."""

    name: str
    parent: float | None
    tuned: float
    ratio: float | None


class TuningSummary(TypedDict, total=False):
    """How a tuned candidate was found (`t2r tune`): the study, its trials, and the winner's constants."""

    study: str  # the Optuna study's SQLite file, relative to the run folder
    study_name: str
    trials: int  # finished trials that counted (complete, pruned, failed by their own training)
    complete: int
    pruned: int
    failed: int
    trial: int  # the winning trial's number
    objective: float  # its score: area under its success curve, plus a tie-breaker (tuning/objective.py)
    margin: float  # how far a trial had to score above the parent's constants to replace them
    kept_parent: bool  # no trial beat the parent's constants by the margin: the winner is the parent's own trial
    steps: int | None  # each trial's training budget (None: the task's default)
    constants_diff: list[ConstantChange]
    warnings: list[str]  # range comments that could not be used


class VisionAnalysis(TypedDict):
    file: str  # the answer (vision_analysis.md), relative to the run folder
    images: list[str]  # the keyframes it was shown
    model: str  # "<backend>:<model>"


class Candidate(TypedDict, total=False):
    """rounds/r<R>/s<S>/candidate.json: one reward program and everything that happened to it; a tuned candidate
    (`t2r tune`) is tune/<parent>/candidate.json, with its parent's round and sample, id `<parent>-tuned`."""

    schema: int
    id: str  # "r0-s1"
    round: int
    sample: int
    backend: str
    model: str
    rule_based: bool
    tokens: Tokens
    attempts: list[dict[str, Any]]
    code_file: str  # relative to the run folder
    validation: dict[str, Any]  # sandbox.ValidationReport.to_dict()
    screening: dict[str, Any]
    status: str  # no_code | invalid | screened_out | pending_training | trained | stopped_early | failed | interrupted
    reason: str  # why a candidate is not trained
    failure_cause: str  # status failed: "reward" (its own code), "machine", "error" (training/jobs.failure_cause)
    failure_numbers: str  # a stopped reward call's CPU, blocked, wall and waiting times (for people, not the model)
    training: TrainingSummary
    training_result: dict[str, Any]  # the whole result.json
    feedback_file: str | None
    behaviour_text: str
    facts: dict[str, float]  # the analysed episodes' facts, averaged (feedback.compose.mean_facts); the contrast reads them
    video_file: str | None
    keyframes: list[str]
    warnings: list[str]  # after training: a failed analysis or video (the candidate still trained)
    stopped_early: dict[str, Any]  # status stopped_early: {rung, steps, reason} of the run's early stopping
    parent: str  # a tuned candidate: the id of the candidate whose constants were tuned
    tuned: TuningSummary  # a tuned candidate: the study and the constants' diff against the parent
    vision_analysis: VisionAnalysis  # --vision-analysis: a vision model's answer to "what went wrong?" about its keyframes


TRAINED_STATUSES = ("trained", "stopped_early")
"""Candidates with a training result (a stopped one keeps its partial curve and result, and can still rank)."""


def has_training(candidate: Candidate) -> bool:
    return candidate.get("status") in TRAINED_STATUSES


def training_summary(result: dict[str, Any]) -> TrainingSummary:
    """A candidate's training figures, from its result.json (the loop's candidates and tuned ones alike)."""
    return {
        "success_rate": result["success_rate"], "best_success_rate": result["best_success_rate"],
        "mean_return": result["mean_return"], "mean_native_return": result["mean_native_return"],
        "steps": result["steps"], "wall_seconds": result["wall_seconds"],
        "steps_per_second": result["steps_per_second"], "curve": result["curve"],
        "episodes": int(result.get("final_eval_episodes") or len((result.get("final_eval") or {}).get("episodes") or [])
                        or result.get("eval_episodes") or DEFAULT_EVAL_EPISODES),
        "eval_episodes": int(result.get("eval_episodes") or DEFAULT_EVAL_EPISODES),
    }


class RoundSummary(TypedDict, total=False):
    """rounds/r<R>/summary.json."""

    schema: int
    round: int
    best: str | None
    best_success: float | None
    statuses: dict[str, str]
    tied: list[str]  # candidates whose success is within the best's noise (runs/ranking.py); absent in older records
    tie_break: str  # how the best was chosen among them (ranking.TIE_BREAK), when `tied` is not empty


class FinalSummary(TypedDict, total=False):
    """final/summary.json: the best reward re-trained on fresh seeds beside the expert."""

    schema: int
    best_candidate: str | None
    reason: str
    seeds: list[int]
    interrupted: bool
    best: dict[str, Any]
    expert: dict[str, Any]


class RunState(TypedDict, total=False):
    """state.json: where the run is."""

    schema: int
    status: str  # running | finished | no_result | incomplete | failed | interrupted | waiting_for_replies
    round: int
    created: float
    updated: float
    rounds_done: int
    best: str | None
    best_success: float | None
    wall_seconds: float
    report: str
    error: str  # why a run failed (an exception)
    reason: str | None  # why a run ended with no result (one line, by candidate)
    pending_prompt: str | None  # waiting_for_replies: the prompt file to answer
    replies_needed: int


def upgrade(record: dict[str, Any], what: str) -> dict[str, Any]:
    """A record as this layout writes it; a ConfigError for one from a newer text2reward."""
    version = record.get("schema", 1)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ConfigError(
            f"{what} was written with record schema {version!r}, newer than this text2reward's {SCHEMA_VERSION}; "
            "upgrade text2reward (pip install -U) to open it"
        )
    # version 1 -> 2: the same fields, now versioned
    return {**record, "schema": SCHEMA_VERSION}


def stamped(record: dict[str, Any]) -> dict[str, Any]:
    """The record as written: with this layout's schema version."""
    return {**record, "schema": SCHEMA_VERSION}


def short_reason(text: str, width: int) -> str:
    """A reason cut to whole words within `width` characters (never mid-word or mid-number), marked when cut;
    the full text stays in the run folder."""
    return textwrap.shorten(" ".join(str(text).split()), width, placeholder=" ...") if text else ""


def final_failures(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """A final arm's failed seeds, each {seed, reason, cause, attempts}; older summaries kept reasons only (seed "?")."""
    failed = entry.get("failed_seeds")
    if isinstance(failed, list):
        return [f for f in failed if isinstance(f, dict)]
    return [{"seed": "?", "reason": str(reason), "cause": "error", "attempts": 1} for reason in entry.get("failures") or []]
