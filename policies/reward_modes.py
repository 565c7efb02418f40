"""Reward modes: what a program computes, and how that becomes the reward the agent trains on.

Why modes: a raw dense reward's optimum may differ from the task's. Two shapes keep the task's own
(sparse success) reward as the objective and use the model's program only to guide learning:

- `dense` (the default): the program is `compute_dense_reward(self, action) -> (total, components)` and
  `total` is the training reward.
- `potential`: the program is a potential `compute_potential(self) -> (value, components)`. The training
  reward is the task's sparse success reward plus `gamma * Phi(s') - Phi(s)`, with `Phi(s') = 0` when the
  episode terminates (Ng, Harada and Russell, 1999: potential-based shaping keeps the optimal policies of
  the sparse task). A truncated episode keeps `Phi(s')`: the agent bootstraps from that state, so the
  shaping must too. Over an episode of T steps the discounted shaped return is the sparse one plus
  `gamma^T Phi(s_T) - Phi(s_0)`, exactly (tests/test_reward_modes.py checks it along real rollouts).
- `progress`: the program is `compute_progress(self) -> float in [0, 1]`, how far along the task a state
  is. The training reward is the sparse success reward, plus the progress gain written as a potential
  (`PROGRESS_WEIGHT * (gamma * p' - p)`, so the progress term keeps the optimum too), plus a count-based
  exploration bonus `COUNT_BONUS / sqrt(N)` over cells of (progress level, object position), where N counts
  this env's visits to the cell over all of training: unseen progress levels pay, revisited ones fade.

The sandbox runs one entry point, `compute_dense_reward(self, action)`; `runnable_source` (policies.reward_program) appends
to a potential or progress program a two-line adapter that calls the mode's function, so the jail, its limits
and its verdicts are the same for every mode. The wrappers below compute the shaping in the training
process, from the program's values: the parent trusts only the numbers the jailed worker returns.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import gymnasium as gym
import numpy as np

from policies.reward_program import MODE_SIGNATURES, runnable_source
from sim_envs.errors import ConfigError

REWARD_MODES: dict[str, str] = {mode: name for mode, (name, _) in MODE_SIGNATURES.items()}
"""Mode -> the function the model writes."""
DEFAULT_REWARD_MODE = "dense"
"""The mode a run and a training use unless told otherwise: the program is the reward."""
DEFAULT_GAMMA = 0.99
"""SB3's and SBX's discount when a family's settings name none; the shaping must use the one that trains."""
PROGRESS_WEIGHT = 1.0
"""The progress gain's weight: a whole task's worth of progress pays as much as one step of success."""
COUNT_BONUS = 0.1
"""The first visit to a cell pays this; the N-th pays COUNT_BONUS / sqrt(N)."""
PROGRESS_BINS = 20
OBJECT_CELL = 0.05
"""Metres: the object's position is counted on a grid of 5 cm cells (the size of the objects themselves)."""


def check_mode(mode: str) -> str:
    """The mode, or a one-line ConfigError naming the choices."""
    if mode not in REWARD_MODES:
        raise ConfigError(f"unknown reward mode {mode!r} (--reward-mode); use one of {', '.join(REWARD_MODES)}")
    return mode


def mode_help() -> str:
    """`--reward-mode`'s help: each mode and what the model writes for it."""
    return ("dense (the program is the reward), potential (compute_potential shapes the sparse success reward) "
            "or progress (compute_progress, with a count bonus)")


MODE_REPORT_TEXT = {
    "dense": "dense (the program is the reward)",
    "potential": "potential (compute_potential shapes the task's sparse success reward: gamma * Phi(s') - Phi(s))",
    "progress": "progress (compute_progress: progress gains plus a count bonus, with the task's sparse success reward)",
}


def mode_report_text(mode: str) -> str:
    """How a run's report names its reward mode."""
    return MODE_REPORT_TEXT.get(mode, mode)


def entry_point(mode: str) -> str:
    return REWARD_MODES[check_mode(mode)]


def require_program(mode: str, reward: str) -> str:
    """The mode, refused in one line when it would shape a built-in reward: a potential or progress mode needs a program."""
    if check_mode(mode) != "dense" and reward in ("expert", "sparse"):
        raise ConfigError(f"--reward-mode {mode} shapes a reward program; pass --reward PATH.py defining "
                          f"{entry_point(mode)}(self), or drop --reward-mode")
    return mode


def object_position(view: Any) -> np.ndarray | None:
    """The manipulated object's position where the view has one (`view.obj.position`), else None."""
    position = getattr(getattr(view, "obj", None), "position", None)
    return None if position is None else np.asarray(position, dtype=float)


