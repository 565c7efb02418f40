"""The Gymnasium wrapper that puts a task's view, success test and chosen reward around an env.

Why one wrapper: every step needs the view once; reading it once and handing the same object to
the success test and the reward keeps the overhead to one simulator read per step.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from policies.reward_modes import DEFAULT_GAMMA, wrap_for_mode
from policies.reward_program import RewardFunction
from sim_envs.errors import ConfigError
from sim_envs.success_progress import BELOW_ONE
from sim_envs.task import Task
from sim_envs.view_base import StateView


class TaskRewardWrapper(gym.Wrapper):
    """Replace the env's reward with `reward_fn`, and report success and components in `info`.

    `info` gains: `native_reward` (the env's own reward), `reward_components` (name -> value),
    `step_success` (the task's predicate this step) and `is_success` (the episode's success so
    far: any step for success_mode "any", this step for "final"). The view's `task_success` is the
    step's success, so a reward's success bonus fires exactly when evaluation counts a success.
    `step_progress` is how far this step's state is from the success rule (`SuccessRule.progress`, 1 exactly when
    the step succeeds) and `rule_progress` the episode's so far (the best step for "any", this step for "final"):
    what ranks candidates when none succeeds (policies.score). Only evaluations read them, so a training env is built
    with `measure_progress=False` and skips the rule's grading on its hot path (5-72 us a step).
    """

    def __init__(self, env: gym.Env, task: Task, reward_fn: RewardFunction, measure_progress: bool = True):
        super().__init__(env)
        self.task = task
        self.reward_fn = reward_fn
        self.view: StateView | None = None
        self._episode_success = False
        # Looked up once, not per step: the unwrapped env, the reader and the success test.
        self._unwrapped = env.unwrapped
        self._read_view = task.read_view
        self._is_success = task.is_success
        self._success_any = task.success_mode == "any"
        self._rule = task.success_rule
        self._measure_progress = measure_progress
        self._episode_progress = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.view = self.task.view(self.env)  # no step yet, so no flag to read: task_success is the rule's verdict
        self._episode_success = False
        self._episode_progress = 0.0
        info["is_success"] = False
        return obs, info

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, native, terminated, truncated, info = self.env.step(action)
        view = self._read_view(self._unwrapped, self.view)
        self.view = view
        step_success = bool(self._is_success(view, info))
        view.task_success = step_success  # the reward sees exactly the test evaluation uses
        native = float(native)
        total, components = self.reward_fn(view, action, native, step_success)
        self._episode_success = (self._episode_success or step_success) if self._success_any else step_success
        info["native_reward"] = native
        info["reward_components"] = components
        info["step_success"] = step_success
        info["is_success"] = self._episode_success
        if self._measure_progress:
            step_progress = self._step_progress(view, step_success)
            self._episode_progress = max(self._episode_progress, step_progress) if self._success_any else step_progress
            info["step_progress"] = step_progress
            info["rule_progress"] = self._episode_progress
        return obs, total, terminated, truncated, info

    def _step_progress(self, view: StateView, step_success: bool) -> float:
        """1 when the judge counts this step a success; otherwise the rule's grade, kept below 1 (where the
        simulator's flag and the rule disagree, the flag decides, as it does for success)."""
        if step_success:
            return 1.0
        if self._rule is None:
            return 0.0
        return min(self._rule.progress(view), BELOW_ONE)

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        """The reward of steps that reached `achieved_goal` had the goal been `desired_goal` (batches of rows):
        what SB3's HerReplayBuffer asks for when it replays a step with another goal (VecEnv.env_method finds it
        here, before the inner env's own `compute_reward`, which knows nothing of the chosen reward). The reward
        function's `relabel` answers (policies.reward_program.RelabellingReward); one without it (a program:
        policies.her says why) is refused."""
        relabel = getattr(self.reward_fn, "relabel", None)
        if relabel is None:
            raise ConfigError(f"reward {self.reward_fn.name!r} cannot be relabelled for hindsight replay (--her); "
                              "use --reward sparse --her, or train without --her")
        return np.asarray(relabel(achieved_goal, desired_goal, info, self.task, self.env))


def make_task_env(
    task: Task,
    reward_fn: RewardFunction,
    *,
    seed: int | None = None,
    render_mode: str | None = None,
    render_size: int | None = None,
    flatten: bool = True,
    reward_mode: str = "dense",
    gamma: float = DEFAULT_GAMMA,
    measure_progress: bool = True,
) -> gym.Env:
    """The env agents train and are evaluated on: task env + reward (shaped by its mode, policies.reward_modes)
    + flat observations. `gamma` is the algorithm's discount, which potential-based shaping must use.
    `flatten=False` keeps a multi-goal task's dict observation: what HER trains on, and what a policy trained
    with it reads (policies.her.flat_observations says which a saved policy needs). `measure_progress=False`: no
    progress toward the success rule in `info` (a training env: only evaluations read it)."""
    env: gym.Env = TaskRewardWrapper(task.make_env(render_mode=render_mode, seed=seed, render_size=render_size), task, reward_fn,
                                     measure_progress)
    env = wrap_for_mode(env, reward_mode, gamma)
    if flatten and isinstance(env.observation_space, gym.spaces.Dict):
        env = gym.wrappers.FlattenObservation(env)
    return env
