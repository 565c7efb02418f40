"""Tiny real training runs write a complete result.json (SB3's SAC and PPO; SBX in test_sbx.py)."""

import json
from pathlib import Path

import pytest

from policies.train import RESULT_FILE, TrainConfig, load_policy, train
from sim_envs.errors import ConfigError

REQUIRED = {"success_rate", "mean_return", "steps", "wall_seconds", "curve", "components", "algo", "device"}


def test_sac_on_metaworld_writes_a_valid_result(tmp_path):
    config = TrainConfig(task_id="metaworld/reach-v3", out_dir=tmp_path, steps=400, eval_freq=200, eval_episodes=1, algo="sac",
                         overrides={"learning_starts": 100, "batch_size": 32})
    result = train(config)
    data = json.loads((tmp_path / RESULT_FILE).read_text())
    assert REQUIRED <= set(data)
    assert data["steps"] == 400 and data["algo"] == "sac" and data["device"] == "cpu"  # auto: SB3 SAC stays on the CPU
    assert [p["steps"] for p in data["curve"]] == [200, 400]
    # the settings really used, not the family's YAML defaults (eval_freq 2000, eval_episodes 5)
    assert data["eval_episodes"] == 1 and data["eval_freq"] == 200 and data["requested_steps"] == 400 and data["seed"] == 0
    assert data["hyperparams"]["eval_episodes"] == 1 and data["hyperparams"]["eval_freq"] == 200
    assert data["hyperparams"]["algo_kwargs"]["learning_starts"] == 100 and data["hyperparams"]["algo_kwargs"]["batch_size"] == 32
    assert len(data["final_eval"]["episodes"]) == 1
    assert 0.0 <= data["success_rate"] <= 1.0
    # progress toward the success rule (policies.score): in every evaluation point and in the final evaluation
    assert all(0.0 <= p["mean_progress"] <= 1.0 and p["progress_se"] >= 0.0 for p in data["curve"])
    assert 0.0 <= data["mean_progress"] <= 1.0 and data["final_eval"]["episodes"][0]["progress"] == data["mean_progress"]
    assert data["components"][-1]["components"]["expert"]["max"] > 0
    assert (tmp_path / "model.zip").is_file() and any((tmp_path / "tb").iterdir())
    model, meta = load_policy(tmp_path)
    assert meta["task"] == "metaworld/reach-v3" and result.success_rate == data["success_rate"]


def test_ppo_on_locomotion_with_a_reward_file(tmp_path):
    reward = tmp_path / "flip.py"
    reward.write_text("def compute_dense_reward(self, action):\n    return self.torso.pitch_velocity, {'spin': self.torso.pitch_velocity}\n")
    config = TrainConfig(task_id="hopper/front_flip", out_dir=tmp_path / "out", reward=str(reward), steps=256,
                         eval_freq=256, eval_episodes=1, overrides={"n_steps": 64, "batch_size": 32})
    result = train(config)
    assert result.algo == "ppo" and result.steps >= 256 and result.reward == "flip"
    assert "spin" in result.components[-1]["components"]


def test_several_envs_train_and_evaluate_a_jailed_reward_at_the_kept_update_ratio(tmp_path):
    """SBX SAC on 2 envs, the reward file in the jail (one jailed worker serves both envs): it trains, is evaluated by the
    task's success test, logs the reward's components, and keeps one update per env step (the family's 4 every 4 steps become 8 every 4 vector steps of 2 envs)."""
    reward = tmp_path / "reach.py"
    reward.write_text("import numpy as np\n\ndef compute_dense_reward(self, action):\n"
                      "    d = float(np.linalg.norm(self.robot.ee_position - self.goal_position))\n    return -d, {'reach': -d}\n")
    config = TrainConfig(task_id="metaworld/reach-v3", out_dir=tmp_path / "out", reward=str(reward), steps=320, eval_freq=160,
                         eval_episodes=1, n_envs=2, algo="sbx-sac", overrides={"learning_starts": 100, "batch_size": 32})
    result = train(config)
    data = json.loads((tmp_path / "out" / RESULT_FILE).read_text())
    kwargs = data["hyperparams"]["algo_kwargs"]  # the family's 4 updates every 4 vector steps, doubled: one per env step
    assert data["hyperparams"]["n_envs"] == 2 and (kwargs["train_freq"], kwargs["gradient_steps"]) == (4, 8)
    assert result.steps == 320 and [p["steps"] for p in data["curve"]] == [160, 320] and len(data["final_eval"]["episodes"]) == 1
    assert "reach" in data["components"][-1]["components"] and data["device"] == "cpu"


