"""Expert reward for metaworld/drawer-open-v3: Pull the drawer open by its handle.

Source: MetaWorld 3.1.1, SawyerDrawerOpenEnvV3.compute_reward ("v2" reward), rewritten against the
SawyerView. Exact: it reproduces MetaWorld's per-step reward to floating-point precision. MetaWorld
measures this task from the hand (wrist) body, clipped to the hand's observation box, and the drawer
opens by a fixed 0.2 m; both constants are written out below.
"""

import math

import numpy as np

HAND_LOW = np.array([-0.525, 0.348, -0.0525])  # MetaWorld clips the observed hand position to this box
HAND_HIGH = np.array([0.525, 1.025, 0.7])
DRAWER_TRAVEL = 0.2  # metres from closed to fully open


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
    hand = np.clip(self.robot.hand_position, HAND_LOW, HAND_HIGH)
    handle = self.obj.position
    goal = self.goal_position

    # Opening: the handle's distance to its fully-open position.
    handle_to_goal = float(np.linalg.norm(handle - goal))
    opening = tolerance(handle_to_goal, 0.0, 0.02, DRAWER_TRAVEL)

    # Caging: the hand at the handle, with x and y errors weighted 3x so the hand lines up above
    # the handle before it drops onto it. The margin is that weighted distance at the start.
    handle_start = goal + np.array([0.0, DRAWER_TRAVEL, 0.0])
    weights = np.array([3.0, 3.0, 1.0])
    hand_error = float(np.linalg.norm((handle - hand) * weights))
    start_error = float(np.linalg.norm((handle_start - self.robot.init_ee_position) * weights))
    caging = tolerance(hand_error, 0.0, 0.01, start_error)

    # The two simply add: reaching pays off even before the drawer moves.
    total = 5.0 * (caging + opening)
    return total, {"caging": caging, "opening": opening, "handle_to_goal": handle_to_goal}
