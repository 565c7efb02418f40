"""Expert reward for metaworld/reach-v3: Move the gripper to the goal position.

Source: MetaWorld 3.1.1, SawyerReachEnvV3.compute_reward (the "v2" reward function), rewritten
against the SawyerView. Exact: it reproduces MetaWorld's per-step reward to floating-point precision.
"""

import math

import numpy as np


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

    # One stage: bring the tool-centre point within 5 cm of the goal. The margin is the distance
    # the hand started from, so the reward starts near 0.1 and rises to 1 at the goal.
    tcp_to_goal = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    start_to_goal = float(np.linalg.norm(self.robot.init_hand_position - self.goal_position))
    reach = tolerance(tcp_to_goal, 0.0, target_radius, start_to_goal)

    return 10.0 * reach, {"reach": reach, "tcp_to_goal": tcp_to_goal}
