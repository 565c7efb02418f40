"""Real states to smoke-test reward code on: random-action rollouts plus scripted-policy rollouts.

Why both: random actions cover the start of the task (the arm flailing near its start), scripted
ones cover the states a reward must rank highest (grasping, carrying, at the goal). A reward that
is constant, crashes or is non-finite on these will fail in training too.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from policies.reward_program import SparseReward
from policies.task_env import make_task_env
from sim_envs.task import Task
from text2reward.errors import ConfigError

Sample = tuple[Any, np.ndarray]
_CACHE: dict[tuple[str, int, int, int], tuple[Sample, ...]] = {}


def collect_states(task: Task, n_random: int = 100, n_scripted: int = 100, seed: int = 0) -> list[Sample]:
    """(view, action) pairs, the view read after the action was applied (what the reward sees)."""
    key = (task.id, n_random, n_scripted, seed)
    if key not in _CACHE:
        samples = _random_rollouts(task, n_random, seed)
        if task.has_scripted_policy and n_scripted > 0:
            samples += _scripted_rollouts(task, n_scripted, seed)
        _CACHE[key] = tuple(samples)
    return list(_CACHE[key])


def _random_rollouts(task: Task, n: int, seed: int) -> list[Sample]:
    """Several short episodes (placements are redrawn at each reset), so goals and starts vary."""
    if n <= 0:
        return []
    episode = max(1, min(task.max_episode_steps, max(10, n // 4)))
    env = make_task_env(task, SparseReward(), seed=seed)
    env.action_space.seed(seed)
    samples: list[Sample] = []
    try:
        env.reset(seed=seed)
        steps = 0
        while len(samples) < n:
            action = env.action_space.sample()
            _, _, terminated, truncated, _ = env.step(action)
            samples.append((env.get_wrapper_attr("view"), np.asarray(action)))
            steps += 1
            if terminated or truncated or steps >= episode:
                env.reset()
                steps = 0
    finally:
        env.close()
    return samples


def _scripted_rollouts(task: Task, n: int, seed: int) -> list[Sample]:
    """States spread evenly over whole scripted episodes (the policy reads the env's own observation)."""
    stride = max(1, task.max_episode_steps // n)
    env = make_task_env(task, SparseReward(), seed=seed + 1, flatten=False)
    policy = task.scripted_policy()
    samples: list[Sample] = []
    try:
        space = env.action_space
        if not isinstance(space, gym.spaces.Box):
            raise ConfigError(f"task {task.id}'s scripted policy needs a Box action space, not {type(space).__name__}")
        obs, _ = env.reset(seed=seed + 1)
        step = 0
        while len(samples) < n:
            action = np.clip(np.asarray(policy(obs), dtype=np.float64), space.low, space.high)
            obs, _, terminated, truncated, _ = env.step(action)
            step += 1
            if step % stride == 0:
                samples.append((env.get_wrapper_attr("view"), action))
            if terminated or truncated:
                obs, _ = env.reset()
                step = 0
    finally:
        env.close()
    return samples
