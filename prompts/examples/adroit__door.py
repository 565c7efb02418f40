"""Expert reward for adroit/door: Turn the door handle to undo the latch, then swing the door open.

Source: Gymnasium-Robotics 1.4.2 AdroitHandDoor-v1 (AdroitHandDoorEnv.step, dense reward), rewritten against
the AdroitView. Exact. The palm-to-handle term is +0.1 x distance as v1 ships it since 1.2.1, which pays the
hand for moving away from the handle (D4RL had -0.1; gymnasium-robotics >= 1.4.3 fixes it as v2): a reward
meant to teach would flip that sign. The rest pulls the hinge towards fully open (1.57 rad), penalises the
scene's joint speeds, and pays bonuses once the door is past 0.2, 1.0 and 1.35 rad (success).
"""

import numpy as np


def compute_dense_reward(self, action):
    hinge = float(self.door.hinge_angle)

    palm_to_handle = float(np.linalg.norm(self.robot.ee_position - self.obj.position))
    reward = 0.1 * palm_to_handle  # the sign as shipped (see above)
    open_door = -0.1 * (hinge - 1.57) * (hinge - 1.57)  # squared error to fully open
    reward += open_door
    velocity = -1e-5 * self.qvel_norm**2  # sum of squared joint velocities
    reward += velocity

    bonus = 0.0
    if hinge > 0.2:
        bonus += 2.0
    if hinge > 1.0:
        bonus += 8.0
    if hinge > 1.35:  # the success test
        bonus += 10.0
    reward += bonus

    return reward, {"palm_to_handle": 0.1 * palm_to_handle, "open_door": open_door, "velocity": velocity, "bonus": bonus}
