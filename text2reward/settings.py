"""A run's settings (`RunConfig`), each declared once with its command-line option, grouped by the stage that owns them
(generation, checking, training, final comparison), immutable, and checked against the registries of the choices they
name (backends, executors, reward modes, reward sources).

Why here, above the stages and below the loop: the settings name a backend, an executor, a reward mode and a reward
source, and only the packages that own those choices know which exist; the store below only persists what a run was
given (config.json), and the CLI builds a `RunConfig` from the declarations here (`cli/options.py`) instead of copying
each option by hand. `check_run_config` is every check that can run before a run folder exists.

Why groups: a stage is handed its own group (the loop gives the training stage `config.training`, the backend is built
from `config.generation`), so what a stage may read is visible in its type; a stage's own settings type below this layer
(`BackendSettings`, `CheckSettings`, `ExecutorSettings`, `TrainConfig`) is filled from the group by field name
(`shared_fields`), never copied field by field. Frozen, so a change is a new value (`RunConfig.updated`), never a
mutation a later reader does not expect.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, TypeVar

import yaml

import sim_envs
from policies.config import DEVICE_HELP, TrainConfig
from policies.reward_modes import DEFAULT_REWARD_MODE, check_mode, mode_help, reward_mode
from text2reward.errors import ConfigError
from text2reward.generation.llm import BackendSettings, BackendSpec, backend_spec, backend_specs, image_backends
from text2reward.keypoints.sources import RewardSourceSpec, keypoint_finder, reward_source, reward_source_specs
from text2reward.runs.store import STOP_FILE
from text2reward.training.executors import ExecutorSettings, ExecutorSpec, executor_spec, executor_specs

if TYPE_CHECKING:
    from sim_envs.task import Task

CANDIDATE_SEED_STRIDE = 1000
"""A candidate's seeds are the run's seed plus multiples of this: never one of the final comparison's seeds (seed + 1
.. seed + final_seeds) and never another candidate seed's neighbour."""

# --- option declarations ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    """How one setting is given on the command line: its flags, help, and how the typed value becomes the setting."""

    flags: tuple[str, ...]
    help: str | Callable[[], str]
    """A string, or a function (help built from a registry when the CLI is built)."""
    cli_type: Any = None
    """What the command line parses (None: the setting's own type)."""
    to_setting: Callable[[Any], Any] | None = None
    """The parsed value -> the setting (None: as parsed)."""
    metavar: str | None = None
    envvar: str | None = None

    def help_text(self) -> str:
        return self.help() if callable(self.help) else self.help


def option(*flags: str, help: str | Callable[[], str], cli_type: Any = None, to_setting: Callable[[Any], Any] | None = None,
           metavar: str | None = None, envvar: str | None = None) -> dict[str, Option]:
    """A dataclass field's metadata declaring its option (`field(default=..., metadata=option("--llm", help=...))`)."""
    return {"option": Option(tuple(flags), help, cli_type, to_setting, metavar, envvar)}


def declared_option(f: dataclasses.Field) -> Option | None:
    return f.metadata.get("option")


