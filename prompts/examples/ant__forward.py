"""Expert reward for ant/forward: Make the ant walk forward (+x) as fast as it can.

Source: Gymnasium 1.x Ant-v5 with its default weights (forward_reward_weight 1.0, ctrl_cost_weight
0.5, healthy_reward 1.0, healthy torso height 0.2 to 1.0 m, contact_cost_weight 5e-4), rewritten
against the AntView. Simplification: Ant-v5 also subtracts a contact cost (5e-4 times the squared
external contact forces, clipped to [-1, 1]), which the view does not expose and which never
exceeds 0.05 per step; its forward speed is measured from body positions one physics substep
stale, the view's from the joint positions, so the two differ slightly from step to step.
"""

import numpy as np


def compute_dense_reward(self, action):
    torso = self.torso
    # Walk: the torso's forward speed over the last step (m/s, +x is forward).
    forward = 1.0 * torso.x_velocity
    # Stay healthy: a constant bonus while the torso is between 0.2 m and 1.0 m high.
    alive = 1.0 if 0.2 <= torso.position[2] <= 1.0 else 0.0
    # Effort: Ant-v5 weighs the torque cost heavily (0.5), which keeps the gait smooth.
    control_cost = 0.5 * float(np.sum(np.square(action)))
    return forward + alive - control_cost, {"forward": forward, "alive": alive, "control_cost": control_cost}
