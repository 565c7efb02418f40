"""The final comparison is never lost to something other than the reward: a final training that fails for another
cause is tried again (bounded), one that still fails is shown with its reason everywhere, and `t2r resume`
re-trains just the failed seeds. Real runs, real workers, a real SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from polling import wait_for
from short_training import SHORT_ALGO, SHORT_HP_ARGS

from text2reward.loop import FINAL_ATTEMPTS
from text2reward.runs.store import RunStore

pytestmark = pytest.mark.slow  # end-to-end: real training


def t2r(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "text2reward.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout)


def kill_each_attempt(pid_file_of, times: int) -> list[int]:
    """SIGKILL the final training's worker `times` times, each a fresh attempt (a new pid in its worker.pid)."""
    killed: list[int] = []
    for _ in range(times):
        def fresh_pid() -> int | None:
            path = pid_file_of()
            if path is None or not path.is_file():
                return None
            text = path.read_text().strip()
            return int(text) if text.isdigit() and int(text) not in killed else None

        pid = wait_for(fresh_pid, 240, f"attempt {len(killed) + 1} of the final training")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        killed.append(pid)
    return killed


def test_a_final_training_killed_every_time_is_shown_with_its_reason_and_resume_retrains_just_it(tmp_path):
    runs = tmp_path / "runs"
    command = [sys.executable, "-m", "text2reward.cli", "run", "--task", "fetch/reach", "--llm", "heuristic",
               "--rounds", "1", "--samples", "1", "--workers", "1", "--steps", "300", "--final-seeds", "1",
               "--no-compare-expert", "--eval-freq", "300", "--eval-episodes", "1", "--no-video", "--algo", SHORT_ALGO,
               *SHORT_HP_ARGS, "--runs-dir", str(runs)]
    main = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    try:
        run_dir = wait_for(lambda: next(iter(runs.glob("*/config.json")), None), 60, "the run directory").parent

        def final_pid_file() -> Path | None:
            return next(iter(run_dir.glob("final/*/seed*/worker.pid")), None)

        kill_each_attempt(final_pid_file, FINAL_ATTEMPTS)
        output, _ = main.communicate(timeout=300)
    finally:
        if main.poll() is None:
            main.kill()
    assert output.count("trying again") == FINAL_ATTEMPTS - 1, output
    store = RunStore(run_dir)
    final = store.final_summary()
    assert final is not None and final.best.success_rates == []
    (failed,) = final.best.failed_seeds
    assert failed.seed == 1 and failed.attempts == FINAL_ATTEMPTS and failed.cause == "interrupted"
    assert "killed by signal 9" in failed.reason
    candidate_done = run_dir / "rounds/r0/s0/training/done.json"
    kept = candidate_done.stat().st_mtime_ns

    shown = t2r("runs", "show", run_dir.name, "--runs-dir", str(runs), cwd=tmp_path)
    assert "final best seed 1 failed: training worker killed by signal 9" in shown.stdout, shown.stdout
    assert "re-trains the failed seeds" in shown.stdout
    report = (run_dir / "report.md").read_text()
    assert "Seeds that did not finish training" in report and f"best seed 1 ({FINAL_ATTEMPTS} attempt(s))" in report

    resumed = t2r("resume", run_dir.name, "--runs-dir", str(runs), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    final = store.final_summary()
    assert final is not None and len(final.best.success_rates) == 1 and final.best.failed_seeds == []
    assert final.best.seeds == [1] and store.state().status == "finished"
    assert candidate_done.stat().st_mtime_ns == kept  # the round's training was not redone
    assert json.loads((run_dir / "final" / final.best_candidate / "seed1" / "done.json").read_text())["result"]["steps"] == 300
