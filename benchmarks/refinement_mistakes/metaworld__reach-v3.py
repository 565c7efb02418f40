"""A draft with one realistic mistake for metaworld/reach-v3 (benchmarks/refinement_gain.py, source `mistakes`):
the expert rewrite with the hand's distance taken to the puck on the table instead of the goal (the wrong object).
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
    tcp_to_goal = float(np.linalg.norm(self.robot.ee_position - self.obj.position))
    start_to_goal = float(np.linalg.norm(self.robot.init_hand_position - self.goal_position))
    reach = tolerance(tcp_to_goal, 0.0, target_radius, start_to_goal)

    return 10.0 * reach, {"reach": reach, "tcp_to_goal": tcp_to_goal}
