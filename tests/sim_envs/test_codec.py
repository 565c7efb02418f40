"""One codec for every record that crosses a file (sim_envs/codec.py): each record's JSON derived from its fields, legacy
fields declared on the field, the curve and the component history typed, a wrong value one line naming the file and
the field, and every earlier run fixture read, written again and read back unchanged."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from policies.curve import CurvePoint
from sim_envs.codec import RecordError, read, write
from text2reward.runs.records import (
    Candidate,
    CheckOutcome,
    ComponentWindow,
    FailedSeed,
    FinalArm,
    FinalSummary,
    RoundPrompt,
    RoundSummary,
    RunState,
    TrainingSummary,
)
from text2reward.runs.store import RunStore

FIXTURES = Path(__file__).parents[1] / "fixtures"
RUNS = sorted(p.parent for p in FIXTURES.glob("*/*/config.json"))
RECORDS = {"rounds/r*/s*/candidate.json": Candidate, "rounds/r*/summary.json": RoundSummary, "rounds/r*/prompt.json": RoundPrompt,
           "final/summary.json": FinalSummary, "state.json": RunState}


@pytest.mark.parametrize("run", RUNS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_record_reads_typed_and_writes_back_what_it_read(run):
    """Each record of each earlier run reads into its class, its curves and histories typed, and what the codec writes
    reads back as the same record (nothing lost, nothing invented)."""
    seen = 0
    for pattern, kind in RECORDS.items():
        for path in sorted(run.glob(pattern)):
            record = read(kind, json.loads(path.read_text()), str(path))
            assert read(kind, json.loads(json.dumps(write(record))), str(path)) == record, path
            seen += 1
    assert seen >= 5
    trained = [c for c in RunStore(run).candidates() if c.training_result is not None]
    assert all(isinstance(p, CurvePoint) for c in trained for p in c.training_result.curve)
    assert all(isinstance(w, ComponentWindow) for c in trained for w in c.training_result.components)
    assert all(isinstance(p, CurvePoint) for c in trained for p in c.training.curve)


def test_the_fixtures_curves_and_histories_read_as_typed_points():
    trained = [c for run in RUNS for c in RunStore(run).candidates() if c.training_result is not None]
    assert len(trained) >= 2
    assert all(c.training_result.curve and c.training_result.components for c in trained)
    point = trained[0].training_result.curve[0]
    assert isinstance(point, CurvePoint) and point.steps > 0 and 0.0 <= point.success_rate <= 1.0


def test_unknown_fields_are_kept_and_fields_at_nothing_left_out():
    """A newer text2reward's field survives a rewrite by this one; a field that holds nothing is not written."""
    data = {"id": "r0-s0", "round": 0, "sample": 0, "status": "trained", "from_the_future": {"x": 1},
            "training": {"success_rate": 0.5, "episodes": 10, "curve": [{"steps": 100, "success_rate": 0.5, "new_figure": 2}]}}
    candidate = read(Candidate, data)
    assert candidate.extra == {"from_the_future": {"x": 1}}
    written = write(candidate)
    assert written["from_the_future"] == {"x": 1}
    assert "reason" not in written and "seeds" not in written and "warnings" not in written
    assert written["training"]["curve"] == [{"new_figure": 2, "steps": 100, "success_rate": 0.5, "mean_return": 0.0}]


def test_a_false_beside_a_default_of_none_is_written():
    """Only a field at its own default of nothing is left out: a failed check (ok False, default None: skipped) stays
    failed after a rewrite."""
    failed = CheckOutcome(ok=False, detail="boom")
    assert write(failed) == {"ok": False, "detail": "boom"} and read(CheckOutcome, write(failed)) == failed
    assert write(CheckOutcome()) == {"detail": ""}


def test_legacy_fields_are_declared_on_the_field():
    """What older layouts wrote differently reads as the field it became: a final arm's bare `failures` reasons, a
    summary's episodes from its evaluation's, a best success from the final one."""
    arm = read(FinalArm, {"success_rates": [0.5], "seeds": [1], "mean": 0.5, "std": 0.0, "failures": ["out of memory"]})
    assert arm.failed_seeds == [FailedSeed(seed="?", reason="out of memory")]
    assert "failures" not in write(arm) and write(arm)["failed_seeds"] == [{"seed": "?", "reason": "out of memory",
                                                                           "cause": "error", "attempts": 1}]
    summary = read(TrainingSummary, {"success_rate": 0.4, "eval_episodes": 10})
    assert (summary.episodes, summary.eval_episodes, summary.best_success_rate) == (10, 10, 0.4)


def _damage_curve(store: RunStore) -> Path:
    path = next(store.root.glob("rounds/r0/s0/candidate.json"))
    record = json.loads(path.read_text())
    record["training"]["curve"][0]["success_rate"] = "high"
    path.write_text(json.dumps(record))
    return path


def test_a_wrong_value_deep_in_a_record_is_one_line_naming_the_file_and_the_field(tmp_path):
    """A curve point whose success is no number used to pass through the reader untouched and fail later, wherever a
    reader did arithmetic on it; now the store refuses it where it is read, naming where it is."""
    run = next(r for r in RUNS if r.parent.name == "runs_head")
    shutil.copytree(run, tmp_path / run.name)
    store = RunStore(tmp_path / run.name)
    path = _damage_curve(store)
    with pytest.raises(RecordError) as caught:
        store.candidates()
    message = str(caught.value)
    assert str(path) in message and "'training.curve[0].success_rate' should be a number, got 'high'" in message
    assert "\n" not in message
    shown = subprocess.run([sys.executable, "-m", "text2reward.cli", "runs", "show", run.name, "--runs-dir", str(tmp_path)],
                           capture_output=True, text=True, timeout=300)
    assert shown.returncode != 0 and "Traceback" not in shown.stderr + shown.stdout
    assert "training.curve[0].success_rate" in shown.stderr + shown.stdout


