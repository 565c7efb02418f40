"""The Python front door: search for a reward, validate one, train one, in the style of SB3 and Gymnasium.

    from text2reward import RewardSearch, SearchCallback

    class Watch(SearchCallback):
        def on_evaluation(self, event):
            print(event.job, event.steps, event.success_rate)

    result = RewardSearch("fetch/reach", backend="heuristic", rounds=2, samples=2, steps=8000, callbacks=[Watch()]).run()
    print(result.status, result.best.success_rate, result.best.code)

    report = validate_reward(code, "metaworld/reach-v3")          # the jail's verdict, as `t2r validate` gives it
    trained = train_reward("my_reward.py", "metaworld/reach-v3", steps=20_000)   # jailed, as `t2r train --reward`

Why one front door for Python, the CLI and the dashboard: the checks before a run, the jail, the run folder and the
events are the same whoever starts a run; the CLI prints the events' text, a program reads their fields. Every
setting of a run (`text2reward.settings.RunConfig`) is a keyword argument here.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Union, get_args, get_origin, get_type_hints

from policies.config import TrainConfig
from policies.her import BUILT_IN_REWARDS
from policies.policy import Policy
from policies.reward_modes import DEFAULT_REWARD_MODE, check_mode
from policies.stats import Rate
from sim_envs import get_task, load_task_file, register_task
from sim_envs.task import Task
from text2reward.errors import ConfigError, RunInterrupted, SettingTypeError, SettingValueError
from text2reward.generation.llm import Backend
from text2reward.loop import resume_run, start_run
from text2reward.preflight import check_train_config
from text2reward.runs.layout import TRAINING
from text2reward.runs.ranking import best_candidate
from text2reward.runs.records import Candidate, FinalSummary
from text2reward.runs.run_events import (
    CandidateChecked,
    CandidateStoppedEarly,
    CandidateTrained,
    Emit,
    Evaluation,
    FinalDone,
    RoundDone,
    RoundStarted,
    RunEnded,
    RunEvent,
)
from text2reward.runs.statuses import RunStatus
from text2reward.runs.store import RunStore
from text2reward.sandbox import ValidationReport, active_isolation, reward_from_file
from text2reward.sandbox import validate as jailed_validation
from text2reward.settings import AT_LEAST, BETWEEN, RunConfig
from text2reward.training.job import TRAIN_DIR
from text2reward.training.pool import JobDisplay

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11's; only a type checker reads it

    from policies.train import TrainResult

MODEL_FILE = "model.zip"
"""A training's policy in its folder (policies.train.MODEL_FILE, named here so that reading a result needs no torch)."""

DEFAULT_RUNS_DIR = Path("runs")


class SearchCallback:
    """Receives a run's events while it works (SB3's `BaseCallback` style): override the hooks you need, or `on_event`
    for every event. A plain function `fn(event)` works too. A hook that returns False stops the search, as SB3's
    `_on_step` does: the run is recorded as interrupted (finished work kept; `RewardSearch.resume` goes on) and `run()`
    returns its result with `stopped_by_callback` set."""

    def on_event(self, event: RunEvent) -> bool | None:
        """Hand the event to the hook of its type, the most specific one (a stopped-early candidate, a kind of trained
        one, goes to `on_stopped_early` only); its answer is the hook's. An event with no hook is ignored."""
        for kind in type(event).__mro__:
            hook = EVENT_HOOKS.get(kind)
            if hook is not None:
                answer: bool | None = getattr(self, hook)(event)
                return answer
        return None

    def __call__(self, event: RunEvent) -> bool | None:
        return self.on_event(event)

    def on_round_started(self, event: RoundStarted) -> bool | None: ...

    def on_candidate_checked(self, event: CandidateChecked) -> bool | None: ...

    def on_evaluation(self, event: Evaluation) -> bool | None: ...

    def on_stopped_early(self, event: CandidateStoppedEarly) -> bool | None: ...

    def on_candidate_trained(self, event: CandidateTrained) -> bool | None: ...

    def on_round_done(self, event: RoundDone) -> bool | None: ...

    def on_final_done(self, event: FinalDone) -> bool | None: ...

    def on_run_ended(self, event: RunEnded) -> bool | None: ...