def _choices(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _backend_help() -> str:
    return _choices([f"{s.name} {s.summary}".strip() for s in backend_specs()])


def _executor_help() -> str:
    return "where candidates train: " + _choices([f"{s.name} {s.summary}" for s in executor_specs()])


def _source_help() -> str:
    return _choices([f"{s.name} {s.summary}" for s in reward_source_specs()])


def _mode_help() -> str:
    return mode_help()


def parse_hyperparams(items: list[str] | None) -> dict[str, Any]:
    """`--hp KEY=VALUE` options (YAML values) as a mapping."""
    overrides: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--hp {item!r} is not KEY=VALUE; e.g. --hp batch_size=64")
        overrides[key.strip()] = yaml.safe_load(value)
    return overrides


def _parse_anchors(items: list[str] | None) -> dict[str, str | None]:
    from text2reward.keypoints.answer import parse_anchor_options  # ~3 ms at every `t2r` start: only --anchor reads it

    return parse_anchor_options(items)


def _paths(items: list[Path] | None) -> list[str]:
    return [str(p) for p in items or []]


def _resolved_path(path: Path | None) -> str | None:
    return str(Path(path).resolve()) if path else None


# --- the settings, grouped by the stage that owns them ---------------------------------------------------------

AT_LEAST = {"rounds": 1, "samples": 1, "workers": 1, "concurrency": 1, "candidate_seeds": 1, "final_seeds": 0, "few_shot": 0, "max_retries": 0,
            "fix_attempts": 0, "tune": 0}
"""The counts among the run's settings and the least each may be (None, where a setting allows it, is its default)."""
BETWEEN = {"screen_threshold": (0.0, 1.0), "temperature": (0.0, 2.0)}
"""The settings that are shares or scales, and their range (both ends included)."""

Settings = TypeVar("Settings")


def shared_fields(cls: type[Settings], *groups: Any, **given: Any) -> Settings:
    """A stage's own settings type (`BackendSettings`, `CheckSettings`, ...) built from the settings of the same names in
    `groups`, plus what the caller adds (`given`): the fields are matched by name, never copied one by one by hand."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values = {f.name: getattr(group, f.name) for group in groups for f in dataclasses.fields(group) if f.name in names}
    return cls(**{**values, **given})


@dataclass(frozen=True)
class GenerationSettings:
    """Who writes the rewards and how they are asked: the backend, its model and limits, the prompt's extras (few-shot
    examples, images, keypoints) and what the model writes (the reward mode, the reward source)."""

    backend: str = field(default="heuristic", metadata=option("--llm", help=_backend_help))
    model: str | None = field(default=None, metadata=option("--model", help="model name for --llm openai (or OPENAI_MODEL)"))
    base_url: str | None = field(default=None, metadata=option("--base-url", help="OpenAI-compatible endpoint (or OPENAI_BASE_URL)"))
    reply_files: list[str] = field(default_factory=list, metadata=option(
        "--reply-file", help="a reply file for --llm file (else stdin); repeat the flag, one file per sample", cli_type=Optional[list[Path]], to_setting=_paths))
    temperature: float = field(default=1.0, metadata=option("--temperature", help="sampling temperature of the model"))
    timeout: float | None = field(default=None, metadata=option(
        "--timeout", help="seconds to wait for one reply (default: 60, or 600 with --base-url)"))
    """Seconds to wait for one model reply (None: the backend's default, minutes for a local server)."""
    max_retries: int | None = field(default=None, metadata=option("--max-retries", help="retries of a failed model request (default 4)"))
    concurrency: int | None = field(default=None, metadata=option(
        "--concurrency", help="model requests at once (default: 1 with a local --base-url, else 8)"))
    """Model requests in flight at once (None: 1 for a local server, several for a hosted API)."""
    cache: bool = field(default=True, metadata=option(
        "--cache/--no-cache", help="reuse replies cached for the same prompt and seed (--no-cache asks again)"))
    """Serve replies already on disk for the same request and seed (`--no-cache` asks the model again)."""
    samples: int = field(default=2, metadata=option("--samples", help="candidates per round (K)"))
    few_shot: int = field(default=0, metadata=option("--few-shot", help="expert examples from similar tasks in the prompt"))
    vision: bool = field(default=False, metadata=option("--vision/--no-vision", help="send rollout keyframes to a vision-capable model"))
    reward_mode: str = field(default=DEFAULT_REWARD_MODE, metadata=option("--reward-mode", help=_mode_help))
    """What the model writes and how it trains (policies.reward_modes); the checks and the training read it too."""
    reward_source: str = field(default="code", metadata=option("--reward-source", help=_source_help))
    """Where round 0's rewards come from (text2reward.keypoints.sources)."""
    keypoints: str = field(default="oracle", metadata=option(
        "--keypoints", help="with a keypoint reward source: oracle (true points projected) or model (the vision model points; needs --vision)"))
    keypoint_camera: str | None = field(default=None, metadata=option(
        "--keypoint-camera", help="camera the keypoints are read from (default: the task's)"))
    keypoint_anchors: dict[str, str | None] = field(default_factory=dict, metadata=option(
        "--anchor", help="KEYPOINT=PART: what a keypoint moves with (obj, obj_start, goal, none), over the model's choice; repeatable",
        cli_type=Optional[list[str]], to_setting=_parse_anchors))
    """A person's word on what a keypoint moves with (`--anchor grasp=obj`), over the model's or the oracle's."""
    vision_analysis: bool = field(default=False, metadata=option(
        "--vision-analysis/--no-vision-analysis",
        help="ask the vision model what went wrong in a failed candidate's keyframes, for the next feedback (with --vision)"))

    def backend_settings(self, seed: int, replies_used: int = 0) -> BackendSettings:
        """What the backend is told: these settings by name, the run's seed, and the replies a resumed run already used."""
        return shared_fields(BackendSettings, self, reply_files=tuple(self.reply_files), seed=seed, replies_used=replies_used)


@dataclass(frozen=True)
class CheckingSettings:
    """How a reply is checked before it trains: fix requests for a rejected one, and screening on scripted rollouts."""

    screen: bool = field(default=True, metadata=option(
        "--screen/--no-screen", help="screen candidates on scripted trajectories before training"))
    screen_threshold: float = field(default=0.7, metadata=option(
        "--screen-threshold", help="share of (success, failure) rollout pairs a reward must rank right"))
    fix_attempts: int = field(default=1, metadata=option("--fix-attempts", help="times a rejected reply goes back to the model with the error"))


@dataclass(frozen=True)
class TrainingSettings:
    """How a round's candidates train: the budget and algorithm (resolved into one plan per job by policies.plan), the
    seeds, early stopping, and where the jobs run (the executor)."""

    steps: int | None = field(default=None, metadata=option("--steps", help="training steps per candidate"))
    workers: int = field(default=2, metadata=option("--workers", help="parallel training workers (W)"))
    video: bool = field(default=True, metadata=option("--video/--no-video", help="film each trained candidate's rollout"))
    candidate_seeds: int = field(default=1, metadata=option(
        "--candidate-seeds", help="training seeds per candidate: its score is success pooled over them (S x the training)"))
    """Each candidate of a round trains on this many seeds (`RunConfig.candidate_seed_list`), one job each; ranking,
    "best so far" and the feedback read the success pooled over the seeds' episodes and state the spread between seeds
    (runs/seed_scores.py). 1 until a default is chosen by measurement (issue 38)."""
    early_stop: bool = field(default=True, metadata=option(
        "--early-stop/--no-early-stop",
        help="stop a candidate clearly behind the round's leader at half the budget (--no-early-stop trains each to the end)"))
    """A round's candidates stop at the run's `success_threshold`, or when clearly behind the round's leader at a rung
    of the budget (training/early_stop.py); `--no-early-stop` trains each to its full budget."""
    device: str = field(default="auto", metadata=option("--device", help=DEVICE_HELP))
    algo: str | None = field(default=None, metadata=option(
        "--algo", help="sbx-sac, sbx-ppo (SBX, JAX), sac or ppo (SB3, PyTorch); default: the task family's"))
    """The training algorithm; None: the task family's default."""
    eval_freq: int | None = field(default=None, metadata=option("--eval-freq", help="env steps between success evaluations"))
    eval_episodes: int | None = field(default=None, metadata=option("--eval-episodes", help="episodes per evaluation"))
    overrides: dict[str, Any] = field(default_factory=dict, metadata=option(
        "--hp", help="hyper-parameter override KEY=VALUE (YAML value), repeatable", cli_type=Optional[list[str]], to_setting=parse_hyperparams))
    executor: str = field(default="local", metadata=option("--executor", help=_executor_help))
    ray_address: str | None = field(default=None, metadata=option(
        "--ray-address", envvar="RAY_ADDRESS", metavar="ADDR",
        help="with --executor ray: the cluster to join (host:port of its head); unset: a local Ray on 127.0.0.1 for the run"))

    def executor_settings(self) -> ExecutorSettings:
        return shared_fields(ExecutorSettings, self, address=self.ray_address)


@dataclass(frozen=True)
class FinalComparisonSettings:
    """The last stage: the best reward re-trained on fresh seeds, beside the expert reward on the same budget."""

    final_seeds: int = field(default=2, metadata=option("--final-seeds", help="seeds to re-train the best reward (and the expert) on"))
    compare_expert: bool = field(default=True, metadata=option(
        "--compare-expert/--no-compare-expert", help="train the expert reward on the same budget"))


STAGE_GROUPS: dict[str, type] = {"generation": GenerationSettings, "checking": CheckingSettings, "training": TrainingSettings,
                                 "final": FinalComparisonSettings}
"""RunConfig's field -> the stage's settings type it holds."""


@dataclass(frozen=True)
class Choices:
    """The registered choices a run's settings name, each looked up once (an unknown name is refused on lookup)."""

    backend: BackendSpec
    executor: ExecutorSpec
    source: RewardSourceSpec


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines a run, immutable (`updated` returns a changed copy): what the whole run uses (the task,
    the seed, the rounds, the success threshold, tuning) and one group per stage, which that stage is handed. Stored
    flat as config.json (each setting under its own name, as every earlier run wrote it) and reused verbatim by
    `t2r resume`. `RunConfig.of(task_id, rounds=3, steps=8000, ...)` builds one from settings by name."""

    task_id: str = field(metadata=option("--task", help="task id"))
    rounds: int = field(default=2, metadata=option("--rounds", help="rounds of generation and training"))
    seed: int = field(default=0, metadata=option("--seed", help="seed of sampling, training and evaluation"))
    success_threshold: float = field(default=0.9, metadata=option(
        "--success-threshold", help="a run (and, with --early-stop, a candidate) stops once it reaches this success rate"))
    tune: int = field(default=0, metadata=option(
        "--tune", help="after the last round, tune the best reward's constants with N Optuna trials (see t2r tune)"))
    """Tuning trials for the best candidate after the last round (text2reward.tuning); 0: none."""
    task_file: str | None = field(default=None, metadata=option(
        "--task-file", help="Python file defining extra tasks (see README)", cli_type=Optional[Path], to_setting=_resolved_path))
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    checking: CheckingSettings = field(default_factory=CheckingSettings)
    training: TrainingSettings = field(default_factory=TrainingSettings)
    final: FinalComparisonSettings = field(default_factory=FinalComparisonSettings)

    # --- built and read by setting name (config.json, the CLI, RewardSearch's keywords) ---
    @classmethod
    def of(cls, task_id: str, **settings: Any) -> RunConfig:
        """A run's settings from flat names (`rounds=3, steps=8000, backend="openai"`), each routed to its group; a name
        that is no setting is a TypeError, as for any keyword argument."""
        return cls(task_id=task_id).updated(**settings)

    def updated(self, **settings: Any) -> RunConfig:
        """A copy with the named settings changed (`dataclasses.replace` on the groups they belong to)."""
        owners = setting_owners()
        unknown = sorted(set(settings) - set(owners))
        if unknown:
            raise TypeError(f"RunConfig has no setting {unknown[0]!r}")
        changes: dict[str, Any] = {name: value for name, value in settings.items() if owners[name] is None}
        for group in STAGE_GROUPS:
            mine = {name: value for name, value in settings.items() if owners[name] == group}
            if mine:
                changes[group] = dataclasses.replace(getattr(self, group), **mine)
        return dataclasses.replace(self, **changes)

    def flat(self) -> dict[str, Any]:
        """Every setting by its own name (config.json's shape), the run's own first, then each group's."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in STAGE_GROUPS}
        for group in STAGE_GROUPS:
            values.update(dataclasses.asdict(getattr(self, group)))
        return values

    # --- the choices it names ---
    def choices(self) -> Choices:
        """The backend, executor and reward source these settings name, from their registries (one line naming the
        flag for a name no registry holds)."""
        return Choices(backend=backend_spec(self.generation.backend), executor=executor_spec(self.training.executor),
                       source=reward_source(self.generation.reward_source))

    @property
    def backend_spec(self) -> BackendSpec:
        return backend_spec(self.generation.backend)

    @property
    def executor_spec(self) -> ExecutorSpec:
        return executor_spec(self.training.executor)

    @property
    def source(self) -> RewardSourceSpec:
        return reward_source(self.generation.reward_source)

    def backend_settings(self, replies_used: int = 0) -> BackendSettings:
        return self.generation.backend_settings(self.seed, replies_used)

    def author(self) -> str:
        """Who writes this run's rewards, as every reader shows it (the backend's label)."""
        return self.backend_spec.label(self.generation.model)

    # --- records ---
    def to_record(self) -> dict[str, Any]:
        """config.json: the settings by name, and what readers below the loop show of the choices they name, in the
        choices' own words (the backend's label and nature, where the rewards come from)."""
        return {**self.flat(), "author": self.author(), "rule_based": self.backend_spec.rule_based,
                "source_text": self.source.report_text.format(keypoints=self.generation.keypoints)}

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> RunConfig:
        """The settings in config.json (the labels it also holds, and fields of a newer text2reward, are left out)."""
        owners = setting_owners()
        known = {k: v for k, v in data.items() if k in owners}
        return cls.of(**known)

    def candidate_seed_list(self) -> list[int]:
        """The seeds each round candidate trains on: the run's seed, then a stride of `CANDIDATE_SEED_STRIDE` (apart from
        the final comparison's fresh seeds, seed + 1 ...)."""
        return [self.seed + CANDIDATE_SEED_STRIDE * k for k in range(self.training.candidate_seeds)]

    def final_seed_list(self) -> list[int]:
        """The final comparison's fresh seeds: seed + 1 ... seed + final_seeds."""
        return [self.seed + 1 + i for i in range(self.final.final_seeds)]

    def train_config(self, task_id: str, out_dir: Path, reward: str, seed: int, early_stop: bool = False) -> TrainConfig:
        """The training settings of one of this run's jobs: the one place run settings become training settings.
        `early_stop` (a round's candidates, not the final comparison, which trains to the same budget for all):
        stop at the run's success threshold, and honour a stop file in the job's folder. HER is off for every job: a
        program cannot be relabelled (policies.her), so the expert reward it is compared with trains without it too."""
        stopping = early_stop and self.training.early_stop
        return shared_fields(
            TrainConfig, self.training, task_id=task_id, out_dir=Path(out_dir), reward=reward,
            reward_mode=self.generation.reward_mode if reward == "code" else DEFAULT_REWARD_MODE,
            seed=seed, overrides=dict(self.training.overrides),
            stop_at_success=self.success_threshold if stopping and self.success_threshold <= 1.0 else None,
            stop_file=str(Path(out_dir).parent / STOP_FILE) if stopping else None, her=False,
            gpu_sharers=self.training.workers,  # a round's jobs run W at once: `--device auto` counts them as sharing a GPU
        )

    def validate(self) -> Choices:
        """Numbers and names a person types, and the choices against their registries; each mistake is one line
        naming the flag. Returns the choices, looked up."""
        # steps, eval_freq and eval_episodes are training settings: preflight.check_train_config checks them,
        # for `t2r train` and for a run's jobs alike
        values = self.flat()
        for name, least in AT_LEAST.items():
            value = values[name]
            if value is not None and value < least:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least {least}, got {value}")
        generation = self.generation
        if generation.timeout is not None and generation.timeout <= 0:
            raise ConfigError(f"--timeout must be a positive number of seconds, got {generation.timeout}")
        for name, (low, high) in BETWEEN.items():
            if not low <= values[name] <= high:
                raise ConfigError(f"--{name.replace('_', '-')} must be between {low:g} and {high:g}, got {values[name]}")
        choices = self.choices()
        backend, source = choices.backend, choices.source
        check_mode(generation.reward_mode)
        finder = keypoint_finder(generation.keypoints)
        if source.dense_only and reward_mode(generation.reward_mode).needs_program:
            raise ConfigError(f"--reward-source {generation.reward_source} writes a {DEFAULT_REWARD_MODE} reward: use it with "
                              f"--reward-mode {DEFAULT_REWARD_MODE}")
        if source.uses_keypoints and finder.asks_backend and not generation.vision:
            raise ConfigError("--keypoints model reads an image: add --vision (the model must accept images), or use --keypoints oracle")
        if generation.vision_analysis and not generation.vision:
            raise ConfigError("--vision-analysis shows a vision model the rollout: add --vision (the model must accept images)")
        vision_names = _choices(image_backends())
        if (generation.vision or generation.vision_analysis) and not backend.accepts_images:
            nature = "is rule-based and " if backend.rule_based else ""
            raise ConfigError(f"the {backend.name} backend {nature}cannot see images: drop --vision/--vision-analysis, "
                              f"or use --llm {vision_names} with a vision model")
        if generation.vision_analysis and not backend.answers_between_rounds:
            raise ConfigError(f"--vision-analysis asks a vision model between rounds: use --llm {vision_names} with a model that "
                              "accepts images")
        return choices


def setting_owners() -> dict[str, str | None]:
    """Each setting's name -> the group that holds it (None: RunConfig's own), in config.json's order."""
    owners: dict[str, str | None] = {f.name: None for f in dataclasses.fields(RunConfig) if f.name not in STAGE_GROUPS}
    for group, cls in STAGE_GROUPS.items():
        owners.update({f.name: group for f in dataclasses.fields(cls)})
    return owners


def setting_fields() -> list[tuple[type, dataclasses.Field]]:
    """Every setting's declaration (the class that holds it, its field), in config.json's order: what the CLI's
    options and RewardSearch's keywords are built from."""
    own = [(RunConfig, f) for f in dataclasses.fields(RunConfig) if f.name not in STAGE_GROUPS]
    return own + [(cls, f) for cls in STAGE_GROUPS.values() for f in dataclasses.fields(cls)]


# --- the checks before a run ----------------------------------------------------------------------------------

_NOWHERE = Path(os.devnull)
"""A training config needs an out_dir; the checks never write to it."""


def resolve_run_config(config: RunConfig) -> RunConfig:
    """The run's settings with what the environment supplies filled in (the backend's `resolve`: e.g. the model and
    endpoint from OPENAI_MODEL / OPENAI_BASE_URL), so config.json records what the run really used."""
    settings = config.backend_spec.resolve(config.backend_settings())
    return config.updated(model=settings.model, base_url=settings.base_url)


def run_task(config: RunConfig) -> Task:
    """The run's task; a task file is run first to define it (sim_envs runs a file once per process, however many
    stages and resumes ask)."""
    if config.task_file:
        sim_envs.load_task_file(config.task_file)
    return sim_envs.get_task(config.task_id)


def check_run_config(config: RunConfig, backend_given: bool = False) -> RunConfig:
    """Everything `t2r run` can check before it creates a run folder; returns the resolved settings.
    `backend_given`: the caller hands the loop a backend object, so the configured one is not built."""
    choices = config.validate()
    config = resolve_run_config(config)
    task = run_task(config)
    if choices.source.uses_keypoints and task.keypoints is None:
        raise ConfigError(f"--reward-source {config.generation.reward_source} needs keypoints, which task {task.id} has no setup for: "
                          "use a metaworld, fetch or franka task, or --reward-source code")
    from text2reward.preflight import check_train_config  # the training plan's checks load gymnasium (~0.2 s): not at `t2r` start

    executor, executor_settings = choices.executor, config.training.executor_settings()
    check_train_config(config.train_config(task.id, out_dir=_NOWHERE, reward="code", seed=config.seed),
                       device_here=executor.trains_here(executor_settings),
                       fork_refused_by=None if executor.jobs_may_fork else executor.name)
    executor.check(executor_settings)
    if not backend_given:
        check_backend(config, task)
    return config


def check_backend(config: RunConfig, task: Task) -> None:
    """The backend can be built from these settings, and (where it has one) its model endpoint answers."""
    config.backend_spec.check(config.backend_spec.resolve(config.backend_settings()), task)
