"""The run's records, one typed class each: a candidate, its training, a round, the final comparison, the run's state.

Why dataclasses parsed at the store boundary: the records are JSON files people open, diff and feed to other tools,
so on disk they stay the plain JSON they always were; in the code each is a class whose fields mypy checks, parsed
once when the store reads the file (`from_dict`, which names the file and the field when something is wrong) and
written back by `to_dict`. A field a record may lack is `None` (or empty) in the class and absent from the file.
Fields this text2reward does not know (written by a newer one) are kept in `extra` and written back untouched.

Every record carries `schema`; `upgrade` turns a record written by an older layout into the current one (the
version-1 runs in tests/fixtures still open), and refuses one written by a newer text2reward.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeGuard, TypeVar

from policies.stats import Rate
from text2reward.errors import ConfigError
from text2reward.runs.statuses import CandidateStatus, FailureCause, RunStatus

SCHEMA_VERSION = 2
"""1: runs written before records were versioned (no `schema` field); 2: versioned. The fields are the same; a
change to a record's fields raises the version and adds a step to `upgrade`. Optional fields a reader may ignore
(a tuned candidate's `parent`, a run's `author`) are no such change: a record without them reads as before."""
DEFAULT_EVAL_EPISODES = 5
"""What an older record that does not say how many episodes an evaluation had is read as (the default of every
family but Fetch, and the fewest: the widest interval)."""

Json = dict[str, Any]
R = TypeVar("R")


class RecordError(ConfigError):
    """A record file that cannot be read as its schema: one line naming the file, the field and what to do."""


def upgrade(record: Any, what: str) -> Json:
    """A record as this layout writes it; a RecordError for one from a newer text2reward or one that is no record."""
    if not isinstance(record, dict):
        raise RecordError(f"{what} is not a JSON object (it holds {type(record).__name__}); restore it from a copy or "
                          "remove the run (`t2r runs rm RUN_ID`)")
    version = record.get("schema", 1)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise RecordError(
            f"{what} was written with record schema {version!r}, newer than this text2reward's {SCHEMA_VERSION}; "
            "upgrade text2reward (pip install -U) to open it"
        )
    # version 1 -> 2: the same fields, now versioned
    return {**record, "schema": SCHEMA_VERSION}


class _Fields:
    """Typed reads of one record's fields; a wrong one is a RecordError naming the record and the field."""

    def __init__(self, data: Mapping[str, Any], what: str):
        if not isinstance(data, Mapping):
            raise RecordError(f"{what} should be a JSON object, got {type(data).__name__}")
        self.data, self.what = data, what

    def _bad(self, key: str, kind: str) -> RecordError:
        value = repr(self.data.get(key))
        return RecordError(f"{self.what}: field {key!r} should be {kind}, got {value[:60]}")

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def text(self, key: str, default: str | None = None) -> str:
        value = self.data.get(key, default)
        if not isinstance(value, str):
            raise self._bad(key, "text")
        return value

    def opt_text(self, key: str) -> str | None:
        return None if self.data.get(key) is None else self.text(key)

    def whole(self, key: str, default: int | None = None) -> int:
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._bad(key, "a whole number")
        return value

    def opt_whole(self, key: str) -> int | None:
        return None if self.data.get(key) is None else self.whole(key)

    def number(self, key: str, default: float | None = None) -> float:
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._bad(key, "a number")
        return float(value)

    def opt_number(self, key: str) -> float | None:
        return None if self.data.get(key) is None else self.number(key)

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.data.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._bad(key, "true or false")
        return value

    def items(self, key: str) -> list[Any]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._bad(key, "a list")
        return value

    def texts(self, key: str) -> list[str]:
        values = self.items(key)
        if not all(isinstance(v, str) for v in values):
            raise self._bad(key, "a list of text")
        return list(values)

    def obj(self, key: str) -> Json:
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self._bad(key, "a JSON object")
        return value

    def opt_obj(self, key: str) -> Json | None:
        return None if self.data.get(key) is None else self.obj(key)

    def numbers(self, key: str) -> dict[str, float]:
        values = self.obj(key)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values.values()):
            raise self._bad(key, "an object of numbers")
        return {k: float(v) for k, v in values.items()}

    def record(self, key: str, parse: Callable[[Mapping[str, Any], str], R]) -> R | None:
        value = self.data.get(key)
        if value is None:
            return None
        return parse(value, f"{self.what}, field {key!r}")

    def extra(self, cls: type) -> Json:
        """The fields `cls` does not know, kept as they were."""
        known = {f.name for f in fields(cls)} | {"schema"}
        return {k: v for k, v in self.data.items() if k not in known}


def _compact(record: Json) -> Json:
    """A record's dict without the fields it does not have (None): the file holds what happened, nothing more."""
    return {k: v for k, v in record.items() if v is not None}


def short_reason(text: str, width: int) -> str:
    """A reason cut to whole words within `width` characters (never mid-word or mid-number), marked when cut;
    the full text stays in the run folder."""
    return textwrap.shorten(" ".join(str(text).split()), width, placeholder=" ...") if text else ""


