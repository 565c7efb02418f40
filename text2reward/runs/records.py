"""The run's records, one typed class each: a candidate, its training, a round, the final comparison, the run's state.

Why dataclasses read at the store boundary: the records are JSON files people open, diff and feed to other tools, so
on disk they stay the plain JSON they always were; in the code each is a class whose fields mypy checks. Their JSON
is derived from their fields by one codec (sim_envs/codec.py: `write`, and `read` naming the file and the field when
something is wrong); what an older layout wrote differently is declared on the field it concerns (`legacy`,
`fallback`, `reader`). A field a record may lack is `None` (or empty) in the class and absent from the file. Fields
this text2reward does not know (written by a newer one) are kept in `extra` and written back untouched.

Every record file carries `schema`; `read_versioned` reads a record written by an older layout (the version-1 runs in
tests/fixtures still open), and refuses one written by a newer text2reward.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeGuard, TypeVar

from policies.curve import CurvePoint
from policies.stats import Rate
from sim_envs.codec import Json, RecordError, fallback, legacy, read, reader, write
from text2reward.runs.statuses import CandidateStatus, FailureCause, RunStatus, StopKind

__all__ = ["CurvePoint", "Json", "RecordError", "read", "write"]  # re-exported: the records' readers import them from here

SCHEMA_VERSION = 2
"""1: runs written before records were versioned (no `schema` field); 2: versioned. The fields are the same; a
change to a record's fields raises the version and adds a step to `read_versioned`. Optional fields a reader may
ignore (a tuned candidate's `parent`, a run's `author`) are no such change: a record without them reads as before."""
DEFAULT_EVAL_EPISODES = 5
"""What an older record that does not say how many episodes an evaluation had is read as (the default of every
family but Fetch, and the fewest: the widest interval)."""

R = TypeVar("R")


def read_versioned(kind: type[R], record: Any, what: str) -> R:
    """A record file's contents as `kind`, whichever layout wrote it; a RecordError for one from a newer text2reward
    or one that is no record."""
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
    return read(kind, record, what)


def write_versioned(record: Any) -> Json:
    """A record as its file holds it: its JSON, stamped with the layout version."""
    return {**write(record), "schema": SCHEMA_VERSION}


def short_reason(text: str, width: int) -> str:
    """A reason cut to whole words within `width` characters (never mid-word or mid-number), marked when cut;
    the full text stays in the run folder."""
    return textwrap.shorten(" ".join(str(text).split()), width, placeholder=" ...") if text else ""


# --- what a training's result.json holds, as the run reads it -------------------------------------------------


@dataclass(frozen=True)
class ComponentStats:
    """One reward component's per-step statistics over a window of training."""

    mean: float
    min: float
    max: float


@dataclass(frozen=True)
class ComponentWindow:
    """One window of training in the component history (policies.callbacks): each component's statistics, and the
    environment's own figures beside them."""

    steps: int
    components: dict[str, ComponentStats]
    native: float | None = None
    """The environment's own reward, averaged over the window."""
    step_success: float | None = None
    """The fraction of the window's steps that met the task's success test."""


COMPONENT_STATS = ("mean", "min", "max")
ENV_FIGURES = ("native", "step_success")
"""What a history entry holds from the environment itself (policies.callbacks), apart from the reward's components."""