EVENT_HOOKS: dict[type, str] = {
    RoundStarted: SearchCallback.on_round_started.__name__,
    CandidateChecked: SearchCallback.on_candidate_checked.__name__,
    Evaluation: SearchCallback.on_evaluation.__name__,
    CandidateStoppedEarly: SearchCallback.on_stopped_early.__name__,
    CandidateTrained: SearchCallback.on_candidate_trained.__name__,
    RoundDone: SearchCallback.on_round_done.__name__,
    FinalDone: SearchCallback.on_final_done.__name__,
    RunEnded: SearchCallback.on_run_ended.__name__,
}
"""Event type -> the SearchCallback hook it goes to (looked up along the event's MRO, so a subclass finds its own)."""

Callback = Callable[[RunEvent], "bool | None"]
"""A listener: returning False (not None) stops the search."""


class SearchStopped(KeyboardInterrupt):
    """A callback returned False. A KeyboardInterrupt, so the run ends as a Ctrl-C ends it (recorded as interrupted,
    its workers stopped, its finished work kept); `RewardSearch.run` turns it into a result."""

    def __init__(self, event: RunEvent):
        super().__init__(f"a callback stopped the search at {type(event).__name__}")
        self.event = event


def fan_out(callbacks: Iterable[Callback]) -> Emit:
    """One `Emit` calling each callback in turn; a False answer stops the search once every callback has the event."""
    listeners = list(callbacks)

    def emit(event: RunEvent) -> None:
        answers = [listener(event) for listener in listeners]
        if any(answer is False for answer in answers) and not isinstance(event, RunEnded):
            raise SearchStopped(event)

    return emit


@dataclass(frozen=True)
class BestReward:
    """The best reward a run found: its code and how well the policy trained on it did."""

    id: str
    code: str
    file: Path
    success_rate: float
    episodes: int
    """Of the final evaluation the rate is a mean of."""
    author: str

    @property
    def interval(self) -> tuple[float, float]:
        """The success rate's 95% Wilson interval."""
        return Rate.of(self.success_rate, self.episodes).interval


@dataclass(frozen=True)
class SearchResult:
    """What a run ended with, read from its folder."""

    run_id: str
    run_dir: Path
    status: RunStatus
    best: BestReward | None
    comparison: FinalSummary | None
    """The best reward re-trained on fresh seeds beside the expert's (`comparison.best.mean`, `comparison.expert.mean`)."""
    candidates: list[Candidate]
    report: Path | None
    reason: str | None = None
    """Why nothing trained (status no_result), candidate by candidate."""
    stopped_by_callback: bool = False
    """A callback returned False: the run is interrupted here, and `RewardSearch.resume(run_id)` goes on."""

    @property
    def succeeded(self) -> bool:
        return self.best is not None

    @property
    def policy(self) -> Policy | None:
        """The best candidate's trained policy (`predict`, `save`; `Policy.load(path)` reads it back anywhere), or None
        when nothing trained."""
        if self.best is None:
            return None
        model = self.best.file.parent / TRAINING / TRAIN_DIR / MODEL_FILE
        if not model.is_file():
            raise ConfigError(f"the best candidate's policy {model} is missing (the run folder was pruned?); "
                              f"train it again with `t2r train --reward {self.best.file}`")
        return Policy.load(model.parent)

    @classmethod
    def of(cls, store: RunStore) -> SearchResult:
        state, candidates = store.state(), store.candidates()
        best = best_candidate(candidates)
        best_reward = None
        if best is not None and best.code_file is not None and best.training is not None:
            best_reward = BestReward(id=best.id, code=store.read_text(best.code_file), file=store.root / best.code_file,
                                     success_rate=best.success, episodes=best.training.episodes, author=best.author)
        return cls(run_id=store.run_id, run_dir=store.root, status=store.status(), best=best_reward, comparison=store.final_summary(),
                   candidates=candidates, report=store.root / state.report if state.report else None, reason=state.reason)


def open_run(run_id: str = "latest", runs_dir: str | Path = DEFAULT_RUNS_DIR) -> SearchResult:
    """A run already in `runs_dir` (its id, a unique prefix, or `latest`), as a `SearchResult`."""
    return SearchResult.of(RunStore.open(Path(runs_dir), run_id))


