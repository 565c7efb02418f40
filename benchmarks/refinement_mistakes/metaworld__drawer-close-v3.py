"""A draft with one realistic mistake for metaworld/drawer-close-v3 (benchmarks/refinement_gain.py, source
`mistakes`): the expert rewrite with a smoothness penalty on the action at a weight that rivals the task's reward
(up to 4 a step against 10 at the goal; a scale mistake).
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
    target_radius = 0.05
    handle = self.obj.position
    goal = self.goal_position

    # Drawer progress: the handle's distance to its closed position, scaled by where it started.
    handle_to_goal = float(np.linalg.norm(handle - goal))
    start_to_goal = float(np.linalg.norm(self.obj.init_position - goal))
    in_place = tolerance(handle_to_goal, 0.0, target_radius, abs(start_to_goal - target_radius))

    # Reach: the fingertips at the handle (a sharp Gaussian), with the gripper commanded closed.
    tcp_to_handle = float(np.linalg.norm(handle - self.robot.ee_position))
    tcp_start_to_handle = float(np.linalg.norm(self.obj.init_position - self.robot.init_ee_position))
    near_handle = tolerance(tcp_to_handle, 0.0, 0.005, abs(tcp_start_to_handle - 0.005), sigmoid="gaussian")
    gripper_closed = min(max(0.0, action[-1]), 1.0)
    reach = hamacher_product(near_handle, gripper_closed)

    # Both together; full marks once the drawer is (nearly) shut, however the hand got there.
    total = hamacher_product(reach, in_place)
    if handle_to_goal <= target_radius + 0.015:
        total = 1.0
    return 10.0 * total - float(np.square(action).sum()), {"reach": reach, "in_place": in_place, "handle_to_goal": handle_to_goal}