def component_history(history: Any) -> list[ComponentWindow]:
    """The well-formed entries of a training result's component history (`{"steps", "components": {name: {mean, min,
    max}}, "native", "step_success"}`), each rebuilt from its numbers: the `components` field's reader.

    Why: a reward's component names are data, and records written before they had a namespace of their own may hold
    entries a hostile reward bent (a component `_components` made `components` a number, `_steps` made `steps`
    1e300, `_step_success` forged the environment's figure). Every record reads the history through here, so such a
    record still opens: an entry that is not well formed is left out."""
    if not isinstance(history, list):
        return []
    kept: list[ComponentWindow] = []
    for entry in history:
        if not isinstance(entry, Mapping):
            continue
        steps, components = entry.get("steps"), entry.get("components")
        if not (_is_number(steps) and isinstance(components, Mapping)) or not 0 <= float(steps) < 2**62:
            continue
        stats = {name: ComponentStats(*(_clamped(values[key]) for key in COMPONENT_STATS)) for name, values in components.items()
                 if isinstance(name, str) and isinstance(values, Mapping) and all(_is_bounded(values.get(key)) for key in COMPONENT_STATS)}
        native, success = (float(entry[ours]) if _is_number(entry.get(ours)) else None for ours in ENV_FIGURES)
        if success is not None and not 0.0 <= success <= 1.0:  # a fraction of steps, or forged
            success = None
        kept.append(ComponentWindow(steps=int(float(steps)), components=stats, native=native, step_success=success))
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
class TrainingResult:
    """What a candidate keeps of its training's result.json: what the reflection and the early stopper read (the
    curve and the component history over training, the final success and its episodes)."""

    curve: list[CurvePoint] = field(default_factory=list)
    components: list[ComponentWindow] = field(default_factory=list, metadata=reader(component_history))
    success_rate: float | None = None
    eval_episodes: int | None = None
    """Episodes of each evaluation during training; None in older results."""
    final_eval_episodes: int | None = None
    """Episodes of the final evaluation; None in older results (then `eval_episodes`)."""
    mean_progress: float | None = None
    """The final evaluation's progress toward the success rule (policies.score); None before it was measured."""
    progress_se: float | None = None
    steps: int = 0
    """Steps trained; 0 in candidates' records older than this field."""

    @property
    def progress(self) -> tuple[float, float] | None:
        """(mean, standard error) of the final progress; None where it was not measured."""
        return (self.mean_progress, self.progress_se or 0.0) if self.mean_progress is not None else None

    @property
    def episodes(self) -> tuple[int, int]:
        """(episodes per evaluation during training, episodes of the final evaluation); `DEFAULT_EVAL_EPISODES`, the
        fewest any family uses (so the widest intervals), where an older result does not say."""
        during = self.eval_episodes or DEFAULT_EVAL_EPISODES
        return during, self.final_eval_episodes or during


@dataclass(frozen=True)
class FinalEpisode:
    """One episode of the final evaluation (policies.evaluate's `Episode`), as far as the run reads it: whether it
    succeeded; the rest (returns, lengths, the success rule's figures) is kept as written."""

    success: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FinalEvaluation:
    """result.json's final evaluation, as far as the run reads it: its episodes (how many, which succeeded)."""

    episodes: list[FinalEpisode] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def successes(self) -> list[bool]:
        return [episode.success for episode in self.episodes]


@dataclass(frozen=True)
class UsedHyperparams:
    """result.json's hyper-parameters (policies.hyperparams.Hyperparams, as the training used them), as far as the run
    reads them: the algorithm's keyword arguments; the rest kept as written."""

    algo_kwargs: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TrainingPeak:
    """The best evaluation during training (policies.train): its step, success and episodes, and the checkpoint saved
    there (`PEAK_MODEL_FILE`)."""

    steps: int
    success_rate: float
    episodes: int = 0
    model_path: str = ""


@dataclass(frozen=True)
class FinalPolicy:
    """The final policy's figures, kept when the peak checkpoint was delivered in its place (training.job)."""

    success_rate: float
    episodes: int
    model_path: str = ""
    mean_progress: float | None = None
    progress_se: float | None = None


@dataclass(frozen=True)
class Delivered:
    """Which policy a candidate delivers when it is not its final one: the peak checkpoint, better beyond noise (a
    McNemar test on the final evaluation's episodes)."""

    policy: str
    steps: int
    p_value: float
    only_peak: int
    """Episodes only the peak policy succeeded in."""
    only_final: int


@dataclass
class EarlyStop:
    """A candidate stopped by the run's early stopping: at which rung and step, and why."""

    steps: int | None
    reason: str = ""
    rung: Any = None
    leader: str | None = None
    """The candidate it trailed at the rung (None in records older than this field, and for a pruned trial)."""
    kind: str | None = None
    """result.json's: "behind" (the run's early stopping) or "success" (the evaluation reached the threshold)."""