def result_episodes(result: Mapping[str, Any]) -> int:
    """How many episodes a result.json's final evaluation had (older results: their evaluation's, or 5)."""
    return int(result.get("final_eval_episodes") or len((result.get("final_eval") or {}).get("episodes") or [])
               or result.get("eval_episodes") or DEFAULT_EVAL_EPISODES)


# --- a candidate's training ---------------------------------------------------------------------------------


@dataclass
class TrainingSummary:
    """A trained candidate's figures, copied from policies.train's result.json."""

    success_rate: float
    """Of the final evaluation (`episodes` episodes)."""
    best_success_rate: float
    mean_return: float
    mean_native_return: float
    steps: int
    wall_seconds: float
    steps_per_second: float
    curve: list[Json]
    """The evaluations during training: {steps, success_rate, mean_return, ...} each."""
    episodes: int = DEFAULT_EVAL_EPISODES
    """Of the final evaluation; older records did not say (then their evaluation's, or 5)."""
    eval_episodes: int = DEFAULT_EVAL_EPISODES
    """Of each evaluation during training (the curve's points)."""
    extra: Json = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "a training summary") -> TrainingSummary:
        f = _Fields(data, what)
        episodes = f.opt_whole("episodes") or f.opt_whole("eval_episodes") or DEFAULT_EVAL_EPISODES
        return cls(success_rate=f.number("success_rate"), best_success_rate=f.number("best_success_rate", f.number("success_rate")),
                   mean_return=f.number("mean_return", 0.0), mean_native_return=f.number("mean_native_return", float("-inf")),
                   steps=f.whole("steps", 0), wall_seconds=f.number("wall_seconds", 0.0), steps_per_second=f.number("steps_per_second", 0.0),
                   curve=[dict(p) for p in f.items("curve") if isinstance(p, dict)], episodes=episodes,
                   eval_episodes=f.opt_whole("eval_episodes") or DEFAULT_EVAL_EPISODES, extra=f.extra(cls))

    @classmethod
    def of_result(cls, result: Mapping[str, Any]) -> TrainingSummary:
        """A candidate's training figures, from its result.json (the loop's candidates and tuned ones alike)."""
        episodes = result_episodes(result)
        return cls(success_rate=float(result["success_rate"]), best_success_rate=float(result["best_success_rate"]),
                   mean_return=float(result["mean_return"]), mean_native_return=float(result["mean_native_return"]),
                   steps=int(result["steps"]), wall_seconds=float(result["wall_seconds"]),
                   steps_per_second=float(result["steps_per_second"]), curve=list(result["curve"]), episodes=int(episodes),
                   eval_episodes=int(result.get("eval_episodes") or DEFAULT_EVAL_EPISODES),
                   extra={**{k: result[k] for k in ("delivered", "final_policy") if result.get(k)},
                          **{k: result[k] for k in PROGRESS_KEYS if result.get(k) is not None}})

    @property
    def progress(self) -> tuple[float, float] | None:
        """(mean, standard error) of the final evaluation's progress toward the success rule (policies.score); None
        in records from before it was measured."""
        mean = self.extra.get("mean_progress")
        return (float(mean), float(self.extra.get("progress_se") or 0.0)) if isinstance(mean, (int, float)) else None

    @property
    def delivered_peak(self) -> Json | None:
        """{policy, steps, p_value, only_peak, only_final} when the peak checkpoint is the delivered policy (better beyond
        noise than the final one on the same episodes), else None: the final policy is the candidate's."""
        delivered = self.extra.get("delivered")
        return delivered if isinstance(delivered, dict) and delivered.get("policy") == "peak" else None

    def to_dict(self) -> Json:
        return {**self.extra, "success_rate": self.success_rate, "best_success_rate": self.best_success_rate,
                "mean_return": self.mean_return, "mean_native_return": self.mean_native_return, "steps": self.steps,
                "wall_seconds": self.wall_seconds, "steps_per_second": self.steps_per_second, "curve": self.curve,
                "episodes": self.episodes, "eval_episodes": self.eval_episodes}


PROGRESS_KEYS = ("mean_progress", "progress_se")
"""The final evaluation's progress toward the success rule, in result.json since it was measured (policies.score)."""

TRAINING_RESULT_KEYS = ("curve", "components", "success_rate", "eval_episodes", "final_eval_episodes", *PROGRESS_KEYS)
"""What a candidate keeps of its whole result.json: what the reflection and the early stopper read."""

COMPONENT_STATS = ("mean", "min", "max")
ENV_FIGURES = ("native", "step_success")
"""What a history entry holds from the environment itself (policies.callbacks), apart from the reward's components."""


