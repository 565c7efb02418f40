"""First draft for metaworld/push-v3: reach the puck, then push it to the goal."""

import numpy as np


def compute_dense_reward(self, action):
    tcp_to_puck = float(np.linalg.norm(self.robot.ee_position - self.obj.position))
    puck_to_goal = float(np.linalg.norm(self.obj.position - self.goal_position))
    return -tcp_to_puck - puck_to_goal, {"tcp_to_puck": tcp_to_puck, "puck_to_goal": puck_to_goal}