@dataclass
class ResultFile(TrainingResult):
    """A training's result.json (policies.train's `TrainResult`), as the run reads it: read once where a job's
    outcome is taken (training.results, tuning), so every reader after uses attributes."""

    seed: int = 0
    best_success_rate: float = field(default=0.0, metadata=fallback("success_rate"))
    mean_return: float = 0.0
    mean_native_return: float = float("-inf")
    wall_seconds: float = 0.0
    steps_per_second: float = 0.0
    final_eval: FinalEvaluation | None = None
    delivered: Delivered | None = None
    final_policy: FinalPolicy | None = None
    stopped_early: EarlyStop | None = None
    model_path: str = ""
    peak: TrainingPeak | None = None
    hyperparams: UsedHyperparams | None = None
    """The settings the training used (None in results older than this field)."""
    her: bool = False
    """Trained with hindsight experience replay: the policy reads the dict observation (policies.her.flat_observations)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """The rest of result.json (the task, the reward, the timings...), kept as written."""

    @property
    def peak_fell(self) -> bool:
        """Success peaked during training above where it ended, with the peak's checkpoint saved (worth a look)."""
        return (self.peak is not None and bool(self.peak.model_path)
                and self.peak.success_rate > (self.success_rate if self.success_rate is not None else 0.0))

    @property
    def final_episodes(self) -> int:
        """How many episodes the final evaluation had (older results: their evaluation's, or 5)."""
        return (self.final_eval_episodes or (len(self.final_eval.episodes) if self.final_eval is not None else 0)
                or self.eval_episodes or DEFAULT_EVAL_EPISODES)

    @property
    def stopped_behind(self) -> bool:
        """Stopped by the run's early stopping (not by reaching the success threshold)."""
        return self.stopped_early is not None and self.stopped_early.kind == StopKind.BEHIND

    def kept(self) -> TrainingResult:
        """What a candidate keeps of it."""
        return TrainingResult(**{spec.name: getattr(self, spec.name) for spec in fields(TrainingResult)})


def read_result(result: Mapping[str, Any], what: str = "result.json") -> ResultFile:
    """A training's result.json (a mapping: the worker's done.json holds it) as the run reads it."""
    return read(ResultFile, result, what)


@dataclass(frozen=True)
class Video:
    """A job's rollout video, as done.json records it (policies.video.record_video): its keyframes (image files,
    absolute); the rest (path, frames, fps...) kept as written."""

    keyframes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PeakCheck:
    """The peak checkpoint played on the final evaluation's episodes beside the final policy (training.job.analyse):
    its success there, the discordant episodes, McNemar's exact p, and whether it was delivered in the final's place."""

    steps: int
    success_on_final_episodes: float
    only_peak: int
    only_final: int
    p_value: float
    delivered: bool = False
    progress_on_final_episodes: tuple[float, float] | None = None
    """(mean, standard error) of the peak's progress on those episodes, where the task measures progress."""


@dataclass
class DoneRecord:
    """A training job's done.json (training.job.run_job): the result, and the worker's analysis of the policy."""

    result: ResultFile
    warnings: list[str] = field(default_factory=list)
    behaviour_text: str = ""
    facts: dict[str, float] = field(default_factory=dict)
    video: Video | None = None
    feedback_text: str = ""
    analysed_seeds: list[int] = field(default_factory=list)
    """The reset seeds of the analysed episodes: the final evaluation's first ones."""
    peak: PeakCheck | None = None


@dataclass(frozen=True)
class ProgressFile:
    """A running job's progress.json (training.job.JobProgress): its latest evaluation (a curve point's fields, the
    rest kept as written), its step budget, and what the worker does after training (`phase`)."""

    steps: int = 0
    success_rate: float | None = None
    mean_return: float | None = None
    total_steps: int | None = None
    phase: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class JobError:
    """A training job's error.json (training.job.run_in_folder): why it failed, whose doing it was, and the sandbox's
    account of a stopped call."""

    reason: str = "the training failed (its error.json gives no reason)"
    cause: FailureCause = field(default=FailureCause.ERROR, metadata=reader(lambda raw: FailureCause.read(raw or FailureCause.ERROR.value)))
    numbers: str = ""
    traceback: str = ""


# --- a candidate's training ---------------------------------------------------------------------------------


