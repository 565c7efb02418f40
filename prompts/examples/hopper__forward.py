"""Expert reward for hopper/forward: Make the hopper hop forward as fast as it can without falling.

Source: Gymnasium 1.x Hopper-v5 with its default weights (forward_reward_weight 1.0,
ctrl_cost_weight 1e-3, healthy_reward 1.0, healthy z above 0.7 m, healthy angle within 0.2 rad):
forward velocity plus a bonus while healthy minus a quadratic control cost, rewritten against the
PlanarWalkerView. Simplification: Hopper-v5 also calls a state unhealthy when any joint angle or
velocity leaves (-100, 100), a check left out here (no rollout comes near it; on real rollouts the
two rewards agree to floating-point precision).
"""

import numpy as np


def compute_dense_reward(self, action):
    torso = self.torso
    # Hop forward: the torso's forward speed over the last step (m/s, +x is forward).
    forward = 1.0 * torso.x_velocity
    # Stay up: a constant bonus while the torso is high enough (z > 0.7 m) and nearly upright
    # (|pitch| < 0.2 rad); Hopper-v5 pays nothing for a fallen state.
    healthy = torso.position[2] > 0.7 and -0.2 < torso.pitch < 0.2
    alive = 1.0 if healthy else 0.0
    # Effort: a small quadratic torque cost.
    control_cost = 1e-3 * float(np.sum(np.square(action)))
    return forward + alive - control_cost, {"forward": forward, "alive": alive, "control_cost": control_cost}
