"""The `t2r` commands a new user runs, as subprocesses: outputs, files and one-line errors."""

import json
import subprocess
import sys

import pytest


def t2r(*args, check=True):
    result = subprocess.run([sys.executable, "-m", "text2reward.cli", *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(result.stderr)
    return result


def test_tasks_json_has_the_promised_keys():
    tasks = json.loads(t2r("tasks", "--json").stdout)
    assert len(tasks) == 74  # 50 MetaWorld, 4 Fetch, 4 Franka, 4 Adroit, 4 Shadow, 8 locomotion
    for task in tasks:
        assert {"id", "family", "description", "has_expert_reward", "has_scripted_policy"} <= set(task)


def test_tasks_show_prints_the_view():
    out = t2r("tasks", "--show", "fetch/push").stdout
    assert "class FetchObjectView" in out and "goal_position" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (("train", "--task", "metaworld/nope-v3"), "unknown task 'metaworld/nope-v3'"),
        (("train", "--task", "fetch/reach", "--reward", "missing.py"), "reward file missing.py does not exist"),
        (("evaluate", "--model", "no/such/dir"), "no trained policy at no/such/dir"),
    ],
)
def test_user_mistakes_give_one_line_and_nonzero_exit(args, message):
    result = t2r(*args, check=False)
    assert result.returncode == 1
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_reward_file_without_the_function(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def reward(self, action):\n    return 0.0\n")
    result = t2r("train", "--task", "fetch/reach", "--reward", str(bad), "--steps", "10", "--out", str(tmp_path / "o"), check=False)
    assert result.returncode == 1 and "defines no compute_dense_reward" in result.stderr


@pytest.mark.slow
def test_train_evaluate_video_round_trip(tmp_path):
    out = tmp_path / "run"
    t2r("train", "--task", "fetch/reach", "--steps", "150", "--eval-freq", "150", "--eval-episodes", "1", "--out", str(out))
    result = json.loads((out / "result.json").read_text())
    assert result["task"] == "fetch/reach" and result["steps"] == 150
    summary = json.loads(t2r("evaluate", "--model", str(out), "--episodes", "2", "--json").stdout)
    assert summary["episodes"] == 2 and 0.0 <= summary["success_rate"] <= 1.0
    assert 0.0 <= summary["mean_progress"] <= 1.0 and summary["progress_se"] >= 0.0  # toward fetch/reach's own rule
    t2r("video", "--model", str(out), "--size", "64")
    video = out / "rollout.mp4"
    assert video.is_file() and video.stat().st_size > 1000
    import imageio.v2 as imageio

    frames = imageio.mimread(video)
    assert len(frames) == 51 and frames[0].shape == (64, 64, 3)