@dataclass
class TrainingSummary:
    """A trained candidate's figures, copied from policies.train's result.json."""

    success_rate: float
    """Of the final evaluation (`episodes` episodes)."""
    best_success_rate: float = field(default=0.0, metadata=fallback("success_rate"))
    mean_return: float = 0.0
    mean_native_return: float = float("-inf")
    steps: int = 0
    wall_seconds: float = 0.0
    steps_per_second: float = 0.0
    curve: list[CurvePoint] = field(default_factory=list)
    """The evaluations during training."""
    episodes: int = field(default=DEFAULT_EVAL_EPISODES, metadata=legacy("eval_episodes"))
    """Of the final evaluation; older records did not say (then their evaluation's, or 5)."""
    eval_episodes: int = DEFAULT_EVAL_EPISODES
    """Of each evaluation during training (the curve's points)."""
    mean_progress: float | None = None
    """The final evaluation's progress toward the success rule (policies.score); None before it was measured."""
    progress_se: float | None = None
    delivered: Delivered | None = None
    """Set when the peak checkpoint is the delivered policy."""
    final_policy: FinalPolicy | None = None
    pooled_seeds: int | None = None
    """Pooled over this many seeds (runs/seed_scores.py); None for one seed's."""
    extra: Json = field(default_factory=dict)

    @classmethod
    def of_result(cls, result: ResultFile) -> TrainingSummary:
        """A candidate's training figures, from its result.json (the loop's candidates and tuned ones alike)."""
        return cls(success_rate=result.success_rate or 0.0, best_success_rate=result.best_success_rate,
                   mean_return=result.mean_return, mean_native_return=result.mean_native_return, steps=result.steps,
                   wall_seconds=result.wall_seconds, steps_per_second=result.steps_per_second, curve=list(result.curve),
                   episodes=result.final_episodes, eval_episodes=result.eval_episodes or DEFAULT_EVAL_EPISODES,
                   mean_progress=result.mean_progress, progress_se=result.progress_se, delivered=result.delivered,
                   final_policy=result.final_policy)

    @property
    def progress(self) -> tuple[float, float] | None:
        """(mean, standard error) of the final evaluation's progress toward the success rule (policies.score); None
        in records from before it was measured."""
        return (self.mean_progress, self.progress_se or 0.0) if self.mean_progress is not None else None

    @property
    def delivered_peak(self) -> Delivered | None:
        """When the peak checkpoint is the delivered policy (better beyond noise than the final one on the same
        episodes), how; else None: the final policy is the candidate's."""
        return self.delivered if self.delivered is not None and self.delivered.policy == "peak" else None


@dataclass
class SeedRun:
    """One training seed of a candidate trained on several (`--candidate-seeds S`): which seed, its job folder, and its
    own figures (success with its episodes, curve, native return), or why it did not train."""

    seed: int
    job: str = ""
    """The seed's job folder, relative to the run folder."""
    training: TrainingSummary | None = None
    """None when this seed did not train (`reason` says why)."""
    stopped_early: bool = False
    reason: str | None = None

    @property
    def success(self) -> float | None:
        return self.training.success_rate if self.training is not None else None


@dataclass
class ConstantChange:
    """One constant of a tuned candidate: its parent's value, the tuned one, and tuned/parent."""

    name: str
    parent: float | None
    tuned: float
    ratio: float | None


@dataclass
class TuningSummary:
    """How a tuned candidate was found (`t2r tune`): the study, its trials, and the winner's constants."""

    study: str = ""
    """The Optuna study's SQLite file, relative to the run folder."""
    study_name: str = ""
    trials: int = 0
    """Finished trials that counted (complete, pruned, failed by their own training)."""
    complete: int = 0
    pruned: int = 0
    failed: int = 0
    trial: int = 0
    """The winning trial's number."""
    objective: float = 0.0
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


@dataclass
class VisionAnalysis:
    """A vision model's answer to "what went wrong?" about a candidate's keyframes (`--vision-analysis`)."""

    file: str
    """The answer (vision_analysis.md), relative to the run folder."""
    images: list[str] = field(default_factory=list)
    """The keyframes it was shown."""
    model: str = ""
    """"<backend>:<model>"."""


@dataclass
class Tokens:
    prompt: int = 0
    completion: int = 0

    @property
    def total(self) -> int:
        return self.prompt + self.completion


