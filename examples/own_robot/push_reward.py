"""A staged dense reward for planar_arm/push_puck, written against the task's view (planar_arm_view.py).

What a reward for this task looks like, and the file the example validates and trains with: bring the finger to
the pushing spot behind the puck (on the far side from the goal), push the puck to the goal while touching it
from behind, leave it there. The push pays only while the finger is at the puck (or the puck is already at the
goal), so knocking the puck about on the way costs nothing and touching it is worth seeking. Weights, scales and
thresholds are module-level UPPER_CASE numbers, which `t2r tune` can search.
"""

import numpy as np

BEHIND = 0.06  # m behind the puck's centre (away from the goal) where a push starts; they touch at 0.045
ENGAGED = 0.07  # m, finger to puck centre within which the finger counts as at the puck
AT_GOAL = 0.05  # m, the success rule's distance
W_REACH = 1.0
K_REACH = 5.0  # 1/m, sharpness of the reach kernel: not yet flat at the typical 0.14-0.30 m start
W_PUSH = 3.0
K_PUSH = 5.0  # 1/m, sharpness of the push kernel: not yet flat at the typical 0.10-0.24 m start
W_TOUCH = 0.5
W_SUCCESS = 5.0
W_ACTION = 0.01


def compute_dense_reward(self, action):
    finger = np.asarray(self.robot.ee_position, dtype=float)
    puck = np.asarray(self.obj.position, dtype=float)
    goal = np.asarray(self.goal_position, dtype=float)
    d_goal = float(np.linalg.norm(goal - puck))
    direction = (goal - puck) / max(d_goal, 1e-6)
    d_behind = float(np.linalg.norm(finger - (puck - BEHIND * direction)))  # finger to the pushing spot
    engaged = float(np.linalg.norm(finger - puck)) < ENGAGED
    from_behind = float((finger - puck) @ direction) < 0.0

    reach = W_REACH * (1.0 - np.tanh(K_REACH * d_behind))
    push = W_PUSH * (1.0 - np.tanh(K_PUSH * d_goal)) if (engaged or d_goal < AT_GOAL) else 0.0
    touch = W_TOUCH * float(self.obj.touched and from_behind)
    success = W_SUCCESS * float(self.task_success)
    effort = -W_ACTION * float(np.sum(np.square(action)))
    total = reach + push + touch + success + effort
    return total, {"reach": reach, "push": push, "touch": touch, "success": success, "effort": effort}
