"""Expert reward for franka/push: Push the block across the table to the goal with the closed fingers.

Source: the reference Franka push environment's dense reward ("Open-Source Reinforcement Learning Environments
Implemented in MuJoCo with Franka Manipulator", reward_type "dense"), as sim_envs.franka_env computes it: minus the
distance from the achieved goal (the block's centre) to the goal. Exact.
Like Fetch's, it pays nothing for approaching the block: the signal appears only once the block moves.
"""

import numpy as np


def compute_dense_reward(self, action):
    # One term: the block's distance to the goal; the hand itself is not rewarded.
    distance = float(np.linalg.norm(self.obj.position - self.goal_position))
    return -distance, {"block_to_goal": distance}