# --- a candidate ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckOutcome:
    """One check of a validation: passed, failed, or skipped (None, after a failed one), with what it found."""

    ok: bool | None = None
    detail: str = ""
    extra: Json = field(default_factory=dict)
    """The check's own figures (times, counts)."""


@dataclass
class Validation:
    """sandbox.ValidationReport as a candidate's record keeps it (read from the report's JSON through the codec)."""

    ok: bool = False
    errors: list[str] = field(default_factory=list)
    checks: dict[str, CheckOutcome] = field(default_factory=dict)
    seconds: float = 0.0
    n_states: int = 0
    isolation: str = ""
    component_names: list[str] | None = None
    """Every component name the reward returned on the validation's states; None in validations older than it."""
    extra: Json = field(default_factory=dict)


@dataclass
class Attempt:
    """One reply tried for a candidate: the code it held and how it was checked, or why it was refused."""

    attempt: int
    code_file: str | None = None
    """The attempt's code, relative to the run folder; None when the reply held none."""
    validation: Validation | None = None
    screening: Json | None = None
    """screening.ScreeningReport's JSON (the dashboard shows it as it is)."""
    screening_error: str | None = None
    errors: list[str] = field(default_factory=list)
    """Why the reply was refused before validation (no code, a setup error)."""
    extra: Json = field(default_factory=dict)


@dataclass
class Candidate:
    """rounds/r<R>/s<S>/candidate.json: one reward program and everything that happened to it; a tuned candidate
    (`t2r tune`) is tune/<parent>/candidate.json, with its parent's round and sample, id `<parent>-tuned`."""

    id: str
    """"r0-s1" (a tuned one: "r0-s1-tuned")."""
    round: int
    sample: int
    backend: str = ""
    model: str = ""
    status: CandidateStatus = CandidateStatus.PENDING_TRAINING
    rule_based: bool = False
    """Written by a rule-based composer, not a language model (the reply said so)."""
    tokens: Tokens = field(default_factory=Tokens)
    attempts: list[Attempt] = field(default_factory=list)
    """Each reply tried."""
    code_file: str | None = None
    """Relative to the run folder."""
    validation: Validation | None = None
    """The validation of the code that may train."""
    screening: Json | None = None
    reason: str | None = None
    """Why a candidate is not trained."""
    failure_cause: FailureCause | None = field(default=None, metadata=reader(lambda raw: None if raw is None else FailureCause.read(raw)))
    """Status failed: whose doing it was."""
    failure_numbers: str | None = None
    """A stopped reward call's CPU, blocked, wall and waiting times (for people, never the model)."""
    training: TrainingSummary | None = None
    training_result: TrainingResult | None = None
    """What it keeps of result.json: the curve and the components over training."""
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
        return list(self.validation.component_names) if self.validation is not None and self.validation.component_names is not None else None

    def finish(self, status: CandidateStatus, reason: str) -> Candidate:
        """Ended before training: `status` with its reason."""
        self.status, self.reason = status, reason
        return self


# --- a round, the final comparison, the run ---------------------------------------------------------------



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


@dataclass
class FailedSeed:
    """A final-comparison seed that could not be trained, after its attempts."""

    seed: int | str = field(default="?", metadata=reader(lambda raw: raw if isinstance(raw, (int, str)) and not isinstance(raw, bool) else "?"))
    """"?" in summaries written before seeds were recorded."""
    reason: str = ""
    cause: FailureCause = field(default=FailureCause.ERROR, metadata=reader(lambda raw: FailureCause.read(raw or FailureCause.ERROR.value)))
    attempts: int = 1


def _reasons_as_seeds(reasons: Any) -> Any:
    """Older summaries kept the failed seeds' reasons only (`failures`): each as a seed "?" with its reason."""
    return [{"seed": "?", "reason": str(reason)} for reason in reasons] if isinstance(reasons, list) else reasons


