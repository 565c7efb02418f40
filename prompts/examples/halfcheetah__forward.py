"""Expert reward for halfcheetah/forward: Make the half cheetah run forward as fast as it can.

Source: Gymnasium 1.x HalfCheetah-v5 with its default weights (forward_reward_weight 1.0,
ctrl_cost_weight 0.1): forward velocity minus a quadratic control cost. Exact.
"""

import numpy as np


def compute_dense_reward(self, action):
    # Run: forward speed of the torso over the last step (m/s, +x is forward).
    forward = 1.0 * self.torso.x_velocity
    # Effort: penalise large torques so the gait stays efficient.
    control_cost = 0.1 * float(np.sum(np.square(action)))
    return forward - control_cost, {"forward": forward, "control_cost": control_cost}