def component_history(result: Any) -> list[Json]:
    """The well-formed entries of a training result's component history (`{"steps", "components": {name: {mean, min,
    max}}, "native", "step_success"}`), each rebuilt from its numbers.

    Why: a reward's component names are data, and records written before they had a namespace of their own may hold
    entries a hostile reward bent (a component `_components` made `components` a number, `_steps` made `steps`
    1e300, `_step_success` forged the environment's figure). Every reader (report, dashboard, feedback, resume) takes
    the history through here, so such a record still opens: an entry that is not well formed is left out."""
    history = result.get("components") if isinstance(result, Mapping) else None
    if not isinstance(history, list):
        return []
    kept: list[Json] = []
    for entry in history:
        if not isinstance(entry, Mapping):
            continue
        steps, components = entry.get("steps"), entry.get("components")
        if not (_is_number(steps) and isinstance(components, Mapping)) or not 0 <= float(steps) < 2**62:
            continue
        clean: Json = {"steps": int(float(steps)), "components": {}}
        for name, stats in components.items():
            if isinstance(name, str) and isinstance(stats, Mapping) and all(_is_bounded(stats.get(key)) for key in COMPONENT_STATS):
                clean["components"][name] = {key: _clamped(stats[key]) for key in COMPONENT_STATS}
        for ours in ENV_FIGURES:
            if _is_number(entry.get(ours)):
                clean[ours] = float(entry[ours])
        if "step_success" in clean and not 0.0 <= clean["step_success"] <= 1.0:  # a fraction of steps, or forged
            del clean["step_success"]
        kept.append(clean)
    return kept


def kept_training_result(result: Mapping[str, Any]) -> Json:
    """What a candidate keeps of its result.json (`TRAINING_RESULT_KEYS`), the component history well formed."""
    kept = {key: result[key] for key in TRAINING_RESULT_KEYS if key in result}
    if "components" in kept:
        kept["components"] = component_history(result)
    return kept


def _is_bounded(value: Any) -> TypeGuard[float]:
    """A number or an infinity (a statistic that overflowed, as records written before strict JSON stored it), not NaN."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _clamped(value: float) -> float:
    """An infinity as the largest finite float of its sign: what strict records store for an overflowed statistic."""
    return max(-sys.float_info.max, min(sys.float_info.max, float(value)))


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) != float("inf")


@dataclass
class EarlyStop:
    """A candidate stopped by the run's early stopping: at which rung and step, and why."""

    steps: int | None
    reason: str
    rung: Any = None
    leader: str | None = None
    """The candidate it trailed at the rung (None in records older than this field, and for a pruned trial)."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "a stop") -> EarlyStop:
        f = _Fields(data, what)
        leader = data.get("leader")
        return cls(steps=f.opt_whole("steps"), reason=str(data.get("reason") or ""), rung=data.get("rung"),
                   leader=leader if isinstance(leader, str) else None)

    def to_dict(self) -> Json:
        return _compact({"rung": self.rung, "steps": self.steps, "reason": self.reason, "leader": self.leader})


@dataclass
class SeedRun:
    """One training seed of a candidate trained on several (`--candidate-seeds S`): which seed, its job folder, and its
    own figures (success with its episodes, curve, native return), or why it did not train."""

    seed: int
    job: str
    """The seed's job folder, relative to the run folder."""
    training: TrainingSummary | None = None
    """None when this seed did not train (`reason` says why)."""
    stopped_early: bool = False
    reason: str | None = None

    @property
    def success(self) -> float | None:
        return self.training.success_rate if self.training is not None else None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "a seed") -> SeedRun:
        f = _Fields(data, what)
        return cls(seed=f.whole("seed"), job=f.text("job", ""), training=f.record("training", TrainingSummary.from_dict),
                   stopped_early=f.flag("stopped_early"), reason=f.opt_text("reason"))

    def to_dict(self) -> Json:
        return _compact({"seed": self.seed, "job": self.job, "training": self.training.to_dict() if self.training else None,
                         "stopped_early": self.stopped_early or None, "reason": self.reason})


@dataclass
class ConstantChange:
    """One constant of a tuned candidate: its parent's value, the tuned one, and tuned/parent."""

    name: str
    parent: float | None
    tuned: float
    ratio: float | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "a constant") -> ConstantChange:
        f = _Fields(data, what)
        return cls(name=f.text("name"), parent=f.opt_number("parent"), tuned=f.number("tuned"), ratio=f.opt_number("ratio"))

    def to_dict(self) -> Json:
        return {"name": self.name, "parent": self.parent, "tuned": self.tuned, "ratio": self.ratio}


