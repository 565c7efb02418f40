"""First draft for metaworld/door-close-v3: reach the door's handle, then push it to the closed position."""

import numpy as np


def compute_dense_reward(self, action):
    tcp_to_handle = float(np.linalg.norm(self.robot.ee_position - self.obj.position))
    handle_to_goal = float(np.linalg.norm(self.obj.position - self.goal_position))
    return -tcp_to_handle - handle_to_goal, {"tcp_to_handle": tcp_to_handle, "handle_to_goal": handle_to_goal}