def _task_id(task: str | Task, task_file: str | Path | None) -> str:
    """A task's id; a Task built in Python is registered here, and must come from a task file its workers can load."""
    if isinstance(task, str):
        return task
    if task_file is not None:
        load_task_file(task_file)
    try:
        known = get_task(task.id)
    except ConfigError:
        known = None
    if known is not task and task_file is None and task.source != "builtin":
        raise ConfigError(f"task {task.id} was built in Python: its training workers load it from a task file; pass "
                          f"task_file='path/to/my_task.py' (the file that defines it)")
    if known is None:
        register_task(task)
    return task.id


class SearchSettings(TypedDict, total=False):
    """Every setting of a search, typed (`RunConfig`'s settings but the task and the backend, which `RewardSearch` takes
    first; flat, whichever stage's group holds each): what an editor completes and a type checker checks in
    `RewardSearch(task, backend, **settings)`."""

    model: str | None
    base_url: str | None
    reply_files: list[str]
    temperature: float
    timeout: float | None
    max_retries: int | None
    concurrency: int | None
    cache: bool
    rounds: int
    samples: int
    steps: int | None
    workers: int
    seed: int
    few_shot: int
    vision: bool
    screen: bool
    screen_threshold: float
    fix_attempts: int
    video: bool
    candidate_seeds: int
    final_seeds: int
    compare_expert: bool
    success_threshold: float
    early_stop: bool
    device: str
    algo: str | None
    eval_freq: int | None
    eval_episodes: int | None
    overrides: dict[str, Any]
    reward_mode: str
    tune: int
    reward_source: str
    keypoints: str
    keypoint_camera: str | None
    keypoint_anchors: dict[str, str | None]
    vision_analysis: bool
    executor: str
    ray_address: str | None
    task_file: str | None


POSITIVE = ("steps", "eval_freq", "eval_episodes")
"""Training counts (checked for `t2r` by preflight): each at least 1 where given."""


def check_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Each setting's type and value, in Python's terms (`steps must be a positive int, got 'abc'`); paths become
    strings. A name that is no setting lists those that are."""
    hints = get_type_hints(SearchSettings)
    unknown = sorted(set(settings) - set(hints))
    if unknown:
        raise SettingTypeError(f"RewardSearch got an unexpected keyword argument {unknown[0]!r}; the settings are "
                               f"{', '.join(sorted(hints))}")
    checked = dict(settings)
    for name, value in settings.items():
        if name in ("task_file",) and isinstance(value, Path):
            value = checked[name] = str(value)
        if name == "reply_files" and isinstance(value, (list, tuple)):
            value = checked[name] = [str(v) if isinstance(v, Path) else v for v in value]
        if not _is_a(value, hints[name]):
            raise SettingTypeError(f"{name} must be {_kind(hints[name], name)}, got {value!r}")
        least = 1 if name in POSITIVE else AT_LEAST.get(name)
        if least is not None and value is not None and value < least:
            raise SettingValueError(f"{name} must be {_kind(hints[name], name)}, got {value!r}")
        if name in BETWEEN and not BETWEEN[name][0] <= value <= BETWEEN[name][1]:
            low, high = BETWEEN[name]
            raise SettingValueError(f"{name} must be between {low:g} and {high:g}, got {value!r}")
        if name == "success_threshold" and not value > 0:
            raise SettingValueError(f"success_threshold must be above 0 (above 1: never stop early), got {value!r}")
        if name == "timeout" and value is not None and not value > 0:
            raise SettingValueError(f"timeout must be a positive number of seconds, got {value!r}")
    return checked


def _is_a(value: Any, hint: Any) -> bool:
    """Whether `value` fits a setting's annotation (int is never a bool; a float setting takes an int)."""
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_is_a(value, option) for option in get_args(hint))
    if hint is type(None):
        return value is None
    if hint is Any:
        return True
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin is list:
        (item,) = get_args(hint)
        return isinstance(value, (list, tuple)) and all(_is_a(v, item) for v in value)
    if origin is dict:
        key, item = get_args(hint)
        return isinstance(value, dict) and all(_is_a(k, key) and _is_a(v, item) for k, v in value.items())
    return isinstance(value, hint)


def _kind(hint: Any, name: str) -> str:
    """A setting's type in words: `a positive int`, `a str or None`."""
    options = [h for h in get_args(hint)] if get_origin(hint) in (Union, types.UnionType) else [hint]
    optional = type(None) in options
    options = [h for h in options if h is not type(None)]
    least = 1 if name in POSITIVE else AT_LEAST.get(name)
    words = []
    for option in options:
        label = getattr(option, "__name__", str(option)) if get_origin(option) is None else str(option).replace("typing.", "")
        if option is int and least is not None:
            label = "a positive int" if least == 1 else "an int, 0 or more"
        elif get_origin(option) is None:
            label = f"a {label}" if label[0] not in "aeiou" else f"an {label}"
        words.append(label)
    return " or ".join(words + (["None"] if optional else []))