@dataclass
class TuningSummary:
    """How a tuned candidate was found (`t2r tune`): the study, its trials, and the winner's constants."""

    study: str
    """The Optuna study's SQLite file, relative to the run folder."""
    study_name: str
    trials: int
    """Finished trials that counted (complete, pruned, failed by their own training)."""
    complete: int
    pruned: int
    failed: int
    trial: int
    """The winning trial's number."""
    objective: float
    """Its score: the area under its success curve, plus a tie-breaker (tuning/objective.py)."""
    margin: float = 0.0
    """How far a trial had to score above the parent's constants to replace them."""
    kept_parent: bool = False
    """No trial beat the parent's constants by the margin: the winner is the parent's own trial."""
    steps: int | None = None
    """Each trial's training budget (None: the task's default)."""
    constants_diff: list[ConstantChange] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """Range comments that could not be used."""
    extra: Json = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "a tuning summary") -> TuningSummary:
        f = _Fields(data, what)
        return cls(study=f.text("study", ""), study_name=f.text("study_name", ""), trials=f.whole("trials", 0),
                   complete=f.whole("complete", 0), pruned=f.whole("pruned", 0), failed=f.whole("failed", 0), trial=f.whole("trial", 0),
                   objective=f.number("objective", 0.0), margin=f.number("margin", 0.0), kept_parent=f.flag("kept_parent"),
                   steps=f.opt_whole("steps"), constants_diff=[ConstantChange.from_dict(c, what) for c in f.items("constants_diff")],
                   warnings=f.texts("warnings"), extra=f.extra(cls))

    def to_dict(self) -> Json:
        return {**self.extra, "study": self.study, "study_name": self.study_name, "trials": self.trials, "complete": self.complete,
                "pruned": self.pruned, "failed": self.failed, "trial": self.trial, "objective": self.objective, "margin": self.margin,
                "kept_parent": self.kept_parent, "steps": self.steps, "constants_diff": [c.to_dict() for c in self.constants_diff],
                "warnings": self.warnings}


@dataclass
class VisionAnalysis:
    """A vision model's answer to "what went wrong?" about a candidate's keyframes (`--vision-analysis`)."""

    file: str
    """The answer (vision_analysis.md), relative to the run folder."""
    images: list[str]
    """The keyframes it was shown."""
    model: str
    """"<backend>:<model>"."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "a vision analysis") -> VisionAnalysis:
        f = _Fields(data, what)
        return cls(file=f.text("file"), images=f.texts("images"), model=f.text("model", ""))

    def to_dict(self) -> Json:
        return {"file": self.file, "images": self.images, "model": self.model}


@dataclass
class Tokens:
    prompt: int = 0
    completion: int = 0

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "tokens") -> Tokens:
        f = _Fields(data, what)
        return cls(prompt=f.whole("prompt", 0), completion=f.whole("completion", 0))

    def to_dict(self) -> Json:
        return {"prompt": self.prompt, "completion": self.completion}


# --- a candidate ---------------------------------------------------------------------------------------------


@dataclass
class Candidate:
    """rounds/r<R>/s<S>/candidate.json: one reward program and everything that happened to it; a tuned candidate
    (`t2r tune`) is tune/<parent>/candidate.json, with its parent's round and sample, id `<parent>-tuned`."""

    id: str
    """"r0-s1" (a tuned one: "r0-s1-tuned")."""
    round: int
    sample: int
    backend: str
    model: str
    status: CandidateStatus = CandidateStatus.PENDING_TRAINING
    rule_based: bool = False
    """Written by a rule-based composer, not a language model (the reply said so)."""
    tokens: Tokens = field(default_factory=Tokens)
    attempts: list[Json] = field(default_factory=list)
    """Each reply tried: {attempt, code_file, validation, screening | screening_error | errors}."""
    code_file: str | None = None
    """Relative to the run folder."""
    validation: Json | None = None
    """sandbox.ValidationReport.to_dict() of the code that may train."""
    screening: Json | None = None
    reason: str | None = None
    """Why a candidate is not trained."""
    failure_cause: FailureCause | None = None
    """Status failed: whose doing it was."""
    failure_numbers: str | None = None
    """A stopped reward call's CPU, blocked, wall and waiting times (for people, never the model)."""
    training: TrainingSummary | None = None
    training_result: Json | None = None
    """What it keeps of result.json (`TRAINING_RESULT_KEYS`): the curve and the components over training."""
    feedback_file: str | None = None
    behaviour_text: str = ""
    facts: dict[str, float] = field(default_factory=dict)
    """The analysed episodes' facts, averaged (feedback.compose.mean_facts); the contrast reads them."""
    video_file: str | None = None
    keyframes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """After training: a failed analysis or video (the candidate still trained)."""
    stopped_early: EarlyStop | None = None
    parent: str | None = None
    """A tuned candidate: the id of the candidate whose constants were tuned."""
    tuned: TuningSummary | None = None
    vision_analysis: VisionAnalysis | None = None
    seeds: list[SeedRun] = field(default_factory=list)
    """Trained on several seeds (`--candidate-seeds S`, S > 1): each seed's own figures; `training` then holds the
    pooled ones (runs/seed_scores.py). Empty for one seed, and in records older than this field."""
    extra: Json = field(default_factory=dict)

    @property
    def has_training(self) -> bool:
        return self.training is not None and self.status.has_training

    @property
    def author(self) -> str:
        return author_label(self.backend, self.model, self.rule_based)

    @property
    def success(self) -> float:
        """The final success rate of a trained candidate (0 for one without training)."""
        return self.training.success_rate if self.training is not None else 0.0

    @property
    def order(self) -> tuple[int, int, str]:
        return (self.round, self.sample, self.id)

    @property
    def validated_names(self) -> list[str] | None:
        """The component names its validation saw (its training may use no other); None where the record does not say
        (a validation from before it kept them, a tuned candidate)."""
        names = (self.validation or {}).get("component_names")
        return [name for name in names if isinstance(name, str)] if isinstance(names, list) else None

    def finish(self, status: CandidateStatus, reason: str) -> Candidate:
        """Ended before training: `status` with its reason."""
        self.status, self.reason = status, reason
        return self

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "a candidate") -> Candidate:
        f = _Fields(data, what)
        try:
            status = CandidateStatus(f.text("status", CandidateStatus.PENDING_TRAINING.value))
        except ValueError:
            raise RecordError(f"{what}: field 'status' {data.get('status')!r} is none of "
                              f"{', '.join(s.value for s in CandidateStatus)}") from None
        return cls(
            id=f.text("id"), round=f.whole("round"), sample=f.whole("sample"), backend=f.text("backend", ""), model=f.text("model", ""),
            status=status, rule_based=f.flag("rule_based"), tokens=f.record("tokens", Tokens.from_dict) or Tokens(),
            attempts=[dict(a) for a in f.items("attempts") if isinstance(a, dict)], code_file=f.opt_text("code_file"),
            validation=f.opt_obj("validation"), screening=f.opt_obj("screening"), reason=f.opt_text("reason"),
            failure_cause=FailureCause.read(data["failure_cause"]) if f.has("failure_cause") else None,
            failure_numbers=f.opt_text("failure_numbers"), training=f.record("training", TrainingSummary.from_dict),
            training_result=_kept_or_none(f.opt_obj("training_result")), feedback_file=f.opt_text("feedback_file"),
            behaviour_text=f.text("behaviour_text", ""), facts=f.numbers("facts"), video_file=f.opt_text("video_file"),
            keyframes=f.texts("keyframes"), warnings=f.texts("warnings"), stopped_early=f.record("stopped_early", EarlyStop.from_dict),
            parent=f.opt_text("parent"), tuned=f.record("tuned", TuningSummary.from_dict),
            vision_analysis=f.record("vision_analysis", VisionAnalysis.from_dict),
            seeds=[SeedRun.from_dict(x, f"{what}, a seed") for x in f.items("seeds") if isinstance(x, dict)], extra=f.extra(cls),
        )

    def to_dict(self) -> Json:
        return {**self.extra, **_compact({
            "id": self.id, "round": self.round, "sample": self.sample, "backend": self.backend, "model": self.model,
            "rule_based": self.rule_based, "tokens": self.tokens.to_dict(), "attempts": self.attempts, "code_file": self.code_file,
            "validation": self.validation, "screening": self.screening, "status": self.status.value, "reason": self.reason,
            "failure_cause": self.failure_cause.value if self.failure_cause else None, "failure_numbers": self.failure_numbers,
            "training": self.training.to_dict() if self.training else None, "training_result": self.training_result,
            "feedback_file": self.feedback_file, "behaviour_text": self.behaviour_text if self.training else None,
            "facts": self.facts or None, "video_file": self.video_file, "keyframes": self.keyframes or None,
            "warnings": self.warnings or None, "stopped_early": self.stopped_early.to_dict() if self.stopped_early else None,
            "parent": self.parent, "tuned": self.tuned.to_dict() if self.tuned else None,
            "vision_analysis": self.vision_analysis.to_dict() if self.vision_analysis else None,
            "seeds": [seed.to_dict() for seed in self.seeds] or None,
        }), "schema": SCHEMA_VERSION}


