"""Expert reward for metaworld/plate-slide-v3: Slide the plate across the table into the goal under the cabinet.

Source: MetaWorld 3.1.1, SawyerPlateSlideEnvV3.compute_reward ("v2" reward), rewritten against the
SawyerView. Exact: it reproduces MetaWorld's per-step reward to floating-point precision. MetaWorld measures its
margins from the plate's placement on the table (z 0), 1.5 cm below the plate's centre (obj.init_position).
"""

import math

import numpy as np

PLACEMENT_OFFSET = np.array([0.0, 0.0, -0.015])  # MetaWorld's obj_init_pos relative to the plate's start


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
    plate = self.obj.position
    goal = self.goal_position

    # Placing: the plate's distance to the goal, scaled by where it started.
    plate_to_goal = float(np.linalg.norm(plate - goal))
    start_to_goal = float(np.linalg.norm(self.obj.init_position + PLACEMENT_OFFSET - goal))
    in_place = tolerance(plate_to_goal, 0.0, target_radius, start_to_goal)

    # Contact: the fingertips at the plate (within 5 cm), so the hand pushes it rather than
    # being rewarded for a plate that slid by itself.
    tcp_to_plate = float(np.linalg.norm(self.robot.ee_position - plate))
    tcp_start_to_plate = float(np.linalg.norm(self.robot.init_ee_position - (self.obj.init_position + PLACEMENT_OFFSET)))
    near_plate = tolerance(tcp_to_plate, 0.0, target_radius, tcp_start_to_plate)

    total = 8.0 * hamacher_product(near_plate, in_place)
    if plate_to_goal < target_radius:
        total = 10.0  # in the goal: full reward
    return total, {"near_plate": near_plate, "in_place": in_place, "plate_to_goal": plate_to_goal}
