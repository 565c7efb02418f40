"""The Python front door (`text2reward.api`): a search with typed events, its result, a reward validated and one
trained through the jail; the README's Python example and the scripts in examples/ run as a user runs them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from short_training import SHORT_ALGO

from text2reward import RewardSearch, SearchCallback, SearchResult, open_run, train_reward, validate_reward
from text2reward.errors import ConfigError
from text2reward.runs.run_events import (
    CandidateChecked,
    CandidateTrained,
    Evaluation,
    FinalDone,
    RoundDone,
    RoundStarted,
    RunEnded,
    RunEvent,
    TrainingStarted,
)
from text2reward.runs.statuses import RunStatus

ROOT = Path(__file__).resolve().parents[2]
GOOD = "import numpy as np\n\ndef compute_dense_reward(self, action):\n    d = float(np.linalg.norm(self.robot.ee_position - self.goal_position))\n    return -d, {'distance': -d}\n"


class Recorder(SearchCallback):
    """Keeps what each hook received, to check the hooks see the events meant for them."""

    def __init__(self) -> None:
        self.hooks: list[str] = []

    def on_round_started(self, event: RoundStarted) -> None:
        self.hooks.append("round_started")

    def on_candidate_checked(self, event: CandidateChecked) -> None:
        self.hooks.append("candidate_checked")

    def on_evaluation(self, event: Evaluation) -> None:
        self.hooks.append("evaluation")

    def on_candidate_trained(self, event: CandidateTrained) -> None:
        self.hooks.append("candidate_trained")

    def on_round_done(self, event: RoundDone) -> None:
        self.hooks.append("round_done")

    def on_final_done(self, event: FinalDone) -> None:
        self.hooks.append("final_done")

    def on_run_ended(self, event: RunEnded) -> None:
        self.hooks.append("run_ended")


@pytest.mark.slow
def test_a_search_reports_typed_events_and_returns_its_result(tmp_path):
    events: list[RunEvent] = []
    recorder = Recorder()
    result = RewardSearch("fetch/reach", backend="heuristic", rounds=1, samples=1, steps=300, eval_freq=150, eval_episodes=2,
                          final_seeds=1, compare_expert=False, video=False, algo=SHORT_ALGO, runs_dir=tmp_path, callbacks=[events.append, recorder]).run()
    kinds = [type(e) for e in events]
    assert kinds[0] is not RunEnded and kinds[-1] is RunEnded
    order = [RoundStarted, CandidateChecked, TrainingStarted, CandidateTrained, RoundDone, FinalDone, RunEnded]
    positions = [kinds.index(kind) for kind in order]
    assert positions == sorted(positions), [k.__name__ for k in kinds]
    evaluations = [e for e in events if isinstance(e, Evaluation)]
    assert any(e.job == "r0-s0" and e.episodes == 2 for e in evaluations)  # read from the running job as it evaluated
    assert [e.steps for e in evaluations if e.job == "r0-s0"] == sorted({e.steps for e in evaluations if e.job == "r0-s0"})
    assert recorder.hooks[0] == "round_started" and recorder.hooks[-1] == "run_ended" and "evaluation" in recorder.hooks
    assert isinstance(result, SearchResult) and result.status == RunStatus.FINISHED and result.succeeded
    assert result.best is not None and "def compute_dense_reward" in result.best.code and result.best.file.is_file()
    low, high = result.best.interval
    assert 0.0 <= low <= result.best.success_rate <= high <= 1.0
    assert result.comparison is not None and result.comparison.best is not None and len(result.comparison.best.success_rates) == 1
    assert result.report is not None and result.report.is_file()
    assert open_run("latest", tmp_path).best == result.best


def test_a_setting_that_does_not_exist_is_one_line_naming_those_that_do(tmp_path):
    with pytest.raises(ConfigError, match=r"RewardSearch got an unexpected keyword argument 'roundz'; the settings are .*rounds"):
        RewardSearch("fetch/reach", roundz=2, runs_dir=tmp_path)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="rounds must be a positive int, got 0"):
        RewardSearch("fetch/reach", rounds=0, runs_dir=tmp_path)
    assert not list(tmp_path.iterdir())


def test_a_reward_string_is_validated_in_the_jail():
    report = validate_reward(GOOD, "metaworld/reach-v3")
    assert report.ok and report.isolation
    bad = validate_reward(GOOD.replace("return -d", "return undefined_name"), "metaworld/reach-v3")
    assert not bad.ok and any("undefined_name" in e for e in bad.errors)


def test_a_reward_file_trains_in_the_jail(tmp_path):
    reward = tmp_path / "reward.py"
    reward.write_text(GOOD)
    result = train_reward(reward, "metaworld/reach-v3", steps=200, out_dir=tmp_path / "train", eval_freq=200, eval_episodes=1,
                          overrides={"learning_starts": 100, "final_eval_episodes": 1})
    assert result.steps == 200 and result.reward_isolation  # the file ran in the jail, not in this process
    with pytest.raises(ConfigError, match="is not text"):
        binary = tmp_path / "binary.py"
        binary.write_bytes(bytes(range(256)))
        train_reward(binary, "metaworld/reach-v3", steps=200, out_dir=tmp_path / "train2")


def readme_python_example() -> str:
    """The README's front-door example: the first ```python block after its "From Python" heading."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## From Python"):]
    return re.search(r"```python\n(.*?)```", section, re.S)[1]  # type: ignore[index]


@pytest.mark.slow
def test_the_readme_python_example_runs(tmp_path):
    code = readme_python_example()
    assert "RewardSearch(" in code and "validate_reward(" in code
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "finished" in done.stdout and "def compute_dense_reward" in done.stdout
    assert re.search(r"^r0-s0: \d+ steps, success \d\.\d\d$", done.stdout, re.M), done.stdout  # the callback printed at its budget
    assert (tmp_path / "reach_policy.zip").is_file()  # result.policy saved, and loaded back from the file alone


@pytest.mark.slow
@pytest.mark.parametrize("script, args, expect", [
    ("search_reward.py", ["--rounds", "1", "--samples", "1", "--steps", "300", "--final-seeds", "0"], "best reward r0-s0 by heuristic (rule-based"),
    ("validate_and_train.py", ["--task", "fetch/reach", "--steps", "300"], "success "),
])
def test_the_example_scripts_run(script, args, expect, tmp_path):
    command = [sys.executable, str(ROOT / "examples" / script), *args]
    if script == "search_reward.py":
        command += ["--runs-dir", str(tmp_path / "runs")]
    else:
        command += ["--out", str(tmp_path / "out")]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert expect in done.stdout