# --- a round, the final comparison, the run ---------------------------------------------------------------


def _kept_or_none(result: Json | None) -> Json | None:
    """A stored training result with its component history well formed (`component_history`); extra keys kept."""
    if result is None or "components" not in result:
        return result
    return {**result, "components": component_history(result)}


@dataclass
class RoundSummary:
    """rounds/r<R>/summary.json."""

    round: int
    best: str | None
    best_success: float | None
    statuses: dict[str, CandidateStatus]
    tied: list[str] = field(default_factory=list)
    """Candidates whose success is within the best's noise (runs/ranking.py); absent in older records."""
    tie_break: str | None = None
    """How the best was chosen among them (ranking.TIE_BREAK), when `tied` is not empty."""
    extra: Json = field(default_factory=dict)

    @property
    def interrupted(self) -> bool:
        """A candidate of the round was cut short: the round is run again on resume (finished work is kept)."""
        return CandidateStatus.INTERRUPTED in self.statuses.values()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "a round summary") -> RoundSummary:
        f = _Fields(data, what)
        statuses: dict[str, CandidateStatus] = {}
        for key, value in f.obj("statuses").items():
            try:
                statuses[str(key)] = CandidateStatus(value)
            except ValueError:
                raise RecordError(f"{what}: candidate {key}'s status {value!r} is unknown") from None
        return cls(round=f.whole("round"), best=f.opt_text("best"), best_success=f.opt_number("best_success"), statuses=statuses,
                   tied=f.texts("tied"), tie_break=f.opt_text("tie_break"), extra=f.extra(cls))

    def to_dict(self) -> Json:
        return {**self.extra, "round": self.round, "best": self.best, "best_success": self.best_success,
                "statuses": {k: v.value for k, v in self.statuses.items()},
                **({"tied": self.tied, "tie_break": self.tie_break} if self.tied else {}), "schema": SCHEMA_VERSION}


