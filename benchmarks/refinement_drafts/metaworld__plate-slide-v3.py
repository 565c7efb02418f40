"""First draft for metaworld/plate-slide-v3: reach the plate, then slide it into the goal."""

import numpy as np


def compute_dense_reward(self, action):
    tcp_to_plate = float(np.linalg.norm(self.robot.ee_position - self.obj.position))
    plate_to_goal = float(np.linalg.norm(self.obj.position - self.goal_position))
    return -tcp_to_plate - plate_to_goal, {"tcp_to_plate": tcp_to_plate, "plate_to_goal": plate_to_goal}