class RewardSearch:
    """A reward search on one task: rounds of K candidates written by a backend, checked, trained, refined, and the
    best re-trained beside the expert. `settings` are `SearchSettings` (rounds, samples, steps, workers, model,
    base_url, reward_mode, executor, seed, ...): each is checked here, a wrong type a TypeError and an impossible value
    a ValueError naming the parameter; the choices they name (backend, executor, reward mode) are checked against their
    registries here too, and the task, the backend's endpoint and the jail by `run()`, before a run folder exists."""

    def __init__(self, task: str | Task, backend: str | Backend = "heuristic", *, runs_dir: str | Path = DEFAULT_RUNS_DIR,
                 callbacks: Sequence[Callback] = (), display: JobDisplay | None = None, **settings: Unpack[SearchSettings]):
        if not isinstance(task, (str, Task)):
            raise SettingTypeError(f"task must be a task id (str, e.g. 'fetch/reach') or a Task, got {task!r}")
        if not isinstance(backend, str) and not callable(getattr(backend, "generate", None)):
            raise SettingTypeError(f"backend must be a backend's name (str, e.g. 'heuristic') or a Backend, got {backend!r}")
        if not isinstance(runs_dir, (str, Path)):
            raise SettingTypeError(f"runs_dir must be a str or Path, got {runs_dir!r}")
        if not all(callable(c) for c in callbacks):
            raise SettingTypeError(f"callbacks must be SearchCallback objects or functions of an event, got {list(callbacks)!r}")
        values = check_settings(dict(settings))
        self.backend_object = None if isinstance(backend, str) else backend
        name = backend if isinstance(backend, str) else str(getattr(backend, "name", "custom"))
        task_id = _task_id(task, values.get("task_file"))
        if values.get("task_file") is not None:
            values["task_file"] = str(Path(values["task_file"]).resolve())
        self.config = RunConfig.of(task_id, backend=name, **values)
        self.config.validate()  # the choices against their registries, now rather than at run()
        self.runs_dir, self.callbacks, self.display = Path(runs_dir), list(callbacks), display

    @classmethod
    def from_config(cls, config: RunConfig, runs_dir: str | Path = DEFAULT_RUNS_DIR, callbacks: Sequence[Callback] = (),
                    display: JobDisplay | None = None) -> RewardSearch:
        search = cls.__new__(cls)
        search.config, search.backend_object = config, None
        search.runs_dir, search.callbacks, search.display = Path(runs_dir), list(callbacks), display
        return search

    def run(self) -> SearchResult:
        """Check the settings, create the run folder, run it to its end (or to where it waits for replies, or to where a
        callback returned False: then `stopped_by_callback`)."""
        try:
            store = start_run(self.config, self.runs_dir, fan_out(self.callbacks), self.backend_object, self.display)
        except RunInterrupted as exc:
            if not isinstance(exc.__cause__, SearchStopped):
                raise
            return dataclasses.replace(SearchResult.of(RunStore.open(Path(exc.runs_dir), exc.run_id)), stopped_by_callback=True)
        return SearchResult.of(store)

    @staticmethod
    def resume(run_id: str = "latest", runs_dir: str | Path = DEFAULT_RUNS_DIR, callbacks: Sequence[Callback] = (),
               display: JobDisplay | None = None, reply_files: Sequence[str | Path] = (), rounds: int | None = None,
               executor: str | None = None, ray_address: str | None = None, backend: Backend | None = None) -> SearchResult:
        """Go on with a run: finished work is kept; `rounds` raises its number of rounds, `executor` trains elsewhere from
        now on, `reply_files` adds replies for a run that waits on a person."""
        store = RunStore.open(Path(runs_dir), run_id)
        if rounds is not None or executor is not None or ray_address is not None:
            config = RunConfig.from_record(store.config_data())
            training = config.training
            config = config.updated(rounds=max(config.rounds, rounds or 0), executor=executor or training.executor,
                                    ray_address=ray_address or training.ray_address)
            config.executor_spec.check(config.training.executor_settings())  # before it is recorded: a typo never lands in config.json
            store.write_config(config.to_record())
        for path in reply_files:
            if not Path(path).is_file():
                raise ConfigError(f"reply file {path} not found: save the model's reply to a file and pass its path")
        try:
            store = resume_run(Path(runs_dir), store.run_id, fan_out(callbacks), backend, display,
                               reply_files=[str(Path(p).resolve()) for p in reply_files])
        except RunInterrupted as exc:
            if not isinstance(exc.__cause__, SearchStopped):
                raise
            return dataclasses.replace(SearchResult.of(RunStore.open(Path(exc.runs_dir), exc.run_id)), stopped_by_callback=True)
        return SearchResult.of(store)


