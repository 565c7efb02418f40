"""Expert reward for shadow/reach: Move the fingertips to their goal positions.

Source: Gymnasium-Robotics 1.4.2 HandReachDense-v3 (MujocoHandReachEnv.compute_reward, reward_type "dense"),
rewritten against the ShadowReachView. Exact. Minus one Euclidean distance over all five fingertips: their
positions stacked into one 15-number vector (index, middle, ring, little, thumb), compared with the goals
stacked the same way. Fingers already at their goals add nothing, so it is driven by the moving ones.
"""

import numpy as np


def compute_dense_reward(self, action):
    tips = self.robot.fingertips
    goals = self.goal_fingertips
    achieved = np.concatenate([tips.index, tips.middle, tips.ring, tips.little, tips.thumb])
    desired = np.concatenate([goals.index, goals.middle, goals.ring, goals.little, goals.thumb])
    distance = float(np.linalg.norm(achieved - desired))
    thumb = float(np.linalg.norm(tips.thumb - goals.thumb))  # reported only: the finger that moves most
    return -distance, {"fingertips_to_goals": distance, "thumb_to_goal": thumb}