@dataclass
class FailedSeed:
    """A final-comparison seed that could not be trained, after its attempts."""

    seed: int | str
    """"?" in summaries written before seeds were recorded."""
    reason: str
    cause: FailureCause = FailureCause.ERROR
    attempts: int = 1

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "a failed seed") -> FailedSeed:
        f = _Fields(data, what)
        seed = data.get("seed", "?")
        return cls(seed=seed if isinstance(seed, (int, str)) and not isinstance(seed, bool) else "?", reason=f.text("reason", ""),
                   cause=FailureCause.read(data.get("cause", "error")), attempts=f.whole("attempts", 1))

    def to_dict(self) -> Json:
        return {"seed": self.seed, "reason": self.reason, "cause": self.cause.value, "attempts": self.attempts}


@dataclass
class FinalArm:
    """One side of the final comparison (the best reward, or the expert's) over its seeds."""

    success_rates: list[float]
    seeds: list[int]
    """The seeds that trained (in the order of `success_rates`)."""
    mean: float | None
    std: float | None
    failed_seeds: list[FailedSeed] = field(default_factory=list)
    curves: list[list[Json]] = field(default_factory=list)
    episodes: list[int] = field(default_factory=list)
    """Each seed's final-evaluation episodes (in the order of `success_rates`); empty in older summaries."""
    extra: Json = field(default_factory=dict)

    @property
    def pooled(self) -> Rate | None:
        """Success pooled over every seed's final-evaluation episodes, the statistic candidates are ranked on
        (runs/seed_scores.py); None for an older summary that did not keep the episodes, or an arm with no seed."""
        if not self.success_rates or len(self.episodes) != len(self.success_rates):
            return None
        return Rate.pooled(Rate.of(rate, n) for rate, n in zip(self.success_rates, self.episodes))

    @classmethod
    def of(cls, results: list[Mapping[str, Any]], failed: list[FailedSeed]) -> FinalArm:
        """The arm's statistics from its seeds' result.json: success pooled over the seeds' episodes (`mean`, the same
        statistic as a candidate's over its seeds) and the population spread of the per-seed rates (`std`)."""
        rates = [float(r["success_rate"]) for r in results]
        episodes = [result_episodes(r) for r in results]
        arm = cls(success_rates=rates, seeds=[int(r["seed"]) for r in results], mean=None, std=None, failed_seeds=failed,
                  curves=[list(r["curve"]) for r in results], episodes=episodes)
        pooled = arm.pooled
        if pooled is not None:
            arm.mean = pooled.rate
            arm.std = (sum((r - sum(rates) / len(rates)) ** 2 for r in rates) / len(rates)) ** 0.5
        return arm

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "a final arm") -> FinalArm:
        f = _Fields(data, what)
        failed = [FailedSeed.from_dict(x, what) for x in f.items("failed_seeds") if isinstance(x, dict)]
        if not failed and not f.has("failed_seeds"):  # older summaries kept the reasons only
            failed = [FailedSeed(seed="?", reason=str(reason)) for reason in f.items("failures")]
        return cls(success_rates=[float(x) for x in f.items("success_rates")], seeds=[int(x) for x in f.items("seeds")],
                   mean=f.opt_number("mean"), std=f.opt_number("std"), failed_seeds=failed,
                   curves=[list(c) for c in f.items("curves") if isinstance(c, list)],
                   episodes=[int(x) for x in f.items("episodes")], extra=f.extra(cls))

    def to_dict(self) -> Json:
        extra = {k: v for k, v in self.extra.items() if k != "failures"}
        return {**extra, "success_rates": self.success_rates, "seeds": self.seeds, "mean": self.mean, "std": self.std,
                "failures": [f.reason for f in self.failed_seeds], "failed_seeds": [f.to_dict() for f in self.failed_seeds],
                "curves": self.curves, **({"episodes": self.episodes} if self.episodes else {})}


@dataclass
class FinalSummary:
    """final/summary.json: the best reward re-trained on fresh seeds beside the expert."""

    best_candidate: str | None
    reason: str | None = None
    """Why there is no best candidate."""
    seeds: list[int] = field(default_factory=list)
    interrupted: bool = False
    best: FinalArm | None = None
    expert: FinalArm | None = None
    extra: Json = field(default_factory=dict)

    def arms(self) -> list[tuple[str, FinalArm]]:
        """("best", arm) and ("expert", arm), for those that trained or failed."""
        return [(name, arm) for name, arm in (("best", self.best), ("expert", self.expert)) if arm is not None]

    @property
    def needs_training(self) -> bool:
        """Seeds still to train: interrupted, or failed (`t2r resume` re-trains those)."""
        return self.interrupted or any(arm.failed_seeds for _, arm in self.arms())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "the final summary") -> FinalSummary:
        f = _Fields(data, what)
        return cls(best_candidate=f.opt_text("best_candidate"), reason=f.opt_text("reason"), seeds=[int(s) for s in f.items("seeds")],
                   interrupted=f.flag("interrupted"), best=f.record("best", FinalArm.from_dict),
                   expert=f.record("expert", FinalArm.from_dict), extra=f.extra(cls))

    def to_dict(self) -> Json:
        return {**self.extra, "best_candidate": self.best_candidate, **_compact({
            "reason": self.reason, "seeds": self.seeds if self.best_candidate else None,
            "interrupted": self.interrupted if self.best_candidate else None,
            "best": self.best.to_dict() if self.best else None, "expert": self.expert.to_dict() if self.expert else None,
        }), "schema": SCHEMA_VERSION}


