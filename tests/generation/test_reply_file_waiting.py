"""The file backend waiting for K replies (issue 40 item 5): the message names K `--reply-file` flags, the help says the
flag repeats, and state.json names the round that waits, not the round the run was made in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from replies import REACH_REPLY
from short_training import SHORT_ALGO, SHORT_HP_ARGS

GOOD = REACH_REPLY
TINY_TRAINING = ["--steps", "150", "--eval-freq", "150", "--eval-episodes", "1", "--final-seeds", "0",
                 "--no-compare-expert", "--workers", "1", "--algo", SHORT_ALGO, *SHORT_HP_ARGS]


def t2r(*args: object, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "text2reward.cli", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "400"}, timeout=timeout)


def test_the_help_says_the_reply_file_flag_repeats():
    result = t2r("run", "--help")
    assert result.returncode == 0 and "repeat the flag, one file per sample" in " ".join(result.stdout.split())


@pytest.mark.slow
def test_a_run_waiting_for_two_replies_names_two_reply_files_and_its_round(tmp_path: Path):
    from text2reward.runs.store import RunStore

    for name in ("a", "b"):
        (tmp_path / f"{name}.md").write_text(GOOD)
    runs = tmp_path / "runs"
    first = t2r("run", "--task", "fetch/reach", "--llm", "file", "--reply-file", tmp_path / "a.md", "--reply-file", tmp_path / "b.md",
                "--rounds", "2", "--samples", "2", "--success-threshold", "1.01", "--no-screen", "--no-video", *TINY_TRAINING,
                "--runs-dir", runs)
    assert first.returncode == 0, first.stderr
    [config] = list(runs.glob("*/config.json"))
    store = RunStore(config.parent)
    state = store.state()
    assert state.status == "waiting_for_replies" and state.replies_needed == 2
    assert state.round == 1, "state.json names the round that waits for replies"
    said = " ".join(first.stdout.split())
    assert "--reply-file REPLY1.md --reply-file REPLY2.md (one --reply-file per reply)" in said, said
