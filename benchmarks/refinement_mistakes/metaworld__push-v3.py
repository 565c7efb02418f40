"""A draft with one realistic mistake for metaworld/push-v3 (benchmarks/refinement_gain.py, source `mistakes`):
the expert rewrite with the goal distance taken from the gripper instead of the puck (the wrong object), so moving
the hand to the goal pays as if the puck were there.
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


def caging_reward(action, obj, obj_init, tcp, tcp_init, left_pad, right_pad,
                  obj_radius=0.015, pad_success_thresh=0.05, xz_thresh=0.005):
    """How well the open fingers surround the object, and whether they close on it (0 to 1)."""
    # Sideways (y): each finger pad should be just outside the object, between obj_radius and
    # pad_success_thresh from its centre. The margin is measured from the object's start, so the
    # score is nearly binary before contact.
    caging_sides = []
    for pad in (left_pad, right_pad):
        pad_to_obj = abs(pad[1] - obj[1])
        pad_to_obj_init = abs(pad[1] - obj_init[1])
        margin = abs(pad_to_obj_init - pad_success_thresh)
        caging_sides.append(tolerance(pad_to_obj, obj_radius, pad_success_thresh, margin))
    caging_y = hamacher_product(caging_sides[0], caging_sides[1])

    # In the x-z plane: the fingertips centred on the object.
    xz = [0, 2]
    xz_margin = float(np.linalg.norm(obj_init[xz] - tcp_init[xz])) - xz_thresh
    caging_xz = tolerance(float(np.linalg.norm(tcp[xz] - obj[xz])), 0.0, xz_thresh, xz_margin)

    # Closing the gripper only counts once the object is caged.
    caging = hamacher_product(caging_y, caging_xz)
    gripper_closed = min(max(0.0, action[-1]), 1.0)
    gripping = gripper_closed if caging > 0.97 else 0.0
    caging_and_gripping = hamacher_product(caging, gripping)
    return (caging_and_gripping + caging) / 2.0


def compute_dense_reward(self, action):
    target_radius = 0.05
    puck = self.obj.position
    goal = self.goal_position

    # Stage 1: get the fingers around the puck.
    grasp = caging_reward(action, puck, self.obj.init_position, self.robot.ee_position,
                          self.robot.init_ee_position, self.robot.left_pad_position,
                          self.robot.right_pad_position)
    total = 2.0 * grasp

    # Stage 2: with the fingertips on the puck and the gripper not fully shut, reward the puck's
    # progress to the goal (MetaWorld doubles the grasp term here too).
    puck_to_goal = float(np.linalg.norm(self.robot.ee_position - goal))
    start_to_goal = float(np.linalg.norm(self.obj.init_position - goal))
    in_place = tolerance(puck_to_goal, 0.0, target_radius, start_to_goal)
    tcp_to_puck = float(np.linalg.norm(puck - self.robot.ee_position))
    if tcp_to_puck < 0.02 and self.robot.gripper_openness > 0:
        total += 1.0 + total + 5.0 * in_place

    if puck_to_goal < target_radius:
        total = 10.0  # at the goal: full reward
    return total, {"grasp": grasp, "in_place": in_place, "puck_to_goal": puck_to_goal}
