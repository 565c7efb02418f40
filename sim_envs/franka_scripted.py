"""Scripted Franka policies: successes for screening, written against the flattened observation.

Why by hand: unlike MetaWorld, the Franka tasks ship no scripted policies. Each is a few waypoints with a
proportional controller (an action of 1 moves the grip point 5 cm). Measured on seeds 0-29, reach, push and
pick-and-place succeed on all 30 (tests check most of 10); slide has none (a strike is not a waypoint path), so it is
not screened. Screening needs no more: successful rollouts to compare with perturbed failed ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

GAIN = 20.0
PUSH_GAIN = 6.0
"""Gentler while pushing, so the block slows down near the goal instead of sliding past it."""
"""Action per metre of error (1 = a 5 cm step): full speed beyond 5 cm, slowing inside it."""
# Flattened observation: achieved_goal (3), desired_goal (3), then the env's `observation`
# (grip 3, grip velocity 3, finger width and its velocity 2, object position 3, ...; sim_envs.franka_env).
GOAL = slice(3, 6)
GRIP = slice(6, 9)
OBJECT = slice(14, 17)
BEHIND = 0.06
"""m behind the block (away from the goal) where a push starts."""
HOVER = 0.1
"""m above the block the grip point travels before descending (the fingertips reach 3.4 cm below it)."""
LOW = 0.03
"""m above the block's centre under which the grip point counts as low enough to push (its floor keeps the
fingertips off the table: about 1.4 cm above a 4 cm block's centre)."""
DONE = 0.02
"""m from the goal at which a push stops."""
CLOSE_STEPS = 5
"""Steps the fingers take to close on the block (0.25 s) before it is lifted."""


def _flat(obs: np.ndarray | dict[str, np.ndarray]) -> np.ndarray:
    """The policies read the flattened layout; given the env's own dict observation, flatten it the same way
    (Gymnasium's FlattenObservation orders the keys alphabetically)."""
    if isinstance(obs, dict):
        return np.concatenate([obs["achieved_goal"], obs["desired_goal"], obs["observation"]])
    return np.asarray(obs)


def _move(grip: np.ndarray, target: np.ndarray, gain: float = GAIN) -> np.ndarray:
    return np.clip(gain * (target - grip), -1.0, 1.0)


def reach_policy() -> Callable[[Any], np.ndarray]:
    def act(observation: Any) -> np.ndarray:
        obs = _flat(observation)
        return _move(obs[GRIP], obs[GOAL])

    return act


def push_policy() -> Callable[[Any], np.ndarray]:
    """Rise, go behind the block (seen from the goal), lower the closed fingers to its height, push it to the goal."""

    def act(observation: Any) -> np.ndarray:
        obs = _flat(observation)
        grip, block, goal = obs[GRIP], obs[OBJECT], obs[GOAL]
        if np.linalg.norm(goal[:2] - block[:2]) < DONE:  # there: stay still rather than chase it round
            return np.zeros(3)
        direction = goal[:2] - block[:2]
        direction = direction / max(float(np.linalg.norm(direction)), 1e-6)
        relative = grip[:2] - block[:2]
        along = float(np.dot(relative, direction))
        lateral = float(np.linalg.norm(relative - along * direction))
        start = np.array([*(block[:2] - BEHIND * direction), block[2]])
        if along < -0.02 and lateral < 0.02 and grip[2] < block[2] + LOW:  # in line behind it, low: push
            return _move(grip, np.array([*(goal[:2] - 0.03 * direction), block[2]]), PUSH_GAIN)
        if np.linalg.norm(grip[:2] - start[:2]) < 0.015:  # above the start: go down
            return _move(grip, start)
        if grip[2] < block[2] + HOVER - 0.01:  # low and out of line: rise first, so as not to knock the block
            return _move(grip, np.array([grip[0], grip[1], block[2] + HOVER]))
        return _move(grip, np.array([start[0], start[1], block[2] + HOVER]))

    return act


def pick_and_place_policy() -> Callable[[Any], np.ndarray]:
    """Hover over the block with open fingers, descend, close for a few steps, then carry it to the goal."""
    closed_for = [0]

    def act(observation: Any) -> np.ndarray:
        obs = _flat(observation)
        grip, block, goal = obs[GRIP], obs[OBJECT], obs[GOAL]
        offset = block - grip
        between = np.linalg.norm(offset[:2]) < 0.012 and abs(offset[2]) < 0.02
        held = closed_for[0] > 0 and np.linalg.norm(offset) < 0.04  # closing on it or carrying it
        if between or held:
            closed_for[0] += 1
            if closed_for[0] <= CLOSE_STEPS:
                return np.array([0.0, 0.0, 0.0, -1.0])
            return np.append(_move(grip, goal), -1.0)
        closed_for[0] = 0
        if np.linalg.norm(offset[:2]) > 0.01:
            target = np.array([block[0], block[1], max(block[2] + HOVER, grip[2])])
            return np.append(_move(grip, target), 1.0)
        return np.append(_move(grip, block), 1.0)

    return act


POLICIES: dict[str, Callable[[], Callable[[Any], np.ndarray]]] = {
    "reach": reach_policy,
    "push": push_policy,
    "pick_and_place": pick_and_place_policy,
}
