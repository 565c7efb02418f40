"""A training's plan (policies.plan), resolved once by the loop, written into job.json and read by the worker and the
early stopper: `--algo` and `--hp` reach both; a job.json from before plans still trains."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from policies.config import TrainConfig
from policies.plan import TrainingPlan, resolve_training_plan
from sim_envs import codec, get_task
from sim_envs.errors import ConfigError
from text2reward.loop import Loop, start_run
from text2reward.runs.store import RunStore
from text2reward.settings import RunConfig
from text2reward.training.early_stop import EarlyStopRule, rung_steps
from text2reward.training.job import DONE_FILE, JOB_FILE, TrainJob, read_job

PPO_TINY = {"clip_range": 0.1, "n_steps": 64, "batch_size": 32, "eval_freq": 64}
"""`eval_freq` as an --hp, not --eval-freq: the early stopper then has to look the hyper-parameters up."""


def test_the_plan_resolves_the_budget_the_algorithm_and_its_flags_once():
    task = get_task("metaworld/reach-v3")
    config = TrainConfig(task_id=task.id, out_dir=Path("nowhere"), algo="ppo", overrides={"clip_range": 0.1}, n_envs=2, seed=5)
    plan = resolve_training_plan(config, task)
    assert (plan.steps, plan.algo, plan.n_envs, plan.seeds, plan.device) == (task.default_steps, "ppo", 2, (5,), "auto")
    assert plan.hyperparams["algo_kwargs"]["clip_range"] == 0.1 and plan.params().algo == "ppo"
    assert codec.read(TrainingPlan, json.loads(json.dumps(codec.write(plan)))) == plan
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.steps = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        plan.hyperparams["algo"] = "sac"  # type: ignore[index]
    with pytest.raises(ConfigError, match="clip_range"):  # the family's own algorithm (SAC) has no clip_range
        resolve_training_plan(dataclasses.replace(config, algo=None), task)
    with pytest.raises(ConfigError, match="--steps must be positive"):
        resolve_training_plan(dataclasses.replace(config, steps=0), task)


@pytest.mark.slow
def test_algo_ppo_with_its_hp_trains_and_the_early_stopper_reads_the_workers_plan(tmp_path):
    """`t2r run --task metaworld/... --algo ppo --hp clip_range=0.1` passed its checks, then failed in round 0: the early
    stopper looked the hyper-parameters up without --algo (SAC has no clip_range)."""
    config = RunConfig.of(task_id="metaworld/reach-v3", backend="heuristic", algo="ppo", overrides=dict(PPO_TINY), rounds=1,
                          samples=1, steps=128, workers=1, final_seeds=0, compare_expert=False, eval_episodes=1, video=False,
                          screen=False)  # neither is what this test checks: a MetaWorld episode is 500 steps to film or screen
    store = start_run(config, tmp_path)
    assert store.state().status == "finished", store.state().error
    [candidate] = store.candidates()
    assert candidate.status == "trained", candidate
    folder = store.candidate_dir(0, 0) / "training"
    job = read_job(json.loads((folder / JOB_FILE).read_text()))
    result = json.loads((folder / DONE_FILE).read_text())["result"]
    assert job.plan is not None and job.plan.algo == "ppo" and job.plan.hyperparams["algo_kwargs"]["clip_range"] == 0.1
    assert (result["algo"], result["hyperparams"]["algo_kwargs"]["clip_range"]) == ("ppo", 0.1)
    assert (result["requested_steps"], result["eval_freq"]) == (job.plan.steps, job.plan.eval_freq) == (128, 64)
    loop = Loop(RunStore.open(tmp_path, store.run_id))
    stopper = loop.early_stopper(0, job.plan)
    assert stopper.rungs == rung_steps(job.plan.steps, job.plan.eval_freq, EarlyStopRule())
    assert loop.job(folder, "code", None, config.seed, False, early_stop=True).plan == job.plan


@pytest.mark.slow
def test_the_worker_trains_by_the_plan_and_a_job_without_one_still_trains(tmp_path):
    """The plan in job.json is what the worker trains by (its budget over the settings'); a job.json written before plans
    (no "plan") resolves one from its settings, by the same function."""
    task = get_task("fetch/reach")
    for name, steps_in_settings, plan_steps in (("planned", None, 120), ("legacy", 80, None)):
        out = tmp_path / name
        train = TrainConfig(task_id=task.id, out_dir=out / "train", steps=steps_in_settings, eval_freq=40, eval_episodes=1,
                            overrides={"learning_starts": 20, "batch_size": 16}, algo="sac", device="cpu")
        job = TrainJob(train=train, analysis_episodes=0, resumable=False)
        data = codec.write(job)
        if plan_steps is not None:
            data["plan"] = codec.write(resolve_training_plan(dataclasses.replace(train, steps=plan_steps), task))
        else:
            assert "plan" not in data  # a job without a plan writes none: a job.json from before plans
        out.mkdir()
        (out / JOB_FILE).write_text(json.dumps(data))
        done = subprocess.run([sys.executable, "-m", "text2reward.training.job", str(out / JOB_FILE)], capture_output=True,
                              text=True, timeout=240)
        assert done.returncode == 0, done.stderr[-2000:]
        result = json.loads((out / DONE_FILE).read_text())["result"]
        assert result["requested_steps"] == result["steps"] == (plan_steps or steps_in_settings)