def test_expert_on_a_task_without_one_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="has no expert reward; use --reward sparse"):
        train(TrainConfig(task_id="ant/wave_leg", out_dir=tmp_path, steps=10))


def _has_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def test_a_gpu_that_is_not_there_is_refused(tmp_path):
    """Without CUDA, `cuda` is refused; with it, a GPU index past the count is (no skip either way)."""
    device, message = ("cuda:99", "names no GPU here") if _has_cuda() else ("cuda", "no CUDA GPU is visible")
    with pytest.raises(ConfigError, match=message):
        train(TrainConfig(task_id="metaworld/reach-v3", out_dir=tmp_path, steps=10, device=device, algo="sac"))


def test_auto_keeps_ppo_and_sb3_sac_on_the_cpu():
    """SB3's SAC ran slower on an H100 than on one core (81 vs 106 steps/s): `auto` never picks the slower device."""
    from policies.train import resolve_device

    assert resolve_device("auto", "ppo") == "cpu"
    assert resolve_device("auto", "sac") == "cpu"
    assert resolve_device("auto", "sac", n_envs=16) == "cpu"
    assert resolve_device("cpu", "sac") == "cpu"


@pytest.mark.parametrize("backend, on_policy, n_envs, gpus, sharers, expected", [
    ("sbx", False, 1, 1, 1, "cpu"),    # 0.68x one core on an H100 (benchmarks/RESULTS.md, throughput)
    ("sbx", False, 2, 1, 1, "cpu"),
    ("sbx", False, 4, 1, 1, "cuda"),   # 1.28-1.57x
    ("sbx", False, 16, 1, 1, "cuda"),  # 5x
    ("sbx", False, 16, 1, 2, "cuda"),  # two jobs share the GPU's ~700-750 steps/s: ~350 each, above one CPU job's ~260
    ("sbx", False, 16, 1, 4, "cpu"),   # four jobs ran 174 steps/s each on the GPU
    ("sbx", False, 16, 1, 8, "cpu"),   # eight ran 93 each
    ("sbx", False, 16, 0, 1, "cpu"),   # no GPU
    ("sbx", True, 16, 1, 1, "cpu"),    # PPO's small updates
    ("sb3", False, 16, 1, 1, "cpu"),   # SB3's per-update dispatch: unmeasured above one env, so never assumed faster
])
def test_auto_follows_the_measured_rule(backend, on_policy, n_envs, gpus, sharers, expected):
    from policies.train import auto_device

    assert auto_device(backend, on_policy, n_envs, gpus, sharers) == expected


def test_several_envs_keep_the_updates_per_env_step():
    """n_envs envs take n_envs x the family's gradient steps per vector step (SBX compiles them as one call), so the
    update-to-data ratio stays the one the family was tuned at; a chosen `--hp gradient_steps` and PPO are left alone."""
    from policies.plan import resolve_training_plan
    from sim_envs import get_task

    task = get_task("metaworld/reach-v3")
    plan = lambda **kw: resolve_training_plan(TrainConfig(task_id=task.id, out_dir=Path("nowhere"), **kw), task)  # noqa: E731
    assert plan().hyperparams["algo_kwargs"]["gradient_steps"] == 4  # MetaWorld: 4 updates every 4 steps
    assert plan(n_envs=4).hyperparams["algo_kwargs"]["gradient_steps"] == 16
    assert plan(n_envs=4, overrides={"gradient_steps": 2}).hyperparams["algo_kwargs"]["gradient_steps"] == 2
    assert "gradient_steps" not in plan(n_envs=4, algo="ppo").hyperparams["algo_kwargs"]


