"""Expert reward for fetch/reach: Move the gripper to the goal point in the air.

Source: Gymnasium-Robotics 1.4 FetchReachDense-v4 (MujocoFetchEnv.compute_reward, reward_type
"dense"): minus the distance from the achieved goal (the grip point) to the goal. Exact.
"""

import numpy as np


def compute_dense_reward(self, action):
    # One term: every centimetre closer to the goal is worth the same.
    distance = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    return -distance, {"goal_distance": distance}