def _search_signature() -> inspect.Signature:
    """`RewardSearch`'s signature with every setting spelled out, typed and with its default (what `help()`, an
    IDE and a notebook's completion show), from `SearchSettings` and `RunConfig`'s defaults."""
    base = inspect.signature(RewardSearch.__init__)
    fixed = [p for p in base.parameters.values() if p.kind != inspect.Parameter.VAR_KEYWORD]
    defaults = RunConfig.of("-").flat()  # each setting's default
    hints = get_type_hints(SearchSettings)
    settings = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=defaults.get(name), annotation=hint)
                for name, hint in hints.items()]
    return base.replace(parameters=[*fixed, *settings])


RewardSearch.__init__.__signature__ = _search_signature()  # type: ignore[attr-defined]


def validate_reward(code: str, task: str | Task, mode: str = DEFAULT_REWARD_MODE, task_file: str | Path | None = None) -> ValidationReport:
    """The jail's verdict on a reward program (static checks, then a run on real states in an isolated process), as
    `t2r validate` gives it; refuses (SandboxUnavailable) where no jail works here."""
    task_obj = get_task(_task_id(task, task_file))
    active_isolation()  # fail closed: no jail, no verdict (not even the static pass is offered as one)
    return jailed_validation(code, task_obj, mode=check_mode(mode))


def reward_for_training(reward: str, trusted: bool = False, mode: str = DEFAULT_REWARD_MODE) -> Any:
    """What trains: None for a built-in reward (`expert`, `sparse`: training resolves them and checks the task has an
    expert), else the file's program, jailed unless its author vouches for it (`trusted`)."""
    if reward.lower() in BUILT_IN_REWARDS and reward not in BUILT_IN_REWARDS:
        raise ConfigError(f"--reward {reward} is not a reward; did you mean --reward {reward.lower()}?")
    if reward in BUILT_IN_REWARDS:
        if trusted:
            raise ConfigError("--trusted-reward applies to a --reward FILE.py only; drop it for expert or sparse")
        return None
    return reward_from_file(reward, trusted, mode)


def train_reward(reward: str | Path, task: str | Task, *, out_dir: str | Path = Path("runs/train"), steps: int | None = None,
                 seed: int = 0, mode: str = DEFAULT_REWARD_MODE, trusted: bool = False, task_file: str | Path | None = None,
                 on_phase: Callable[[str], None] | None = None, **settings: Any) -> TrainResult:
    """Train a policy on a reward file (or "expert", "sparse") and evaluate it with the task's own success test, as
    `t2r train --reward` does: a file runs in the jail unless `trusted`. `settings` are TrainConfig's (algo, device,
    eval_freq, eval_episodes, overrides, her, progress...); `on_phase` hears what happens after training."""
    from policies.train import train  # torch and SB3 (~3 s): only this call trains in this process; a search trains in workers

    for name, value, hint in (("steps", steps, int | None), ("seed", seed, int)):
        if not _is_a(value, hint):
            raise SettingTypeError(f"{name} must be {_kind(hint, name)}, got {value!r}")
    if steps is not None and steps < 1:
        raise SettingValueError(f"steps must be a positive int or None (the task's budget), got {steps!r}")

    config = TrainConfig(task_id=_task_id(task, task_file), out_dir=Path(out_dir), reward=str(reward), reward_mode=check_mode(mode),
                         steps=steps, seed=seed, **settings)
    check_train_config(config)  # the task, numbers, device and hyper-parameters, before a sandbox or an env starts
    reward_fn = reward_for_training(str(reward), trusted, mode)
    try:
        return train(config, reward_fn=reward_fn, on_phase=on_phase)
    finally:
        close = getattr(reward_fn, "close", None)
        if close is not None:
            close()