def test_t2r_train_records_the_settings_it_used(tmp_path):
    """`t2r train --eval-episodes 1` once stored the YAML's 5: result.json holds what the run used."""
    from typer.testing import CliRunner

    from text2reward.cli import app

    out = tmp_path / "out"
    args = ["train", "--task", "metaworld/reach-v3", "--steps", "152", "--eval-freq", "152", "--eval-episodes", "1", "--seed", "7",
            "--device", "cpu", "--out", str(out), "--hp", "learning_starts=50", "--hp", "batch_size=16", "--hp", "eval_freq=999"]
    outcome = CliRunner().invoke(app, args)
    assert outcome.exit_code == 0, outcome.output
    data = json.loads((out / RESULT_FILE).read_text())
    assert (data["eval_episodes"], data["eval_freq"], data["seed"], data["device"], data["requested_steps"]) == (1, 152, 7, "cpu", 152)
    assert data["steps"] == 152 and [p["steps"] for p in data["curve"]] == [152]  # a whole number of MetaWorld's 4-step collections
    assert data["hyperparams"]["eval_episodes"] == 1 and data["hyperparams"]["eval_freq"] == 152  # the flag beats --hp and the YAML
    assert data["hyperparams"]["algo_kwargs"] == {**data["hyperparams"]["algo_kwargs"], "learning_starts": 50, "batch_size": 16}


def test_a_reward_naming_its_components_as_our_keys_trains_and_forges_nothing(tmp_path):
    """Component names `_steps`, `_components`, `_step_success`, `_native`, `steps`, `components` (issue 42): the
    reward's names are data under `components` in every entry; steps, native return and training-time success are
    the environment's, whatever the reward claims (a success test front_flip never meets in 256 random steps)."""
    names = ["_steps", "_components", "_step_success", "_native", "steps", "components"]
    reward = tmp_path / "bent.py"
    reward.write_text("def compute_dense_reward(self, action):\n"
                      "    v = self.torso.pitch_velocity\n"
                      "    return v, {'_steps': 1e300, '_components': 0.5, '_step_success': 1.0, '_native': 1e300, "
                      "'steps': v, 'components': -v}\n")
    config = TrainConfig(task_id="hopper/front_flip", out_dir=tmp_path / "out", reward=str(reward), steps=256,
                         eval_freq=256, eval_episodes=1, overrides={"n_steps": 64, "batch_size": 32})
    result = train(config)
    data = json.loads((tmp_path / "out" / RESULT_FILE).read_text())
    history = data["components"]
    assert history and history[-1]["steps"] >= 256
    for entry in history:
        assert set(entry) == {"steps", "components", "native", "step_success"}
        assert isinstance(entry["steps"], int) and entry["steps"] < 1000
        assert sorted(entry["components"]) == sorted(names)
        assert entry["step_success"] == 0.0 and abs(entry["native"]) < 1e6  # the environment's, not the reward's 1.0 and 1e300
        assert entry["components"]["_step_success"]["mean"] == 1.0 and entry["components"]["_steps"]["max"] == 1e300
    from text2reward.runs.records import Candidate, component_history, read, read_result, write

    assert write(read_result(data))["components"] == history  # well formed as written
    candidate = read(Candidate, {"id": "r0-s0", "round": 0, "sample": 0, "status": "trained",
                                 "training_result": write(read_result(data).kept())})
    assert candidate.training_result is not None and candidate.training_result.components == component_history(history)
    assert result.components == history