@dataclass
class Untrained:
    """One candidate's part in why a run trained nothing."""

    candidate: str
    status: CandidateStatus
    reason: str

    def text(self, width: int = 120) -> str:
        return f"{self.candidate} {self.status.value}" + (f" ({short_reason(self.reason, width)})" if self.reason else "")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "an untrained candidate") -> Untrained:
        f = _Fields(data, what)
        try:
            status = CandidateStatus(f.text("status"))
        except ValueError:
            raise RecordError(f"{what}: status {data.get('status')!r} is unknown") from None
        return cls(candidate=f.text("candidate"), status=status, reason=f.text("reason", ""))

    def to_dict(self) -> Json:
        return {"candidate": self.candidate, "status": self.status.value, "reason": self.reason}


def untrained_reason(untrained: list[Untrained]) -> str:
    """One line: why nothing trained, by what happened to each candidate."""
    if not untrained:
        return "no candidate was produced"
    return "no candidate trained: " + "; ".join(u.text() for u in untrained)


@dataclass
class RunState:
    """state.json: where the run is."""

    status: RunStatus = RunStatus.UNKNOWN
    round: int | None = None
    created: float | None = None
    updated: float | None = None
    rounds_done: int = 0
    best: str | None = None
    best_success: float | None = None
    wall_seconds: float = 0.0
    report: str | None = None
    error: str | None = None
    """Why a run failed (an exception)."""
    reason: str | None = None
    """Why a run ended with no result, in one line (`untrained` holds the same, structured)."""
    untrained: list[Untrained] = field(default_factory=list)
    pending_prompt: str | None = None
    """waiting_for_replies: the prompt file to answer."""
    replies_needed: int | None = None
    extra: Json = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "the run's state") -> RunState:
        f = _Fields(data, what)
        return cls(status=RunStatus.read(data.get("status", "unknown")), round=f.opt_whole("round"), created=f.opt_number("created"),
                   updated=f.opt_number("updated"), rounds_done=f.whole("rounds_done", 0), best=f.opt_text("best"),
                   best_success=f.opt_number("best_success"), wall_seconds=f.number("wall_seconds", 0.0), report=f.opt_text("report"),
                   error=f.opt_text("error"), reason=f.opt_text("reason"),
                   untrained=[Untrained.from_dict(u, what) for u in f.items("untrained") if isinstance(u, dict)],
                   pending_prompt=f.opt_text("pending_prompt"), replies_needed=f.opt_whole("replies_needed"), extra=f.extra(cls))

    def to_dict(self) -> Json:
        return {**self.extra, **_compact({
            "status": self.status.value, "round": self.round, "created": self.created, "updated": self.updated,
            "rounds_done": self.rounds_done, "best": self.best, "best_success": self.best_success, "wall_seconds": self.wall_seconds,
            "report": self.report, "error": self.error, "reason": self.reason,
            "untrained": [u.to_dict() for u in self.untrained] or None, "pending_prompt": self.pending_prompt,
            "replies_needed": self.replies_needed}), "schema": SCHEMA_VERSION}


# --- what a run is, for the readers below the loop ------------------------------------------------------------


def author_label(backend: str, model: str | None, rule_based: bool) -> str:
    """Who wrote a run's (or a candidate's) rewards, as every reader shows it: a rule-based composer always says it is
    one, never passing for a model. Backend specs label themselves through this (generation.llm.spec)."""
    if rule_based:
        return f"{backend} (rule-based, no language model)"
    return f"{backend} {model}" if model else backend


@dataclass(frozen=True)
class RunHeader:
    """What a run is, as the report, the dashboard and the index show it: config.json's descriptive fields.

    The run's full settings (`text2reward.settings.RunConfig`) know the backends, executors and modes; these readers
    need only their names and labels, which the run recorded when it was created (`author`, `rule_based`)."""

    task_id: str
    backend: str
    model: str | None
    author: str
    """The backend's label for the run's model (`author_label`); "" in runs written before it was recorded."""
    rule_based: bool
    reward_mode: str
    reward_source: str
    source_text: str
    """Where the rewards come from, in the source's own words (recorded at creation; the name alone in older runs)."""
    keypoints: str
    rounds: int
    samples: int
    steps: int | None
    workers: int
    seed: int
    task_file: str | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "config.json") -> RunHeader:
        f = _Fields(data, what)
        return cls(task_id=f.text("task_id"), backend=f.text("backend", ""), model=f.opt_text("model"), author=f.text("author", ""),
                   rule_based=f.flag("rule_based"), reward_mode=f.text("reward_mode", "dense"), reward_source=f.text("reward_source", "code"),
                   source_text=f.text("source_text", "") or f.text("reward_source", "code"),
                   keypoints=f.text("keypoints", "oracle"), rounds=f.whole("rounds", 1), samples=f.whole("samples", 1),
                   steps=f.opt_whole("steps"), workers=f.whole("workers", 1), seed=f.whole("seed", 0), task_file=f.opt_text("task_file"))

    def with_author(self, rule_based: bool) -> RunHeader:
        """The label of a run written before runs recorded it, from whether its replies said they were rule-based."""
        rule_based = rule_based or self.rule_based
        return replace(self, rule_based=rule_based, author=author_label(self.backend, self.model, rule_based))


