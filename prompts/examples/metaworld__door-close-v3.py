"""Expert reward for metaworld/door-close-v3: Push the open door shut.

Source: MetaWorld 3.1.1, SawyerDoorCloseEnvV3.compute_reward ("v2" reward), rewritten against the
SawyerView. Exact: it reproduces MetaWorld's per-step reward to floating-point precision. MetaWorld measures its
margin from the door's placement, a fixed offset from the handle's start (obj.init_position).
"""

import math

import numpy as np

PLACEMENT_OFFSET = np.array([0.2921412755773664, 0.4757212366003844, -3.5948720107842336e-05])  # the door's placement relative to the handle's start


def tolerance(x, lower, upper, margin, sigmoid="long_tail", value_at_margin=0.1):
    """1 inside [lower, upper]; outside, falls smoothly to `value_at_margin` at `margin` beyond the bound."""
    if lower <= x <= upper:
        return 1.0
    if margin == 0:
        return 0.0
    d = (lower - x if x < lower else x - upper) / margin
    if sigmoid == "gaussian":
        return math.exp(-0.5 * (d * math.sqrt(-2 * math.log(value_at_margin))) ** 2)
    return float(1.0 / ((d * math.sqrt(1 / value_at_margin - 1)) ** 2 + 1))  # long tail


def compute_dense_reward(self, action):
    target_radius = 0.05
    handle = self.obj.position
    goal = self.goal_position

    # Door progress: the handle's distance to its closed position (Gaussian, scaled by the
    # distance from the door's placement to the goal).
    handle_to_goal = float(np.linalg.norm(handle - goal))
    start_to_goal = float(np.linalg.norm(self.obj.init_position + PLACEMENT_OFFSET - goal))
    in_place = tolerance(handle_to_goal, 0.0, target_radius, start_to_goal, sigmoid="gaussian")

    # Hand guidance: move the fingertips towards where the handle ends up, which sweeps the hand
    # through the door's path and pushes it shut.
    tcp_to_goal = float(np.linalg.norm(self.robot.ee_position - goal))
    hand_margin = float(np.linalg.norm(self.robot.init_hand_position - handle)) + 0.1
    hand_in_place = tolerance(tcp_to_goal, 0.0, 0.25 * target_radius, hand_margin, sigmoid="gaussian")

    total = 3.0 * hand_in_place + 6.0 * in_place
    if handle_to_goal < target_radius:
        total = 10.0  # closed: full reward
    return total, {"hand_in_place": hand_in_place, "in_place": in_place, "handle_to_goal": handle_to_goal}