def test_a_record_class_reads_only_what_it_declares():
    """Every run record is a dataclass the codec can read: a type it cannot read is the class's mistake, found here
    rather than by the first file that holds one."""
    import text2reward.runs.records as records

    kinds = [k for k in vars(records).values() if dataclasses.is_dataclass(k) and k.__module__ == records.__name__]
    assert len(kinds) >= 20
    for kind in kinds:
        required = {f.name: f for f in dataclasses.fields(kind)
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
        sample = {name: _sample(kind, name) for name in required}
        assert read(kind, json.loads(json.dumps(write(read(kind, sample))))) == read(kind, sample), kind


def _sample(kind: type, name: str):
    hint = str(dataclasses.fields(kind)[[f.name for f in dataclasses.fields(kind)].index(name)].type)
    if "ResultFile" in hint:
        return {"success_rate": 0.5}
    if hint.startswith("dict"):
        return {}
    if hint.startswith("list"):
        return []
    if "CandidateStatus" in hint:
        return "trained"
    if hint.startswith("int"):
        return 1
    if hint.startswith("float"):
        return 0.5
    if hint.startswith("bool"):
        return True
    return "x" if "None" not in hint else None


JOBS = sorted(p for run in RUNS for p in run.glob("**/job.json"))


@pytest.mark.parametrize("path", JOBS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_job_reads_in_its_layout_and_writes_back_in_todays(path):
    """A job.json of either layout (the first held the training settings at its top level) reads as a TrainJob whose
    settings are its own, and what the codec writes reads back as the same job."""
    from text2reward.training.job import TRAIN_DIR, read_job

    raw = json.loads(path.read_text())
    job = read_job(raw, str(path))
    settings = raw.get("train", raw)
    assert (job.train.task_id, job.train.steps, job.train.seed) == (settings["task_id"], settings["steps"], settings["seed"])
    assert job.train.out_dir.name == TRAIN_DIR and isinstance(job.train.out_dir, Path)
    assert read_job(json.loads(json.dumps(write(job))), str(path)) == job


def test_a_plan_round_trips_with_its_read_only_settings_and_seeds():
    """A training plan's hyper-parameters (a read-only mapping) and seeds (a tuple) are written as JSON and read back
    as what they were."""
    from policies.plan import TrainingPlan

    plan = TrainingPlan(steps=600, eval_freq=200, eval_episodes=2, final_eval_episodes=4, algo="sbx-sac",
                        hyperparams={"algo": "sbx-sac", "algo_kwargs": {"gradient_steps": 2}}, n_envs=2, seeds=(3,))
    data = json.loads(json.dumps(write(plan)))
    assert data["seeds"] == [3] and data["hyperparams"]["algo_kwargs"] == {"gradient_steps": 2}
    again = read(TrainingPlan, data, "job.json")
    assert again == plan and again.seeds == (3,) and again.hyperparams["algo_kwargs"] == {"gradient_steps": 2}
    with pytest.raises(TypeError):
        again.hyperparams["steps"] = 1  # type: ignore[index]
    with pytest.raises(RecordError, match=r"'seeds\[0\]' should be a whole number, got 'x'"):
        read(TrainingPlan, {**data, "seeds": ["x"]}, "job.json")


def test_paths_tuples_of_a_fixed_length_and_arrays_stored_as_lists():
    """A camera (numpy arrays, declared `stored_as` lists) and a keypoint (fixed-length tuples) read back as written;
    a tuple of the wrong length is a one-line error naming the field."""
    import numpy as np

    from sim_envs.camera import CameraModel
    from text2reward.runs.keypoint_record import Keypoint

    camera = CameraModel("corner", 64, 48, 45.0, np.array([1.0, 2.0, 3.0]), np.eye(3))
    data = json.loads(json.dumps(write(camera)))
    assert data["position"] == [1.0, 2.0, 3.0] and data["rotation"][1] == [0.0, 1.0, 0.0]
    again = read(CameraModel, data, "keypoints.json")
    assert isinstance(again.position, np.ndarray) and np.array_equal(again.rotation, camera.rotation)
    assert again.project(np.array([[1.0, 2.0, 2.0]]))[0].tolist() == camera.project(np.array([[1.0, 2.0, 2.0]]))[0].tolist()
    with pytest.raises(RecordError, match=r"'rotation\[2\]' should be a list of 3"):
        read(CameraModel, {**data, "rotation": [[1, 0, 0], [0, 1, 0], [0, 0]]}, "keypoints.json")
    point = Keypoint("grasp", (10.0, 20.0), 0.05, (0.1, 0.2, 0.3), anchor="obj", offset=(0.0, 0.0, 0.05))
    assert read(Keypoint, json.loads(json.dumps(write(point)))) == point
    with pytest.raises(RecordError, match=r"'pixel' should be a list of 2"):
        read(Keypoint, {**write(point), "pixel": [1.0, 2.0, 3.0]})