# --- a round's prompt ---------------------------------------------------------------------------------------------


@dataclass
class ShownAnalysis:
    """Which candidate's vision analysis a prompt's feedback included, on which keyframes, by which model."""

    candidate: str
    images: list[str]
    model: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "a shown analysis") -> ShownAnalysis:
        f = _Fields(data, what)
        return cls(candidate=f.text("candidate", ""), images=f.texts("images"), model=f.text("model", ""))

    def to_dict(self) -> Json:
        return {"candidate": self.candidate, "images": self.images, "model": self.model}


@dataclass
class PromptContext:
    """What a request tells a backend beside the messages, and what the run records of how a prompt was made.

    Model backends read only `images` (a vision model is shown them); the rule-based backend composes from the rest
    (it must never pretend to read prose). Saved in rounds/r<R>/prompt.json; the reply cache keys on `to_dict()`."""

    round: int | None = None
    reward_mode: str | None = None
    previous_best_code: str | None = None
    component_stats: Json | None = None
    success_rate: float | None = None
    critique: str | None = None
    feedback_event: int | None = None
    """The human feedback event the prompt answers."""
    keypoints: str | None = None
    """The keypoints file the prompt shows (code+keypoints), relative to the run folder."""
    images: list[str] = field(default_factory=list)
    """Image files shown to a vision model (rollout keyframes)."""
    vision_analysis: ShownAnalysis | None = None
    """A vision model's reading of the shown candidate's keyframes, which the feedback includes."""
    vision_candidate: str | None = None
    """A vision analysis request: the candidate whose keyframes are asked about."""
    asks_for_keypoints: bool = False
    """A keypoint request: the model is shown the task's first state and asked where to grasp and where to go."""
    written_from_keypoints: bool = False
    """Round 0 of a keypoint source: its candidate is the program written from the keypoints; no model answered."""
    fix_error: str | None = None
    """A fix request: the error the previous reply got."""
    sample: int | None = None
    attempt: int | None = None
    extra: Json = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "a prompt's context") -> PromptContext:
        f = _Fields(data, what)
        return cls(round=f.opt_whole("round"), reward_mode=f.opt_text("reward_mode"), previous_best_code=f.opt_text("previous_best_code"),
                   component_stats=f.opt_obj("component_stats"), success_rate=f.opt_number("success_rate"), critique=f.opt_text("critique"),
                   feedback_event=f.opt_whole("feedback_event"), keypoints=f.opt_text("keypoints"), images=f.texts("images"),
                   vision_analysis=f.record("vision_analysis", ShownAnalysis.from_dict),
                   vision_candidate=f.opt_text("vision_candidate"), written_from_keypoints=f.flag("written_from_keypoints"),
                   asks_for_keypoints=f.flag("asks_for_keypoints"),
                   fix_error=f.opt_text("fix_error"), sample=f.opt_whole("sample"),
                   attempt=f.opt_whole("attempt"), extra=f.extra(cls))

    def to_dict(self) -> Json:
        analysis = self.vision_analysis.to_dict() if self.vision_analysis is not None else None
        return {**self.extra, **_compact({
            "round": self.round, "reward_mode": self.reward_mode, "previous_best_code": self.previous_best_code,
            "component_stats": self.component_stats, "success_rate": self.success_rate, "critique": self.critique,
            "feedback_event": self.feedback_event, "keypoints": self.keypoints, "images": self.images or None,
            "vision_analysis": analysis, "vision_candidate": self.vision_candidate,
            "written_from_keypoints": self.written_from_keypoints or None, "asks_for_keypoints": self.asks_for_keypoints or None,
            "fix_error": self.fix_error,
            "sample": self.sample, "attempt": self.attempt})}


@dataclass
class RoundPrompt:
    """rounds/r<R>/prompt.json: the messages a round's request sent, and its context."""

    messages: list[Json]
    context: PromptContext

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "a round's prompt") -> RoundPrompt:
        f = _Fields(data, what)
        return cls(messages=[dict(m) for m in f.items("messages") if isinstance(m, dict)],
                   context=PromptContext.from_dict(f.obj("context"), what))

    def to_dict(self) -> Json:
        return {"messages": self.messages, "context": self.context.to_dict()}
