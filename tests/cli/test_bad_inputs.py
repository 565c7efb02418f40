"""Bad inputs a newcomer meets, through the real `t2r` command: each is one line naming the problem (the folder, the
setting, the file and line) and the fix, a non-zero exit, no traceback, and nothing written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_runs import FINISHED_RUN as FIXTURE


def t2r(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "text2reward.cli", *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    """The error a command printed: exactly one line, the last, and no traceback (a warning may come before it)."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert done.returncode != 0 and len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in done.stderr, done.stderr
    return errors[0]


def unwritable_places(tmp_path: Path) -> list[Path]:
    """Folders that cannot be written: one below a file (for anyone, root included), and a read-only folder where the
    tests do not run as root (root writes through permissions)."""
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder\n")
    places = [blocker / "runs"]
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        places.append(locked / "runs")
    return places


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def test_run_into_an_unwritable_runs_folder_is_one_line_before_anything_is_written(tmp_path):
    for place in unwritable_places(tmp_path):
        before = files_under(tmp_path)
        line = one_line_error(t2r("run", "--task", "fetch/reach", "--runs-dir", str(place)))
        assert str(place) in line and "cannot be written" in line and "--runs-dir" in line
        assert files_under(tmp_path) == before


def test_listing_runs_whose_index_cannot_be_written_is_one_line(tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURE, runs / FIXTURE.name)
    (runs / "index.sqlite").mkdir()  # sqlite cannot open it: "unable to open database file", as on a read-only folder
    line = one_line_error(t2r("runs", "--runs-dir", str(runs)))
    assert str(runs) in line and "index.sqlite" in line and "--runs-dir" in line
    empty = unwritable_places(tmp_path)[0].parent  # a folder with nothing in it: an empty list, no index created
    done = t2r("runs", "--runs-dir", str(empty))
    assert done.returncode == 0 and "no runs" in done.stdout and not (empty / "index.sqlite").exists()


@pytest.mark.parametrize("task, algo, setting", [
    ("fetch/reach", "sac", "batch_size=-1"),       # SB3's SAC takes it; its first update fails with "negative dimensions"
    ("fetch/reach", "sac", "batch_size=0"),
    ("fetch/reach", "sac", "learning_starts=-5"),
    ("fetch/reach", "sac", "gradient_steps=0"),
    ("hopper/forward", "ppo", "n_epochs=0"),         # SB3's PPO takes it, and never learns
])
def test_a_size_the_library_does_not_check_is_refused_naming_the_setting(tmp_path, task, algo, setting):
    line = one_line_error(t2r("run", "--task", task, "--algo", algo, "--hp", setting, "--rounds", "1", "--samples", "1", "--steps", "100",
                              "--final-seeds", "0", "--no-video", "--runs-dir", str(tmp_path / "runs"), timeout=300))
    assert f"--hp {setting}" in line and "whole number" in line
    assert not (tmp_path / "runs").exists()


def test_a_task_file_that_raises_is_named_with_its_line(tmp_path):
    task_file = tmp_path / "my_task.py"
    task_file.write_text("from sim_envs import derive_task\n\nLIMIT = 3\nTASK = derive_task(undefined_parent, 'x/y')\n")
    for command in (["tasks"], ["run", "--task", "x/y", "--runs-dir", str(tmp_path / "runs")]):
        line = one_line_error(t2r(*command, "--task-file", str(task_file)))
        assert str(task_file) in line and "line 4" in line and "NameError" in line and "undefined_parent" in line
    assert not (tmp_path / "runs").exists()
