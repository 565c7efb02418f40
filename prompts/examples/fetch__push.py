"""Expert reward for fetch/push: Push the block across the table to the goal.

Source: Gymnasium-Robotics 1.4 FetchPushDense-v4 (MujocoFetchEnv.compute_reward, reward_type
"dense"): minus the distance from the achieved goal (the block's centre) to the goal. Exact.
It gives no signal for approaching the block, which is why dense Fetch push is hard to learn.
"""

import numpy as np


def compute_dense_reward(self, action):
    # One term: the block's distance to the goal; the gripper itself is not rewarded.
    distance = float(np.linalg.norm(self.obj.position - self.goal_position))
    return -distance, {"block_to_goal": distance}
