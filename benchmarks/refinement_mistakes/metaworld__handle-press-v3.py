"""A draft with one realistic mistake for metaworld/handle-press-v3 (benchmarks/refinement_gain.py, source
`mistakes`): the expert rewrite with the pressing term computed and logged but left out of the total, so only
reaching the handle is rewarded (a missing stage).
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


def hamacher_product(a, b):
    """A soft AND of two scores in [0, 1]: high only when both are high."""
    denominator = a + b - a * b
    return a * b / denominator if denominator > 0 else 0.0


def compute_dense_reward(self, action):
    target_radius = 0.02
    handle = self.obj.position
    goal = self.goal_position
    handle_start = self.obj.init_position

    # Pressing: only the handle's height matters.
    handle_to_goal = abs(handle[2] - goal[2])
    start_to_goal = abs(handle_start[2] - goal[2])
    in_place = tolerance(handle_to_goal, 0.0, target_radius, abs(start_to_goal - target_radius))

    # Reach: the fingertips on the handle's end (within 2 cm).
    tcp_to_handle = float(np.linalg.norm(handle - self.robot.ee_position))
    tcp_start_to_handle = float(np.linalg.norm(handle_start - self.robot.init_ee_position))
    reach = tolerance(tcp_to_handle, 0.0, 0.02, abs(tcp_start_to_handle - 0.02))

    # Both must hold; full marks once the handle is down, however it got there.
    total = reach
    if handle_to_goal <= target_radius:
        total = 1.0
    return 10.0 * total, {"reach": reach, "in_place": in_place, "handle_to_goal": handle_to_goal}
