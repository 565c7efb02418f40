"""Expert reward for shadow/block: Move and rotate the block in the hand to match the goal pose.

Source: Gymnasium-Robotics 1.4.2 HandManipulateBlockDense-v1 (BaseManipulateEnv.compute_reward with
_goal_distance, reward_type "dense"), rewritten against the ShadowManipulateView. Exact. Minus (10 x the
block's distance from the goal position + its rotation angle to the goal orientation). The angle is
2*arccos of the w of q_block * conj(q_goal), i.e. of the dot product of the two quaternions, without the
absolute value: the same orientation written as -q counts as 2*pi - angle away, as in the env's success test.
"""

import numpy as np


def compute_dense_reward(self, action):
    position_error = float(np.linalg.norm(self.obj.position - self.goal_position))
    q = self.obj.quaternion
    g = self.goal_quaternion
    w = q[0] * g[0] + q[1] * g[1] + q[2] * g[2] + q[3] * g[3]  # w of q * conj(g)
    angle = 2.0 * float(np.arccos(np.clip(w, -1.0, 1.0)))
    return -(10.0 * position_error + angle), {"position": -10.0 * position_error, "rotation": -angle}