class _ModeWrapper(gym.Wrapper):
    """Shared by both shaping modes: reads the program's value on the inner TaskRewardWrapper's views."""

    def __init__(self, env: gym.Env, gamma: float):
        super().__init__(env)
        if not 0.0 < gamma <= 1.0:
            raise ConfigError(f"the shaping discount must be in (0, 1], got {gamma}; use the algorithm's gamma")
        self.gamma = float(gamma)
        self.value = 0.0
        """The program's value at the current state (Phi, or progress)."""

    def _value_at_reset(self) -> tuple[float, dict[str, float]]:
        inner = self.env
        view = inner.get_wrapper_attr("view")
        reward_fn = inner.get_wrapper_attr("reward_fn")
        action = np.zeros(self.action_space.shape or (), dtype=np.float32)
        return reward_fn(view, action, 0.0, bool(view.task_success))


class PotentialShaping(_ModeWrapper):
    """Sparse success + gamma * Phi(s') - Phi(s), around a TaskRewardWrapper whose reward is Phi."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self.value, _ = self._value_at_reset()
        info["potential"] = self.value
        return obs, info

    def step(self, action: np.ndarray):
        obs, potential, terminated, truncated, info = self.env.step(action)
        potential = float(potential)
        sparse = 1.0 if info["step_success"] else 0.0
        shaping = self.gamma * (0.0 if terminated else potential) - self.value
        self.value = potential
        program = info["reward_components"]
        info["reward_components"] = {"success": sparse, "shaping": shaping, "potential": potential,
                                     **{f"potential.{name}": value for name, value in program.items() if name != "potential"}}
        info["potential"] = potential
        return obs, sparse + shaping, terminated, truncated, info


class ProgressBonus(_ModeWrapper):
    """Sparse success + progress gain (as a potential) + COUNT_BONUS / sqrt(visits) of the reached cell."""

    def __init__(self, env: gym.Env, gamma: float, weight: float = PROGRESS_WEIGHT, bonus: float = COUNT_BONUS,
                 bins: int = PROGRESS_BINS, cell: float = OBJECT_CELL):
        super().__init__(env, gamma)
        self.weight, self.bonus, self.bins, self.cell = weight, bonus, bins, cell
        self.visits: defaultdict[tuple[int, ...], int] = defaultdict(int)
        """Visits per cell, over every episode this env runs (the count is what makes a level 'seen')."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        value, _ = self._value_at_reset()
        self.value = clip_progress(value)
        info["progress"] = self.value
        return obs, info

    def cell_of(self, progress: float, view: Any) -> tuple[int, ...]:
        level = min(int(progress * self.bins), self.bins - 1)
        position = object_position(view)
        if position is None:
            return (level,)
        return (level, *(int(math.floor(x / self.cell)) for x in position))

    def count_bonus(self, cell: tuple[int, ...]) -> float:
        """Counts the visit, then pays bonus / sqrt(visits so far)."""
        self.visits[cell] += 1
        return self.bonus / math.sqrt(self.visits[cell])

    def step(self, action: np.ndarray):
        obs, raw, terminated, truncated, info = self.env.step(action)
        progress = clip_progress(float(raw))
        sparse = 1.0 if info["step_success"] else 0.0
        gain = self.weight * (self.gamma * (0.0 if terminated else progress) - self.value)
        self.value = progress
        bonus = self.count_bonus(self.cell_of(progress, self.env.get_wrapper_attr("view")))
        program = info["reward_components"]
        info["reward_components"] = {"success": sparse, "progress_gain": gain, "count_bonus": bonus, "progress": progress,
                                     **{f"progress.{name}": value for name, value in program.items() if name not in ("progress", "reward")}}
        info["progress"] = progress
        return obs, sparse + gain + bonus, terminated, truncated, info


def clip_progress(value: float) -> float:
    """Progress is a fraction: a program that strays outside [0, 1] is held to it (finite values only reach here)."""
    return min(max(value, 0.0), 1.0)


def wrap_for_mode(env: gym.Env, mode: str, gamma: float) -> gym.Env:
    """The env a mode trains on, around a TaskRewardWrapper whose reward_fn is the mode's program."""
    if check_mode(mode) == "potential":
        return PotentialShaping(env, gamma)
    if mode == "progress":
        return ProgressBonus(env, gamma)
    return env


__all__ = ["COUNT_BONUS", "DEFAULT_GAMMA", "OBJECT_CELL", "PROGRESS_BINS", "PROGRESS_WEIGHT", "REWARD_MODES", "PotentialShaping",
           "ProgressBonus", "check_mode", "entry_point", "require_program",
           "runnable_source", "wrap_for_mode"]
