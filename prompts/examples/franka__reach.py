"""Expert reward for franka/reach: Move the Panda's grip point to the goal point in the air.

Source: the reference Franka environments' dense reward (reward_type "dense"), as sim_envs.franka_env computes it
for reach: minus the distance from the grip point (the achieved goal) to the goal. Exact.
"""

import numpy as np


def compute_dense_reward(self, action):
    distance = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    return -distance, {"grip_to_goal": distance}
