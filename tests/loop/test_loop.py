"""The synthesis loop end to end: real backends (heuristic, and a real OpenAI-protocol server on
127.0.0.1), real sandbox, real training workers, real files; plus a killed worker and `t2r resume`."""

import json
import os
import signal
import subprocess
import sys

import pytest
from openai_server import OpenAITestServer, Say
from polling import wait_for
from short_training import SHORT_ALGO, SHORT_HP, SHORT_HP_ARGS

from text2reward.loop import start_run
from text2reward.runs.store import RunStore, list_runs
from text2reward.settings import RunConfig

pytestmark = pytest.mark.slow  # end-to-end: real training


GOOD = '''Here is a reward.

```python
import numpy as np

def compute_dense_reward(self, action):
    distance = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    reach = float(np.exp(-10.0 * distance))
    return reach, {"reach": reach}
```
'''

BUGGY = '''```python
import numpy as np

def compute_dense_reward(self, action):
    gap = self.robot.wrist_camera - self.goal_position
    return -float(np.linalg.norm(gap)), {"gap": 0.0}
```'''

NO_FUNCTION = '''```python
def reward(state):
    return 0.0
```'''

PROSE = "I would reward the robot for getting close to the goal, and for not moving too fast."


def t2r(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "text2reward.cli", *map(str, args)], capture_output=True, text=True, **kwargs)


def test_heuristic_run_two_rounds_with_report(tmp_path):
    config = RunConfig.of(task_id="fetch/reach", backend="heuristic", rounds=2, samples=1, steps=300, workers=2,
                          final_seeds=1, eval_freq=150, eval_episodes=2, overrides=SHORT_HP, algo=SHORT_ALGO, success_threshold=1.01)
    messages: list[str] = []
    store = start_run(config, tmp_path, emit=lambda e: messages.append(e.text))
    state = store.state()
    assert state.status == "finished" and state.rounds_done == 2
    candidates = store.candidates()
    assert [c.id for c in candidates] == ["r0-s0", "r1-s0"]
    assert all(c.status == "trained" and c.rule_based for c in candidates)
    assert "round 0: asking heuristic (rule-based, no language model) for 1 reward(s)" in messages
    # round 1 was prompted with the best round-0 code and its feedback
    prompt = store.read_json("rounds/r1/prompt.json")
    best0 = store.round_summary(0).best
    best_code = (store.root / store.candidate(best0).code_file).read_text()
    user_text = prompt["messages"][-1]["content"]
    assert best_code.strip().splitlines()[3] in user_text
    assert "success" in user_text.lower() and prompt["context"]["previous_best_code"] == best_code
    # every artefact is on disk
    for c in candidates:
        directory = store.candidate_dir(c.round, c.sample)
        assert (directory / "training" / "train" / "result.json").is_file()
        assert (directory / "training" / "feedback.md").read_text().strip()
        assert (directory / "training" / "rollout.mp4").stat().st_size > 1000
        # validation's names bind its training: the job carries them (a new name in training fails the candidate)
        job = json.loads((directory / "training" / "job.json").read_text())
        assert job["component_names"] == c.validation.component_names and job["component_names"]
    final = store.final_summary()
    assert final.best_candidate in {c.id for c in candidates}
    assert len(final.best.success_rates) == 1
    assert len(final.expert.success_rates) == 1
    report = (store.root / "report.md").read_text()
    assert "heuristic (rule-based, no language model)" in report and "```python" in report
    assert (store.root / "curves.png").stat().st_size > 1000
    # the index and the CLI see the run
    (row,) = list_runs(tmp_path)
    assert row["run_id"] == store.run_id and row["status"] == "finished" and row["backend"] == "heuristic"
    shown = t2r("runs", "show", store.run_id, "--runs-dir", tmp_path, check=True).stdout
    assert "rule-based" in shown and "r0-s0" in shown and "final best" in shown


