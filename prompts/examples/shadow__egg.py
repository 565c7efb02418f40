"""Expert reward for shadow/egg: Move and rotate the egg in the hand to match the goal pose.

Source: Gymnasium-Robotics 1.4.2 HandManipulateEggDense-v1 (BaseManipulateEnv.compute_reward with
_goal_distance, reward_type "dense"), rewritten against the ShadowManipulateView. Exact. The block's reward
on the egg: minus (10 x position distance + rotation angle), the angle 2*arccos(q . g) without the absolute
value, as the env's success test measures it. Weighting position by 10 makes 1 cm of position error cost as
much as 0.1 rad of rotation: the two success tolerances.
"""

import numpy as np


def compute_dense_reward(self, action):
    position_error = float(np.linalg.norm(self.obj.position - self.goal_position))
    q = self.obj.quaternion
    g = self.goal_quaternion
    w = q[0] * g[0] + q[1] * g[1] + q[2] * g[2] + q[3] * g[3]  # w of q * conj(g)
    angle = 2.0 * float(np.arccos(np.clip(w, -1.0, 1.0)))
    position = -10.0 * position_error
    rotation = -angle
    return position + rotation, {"position": position, "rotation": rotation}
