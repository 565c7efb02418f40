"""A scripted pusher for the planar arm: it gets behind the puck, then pushes it to the goal.

Why a task wants one: `t2r run` screens each candidate reward on scripted successes against perturbed failures
before spending any training on it (a reward that pays failures more is sent back to the model), and a test can
check the physics with it (the puck moves only when the arm pushes it). It reads only the observation, as a
policy would: the tip, puck and goal positions.
"""

from __future__ import annotations

import numpy as np
from planar_arm_env import FINGER_RADIUS, MAX_FINGER_SPEED, PUCK_RADIUS

CONTACT = PUCK_RADIUS + FINGER_RADIUS
"""m between tip and puck centres when they touch."""
BEHIND = CONTACT + 0.02
"""m behind the puck's centre (away from the goal) where a push starts."""
CLEARANCE = CONTACT + 0.04
"""m from the puck's centre the tip keeps while it goes round to the pushing side."""
ALIGNED = 0.015
"""m off the puck-goal line the tip may be and still push."""
PUSH_INTO = 0.01
"""m past the puck's centre, along the line to the goal, that the tip aims at while it pushes (it corrects drift)."""
DONE = 0.015
"""m from the goal at which the puck counts as delivered and the tip stops."""
GAIN = 4.0
"""1/s, tip speed per metre of error."""
TIP_SPEED = MAX_FINGER_SPEED
"""m/s, the fastest the script moves the tip."""


def waypoint(tip: np.ndarray, puck: np.ndarray, goal: np.ndarray) -> tuple[np.ndarray, float]:
    """Where the tip heads now, and how fast it may go: beside the puck, round behind it, in line behind it, then
    into it along the line to the goal, slowing as the puck nears the goal."""
    to_goal = float(np.linalg.norm(goal - puck))
    if to_goal < DONE:  # there: keep still
        return tip, 0.0
    direction = (goal - puck) / to_goal
    side = np.array([-direction[1], direction[0]])
    offset = tip - puck
    along, lateral = float(offset @ direction), float(offset @ side)
    side = side if lateral >= 0 else -side
    if along > 0:  # on the goal's side of the puck: first beside it, a little towards its back
        return puck + CLEARANCE * (side - 0.3 * direction) / np.hypot(1.0, 0.3), TIP_SPEED
    if along > -0.5 * CONTACT:  # beside it: round to diagonally behind
        return puck + CLEARANCE * (side - direction) / np.sqrt(2.0), TIP_SPEED
    if abs(lateral) > ALIGNED:  # behind but off the line: onto the line
        return puck - BEHIND * direction, TIP_SPEED
    return puck + PUSH_INTO * direction, min(TIP_SPEED, GAIN * to_goal)  # in line: push


class ScriptedPusher:
    """observation -> action (the finger's velocity, in [-1, 1])."""

    def __call__(self, observation: np.ndarray) -> np.ndarray:
        tip, puck, goal = observation[6:8], observation[8:10], observation[12:14]
        target, top_speed = waypoint(tip, puck, goal)
        velocity = GAIN * (target - tip)
        speed = float(np.linalg.norm(velocity))
        if speed > top_speed:
            velocity *= top_speed / speed
        return np.clip(velocity / MAX_FINGER_SPEED, -1.0, 1.0).astype(np.float32)
