"""First draft for metaworld/pick-place-v3: reach the puck, close the gripper on it, then carry it to the goal."""

import numpy as np


def compute_dense_reward(self, action):
    tcp_to_puck = float(np.linalg.norm(self.robot.ee_position - self.obj.position))
    puck_to_goal = float(np.linalg.norm(self.obj.position - self.goal_position))
    grip = float(np.clip(action[-1], 0.0, 1.0)) if tcp_to_puck < 0.02 else 0.0
    return -tcp_to_puck - puck_to_goal + 0.1 * grip, {"tcp_to_puck": tcp_to_puck, "puck_to_goal": puck_to_goal, "grip": grip}
