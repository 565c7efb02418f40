"""Run records: one schema, written and read in one place, and a run written by the previous layout
(`tests/fixtures/runs_v1`, produced by git d86ee1d: a one-round, one-sample heuristic run on fetch/reach,
models and logs stripped) still opens in `t2r runs`, `t2r runs show`, the dashboard, and resumes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dashboard_support import DashboardServer

from sim_envs import codec
from sim_envs.errors import ConfigError
from text2reward.runs.records import SCHEMA_VERSION, write_versioned
from text2reward.runs.store import RunStore
from text2reward.settings import RunConfig
from text2reward.training.job import read_job

FIXTURE = Path(__file__).parents[1] / "fixtures" / "runs_v1"
RUN_ID = "20261123-133612-fetch-reach-e552a4"


@pytest.fixture
def runs_dir(tmp_path):
    target = tmp_path / "runs"
    shutil.copytree(FIXTURE, target)
    return target


def t2r(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "text2reward.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=600)


def test_old_records_open_upgraded(runs_dir):
    store = RunStore.open(runs_dir, RUN_ID)
    assert "schema" not in json.loads((store.root / "rounds/r0/s0/candidate.json").read_text())  # written before versions
    candidates = store.candidates()
    assert [c.id for c in candidates] == ["r0-s0"]
    assert all(write_versioned(c)["schema"] == SCHEMA_VERSION and c.status == "trained" for c in candidates)
    assert store.round_summary(0).best == "r0-s0"
    assert store.final_summary().best_candidate == "r0-s0"
    assert store.state().status == "finished"


def test_new_records_are_stamped_and_newer_ones_refused(runs_dir):
    store = RunStore.open(runs_dir, RUN_ID)
    record = json.loads((store.root / "rounds/r0/s0/candidate.json").read_text())
    store.write_candidate(store.candidate("r0-s0"))
    assert json.loads((store.root / "rounds/r0/s0/candidate.json").read_text())["schema"] == SCHEMA_VERSION
    (store.root / "rounds/r0/s0/candidate.json").write_text(json.dumps({**record, "schema": SCHEMA_VERSION + 1}))
    with pytest.raises(ConfigError, match="newer than this text2reward's .*upgrade text2reward"):
        store.candidates()


def test_old_run_in_the_cli_and_the_dashboard(runs_dir):
    listed = t2r("runs", "--runs-dir", runs_dir, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["run_id"] for r in json.loads(listed.stdout)] == [RUN_ID]
    shown = t2r("runs", "show", RUN_ID, "--runs-dir", runs_dir)
    assert shown.returncode == 0 and "r0-s0" in shown.stdout, shown.stderr
    with DashboardServer(runs_dir) as server:
        status, _, body = server.get(f"/runs/{RUN_ID}")
        assert status == 200 and b"r0-s0" in body


@pytest.mark.slow
def test_old_run_resumes_with_another_round(runs_dir):
    done = t2r("resume", RUN_ID, "--runs-dir", runs_dir, "--rounds", "2")
    assert done.returncode == 0, done.stderr[-2000:]
    store = RunStore.open(runs_dir, RUN_ID)
    assert [c.id for c in store.candidates()] == ["r0-s0", "r1-s0"]
    assert store.state().rounds_done == 2 and store.read_json("state.json")["schema"] == SCHEMA_VERSION
    round_one = store.candidates(1)
    assert all(store.read_json(f"rounds/r1/s{c.sample}/candidate.json")["schema"] == SCHEMA_VERSION
               and c.status in ("trained", "invalid", "failed", "screened_out") for c in round_one)


def test_job_files_hold_one_training_config_and_old_ones_still_read(runs_dir):
    """job.json holds policies' TrainConfig once; a job.json of the first layout (settings at the top level) reads the same."""
    from policies.config import TrainConfig

    store = RunStore.open(runs_dir, RUN_ID)
    old_path = store.root / "rounds/r0/s0/training/job.json"
    old = json.loads(old_path.read_text())
    assert "train" not in old and old["task_id"] == "fetch/reach"
    job = read_job(old)
    assert isinstance(job.train, TrainConfig) and job.train.task_id == "fetch/reach" and job.train.reward == "code"
    assert job.train.steps == old["steps"] and job.train.overrides == old["overrides"] and job.code_path == old["code_path"]
    assert Path(job.train.out_dir) == Path(old["out_dir"]) / "train" and job.out_dir == old["out_dir"]
    again = read_job(json.loads(json.dumps(codec.write(job))))
    assert again == job
    config = RunConfig.from_record(store.config_data())
    made = config.train_config("fetch/reach", Path("/x/train"), "code", 7)
    assert (made.steps, made.seed, made.eval_freq, made.overrides) == (config.training.steps, 7, config.training.eval_freq, config.training.overrides)