def test_openai_server_loop_feeds_tracebacks_back_and_records_failures(tmp_path):
    script = [Say([GOOD, BUGGY, NO_FUNCTION, PROSE]), Say(GOOD.replace("10.0", "5.0")), Say(PROSE), Say(PROSE)]
    with OpenAITestServer(script=script) as server:
        config = RunConfig.of(task_id="metaworld/reach-v3", backend="openai", model="test-model", base_url=server.base_url,
                              rounds=1, samples=4, steps=200, workers=2, final_seeds=0, compare_expert=False,
                              eval_freq=200, eval_episodes=1, overrides=SHORT_HP, algo=SHORT_ALGO, video=False, screen_threshold=0.5)
        os.environ.setdefault("OPENAI_API_KEY", "test-key")
        store = start_run(config, tmp_path)
        requests = server.chat_requests
    statuses = {c.id: c.status for c in store.candidates()}
    assert statuses == {"r0-s0": "trained", "r0-s1": "trained", "r0-s2": "no_code", "r0-s3": "no_code"}
    first = requests[0]
    assert first["n"] == 4 and "compute_dense_reward" in first["messages"][-1]["content"]
    fix_requests = [r["messages"][-1]["content"] for r in requests[1:]]
    assert any("wrist_camera" in text and "AttributeError" in text for text in fix_requests), "traceback must reach the model"
    buggy = store.read_candidate(0, 1)
    assert len(buggy.attempts) == 2 and buggy.attempts[1].validation.ok
    assert buggy.screening["passed"]
    prose = store.read_candidate(0, 3)
    assert "compute_dense_reward" in prose.reason
    assert sum(c.tokens.completion for c in store.candidates()) > 0


