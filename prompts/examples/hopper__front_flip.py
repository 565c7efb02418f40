"""Expert reward for hopper/front_flip: Make the hopper do a front flip.

Source: hand-written for this project (Gymnasium's Hopper has no flip reward, so there is no
environment reward to rewrite). It pays for the turn done so far, for turning forward fast while
the torso is off the floor, and a bonus once the full turn is done; checked on real Hopper states
by tests/generation/test_expert_examples.py (more forward rotation and height score higher, a finished flip
highest, turning backwards lowest).
"""

import math

import numpy as np

FULL_TURN = 2.0 * math.pi


def compute_dense_reward(self, action):
    torso = self.torso
    # Progress: the share of the forward (+pitch, nose-down) turn done so far, in [0, 1]. Pitch is not
    # wrapped, so it keeps counting past pi; backwards rotation earns nothing.
    progress = float(np.clip(torso.pitch / FULL_TURN, 0.0, 1.0))
    # Spin: forward pitch speed, capped at 8 rad/s so the fastest flail does not beat a real flip.
    # A hopper lying on the floor cannot spin, so this term is what pushes it to jump and rotate.
    spin = float(np.clip(torso.pitch_velocity, -8.0, 8.0)) / 8.0
    # Air: height of the torso above its standing height (about 1.25 m), capped at 0.5 m; a flip
    # needs the time in the air that a jump buys.
    air = float(np.clip(torso.position[2] - torso.init_position[2], 0.0, 0.5)) / 0.5
    # Done: a bonus from the step the full turn is reached (the task's own success test).
    done = 10.0 if torso.pitch >= FULL_TURN else 0.0
    # Effort: a small quadratic torque cost.
    control_cost = 1e-3 * float(np.sum(np.square(action)))

    reward = 2.0 * progress + 1.0 * spin + 0.5 * air + done - control_cost
    return reward, {"progress": 2.0 * progress, "spin": spin, "air": 0.5 * air, "done": done, "control_cost": control_cost}
