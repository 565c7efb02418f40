"""Expert reward for adroit/hammer: Pick up the hammer and drive the nail into the board.

Source: Gymnasium-Robotics 1.4.2 AdroitHandHammer-v1 (AdroitHandHammerEnv.step, dense reward), rewritten
against the AdroitView. Exact. The palm-to-hammer term is +0.1 x distance as v1 ships it since 1.2.1 (D4RL
had -0.1): it pays the hand for moving away from the hammer, so a reward meant to teach would flip it. The
rest brings the hammer's head to the nail and the nail to its goal, penalises joint speed, and pays for a
lifted hammer and for a nail within 2 cm and 1 cm (success) of its goal.
"""

import numpy as np


def compute_dense_reward(self, action):
    hammer = self.hammer
    handle = self.obj.position  # the hammer's handle, where the env measures the palm to
    head = hammer.head_position
    nail = hammer.nail_position
    nail_to_goal = float(np.linalg.norm(nail - self.goal_position))

    palm_to_hammer = 0.1 * float(np.linalg.norm(self.robot.ee_position - handle))  # the sign as shipped
    head_to_nail = -float(np.linalg.norm(head - nail))
    drive = -10.0 * nail_to_goal
    velocity = -1e-2 * self.qvel_norm
    reward = palm_to_hammer + head_to_nail + drive + velocity

    bonus = 0.0
    if handle[2] > 0.04 and head[2] > 0.04:  # hammer lifted off the table
        bonus += 2.0
    if nail_to_goal < 0.020:
        bonus += 25.0
    if nail_to_goal < 0.010:  # the success test
        bonus += 75.0
    reward += bonus

    return reward, {"palm_to_hammer": palm_to_hammer, "head_to_nail": head_to_nail, "drive": drive,
                    "velocity": velocity, "bonus": bonus}