def test_killed_worker_then_resume_keeps_finished_results(tmp_path):
    runs = tmp_path / "runs"  # passed as the relative `runs`, as a user would type it
    command = [sys.executable, "-m", "text2reward.cli", "run", "--task", "fetch/reach", "--llm", "heuristic",
               "--rounds", "1", "--samples", "2", "--workers", "1", "--steps", "300", "--final-seeds", "1",
               "--no-compare-expert", "--eval-freq", "150", "--eval-episodes", "1", "--no-video",  # videos: the two-round test
               *SHORT_HP_ARGS, "--runs-dir", "runs"]
    main = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    try:
        run_dir = wait_for(lambda: next(iter(runs.glob("*/config.json")), None), 60, "the run directory").parent
        first_done = wait_for(lambda: (p := run_dir / "rounds/r0/s0/training/done.json").is_file() and p, 240, "s0 to finish")
        pid_file = wait_for(lambda: (p := run_dir / "rounds/r0/s1/training/worker.pid").is_file() and p, 120, "s1's worker")
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        output, _ = main.communicate(timeout=300)
    finally:
        if main.poll() is None:
            main.kill()
    store = RunStore(run_dir)
    assert store.state().status == "incomplete", output
    assert store.read_candidate(0, 1).status == "interrupted"
    assert "t2r resume" in output
    kept = first_done.stat().st_mtime_ns, (run_dir / "rounds/r0/s0/candidate.json").read_text()

    assert not (run_dir / "runs").exists(), "stage files must not nest under a second runs/ folder"
    resumed = t2r("resume", run_dir.name, "--runs-dir", "runs", timeout=300, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert store.state().status == "finished"
    s0, s1 = store.candidates()
    assert s0.status == "trained"
    assert (first_done.stat().st_mtime_ns, (run_dir / "rounds/r0/s0/candidate.json").read_text()) == kept
    # early stopping is on: the retrained s1 is compared with s0's curve at the rung (150 steps); either way it
    # has a result, and a stop is recorded with its reason
    steps = json.loads((run_dir / "rounds/r0/s1/training/done.json").read_text())["result"]["steps"]
    if s1.status == "stopped_early":
        assert steps == 150 and "r0-s0" in s1.stopped_early.reason
    else:
        assert s1.status == "trained" and steps == 300


def test_a_driver_killed_outright_leaves_its_workers_to_the_resumed_run(tmp_path):
    """SIGKILL to the driver alone (no handler runs): its workers train on, and `t2r resume` adopts them instead of
    starting a second writer on their folders, then finishes with their results."""
    command = [sys.executable, "-m", "text2reward.cli", "run", "--task", "fetch/reach", "--llm", "heuristic",
               "--rounds", "1", "--samples", "2", "--workers", "2", "--steps", "1000", "--final-seeds", "0",
               "--eval-freq", "500", "--eval-episodes", "1", "--no-video", *SHORT_HP_ARGS,
               "--runs-dir", "runs"]
    driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    pids: list[int] = []
    try:
        run_dir = wait_for(lambda: next(iter((tmp_path / "runs").glob("*/config.json")), None), 60, "the run directory").parent
        pid_files = [run_dir / f"rounds/r0/s{i}/training/worker.pid" for i in (0, 1)]
        wait_for(lambda: all(p.is_file() for p in pid_files), 120, "both workers")
        pids = [int(p.read_text()) for p in pid_files]
        driver.kill()
        driver.wait()
        assert all((run_dir / f"rounds/r0/s{i}/training/done.json").exists() is False for i in (0, 1))
        resumed = t2r("resume", run_dir.name, "--runs-dir", "runs", timeout=300, cwd=tmp_path)
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if driver.poll() is None:
            driver.kill()
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [int(p.read_text()) for p in pid_files] == pids  # no second worker started on either folder
    store = RunStore(run_dir)
    assert store.state().status == "finished"
    assert all(c.status in ("trained", "stopped_early") for c in store.candidates()), [c.status for c in store.candidates()]


def images(request: dict) -> list[dict]:
    return [part for m in request["messages"] if isinstance(m["content"], list) for part in m["content"] if part.get("type") == "image_url"]


def test_the_feedback_prompt_of_a_two_candidate_vision_round_shows_both_and_the_keyframes(tmp_path):
    """Issue 29: the next prompt shows every candidate of the round, the loser as a diff with its success and interval,
    and the analysis says which evaluation episodes it describes. With vision on, it also shows the model the best
    candidate's rollout keyframes (none in the first prompt: nothing has been rolled out yet). One run for both: each
    two-round run costs four trainings."""
    other = GOOD.replace("10.0", "3.0")
    script = [Say([GOOD, other]), Say([GOOD, GOOD])]
    with OpenAITestServer(script=script) as server:
        os.environ.setdefault("OPENAI_API_KEY", "test-key")
        config = RunConfig.of(task_id="fetch/reach", backend="openai", model="vision-model", base_url=server.base_url,
                              vision=True, rounds=2, samples=2, steps=150, workers=2, final_seeds=0, compare_expert=False,
                              eval_freq=150, eval_episodes=2, overrides=SHORT_HP, algo=SHORT_ALGO, success_threshold=1.01)
        store = start_run(config, tmp_path)
        first, second = server.chat_requests
    assert images(first) == []
    shown = images(second)
    assert len(shown) == 4 and all(p["image_url"]["url"].startswith("data:image/png;base64,") for p in shown)
    assert all(len(store.read_candidate(0, sample).keyframes) == 4 for sample in (0, 1))
    summary = store.round_summary(0)
    best, loser = summary.best, ({"r0-s0", "r0-s1"} - {summary.best}).pop()
    prompt = "".join(part["text"] for part in second["messages"][-1]["content"] if part["type"] == "text")
    assert "## The other candidates of the last round, beside the best" in prompt
    assert f"The best so far, {best}: success " in prompt and f"### {loser}: success " in prompt
    assert prompt.count("of 2 episodes, 95% interval") >= 2
    assert "```diff" in prompt and ("-    reach = float(np.exp(-10.0" in prompt or "+    reach = float(np.exp(-10.0" in prompt)
    assert "the final evaluation's first 2 episodes of 2 (reset seeds 10000-10001)" in prompt
    assert "Each trained on the same budget (" in prompt and "Its own tips" in prompt  # issue 40: budget and the loser's tips
    if summary.tied:  # 2-episode evaluations almost always tie: the prompt says so and how the tie was broken
        assert summary.tied == [loser] and "Tied with it within noise" in prompt and summary.tie_break in prompt
    candidate = store.candidate(best)
    assert candidate.training.episodes == 2 and "object_goal_start" not in candidate.facts and "success" in candidate.facts
