"""Every task through `gym.make`, as other RL code would use it: what each env must do (tests/env_contract.py), the
reward choices, and a reward file that runs in the jail."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from env_contract import assert_env_contract

import text2reward.envs as envs
from sim_envs import list_tasks
from sim_envs.errors import ConfigError


@pytest.mark.filterwarnings("ignore:.*maximum and minimum values are equal.*")  # MetaWorld's unused observation slots
@pytest.mark.parametrize("task_id", [t.id for t in list_tasks()])
def test_every_task_keeps_the_env_contract(task_id, tmp_path):
    assert_env_contract(task_id, tmp_path)


def test_every_task_is_registered():
    ids = envs.register_tasks()
    assert len(ids) == len(list_tasks()) >= 62
    assert "text2reward/metaworld-reach-v3" in gym.registry and "text2reward/hopper-front_flip" in gym.registry


def test_rewards_and_info_match_the_training_env():
    env = gym.make("text2reward/fetch-reach", reward="expert")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert reward == info["native_reward"] and "is_success" in info and info["reward_components"] == {"expert": reward}
    env.close()
    with pytest.raises(ConfigError, match="neither expert, sparse nor an existing"):
        gym.make("text2reward/fetch-reach", reward="no_such_file.py")


def test_a_reward_file_runs_in_the_jail(tmp_path):
    path = tmp_path / "speed.py"
    path.write_text("def compute_dense_reward(self, action):\n    return float(self.torso.x_velocity), {'speed': float(self.torso.x_velocity)}\n")
    env = gym.make("text2reward/halfcheetah-forward", reward=str(path))
    env.reset(seed=0)
    _, reward, _, _, info = env.step(np.zeros(env.action_space.shape))
    assert info["reward_components"] == {"speed": reward}
    reward_fn = env.get_wrapper_attr("_reward_fn")
    assert "jail" in reward_fn.isolation
    env.close()
    assert reward_fn._worker is None  # closing the env stopped the jailed worker
