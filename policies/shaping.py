"""The shaping modes' training wrappers (`potential`, `progress`; see policies/reward_modes.py for what each computes).

Why a module of their own: they are gymnasium wrappers, and the registry of reward modes that every `t2r` command lists
must start without gymnasium and numpy; only a training env needs these.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import gymnasium as gym
import numpy as np

from sim_envs.errors import ConfigError

PROGRESS_WEIGHT = 1.0
"""The progress gain's weight: a whole task's worth of progress pays as much as one step of success."""
COUNT_BONUS = 0.1
"""The first visit to a cell pays this; the N-th pays COUNT_BONUS / sqrt(N)."""
PROGRESS_BINS = 20
OBJECT_CELL = 0.05
"""Metres: the object's position is counted on a grid of 5 cm cells (the size of the objects themselves)."""


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

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.value, _ = self._value_at_reset()
        info["potential"] = self.value
        return obs, info

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict[str, Any]]:
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

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
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

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict[str, Any]]:
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
