"""Every task as a Gymnasium environment, so any RL code can train on it without our CLI.

    import gymnasium as gym
    import text2reward.envs  # registers text2reward/<family>-<name> for every task

    env = gym.make("text2reward/metaworld-reach-v3", reward="expert")       # or "sparse"
    env = gym.make("text2reward/hopper-front_flip", reward="my_reward.py")  # jailed, like model code
    env = gym.make("text2reward/hopper-front_flip", reward="mine.py", trusted_reward=True)  # in-process

Why the same env as training: `make_task_env` is what `t2r train` and the loop use, so rl-zoo3, a
CleanRL script or a user's own loop see the same observations, success test (`info["is_success"]`)
and reward components (`info["reward_components"]`). A reward file runs in the sandbox's jail
unless the caller vouches for it, exactly as with `t2r train`; `env.close()` stops its worker.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from policies.reward_modes import DEFAULT_GAMMA, REWARD_MODES
from policies.reward_program import reward_from_spec
from policies.task_env import make_task_env
from sim_envs import get_task, list_tasks
from sim_envs.errors import ConfigError
from text2reward.sandbox import reward_from_file

NAMESPACE = "text2reward"


def gym_id(task_id: str) -> str:
    """`metaworld/reach-v3` -> `text2reward/metaworld-reach-v3` (Gymnasium allows one namespace)."""
    return f"{NAMESPACE}/{task_id.replace('/', '-')}"


class _ClosesReward(gym.Wrapper):
    """Closing the env also stops a jailed reward's worker."""

    def __init__(self, env: gym.Env, reward_fn: Any):
        super().__init__(env)
        self._reward_fn = reward_fn

    def close(self) -> None:
        try:
            super().close()
        finally:
            close = getattr(self._reward_fn, "close", None)
            if close is not None:
                close()


def make(task_id: str, reward: str = "expert", trusted_reward: bool = False, seed: int | None = None,
         render_mode: str | None = None, reward_mode: str = "dense", gamma: float = DEFAULT_GAMMA, flatten: bool = True) -> gym.Env:
    """The task env with `reward`: "expert", "sparse" or a .py file defining compute_dense_reward (or, with
    `reward_mode` "potential" / "progress", compute_potential / compute_progress, shaped with the agent's `gamma`).
    `flatten=False` keeps a multi-goal task's dict observation, and `env.compute_reward` relabels the built-in rewards,
    so SB3's HerReplayBuffer can train on it (policies.her says why a reward file cannot be relabelled)."""
    task = get_task(task_id)
    if reward in ("expert", "sparse"):
        if reward == "expert" and not task.has_expert_reward:
            raise ConfigError(f"task {task.id} has no expert reward; use reward='sparse' or a reward file")
        reward_fn: Any = reward_from_spec(reward)
    else:
        reward_fn = reward_from_file(reward, trusted_reward, reward_mode)
    spec = REWARD_MODES.get(reward_mode)
    if (spec is None or spec.needs_program) and reward in ("expert", "sparse"):
        raise ConfigError(f"reward_mode={reward_mode!r} shapes a reward program; pass reward='PATH.py' with the mode's function")
    env = make_task_env(task, reward_fn, seed=seed, render_mode=render_mode, reward_mode=reward_mode, gamma=gamma, flatten=flatten)
    return _ClosesReward(env, reward_fn)


def register_tasks() -> list[str]:
    """Register every task known now (built-in and loaded user tasks); returns the Gymnasium ids."""
    ids = []
    for task in list_tasks():
        env_id = gym_id(task.id)
        if env_id not in gym.registry:  # Gymnasium's EnvCreator type takes **kwargs only; it calls make with keywords
            gym.register(env_id, entry_point=make, kwargs={"task_id": task.id}, disable_env_checker=False,  # type: ignore[arg-type]
                         order_enforce=True, max_episode_steps=None)
        ids.append(env_id)
    return ids


register_tasks()
