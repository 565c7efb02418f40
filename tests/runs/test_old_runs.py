"""Runs written by earlier layouts still open, show, report, render and resume: `tests/fixtures/runs_v1` (records
before they were versioned, git d86ee1d) and `tests/fixtures/runs_head` (the layout before typed records and specs,
git 32cb96d: a finished two-round heuristic run and a run that ended with no result, its reason one line of prose)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from text2reward import RewardSearch, open_run
from text2reward.dashboard.runview import load_run
from text2reward.runs.records import Candidate, ComponentStats, ComponentWindow
from text2reward.runs.report import write_report
from text2reward.runs.statuses import CandidateStatus, RunStatus
from text2reward.runs.store import RunStore, list_runs

FIXTURES = Path(__file__).parents[1] / "fixtures"
FINISHED = ["runs_v1/20261123-133612-fetch-reach-e552a4", "runs_head/20261125-213341-fetch-reach-4ed575"]
NO_RESULT = "runs_head/20261125-213719-fetch-reach-e25f23"


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """Copies of the old runs (a test may rewrite them), in one runs folder."""
    for run in [*FINISHED, NO_RESULT]:
        shutil.copytree(FIXTURES / run, tmp_path / Path(run).name)
    config_path = tmp_path / Path(NO_RESULT).name / "config.json"
    config = json.loads(config_path.read_text())
    config["reply_files"] = [str(tmp_path / Path(NO_RESULT).name / "pasted_reply.md")]  # where this machine has it
    config_path.write_text(json.dumps(config))
    return tmp_path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "text2reward.cli", *args], capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize("run", FINISHED)
def test_a_finished_old_run_reads_as_typed_records(run, runs):
    store = RunStore(runs / Path(run).name)
    candidates = store.candidates()
    assert candidates and all(isinstance(c, Candidate) and c.status == CandidateStatus.TRAINED for c in candidates)
    assert all(c.training is not None and c.training.episodes >= 1 and c.training.curve for c in candidates)
    assert store.state().status == RunStatus.FINISHED
    final = store.final_summary()
    assert final is not None and final.best_candidate in {c.id for c in candidates} and final.best is not None
    header = store.header()
    assert header.task_id == "fetch/reach" and header.rule_based and header.author == "heuristic (rule-based, no language model)"
    result = open_run(store.run_id, runs)
    assert result.best is not None and "def compute_dense_reward" in result.best.code


@pytest.mark.parametrize("run", FINISHED)
def test_a_finished_old_run_shows_reports_and_renders(run, runs):
    run_id = Path(run).name
    listed = cli("runs", "--runs-dir", str(runs), "--json")
    assert listed.returncode == 0 and run_id in {r["run_id"] for r in json.loads(listed.stdout)}
    row = next(r for r in json.loads(listed.stdout) if r["run_id"] == run_id)
    assert row["best_episodes"] >= 1  # the list states the best's success with its episodes, as `runs show` does
    shown = cli("runs", "show", run_id, "--runs-dir", str(runs))
    assert shown.returncode == 0 and "finished" in shown.stdout and "heuristic (rule-based" in shown.stdout, shown.stderr
    assert "episodes, 95% interval" in shown.stdout  # a round's best success with its episodes, never a bare float
    store = RunStore(runs / run_id)
    report = write_report(store).read_text()
    assert "heuristic (rule-based, no language model)" in report and "## Final comparison" in report
    view = load_run(store, lambda relative: f"/files/{relative}")
    assert view.best_id is not None and view.rounds and view.backend == "heuristic (rule-based, no language model)"
    assert all(c.author for r in view.rounds for c in r.candidates)


def test_an_old_no_result_run_says_why_and_resumes_to_the_same_end(runs):
    store = RunStore(runs / Path(NO_RESULT).name)
    assert store.state().status == RunStatus.NO_RESULT and store.state().untrained == []  # prose only, then
    view = load_run(store, lambda relative: relative)
    assert "r0-s0 no_code" in view.untrained_reason  # the run's own line, as written
    result = RewardSearch.resume(store.run_id, runs)
    assert result.status == RunStatus.NO_RESULT and not result.succeeded
    state = store.state()
    assert [(u.candidate, u.status) for u in state.untrained] == [("r0-s0", CandidateStatus.NO_CODE)]  # now structured
    assert "no candidate trained: r0-s0 no_code" in (state.reason or "")


def test_a_finished_old_run_resumes_without_training_again(runs):
    run_id = Path(FINISHED[1]).name
    before = {p: p.stat().st_mtime_ns for p in (runs / run_id).rglob("done.json")}
    result = RewardSearch.resume(run_id, runs)
    assert result.status == RunStatus.FINISHED and result.best is not None
    assert {p: p.stat().st_mtime_ns for p in (runs / run_id).rglob("done.json")} == before  # nothing retrained
    assert {row["run_id"] for row in list_runs(runs)} >= {Path(r).name for r in FINISHED}


BENT = [  # what a reward naming its components `_components`, `_steps` and `_step_success` made of a history entry
    {"steps": 1e300, "components": 0.5, "native": -0.1},
    {"steps": 100, "components": {"reach": {"mean": 0.1, "min": 0.0, "max": 0.2}, "bad": 3.0}, "step_success": 7.0},
    "not an entry",
]


def test_a_run_whose_reward_bent_its_records_still_opens_reports_renders_and_resumes(runs):
    """Records written before component names had a namespace of their own: the bent entries are left out, the rest
    reads as before, and nothing fails for ever after (report, dashboard page, `t2r report`, resume, the feedback)."""
    from text2reward.feedback import reward_reflection

    run_id = Path(FINISHED[1]).name
    for path in (runs / run_id).rglob("candidate.json"):
        record = json.loads(path.read_text())
        if record.get("training_result"):
            record["training_result"]["components"] = BENT + record["training_result"]["components"]
            path.write_text(json.dumps(record))
    store = RunStore(runs / run_id)
    trained = [c for c in store.candidates() if c.training_result]
    assert trained
    for candidate in trained:
        history = candidate.training_result.components
        assert history[0] == ComponentWindow(steps=100, components={"reach": ComponentStats(mean=0.1, min=0.0, max=0.2)})
        assert all(isinstance(entry.components, dict) and isinstance(entry.steps, int) for entry in history)
        text = reward_reflection(candidate.training_result)
        assert "1e+300" not in text and "reach:" in text
    assert "## Final comparison" in write_report(store).read_text()
    assert load_run(store, lambda relative: f"/files/{relative}").best_id is not None
    reported = cli("report", run_id, "--runs-dir", str(runs))
    assert reported.returncode == 0, reported.stderr
    result = RewardSearch.resume(run_id, runs)
    assert result.status == RunStatus.FINISHED and result.best is not None
