"""Expert reward for metaworld/button-press-topdown-v3: Press the button down from above.

Source: MetaWorld 3.1.1, SawyerButtonPressTopdownEnvV3.compute_reward ("v2" reward), rewritten
against the SawyerView. Exact: it reproduces MetaWorld's per-step reward to floating-point precision.
The button's full travel (9.35 cm along an axis the model tilts by 1.57 rad) is a constant of the
MetaWorld model, written out below.
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
    button = self.obj.position
    tcp = self.robot.ee_position
    button_travel = 0.0935 * math.sin(1.57)  # the button's full stroke (its axis is tilted by 1.57 rad)

    # Stage 1: reach the button top with a closed gripper (a fist presses better than open fingers).
    tcp_to_button = float(np.linalg.norm(button - tcp))
    start_to_button = float(np.linalg.norm(button - self.robot.init_ee_position))
    near_button = tolerance(tcp_to_button, 0.0, 0.01, start_to_button)
    gripper_closed = 1.0 - self.robot.gripper_openness
    reach = hamacher_product(gripper_closed, near_button)

    # Stage 2: once touching (within 3 cm), reward pushing the button down to its pressed height.
    button_to_goal = abs(self.goal_position[2] - button[2])
    pressed = tolerance(button_to_goal, 0.0, 0.005, button_travel)
    press = pressed if tcp_to_button <= 0.03 else 0.0

    total = 5.0 * reach + 5.0 * press
    return total, {"reach": reach, "press": press, "gripper_closed": gripper_closed}
