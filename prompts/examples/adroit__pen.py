"""Expert reward for adroit/pen: Rotate the pen in the hand to match the goal orientation, keeping it in place.

Source: Gymnasium-Robotics 1.4.2 AdroitHandPen-v1 (AdroitHandPenEnv.step, dense reward), rewritten against
the AdroitView. Exact. The pen's distance from its goal position is a penalty, the alignment of its axis with
the goal axis (a dot product of unit vectors, -1 to 1) a reward; bonuses pay for being in place and aligned
(above 0.9, then above 0.95: the success test), and a dropped pen costs 5 per step.
"""

import numpy as np


def compute_dense_reward(self, action):
    pen = self.pen
    distance = float(np.linalg.norm(self.obj.position - self.goal_position))
    alignment = float(np.dot(pen.orientation, pen.goal_orientation))
    reward = -distance + alignment

    bonus = 0.0
    if distance < 0.075 and alignment > 0.9:
        bonus += 10.0
    if distance < 0.075 and alignment > 0.95:  # the success test
        bonus += 50.0
    dropped = -5.0 if self.obj.position[2] < 0.075 else 0.0
    reward += bonus + dropped

    return reward, {"distance": -distance, "alignment": alignment, "bonus": bonus, "dropped": dropped}
