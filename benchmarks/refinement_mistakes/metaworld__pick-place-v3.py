"""A draft with one realistic mistake for metaworld/pick-place-v3 (benchmarks/refinement_gain.py, source
`mistakes`): the expert rewrite with the gripper's sign read the wrong way round (it takes a negative last action
for closing, where MetaWorld closes on a positive one), so opening at the puck is what pays.
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


def grasp_reward(action, obj, obj_init, tcp, tcp_init, left_pad, right_pad):
    """How well the fingers surround the puck, and whether they close on it (0 to 1)."""
    pad_margin, xz_margin_min, obj_radius = 0.05, 0.005, 0.015

    # Sideways (y): the left pad on the puck's +y side and the right pad on its -y side, each
    # between obj_radius and pad_margin from the centre. Each margin is the pad's own distance
    # from that band, so the score is nearly binary: close to 1 inside the band, small outside.
    left_gap = left_pad[1] - obj[1]
    right_gap = obj[1] - right_pad[1]
    left_margin = abs(abs(left_gap) - pad_margin)
    right_margin = abs(abs(right_gap) - pad_margin)
    left = tolerance(left_gap, obj_radius, pad_margin, left_margin)
    right = tolerance(right_gap, obj_radius, pad_margin, right_margin)
    caging_y = hamacher_product(left, right)

    # In the x-z plane: the fingertips centred on the puck.
    xz = [0, 2]
    xz_distance = float(np.linalg.norm(tcp[xz] - obj[xz]))
    xz_margin = float(np.linalg.norm(obj_init[xz] - tcp_init[xz])) - xz_margin_min
    caging_xz = tolerance(xz_distance, 0.0, xz_margin_min, xz_margin)

    # Closing the gripper only counts once the puck is caged.
    caging = hamacher_product(caging_y, caging_xz)
    gripper_closed = min(max(0.0, -action[-1]), 1.0)  # negative closes
    gripping = gripper_closed if caging > 0.97 else 0.0
    return (hamacher_product(caging, gripping) + caging) / 2.0


def compute_dense_reward(self, action):
    target_radius = 0.05
    robot, puck, goal = self.robot, self.obj.position, self.goal_position

    # Placing progress, scaled by where the puck started.
    puck_to_goal = float(np.linalg.norm(puck - goal))
    start_to_goal = float(np.linalg.norm(self.obj.init_position - goal))
    in_place = tolerance(puck_to_goal, 0.0, target_radius, start_to_goal)

    # Stage 1: grasp, softly ANDed with placing progress.
    grasp = grasp_reward(action, puck, self.obj.init_position, robot.ee_position, robot.init_ee_position,
                         robot.left_pad_position, robot.right_pad_position)
    total = hamacher_product(grasp, in_place)

    # Stage 2: the puck held (fingertips on it, gripper not fully shut) and lifted 1 cm off its
    # start: a bonus plus a strong pull towards the goal.
    tcp_to_puck = float(np.linalg.norm(puck - robot.ee_position))
    lifted = puck[2] - 0.01 > self.obj.init_position[2]
    if tcp_to_puck < 0.02 and robot.gripper_openness > 0 and lifted:
        total += 1.0 + 5.0 * in_place

    if puck_to_goal < target_radius:
        total = 10.0  # at the goal: full reward
    return total, {"grasp": grasp, "in_place": in_place, "lifted": float(lifted), "puck_to_goal": puck_to_goal}
