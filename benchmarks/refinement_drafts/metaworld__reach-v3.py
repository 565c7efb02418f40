"""First draft for metaworld/reach-v3: get the gripper to the goal."""

import numpy as np


def compute_dense_reward(self, action):
    tcp_to_goal = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    return -tcp_to_goal, {"tcp_to_goal": tcp_to_goal}
