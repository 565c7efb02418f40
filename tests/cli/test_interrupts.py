"""Ctrl-C and SIGTERM through the real `t2r` command, sent to the process once it has reached a known point (a file
it writes, never a sleep): `t2r run` says how to resume and exits 130 with the run recorded as interrupted and its time
kept; `t2r train` writes result.json marked interrupted with what it reached, and `t2r train --resume OUT` continues the
curve. Also: the end of a failed training prints its one error line last, and resuming a finished run says how to add
rounds and does it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from fixture_runs import FINISHED_RUN as FIXTURE
from short_training import SHORT_ALGO, SHORT_HP_ARGS

REACHED_WITHIN = 300.0
"""A bound far above what reaching the first evaluation takes on a loaded machine (about 20 s), never a wait."""
SMALL_SAC = ["--algo", SHORT_ALGO, *SHORT_HP_ARGS]


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "text2reward.cli", *args]


def t2r(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(*args), capture_output=True, text=True, timeout=timeout, check=False)


def signal_once_reached(args: list[str], reached: object, number: int) -> subprocess.CompletedProcess[str]:
    """Start `t2r ARGS`, send `number` to it (the process alone, not its group) once `reached()` is true, and wait."""
    process = subprocess.Popen(command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + REACHED_WITHIN
    while not reached() and process.poll() is None and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)
    assert process.poll() is None, "the command ended before the point the test waits for"
    assert reached(), "the command never reached the point the test waits for"  # type: ignore[operator]
    process.send_signal(number)
    stdout, stderr = process.communicate(timeout=REACHED_WITHIN)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_run_says_how_to_resume_and_keeps_its_time(tmp_path, number):
    runs = tmp_path / "runs"
    done = signal_once_reached(
        ["run", "--task", "fetch/reach", "--rounds", "1", "--samples", "1", "--steps", "400", "--eval-freq", "100",
         "--eval-episodes", "1", "--final-seeds", "0", "--no-video", *SMALL_SAC, "--runs-dir", str(runs)],
        lambda: any(runs.glob("*/rounds/r0/s0/training/progress.json")), number)
    (run,) = [p for p in runs.iterdir() if p.is_dir() and (p / "config.json").is_file()]
    assert done.returncode == 130, done.stderr[-2000:]
    assert f"interrupted; resume with `t2r resume {run.name} --runs-dir {runs}`" in done.stderr
    assert "Traceback" not in done.stderr
    state = json.loads((run / "state.json").read_text())
    assert state["status"] == "interrupted" and state["wall_seconds"] > 0
    shown = t2r("runs", "show", run.name, "--runs-dir", str(runs))
    assert "interrupted, 0 s" not in shown.stdout and "interrupted" in shown.stdout


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_training_keeps_what_it_reached_and_resume_continues_the_curve(tmp_path, number):
    out = tmp_path / "train"
    args = ["train", "--task", "fetch/reach", "--steps", "400", "--eval-freq", "100", "--eval-episodes", "1", *SMALL_SAC,
            "--out", str(out)]
    done = signal_once_reached(args, lambda: (out / "resume.ckpt").is_file(), number)  # written after the first evaluation
    assert done.returncode == 130, done.stderr[-2000:]
    assert f"resume with `t2r train --resume {out}`" in done.stderr and "Traceback" not in done.stderr
    stopped = json.loads((out / "result.json").read_text())
    assert stopped["interrupted"] is True and 100 <= stopped["steps"] < 400 and stopped["requested_steps"] == 400
    assert [p["steps"] for p in stopped["curve"]][:1] == [100] and (out / "model.zip").is_file()

    again = t2r("train", "--task", "fetch/reach", "--out", str(out))  # a fresh start would lose it: refused
    assert again.returncode == 1 and f"t2r train --resume {out}" in again.stderr

    resumed = t2r("train", "--resume", str(out))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    result = json.loads((out / "result.json").read_text())
    assert not result.get("interrupted") and result["steps"] == 400 and result["resumed_from"] == [stopped["steps"]]
    steps = [p["steps"] for p in result["curve"]]
    assert steps[:len(stopped["curve"])] == [p["steps"] for p in stopped["curve"]] and steps[-1] == 400 and steps == sorted(steps)
    assert result["curve"][0] == stopped["curve"][0]  # the points before the stop are kept as they were
    assert not (out / "resume.ckpt").exists()  # finished: nothing left to resume


def test_a_failed_training_ends_on_its_one_error_line(tmp_path):
    reward = tmp_path / "nan.py"
    reward.write_text("def compute_dense_reward(self, action):\n    return float('nan')\n")
    done = t2r("train", "--task", "fetch/reach", "--reward", str(reward), "--steps", "200", "--eval-episodes", "1",
               "--out", str(tmp_path / "out"))
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and lines[-1].startswith("error:") and "nan" in lines[-1], done.stderr[-2000:]
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_resuming_a_finished_run_says_how_to_add_rounds_and_adds_them(tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURE, runs / FIXTURE.name)
    done = t2r("resume", FIXTURE.name, "--runs-dir", str(runs))
    assert done.returncode == 0 and f"`t2r resume {FIXTURE.name} --runs-dir {runs} --rounds N`" in done.stdout, done.stderr[-2000:]
    more = t2r("resume", FIXTURE.name, "--runs-dir", str(runs), "--rounds", "3")
    assert more.returncode == 0, more.stderr[-2000:]
    assert "round 2:" in more.stdout and json.loads((runs / FIXTURE.name / "state.json").read_text())["rounds_done"] == 3


def test_a_run_killed_outright_shows_the_time_it_ran(tmp_path):
    """SIGKILL leaves no chance to record anything: `t2r runs show` and `t2r runs` count the killed attempt's time from
    its lock (its start to its last heartbeat), instead of "interrupted, 0 s"."""
    runs = tmp_path / "runs"
    # a budget it never reaches: killed after its first heartbeat (5 s in), whatever the CPU's speed
    process = subprocess.Popen(command("run", "--task", "fetch/reach", "--rounds", "1", "--samples", "1", "--steps", "100000",
                                       "--eval-freq", "100", "--eval-episodes", "1", "--final-seeds", "0", "--no-video", *SMALL_SAC,
                                       "--runs-dir", str(runs)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               process_group=0)  # a group of its own, in this session: its jobs fork from the shared server
    deadline = time.monotonic() + REACHED_WITHIN
    lock = list(runs.glob("*/run.lock"))
    while process.poll() is None and time.monotonic() < deadline:
        lock = list(runs.glob("*/run.lock"))
        if lock and json.loads(lock[0].read_text() or "{}").get("heartbeat", 0) > json.loads(lock[0].read_text() or "{}").get("started", 0) + 1:
            break  # a heartbeat after the start: the attempt has run for a while, as its lock says
        time.sleep(0.1)
    assert process.poll() is None and lock
    os.killpg(process.pid, signal.SIGKILL)  # the command and its workers, with no chance to write a word
    process.wait(timeout=60)
    run = lock[0].parent
    shown = t2r("runs", "show", run.name, "--runs-dir", str(runs))
    assert "interrupted" in shown.stdout and "interrupted, 0 s" not in shown.stdout, shown.stdout
    listed = json.loads(t2r("runs", "--runs-dir", str(runs), "--json").stdout)
    assert listed[0]["status"] == "interrupted" and listed[0]["wall_seconds"] >= 1
