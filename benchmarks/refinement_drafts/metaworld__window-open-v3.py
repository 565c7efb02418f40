"""First draft for metaworld/window-open-v3: reach the handle, then slide the window open."""

import numpy as np


def compute_dense_reward(self, action):
    tcp_to_handle = float(np.linalg.norm(self.robot.ee_position - self.obj.position))
    handle_to_goal = abs(float(self.obj.position[0] - self.goal_position[0]))
    return -tcp_to_handle - handle_to_goal, {"tcp_to_handle": tcp_to_handle, "handle_to_goal": handle_to_goal}