@dataclass
class FinalArm:
    """One side of the final comparison (the best reward, or the expert's) over its seeds."""

    mean: float | None
    std: float | None
    success_rates: list[float] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    """The seeds that trained (in the order of `success_rates`); empty in older summaries."""
    failed_seeds: list[FailedSeed] = field(default_factory=list, metadata=legacy("failures", upgrade=_reasons_as_seeds))
    curves: list[list[CurvePoint]] = field(default_factory=list)
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
    def of(cls, results: list[ResultFile], failed: list[FailedSeed]) -> FinalArm:
        """The arm's statistics from its seeds' result.json: success pooled over the seeds' episodes (`mean`, the same
        statistic as a candidate's over its seeds) and the population spread of the per-seed rates (`std`)."""
        rates = [r.success_rate or 0.0 for r in results]
        arm = cls(success_rates=rates, seeds=[r.seed for r in results], mean=None, std=None, failed_seeds=failed,
                  curves=[list(r.curve) for r in results], episodes=[r.final_episodes for r in results])
        pooled = arm.pooled
        if pooled is not None:
            arm.mean = pooled.rate
            arm.std = (sum((r - sum(rates) / len(rates)) ** 2 for r in rates) / len(rates)) ** 0.5
        return arm


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


@dataclass
class Untrained:
    """One candidate's part in why a run trained nothing."""

    candidate: str
    status: CandidateStatus
    reason: str

    def text(self, width: int = 120) -> str:
        return f"{self.candidate} {self.status.value}" + (f" ({short_reason(self.reason, width)})" if self.reason else "")


def untrained_reason(untrained: list[Untrained]) -> str:
    """One line: why nothing trained, by what happened to each candidate."""
    if not untrained:
        return "no candidate was produced"
    return "no candidate trained: " + "; ".join(u.text() for u in untrained)


@dataclass
class RunState:
    """state.json: where the run is."""

    status: RunStatus = field(default=RunStatus.UNKNOWN, metadata=reader(lambda raw: RunStatus.read(raw or RunStatus.UNKNOWN.value)))
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


@dataclass
class FeedbackEvent:
    """One entry of events.json: a person's feedback on a run (who, when, what), and the round it produces."""

    type: str
    """"critique" (of `candidate`) or "preference" (`best` over `worst`)."""
    for_round: int
    id: int = 0
    time: float | None = None
    candidate: str | None = None
    best: str | None = None
    worst: str | None = None
    text: str = ""
    author: str = ""
    source: str = ""
    extra: Json = field(default_factory=dict)

    @property
    def shown(self) -> str | None:
        """The candidate whose behaviour the feedback is about: the critiqued one, or the preferred one."""
        return self.candidate or self.best


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
    backend: str = ""
    model: str | None = None
    author: str = ""
    """The backend's label for the run's model (`author_label`); "" in runs written before it was recorded."""
    rule_based: bool = False
    reward_mode: str = "dense"
    reward_source: str = "code"
    source_text: str = field(default="code", metadata=fallback("reward_source"))
    """Where the rewards come from, in the source's own words (recorded at creation; the name alone in older runs)."""
    keypoints: str = "oracle"
    rounds: int = 1
    samples: int = 1
    steps: int | None = None
    workers: int = 1
    seed: int = 0
    task_file: str | None = None

    def with_author(self, rule_based: bool) -> RunHeader:
        """The label of a run written before runs recorded it, from whether its replies said they were rule-based."""
        rule_based = rule_based or self.rule_based
        return replace(self, rule_based=rule_based, author=author_label(self.backend, self.model, rule_based))


# --- a round's prompt ---------------------------------------------------------------------------------------------


@dataclass
class ShownAnalysis:
    """Which candidate's vision analysis a prompt's feedback included, on which keyframes, by which model."""

    candidate: str = ""
    images: list[str] = field(default_factory=list)
    model: str = ""


@dataclass
class PromptContext:
    """What a request tells a backend beside the messages, and what the run records of how a prompt was made.

    Model backends read only `images` (a vision model is shown them); the rule-based backend composes from the rest
    (it must never pretend to read prose). Saved in rounds/r<R>/prompt.json; the reply cache keys on its JSON (`write`)."""

    round: int | None = None
    reward_mode: str | None = None
    previous_best_code: str | None = None
    component_stats: dict[str, dict[str, float]] | None = None
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


@dataclass
class RoundPrompt:
    """rounds/r<R>/prompt.json: the messages a round's request sent, and its context."""

    messages: list[Json] = field(default_factory=list)
    context: PromptContext = field(default_factory=PromptContext)
