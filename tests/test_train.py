"""Tiny real training runs write a complete result.json (SAC and PPO)."""

import json

import pytest

from policies.train import RESULT_FILE, TrainConfig, load_policy, train
from sim_envs.errors import ConfigError

REQUIRED = {"success_rate", "mean_return", "steps", "wall_seconds", "curve", "components", "algo", "device"}


def test_sac_on_metaworld_writes_a_valid_result(tmp_path):
    config = TrainConfig(task_id="metaworld/reach-v3", out_dir=tmp_path, steps=400, eval_freq=200, eval_episodes=1,
                         overrides={"learning_starts": 100, "batch_size": 32})
    result = train(config)
    data = json.loads((tmp_path / RESULT_FILE).read_text())
    assert REQUIRED <= set(data)
    assert data["steps"] == 400 and data["algo"] == "sac" and data["device"] == "cpu"
    assert [p["steps"] for p in data["curve"]] == [200, 400]
    assert 0.0 <= data["success_rate"] <= 1.0
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


def test_expert_on_a_task_without_one_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="has no expert reward; use --reward sparse"):
        train(TrainConfig(task_id="ant/wave_leg", out_dir=tmp_path, steps=10))


def test_cuda_request_without_a_gpu_is_refused(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    with pytest.raises(ConfigError, match="no CUDA GPU is visible"):
        train(TrainConfig(task_id="metaworld/reach-v3", out_dir=tmp_path, steps=10, device="cuda"))
