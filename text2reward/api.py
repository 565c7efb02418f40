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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policies.config import TrainConfig
from policies.her import BUILT_IN_REWARDS
from policies.reward_modes import DEFAULT_REWARD_MODE, check_mode
from policies.stats import Rate
from sim_envs import get_task, load_task_file, register_task
from sim_envs.task import Task
from text2reward.errors import ConfigError
from text2reward.generation.llm import Backend
from text2reward.loop import resume_run, start_run
from text2reward.preflight import check_train_config
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
from text2reward.settings import RunConfig
from text2reward.training.pool import JobDisplay

if TYPE_CHECKING:
    from policies.train import TrainResult

DEFAULT_RUNS_DIR = Path("runs")


class SearchCallback:
    """Receives a run's events while it works (SB3's `BaseCallback` style): override the hooks you need, or `on_event`
    for every event. A plain function `fn(event)` works too."""

    def on_event(self, event: RunEvent) -> None:
        """Hand the event to the hook of its type, the most specific one (a stopped-early candidate, a kind of trained
        one, goes to `on_stopped_early` only); an event with no hook is ignored."""
        for kind in type(event).__mro__:
            hook = EVENT_HOOKS.get(kind)
            if hook is not None:
                getattr(self, hook)(event)
                return

    def __call__(self, event: RunEvent) -> None:
        self.on_event(event)

    def on_round_started(self, event: RoundStarted) -> None: ...

    def on_candidate_checked(self, event: CandidateChecked) -> None: ...

    def on_evaluation(self, event: Evaluation) -> None: ...

    def on_stopped_early(self, event: CandidateStoppedEarly) -> None: ...

    def on_candidate_trained(self, event: CandidateTrained) -> None: ...

    def on_round_done(self, event: RoundDone) -> None: ...

    def on_final_done(self, event: FinalDone) -> None: ...

    def on_run_ended(self, event: RunEnded) -> None: ...


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

Callback = Callable[[RunEvent], None]


def fan_out(callbacks: Iterable[Callback]) -> Emit:
    """One `Emit` calling each callback in turn."""
    listeners = list(callbacks)

    def emit(event: RunEvent) -> None:
        for listener in listeners:
            listener(event)

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

    @property
    def succeeded(self) -> bool:
        return self.best is not None

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


class RewardSearch:
    """A reward search on one task: rounds of K candidates written by a backend, checked, trained, refined, and the
    best re-trained beside the expert. `settings` are `RunConfig`'s fields (rounds, samples, steps, workers, model,
    base_url, reward_mode, executor, seed, ...); each is checked before a run folder exists."""

    def __init__(self, task: str | Task, backend: str | Backend = "heuristic", *, runs_dir: str | Path = DEFAULT_RUNS_DIR,
                 callbacks: Sequence[Callback] = (), display: JobDisplay | None = None, **settings: Any):
        known = {f.name for f in dataclasses.fields(RunConfig)} - {"task_id", "backend"}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ConfigError(f"RewardSearch takes no setting {', '.join(unknown)}; the settings are {', '.join(sorted(known))}")
        self.backend_object = None if isinstance(backend, str) else backend
        name = backend if isinstance(backend, str) else str(getattr(backend, "name", "custom"))
        task_id = _task_id(task, settings.get("task_file"))
        if settings.get("task_file") is not None:
            settings["task_file"] = str(Path(settings["task_file"]).resolve())
        self.config = RunConfig(task_id=task_id, backend=name, **settings)
        self.runs_dir, self.callbacks, self.display = Path(runs_dir), list(callbacks), display

    @classmethod
    def from_config(cls, config: RunConfig, runs_dir: str | Path = DEFAULT_RUNS_DIR, callbacks: Sequence[Callback] = (),
                    display: JobDisplay | None = None) -> RewardSearch:
        search = cls.__new__(cls)
        search.config, search.backend_object = config, None
        search.runs_dir, search.callbacks, search.display = Path(runs_dir), list(callbacks), display
        return search

    def run(self) -> SearchResult:
        """Check the settings, create the run folder, run it to its end (or to where it waits for replies)."""
        store = start_run(self.config, self.runs_dir, fan_out(self.callbacks), self.backend_object, self.display)
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
            config.rounds = max(config.rounds, rounds or 0)
            config.executor = executor or config.executor
            config.ray_address = ray_address or config.ray_address
            config.executor_spec.check(config.executor_settings())  # before it is recorded: a typo never lands in config.json
            store.write_config(config.to_record())
        for path in reply_files:
            if not Path(path).is_file():
                raise ConfigError(f"reply file {path} not found: save the model's reply to a file and pass its path")
        store = resume_run(Path(runs_dir), store.run_id, fan_out(callbacks), backend, display,
                           reply_files=[str(Path(p).resolve()) for p in reply_files])
        return SearchResult.of(store)


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
