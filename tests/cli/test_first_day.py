"""What a newcomer meets on a first day, through the real `t2r` command: a damaged run file or a binary code file is
one line naming the file and the fix; a bad `--hp` value is refused before a run folder exists; tables and help stay
readable and copyable at 80 columns; a damaged run is listed as such (and `t2r runs rm` deletes it); `t2r demo` prints
every path it wrote, the best candidate's video among them, whole even when piped."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_runs import FINISHED_RUN as FIXTURE

DAMAGEABLE = ["state.json", "config.json", "rounds/r0/s0/candidate.json", "final/summary.json", "rounds/r1/summary.json"]


def t2r(*args: str, columns: int | None = None, cwd: Path | None = None, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "text2reward.cli", *args], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=cwd, check=False)


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    """The error a command printed: exactly one line, the last, and no traceback (a warning may come before it)."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert done.returncode != 0 and len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in done.stderr, done.stderr
    return errors[0]


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "runs" / FIXTURE.name)
    return tmp_path / "runs"


@pytest.mark.parametrize("damaged", DAMAGEABLE)
def test_a_truncated_record_is_one_line_naming_it_on_every_command(damaged, runs):
    """Each command that reads the file says so in one line naming it; a command that does not need it still works."""
    path = runs / FIXTURE.name / damaged
    path.write_text(path.read_text()[: len(path.read_text()) // 2])  # a write cut short
    failed = []
    for command in (["runs", "show", FIXTURE.name], ["report", FIXTURE.name], ["resume", FIXTURE.name]):
        done = t2r(*command, "--runs-dir", str(runs))
        if done.returncode == 0:
            continue
        line = one_line_error(done)
        assert str(path) in line and "is damaged" in line and f"t2r runs rm {FIXTURE.name}" in line, (command, line)
        failed.append(command[0])
    assert "resume" in failed  # resuming reads every record


def test_a_damaged_run_is_listed_as_damaged_beside_the_others_and_can_be_removed(runs):
    shutil.copytree(FIXTURE, runs / "20261125-000000-fetch-reach-aaaaaa")  # a healthy run beside it
    (runs / FIXTURE.name / "state.json").write_bytes(b"\x00\xff binary")
    listed = t2r("runs", "--runs-dir", str(runs), columns=80)
    assert listed.returncode == 0, listed.stderr
    assert "damaged" in listed.stdout and "20261125-000000-fetch-reach-aaaaaa" in listed.stdout and "finished" in listed.stdout
    assert "state.json is damaged (it is not text)" in listed.stdout
    removed = t2r("runs", "rm", FIXTURE.name, "--yes", "--runs-dir", str(runs))
    assert removed.returncode == 0 and not (runs / FIXTURE.name).exists()
    assert FIXTURE.name not in t2r("runs", "--runs-dir", str(runs)).stdout


def test_binary_code_and_reward_files_are_one_line(tmp_path):
    binary = tmp_path / "reward.py"
    binary.write_bytes(bytes(range(256)))
    line = one_line_error(t2r("validate", "--task", "fetch/reach", "--code", str(binary)))
    assert str(binary) in line and "is not text" in line
    line = one_line_error(t2r("train", "--task", "fetch/reach", "--reward", str(binary), "--steps", "100", "--out", str(tmp_path / "t")))
    assert str(binary) in line and "is not text" in line
    reply = tmp_path / "reply.md"
    reply.write_bytes(b"\xff\xfe\x00" * 40)
    line = one_line_error(t2r("run", "--task", "fetch/reach", "--llm", "file", "--reply-file", str(reply), "--rounds", "1",
                              "--samples", "1", "--runs-dir", str(tmp_path / "runs")))
    assert str(reply) in line and "is not text" in line


def test_a_bad_hp_value_is_refused_before_a_run_folder_exists(tmp_path):
    line = one_line_error(t2r("run", "--task", "fetch/reach", "--hp", "learning_rate=abc", "--runs-dir", str(tmp_path / "runs")))
    assert "--hp learning_rate='abc'" in line and "learning rate" in line.lower()
    line = one_line_error(t2r("run", "--task", "fetch/reach", "--hp", "batch_size=64", "--hp", "net_arch=wide",
                              "--runs-dir", str(tmp_path / "runs")))
    assert "net_arch" in line or "policy_kwargs" in line or "--hp" in line
    assert not (tmp_path / "runs").exists()


def test_tables_and_help_fit_80_columns_with_ids_whole(runs):
    ids = {t["id"] for t in json.loads(t2r("tasks", "--json").stdout)}
    for done in (t2r("tasks", columns=80), t2r("runs", "--runs-dir", str(runs), columns=80), t2r("run", "--help", columns=80)):
        assert done.returncode == 0, done.stderr
        lines = [line for line in done.stdout.splitlines() if str(runs) not in line]  # a path is printed whole, never folded
        assert max(len(line) for line in lines) <= 80, done.stdout
    listing = t2r("tasks", columns=80).stdout
    assert all(task_id in listing for task_id in ids)  # every id whole: it can be copied
    assert FIXTURE.name in t2r("runs", "--runs-dir", str(runs), columns=80).stdout
    stub = t2r("tasks", "--show", "metaworld/reach-v3", columns=80).stdout
    assert "class" in stub and any(len(line) > 80 for line in stub.splitlines())  # code is printed as written, never folded


@pytest.mark.slow
def test_the_demo_prints_every_path_whole_with_the_best_candidates_video(tmp_path):
    done = t2r("demo", "--steps", "300", "--runs-dir", str(tmp_path / "runs"), timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    paths = {}
    for line in done.stdout.splitlines():  # "label: /a/path", one a line
        label, sep, value = line.partition(": /")
        if sep and "/" not in label and " " not in value and "*" not in value:
            paths[label] = Path("/" + value)
    assert {"run folder", "report", "learning curves"} <= set(paths), done.stdout
    assert all(path.exists() for path in paths.values()), paths  # every printed path is whole (piped: never folded)
    run = paths["run folder"]
    best = json.loads((run / "state.json").read_text())["best"]
    videos = [label for label in paths if label.startswith("best candidate's rollout video")]
    assert videos == [f"best candidate's rollout video ({best})"], list(paths)
