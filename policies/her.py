"""Hindsight experience replay (HER) for multi-goal tasks: when it applies, and how SB3 is set up for it.

Multi-goal tasks (Fetch, and any task with `Task.goal_success`) observe `observation`, `achieved_goal` and
`desired_goal`. SB3's `HerReplayBuffer` replays each stored step with goals the episode reached later, and
asks the env for the reward of the step under that goal: `env.compute_reward(achieved, desired, infos)`,
found through the wrappers (`TaskRewardWrapper.compute_reward`, which asks the reward function's `relabel`).

Why only the built-in rewards relabel: a relabelled reward must be what the reward would have paid had the
goal been the replayed one. `sparse` pays the task's goal test, and `expert` the env's goal-conditioned
reward: both are functions of the two goal vectors alone, so they relabel exactly. A reward program (model-
written, jailed, or a trusted file) reads the whole state view (gripper, object, velocities, the goal among
them) and may keep state across steps; scoring a replayed step under another goal would mean re-running it
on a view edited to hold that goal, for each of the thousands of replayed steps in a batch, and trusting the
edit to be the state it describes. So `--her` refuses a program (and the potential and progress modes, which
shape one: `RewardModeSpec.shapes_sparse_reward`): train it without HER, or use `--reward sparse --her`.
"""

from __future__ import annotations

import inspect
from typing import Any

from policies.algorithms import algorithm_class, get_algorithm
from policies.reward_modes import REWARD_MODES
from sim_envs.errors import ConfigError
from sim_envs.task import Task

BUILT_IN_REWARDS = ("expert", "sparse")
"""The rewards that relabel: functions of the achieved and desired goals alone."""
DEFAULT_HER_KWARGS: dict[str, Any] = {"n_sampled_goal": 4, "goal_selection_strategy": "future"}
"""SB3's `HerReplayBuffer` settings when a family's YAML names none: 4 replayed goals per real step, from later in the episode."""
SB3_BUFFER_SIZE = 1_000_000
"""SAC's replay buffer size in SB3 and SBX when the settings name none."""
HER_POLICY = "MultiInputPolicy"
"""HER keeps the observation a dict (the buffer swaps `desired_goal`), so the policy reads a dict."""


def her_refusal(task: Task, algo: str, relabels: bool, reward_mode: str = "dense") -> str | None:
    """Why `--her` cannot train this combination (one line naming the fix), or None when it can. `relabels`: the
    reward can score a replayed goal (the built-in ones, `BUILT_IN_REWARDS`; a reward function with `relabel`)."""
    if get_algorithm(algo).on_policy:
        return (f"--her needs an off-policy algorithm (SAC): {algo.upper()} learns from fresh rollouts and has no replay "
                "buffer to relabel; use --algo sbx-sac or --algo sac, or drop --her")
    if not task.is_multi_goal:
        return (f"--her needs a multi-goal task (observations with an achieved and a desired goal), and {task.id} has "
                "no goals; drop --her (Fetch tasks have goals)")
    spec = REWARD_MODES.get(reward_mode)
    if spec is None or spec.shapes_sparse_reward:
        return (f"--her cannot relabel --reward-mode {reward_mode}: it shapes a reward program, which reads the whole "
                "state and cannot be re-scored for another goal; drop --her, or use --reward sparse --her")
    if not relabels:
        return ("--her cannot relabel a reward program: it reads the whole state view, not just the goals, so its reward "
                "for a replayed goal is unknown; use --reward sparse --her (or expert), or train the program without --her")
    return None


def resolve_her(requested: bool | None, family_default: bool, task: Task, algo: str, relabels: bool,
                reward_mode: str = "dense") -> bool:
    """Whether a training uses HER: `--her` / `--no-her` when given (`--her` refused in one line where it cannot
    apply), else the family's default, which quietly stays off where HER does not apply (a program, PPO, no goals)."""
    refusal = her_refusal(task, algo, relabels, reward_mode)
    if requested is None:
        return family_default and refusal is None
    if requested and refusal is not None:
        raise ConfigError(refusal)
    return requested


def check_learning_starts(algo: str, algo_kwargs: dict[str, Any], task: Task, n_envs: int) -> None:
    """HER replays whole episodes: its buffer cannot sample before one has ended, so updates must wait for one
    episode in every env (a one-line error here rather than SB3's RuntimeError mid-training)."""
    starts = algo_kwargs.get("learning_starts")
    if starts is None:
        starts = inspect.signature(algorithm_class(algo).__init__).parameters["learning_starts"].default
    least = task.max_episode_steps * n_envs
    if starts < least:
        raise ConfigError(f"--her replays whole episodes, so learning_starts must be at least one episode per env "
                          f"({task.max_episode_steps} x {n_envs} = {least} steps), got {starts}; use --hp learning_starts={least}")


def her_buffer_size(buffer_size: int | None, steps: int, n_envs: int) -> int:
    """The replay buffer's size for a HER run: no larger than the run's steps (plus one step per env: SB3 steps all
    envs together), which it then never wraps, so learning is the same as with the YAML's size. Why: SB3's
    HerReplayBuffer builds one info dict per slot up front (a 10^6 buffer: ~1 s and ~180 MB per worker), where
    the plain buffer's arrays take memory only as they fill."""
    return min(int(buffer_size or SB3_BUFFER_SIZE), steps + n_envs)


def her_algo_kwargs(algo_kwargs: dict[str, Any], her_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The algorithm's constructor arguments with SB3's HerReplayBuffer; a `--hp replay_buffer_kwargs` wins over the YAML's `her_kwargs`."""
    from stable_baselines3 import HerReplayBuffer  # SB3 and torch (~1.8 s): preflight imports this module in every `t2r` command

    buffer_kwargs = {**DEFAULT_HER_KWARGS, **her_kwargs, **dict(algo_kwargs.get("replay_buffer_kwargs") or {})}
    return {**algo_kwargs, "replay_buffer_class": HerReplayBuffer, "replay_buffer_kwargs": buffer_kwargs}


def flat_observations(result: dict[str, Any]) -> bool:
    """Whether a saved policy (its result.json) reads flat observations: every policy but one trained with HER,
    which reads the dict (`make_task_env(..., flatten=...)` must build the env it was trained on)."""
    return not result.get("her", False)
