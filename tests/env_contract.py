"""What every task's env must do, asserted (Gymnasium's `check_env` mostly warns, and the suite ignored the warnings):
bounded spaces its observations stay in, an `is_success` flag on every step (the episode's verdict; `step_success` the step's), the reward a run chooses in place of the
env's own, and the same steps from the same seed."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

import text2reward.envs as envs

STEPS = 5


def _step_all(env: gym.Env, actions: np.ndarray) -> list[tuple[Any, float, bool, bool, dict[str, Any]]]:
    return [env.step(action) for action in actions]


def assert_env_contract(task_id: str, tmp_path: Any) -> None:
    """The env users and training get (gym.make, wrappers included) keeps its contract; see the module's docstring."""
    program = tmp_path / "quarter.py"
    program.write_text("def compute_dense_reward(self, action):\n    return 0.25, {'quarter': 0.25}\n")
    env, twin, other = (gym.make(envs.gym_id(task_id), reward="sparse") for _ in range(3))
    chosen = gym.make(envs.gym_id(task_id), reward=str(program), trusted_reward=True)
    try:
        space = env.action_space
        assert isinstance(space, gym.spaces.Box) and np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))
        assert np.all(space.low < space.high) and space.shape == twin.action_space.shape
        assert isinstance(env.observation_space, gym.spaces.Box), "training reads a flat observation"

        obs, info = env.reset(seed=3)
        twin_obs, _ = twin.reset(seed=3)
        other_obs, _ = other.reset(seed=4)
        chosen.reset(seed=3)
        assert env.observation_space.contains(obs), f"reset's observation is outside the space: {obs}"
        np.testing.assert_array_equal(obs, twin_obs, err_msg="two envs reset with one seed must start alike")
        assert not np.array_equal(obs, other_obs), "another seed must give another start"

        rng = np.random.default_rng(0)
        actions = rng.uniform(space.low, space.high, size=(STEPS, *space.shape)).astype(space.dtype)
        steps, twin_steps, chosen_steps = _step_all(env, actions), _step_all(twin, actions), _step_all(chosen, actions)
        for (obs, reward, terminated, truncated, info), again, (_, own, *_, own_info) in zip(steps, twin_steps, chosen_steps):
            assert env.observation_space.contains(obs), f"a step's observation is outside the space: {obs}"
            assert isinstance(terminated, bool) and isinstance(truncated, bool)
            assert info["is_success"] in (True, False), info["is_success"]
            assert isinstance(reward, float) and reward == (1.0 if info["step_success"] else 0.0), "the sparse reward is the step's success"
            assert info["is_success"] or not info["step_success"], "a step's success is the episode's"
            assert info["reward_components"] == {"success": reward} and np.isfinite(info["native_reward"])
            assert own == 0.25 and own_info["reward_components"] == {"quarter": 0.25}, "a chosen reward replaces the env's own"
            np.testing.assert_array_equal(obs, again[0], err_msg="the same actions from one seed must give the same states")
            assert (reward, terminated, truncated) == again[1:4]
    finally:
        for made in (env, twin, other, chosen):
            made.close()
