"""Expert reward for metaworld/faucet-open-v3: Turn the faucet handle to open the tap.

Source: MetaWorld 3.1.1, SawyerFaucetOpenEnvV3.compute_reward ("v2" reward), rewritten against the
SawyerView. Exact: it reproduces MetaWorld's per-step reward to floating-point precision.
(As in MetaWorld, the margins are measured from the faucet's base, BASE_OFFSET from the handle's start obj.init_position.)
"""

import math

import numpy as np

BASE_OFFSET = np.array([0.015, 0.175, -0.114])  # the faucet's base (MetaWorld's obj_init_pos) relative to the handle's start


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
    target_radius = 0.07
    # The point MetaWorld scores: 4 cm back along the handle and 3 cm above its tracked end.
    handle = self.obj.position + np.array([-0.04, 0.0, 0.03])
    goal = self.goal_position

    # Turning: that point's distance to its open position.
    handle_to_goal = float(np.linalg.norm(handle - goal))
    start_to_goal = float(np.linalg.norm(self.obj.init_position + BASE_OFFSET - goal))
    in_place = tolerance(handle_to_goal, 0.0, target_radius, abs(start_to_goal - target_radius))

    # Reach: the fingertips at that point (a sharp Gaussian within 1 cm).
    tcp_to_handle = float(np.linalg.norm(handle - self.robot.ee_position))
    tcp_start_to_base = float(np.linalg.norm(self.obj.init_position + BASE_OFFSET - self.robot.init_ee_position))
    reach = tolerance(tcp_to_handle, 0.0, 0.01, abs(tcp_start_to_base - 0.01), sigmoid="gaussian")

    # The two add (turning weighs more); full marks once the handle is open.
    total = 2.0 * (2.0 * reach + 3.0 * in_place)
    if handle_to_goal <= target_radius:
        total = 10.0
    return total, {"reach": reach, "in_place": in_place, "handle_to_goal": handle_to_goal}
