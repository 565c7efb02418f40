"""What a researcher meets in the first hour, through the `t2r` command: a killed run says it was
interrupted (and how to finish it), run ids by prefix or `latest`, and mistakes named with the fix."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from polling import wait_for

from text2reward.runs.lock import LOCK_FILE
from text2reward.runs.store import RunStore


def t2r(*args: object, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "text2reward.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


def first_error(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory) -> RunStore:
    """A real `t2r run` killed while it trains (as a timeout or a closed laptop would): nothing it could write."""
    runs = tmp_path_factory.mktemp("killed") / "runs"
    process = subprocess.Popen(
        [sys.executable, "-m", "text2reward.cli", "run", "--task", "fetch/reach", "--llm", "heuristic", "--rounds", "1",
         "--samples", "1", "--steps", "100000", "--no-screen", "--runs-dir", str(runs)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        process_group=0)  # a group of its own, in this session: its jobs fork from the shared server
    try:
        root = wait_for(lambda: next(iter(runs.glob("*/rounds/r0/s0/training/worker.pid")), None), 300, "training to start")  # a bound against a hang only
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    store = RunStore(root.parents[4])
    assert store.state().status == "running" and (store.root / LOCK_FILE).exists(), "killed: no chance to record anything"
    return store


@pytest.mark.slow
def test_a_killed_run_says_it_was_interrupted_and_how_to_finish_it(killed_run):
    runs_dir = killed_run.runs_dir
    listing = t2r("runs", "--runs-dir", runs_dir)
    assert listing.returncode == 0 and "interrupted" in listing.stdout and "running" not in listing.stdout
    assert f"t2r resume {killed_run.run_id} --runs-dir {runs_dir}" in " ".join(listing.stdout.split())
    shown = t2r("runs", "show", "latest", "--runs-dir", runs_dir)
    assert shown.returncode == 0 and f"{killed_run.run_id} fetch/reach" in shown.stdout and "interrupted" in shown.stdout
    assert f"t2r resume {killed_run.run_id} --runs-dir {runs_dir}" in " ".join(shown.stdout.split())
    report = t2r("report", killed_run.run_id[:17], "--runs-dir", runs_dir)  # a unique prefix is enough
    assert report.returncode == 0, report.stderr
    text = (killed_run.root / "report.md").read_text()
    assert "status: **interrupted**" in text and "this report is **incomplete**" in text and "rounds done 0 of 1" in text


def test_run_ids_by_prefix_and_latest_and_what_is_refused(tmp_path):
    runs = tmp_path / "runs"
    for name in ("20260101-000000-fetch-reach-aaaaaa", "20260101-000001-fetch-reach-aaaabb"):
        (runs / name).mkdir(parents=True)
        (runs / name / "config.json").write_text('{"task_id": "fetch/reach"}')
    from text2reward.errors import ConfigError
    from text2reward.runs.store import resolve_run_id

    assert resolve_run_id(runs, "latest") == "20260101-000001-fetch-reach-aaaabb"
    assert resolve_run_id(runs, "20260101-000000") == "20260101-000000-fetch-reach-aaaaaa"
    with pytest.raises(ConfigError, match="matches 2 runs"):
        resolve_run_id(runs, "20260101")
    with pytest.raises(ConfigError, match="no run 'nope'"):
        resolve_run_id(runs, "nope")
    empty = t2r("runs", "show", "latest", "--runs-dir", tmp_path / "none")
    assert empty.returncode == 1 and "there are no runs in" in first_error(empty)


@pytest.mark.parametrize("args, message", [
    (("tasks", "--family", "metawrld"), "error: unknown --family 'metawrld'; the families are"),
    (("train", "--task", "fetch/reach", "--reward", "Expert"), "error: --reward Expert is not a reward; did you mean --reward expert?"),
])
def test_mistakes_name_the_fix(args, message):
    result = t2r(*args)
    assert result.returncode == 1 and first_error(result).startswith(message)


def test_progress_in_a_log_is_a_line_per_evaluation_and_phase_with_a_heartbeat(tmp_path):
    """Not a terminal (a log, CI, `| tee`): plain lines, never a bar wrapped at 80 columns, and never silent."""
    import io
    import json

    from rich.console import Console

    from policies.config import TrainConfig
    from text2reward.training.job import DONE_FILE, PROGRESS_FILE, TrainJob
    from text2reward.training.progress import TrainingBars

    job = TrainJob(train=TrainConfig(task_id="fetch/reach", out_dir=tmp_path / "r0-s0" / "train", steps=4000))
    out = Path(job.out_dir)
    out.mkdir(parents=True)
    log = io.StringIO()
    bars = TrainingBars(Console(file=log, force_terminal=False, width=80), refresh_seconds=0.0, heartbeat_seconds=0.0)
    bars.start([("r0-s0", job)])
    point = {"steps": 2000, "success_rate": 0.4, "mean_return": 12.345, "total_steps": 4000}
    (out / PROGRESS_FILE).write_text(json.dumps(point))  # as the worker publishes an evaluation
    bars.poll()
    (out / PROGRESS_FILE).write_text(json.dumps({**point, "phase": "final evaluation (10 episodes)"}))
    bars.poll()
    (out / DONE_FILE).write_text(json.dumps({"result": {**point, "steps": 4000, "success_rate": 0.9}}))
    bars.stop()
    lines = log.getvalue().splitlines()
    assert "r0-s0: 2000/4000 steps, success 0.40, return 12.35" in lines
    assert "r0-s0: 2000/4000 steps, success 0.40, return 12.35 · final evaluation (10 episodes)..." in lines
    assert "r0-s0: 4000/4000 steps, success 0.90, return 12.35 done" in lines
    assert any(line.startswith("training r0-s0: ") and line.endswith(" s elapsed") for line in lines), "the heartbeat"
    assert not any("━" in line for line in lines), "no progress bar in a log"


def test_a_budget_far_below_the_tasks_usual_one_is_warned_once():
    from sim_envs import get_task
    from text2reward.preflight import budget_warning

    task = get_task("fetch/reach")
    assert budget_warning(task, None) is None and budget_warning(task, task.default_steps) is None
    warning = budget_warning(task, 100)
    assert warning is not None and warning.startswith(f"warning: --steps 100 is far below fetch/reach's usual budget of {task.default_steps:,}")


SAWYER_REWARD = '''import numpy as np

def compute_dense_reward(self, action):
    distance = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    return -distance, {"distance": -distance}
'''


def test_validate_speaks_and_a_reward_for_another_view_names_the_real_attributes(tmp_path):
    good = tmp_path / "forward.py"
    good.write_text("def compute_dense_reward(self, action):\n    v = float(self.torso.x_velocity)\n    return v, {'v': v}\n")
    ok = t2r("validate", "--task", "hopper/forward", "--code", good)
    assert ok.returncode == 0, ok.stderr
    lines = ok.stdout.splitlines()
    assert lines[0].startswith("ok: it may train (100 states") and "jail" in lines[0]
    assert any(line.split()[:2] == ["ok", "time_per_call"] and "us per call" in line for line in lines)
    assert "Constant(s) may be too high" not in ok.stdout + ok.stderr

    sawyer = tmp_path / "sawyer.py"
    sawyer.write_text(SAWYER_REWARD)
    refused = t2r("validate", "--task", "hopper/forward", "--code", sawyer)
    assert refused.returncode == 1 and refused.stdout.startswith("rejected")
    assert "fail runs               AttributeError: 'PlanarWalkerView' object has no attribute 'robot'" in refused.stdout
    hint = "hint: PlanarWalkerView has no 'robot'; its attributes are dt, episode_step, task_success, torso"
    assert hint in refused.stdout and any(line.split()[:1] == ["skip"] for line in refused.stdout.splitlines())

    trained = t2r("train", "--task", "hopper/forward", "--reward", sawyer, "--steps", "200", "--out", tmp_path / "out")
    warning, error = trained.stderr.split("\n", 1)  # the short budget is warned about first
    assert trained.returncode == 1 and warning.startswith("warning: --steps 200 is far below hopper/forward's usual budget")
    assert error.startswith("error: reward program 'sawyer' failed at call 1:")
    assert hint in error and len(error.splitlines()) < 12, "the reward's own lines only, no Python internals"


def _all_commands():
    import typer

    from text2reward.cli import app

    def walk(command, path):
        for name, sub in getattr(command, "commands", {}).items():
            yield (*path, name)
            yield from walk(sub, (*path, name))

    return list(walk(typer.main.get_command(app), ()))


@pytest.mark.parametrize("command", _all_commands(), ids=" ".join)
def test_every_commands_help_has_an_example_and_no_type_tags_on_flags_or_arguments(command):
    """Help reads as a person writes it: `RUN_ID` not `{RUN_ID}`, no `<bool>`/`<str>` beside flags or
    arguments, every option explained, and an example to copy."""
    from typer.testing import CliRunner

    from text2reward.cli import app

    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output
    usage = next(line for line in result.output.splitlines() if "Usage:" in line)
    assert "{" not in usage, usage
    arguments = result.output.split("Arguments")[1].split("Options")[0] if "Arguments" in result.output else ""
    assert "<" not in arguments, arguments
    assert "Example: t2r " in result.output
    for line in result.output.splitlines():
        if line.lstrip("│ *").startswith("--"):
            assert len(line.strip("│ ").split()) > 1, f"option without help: {line.strip()}"
