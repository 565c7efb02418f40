"""A fourth backend and a third executor, each one module's worth of code plus one registration line, written here in
the test file alone: a round runs through them with no other file touched, and the choices they add are refused
while they are not registered."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from text2reward import RewardSearch
from text2reward.errors import ConfigError, DuplicateChoice
from text2reward.generation.llm import BackendSettings, BackendSpec, GenerationRequest, Reply, register_backend, unregister_backend
from text2reward.runs.run_events import RoundStarted, RunEvent
from text2reward.training.executors import ExecutorSettings, ExecutorSpec, JobRunner, register_executor, unregister_executor
from text2reward.training.job import TrainJob, execute
from text2reward.training.pool import JobOutcome, job_outcome, schedule

PROGRAM = '''import numpy as np


def compute_dense_reward(self, action):
    distance = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    return -distance, {"distance": -distance}
'''


class EchoBackend:
    """Answers every request with the same program: a model stand-in a person might write to replay a reward."""

    name = "echo"
    model = "echo-1"
    rule_based = False

    def __init__(self, settings: BackendSettings):
        self.requests: list[GenerationRequest] = []

    def generate(self, request: GenerationRequest) -> list[Reply]:
        self.requests.append(request)
        return [Reply(text=f"```python\n{PROGRAM}```", backend=self.name, model=self.model) for _ in range(request.n)]


class InlineLauncher:
    """Runs each job in this process when it is started (the pool's `Launcher` protocol): one job at a time, here."""

    def __init__(self, started: list[str]):
        self.started, self.ended = started, []  # type: list[str], list[tuple[int, JobOutcome]]

    def start(self, index: int, job: TrainJob) -> None:
        self.started.append(job.out_dir)
        execute(job)
        self.ended.append((index, job_outcome(job, "ended")))

    def collect(self) -> list[tuple[int, JobOutcome]]:
        ended, self.ended = self.ended, []
        return ended

    def mirror(self) -> None: ...

    def relay_stops(self) -> None: ...

    def abort(self) -> None: ...


@pytest.fixture
def plugins() -> Iterator[dict[str, list]]:
    """The toy backend and executor, registered for one test (one line each), and what they saw."""
    seen: dict[str, list] = {"backends": [], "jobs": []}

    def build(settings: BackendSettings) -> EchoBackend:
        backend = EchoBackend(settings)
        seen["backends"].append(backend)
        return backend

    def open_inline(settings: ExecutorSettings, resources, say) -> JobRunner:
        def runner(jobs: list[TrainJob], **options) -> list[JobOutcome]:
            return schedule(jobs, 1, InlineLauncher(seen["jobs"]), **options)

        return runner

    register_backend(BackendSpec(name="echo", summary="(replays one program)", build=build, cache_replies=False))
    register_executor(ExecutorSpec(name="inline", summary="(in this process)", open=open_inline))
    try:
        yield seen
    finally:
        unregister_backend("echo")
        unregister_executor("inline")


def test_a_toy_backend_and_executor_registered_here_run_a_round(plugins, tmp_path: Path):
    events: list[RunEvent] = []
    result = RewardSearch("fetch/reach", backend="echo", executor="inline", rounds=1, samples=1, steps=300, eval_freq=150,
                          eval_episodes=1, final_seeds=1, compare_expert=False, video=False, screen=False, runs_dir=tmp_path,
                          callbacks=[events.append]).run()
    assert result.status == "finished" and result.best is not None
    assert result.best.code.strip() == PROGRAM.strip() and result.best.author == "echo echo-1"
    (backend,) = plugins["backends"]
    assert len(backend.requests) == 1 and backend.requests[0].n == 1  # the round asked the toy backend, once
    trained = sorted(Path(p).relative_to(result.run_dir).as_posix() for p in plugins["jobs"])
    assert trained == ["final/r0-s0/seed1", "rounds/r0/s0/training"]  # the round's candidate and the final seed, inline
    assert any(isinstance(e, RoundStarted) and e.author == "echo" for e in events)
    config = json.loads((result.run_dir / "config.json").read_text())
    assert config["backend"] == "echo" and config["executor"] == "inline" and config["author"] == "echo"


def test_a_choice_that_is_not_registered_is_refused_in_one_line(tmp_path: Path):
    with pytest.raises(ConfigError, match="unknown --llm 'echo': choose openai .*heuristic .*file"):
        RewardSearch("fetch/reach", backend="echo", runs_dir=tmp_path).run()
    with pytest.raises(ConfigError, match="unknown --executor 'inline': choose local .* or ray"):
        RewardSearch("fetch/reach", executor="inline", runs_dir=tmp_path).run()
    assert not list(tmp_path.iterdir())  # refused before a run folder exists


def test_a_name_is_registered_once(plugins):
    with pytest.raises(DuplicateChoice, match="'echo' is registered already"):
        register_backend(BackendSpec(name="echo", summary="", build=EchoBackend))
    with pytest.raises(DuplicateChoice, match="'inline' is registered already"):
        register_executor(ExecutorSpec(name="inline", summary="", open=lambda settings, resources, say: None))  # type: ignore[arg-type,return-value]
