"""Expert reward for shadow/pen: Move and rotate the pen in the hand to match the goal pose.

Source: Gymnasium-Robotics 1.4.2 HandManipulatePenDense-v1 (BaseManipulateEnv.compute_reward with
_goal_distance and ignore_z_target_rotation, reward_type "dense"), rewritten against the
ShadowManipulateView with Gymnasium-Robotics' own rotation formulas (utils/rotations.py). Exact. Minus
(10 x position distance + rotation angle), where the pen's orientation first takes the goal's z Euler angle,
so turning the pen about that axis costs nothing; the angle is 2*arccos(w) without the absolute value.
"""

import math

import numpy as np


def euler_of(q):
    """(x, y, z) Euler angles of quaternion q (w, x, y, z), as rotations.quat2euler computes them."""
    w, x, y, z = q[0], q[1], q[2], q[3]
    s = 2.0 / (w * w + x * x + y * y + z * z)
    X, Y, Z = x * s, y * s, z * s
    wX, wY, wZ = w * X, w * Y, w * Z
    xX, xY, xZ = x * X, x * Y, x * Z
    yY, yZ, zZ = y * Y, y * Z, z * Z
    m00, m01, m02 = 1.0 - (yY + zZ), xY - wZ, xZ + wY
    m10, m11, m12 = xY + wZ, 1.0 - (xX + zZ), yZ - wX
    m22 = 1.0 - (xX + yY)
    cy = math.sqrt(m22 * m22 + m12 * m12)
    if cy > 4 * np.finfo(np.float64).eps:
        return -np.arctan2(m12, m22), -np.arctan2(-m02, cy), -np.arctan2(m01, m00)
    return 0.0, -np.arctan2(-m02, cy), -np.arctan2(-m10, m11)


def quaternion_of(ex, ey, ez):
    """Quaternion (w, x, y, z) of Euler angles, as rotations.euler2quat computes it."""
    ai, aj, ak = ez / 2, -ey / 2, ex / 2
    si, sj, sk = np.sin(ai), np.sin(aj), np.sin(ak)
    ci, cj, ck = np.cos(ai), np.cos(aj), np.cos(ak)
    cc, cs, sc, ss = ci * ck, ci * sk, si * ck, si * sk
    return cj * cc + sj * ss, cj * cs - sj * sc, -(cj * ss + sj * cc), cj * sc - sj * cs


def compute_dense_reward(self, action):
    position_error = float(np.linalg.norm(self.obj.position - self.goal_position))
    g = self.goal_quaternion
    ex, ey, _ = euler_of(self.obj.quaternion)
    _, _, goal_ez = euler_of(g)
    q = quaternion_of(ex, ey, goal_ez)  # the pen's orientation with the goal's z angle
    w = q[0] * g[0] + q[1] * g[1] + q[2] * g[2] + q[3] * g[3]  # w of q * conj(g)
    angle = 2.0 * float(np.arccos(np.clip(w, -1.0, 1.0)))
    position = -10.0 * position_error
    rotation = -angle
    return position + rotation, {"position": position, "rotation": rotation}
