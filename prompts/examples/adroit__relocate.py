"""Expert reward for adroit/relocate: Pick up the ball from the table and move it to the target in the air.

Source: Gymnasium-Robotics 1.4.2 AdroitHandRelocate-v1 (AdroitHandRelocateEnv.step, dense reward), rewritten
against the AdroitView. Exact. The palm-to-ball term is +0.1 x distance as v1 ships it since 1.2.1 (D4RL had
-0.1): it pays the hand for moving away from the ball, so a reward meant to teach would flip it. Once the ball
is off the table (above 4 cm) the reward adds a lift bonus and pulls palm and ball to the target; bonuses pay
for the ball within 10 cm (success) and 5 cm of the target.
"""

import numpy as np


def compute_dense_reward(self, action):
    palm = self.robot.ee_position
    ball = self.obj.position
    target = self.goal_position
    ball_to_target = float(np.linalg.norm(ball - target))

    palm_to_ball = 0.1 * float(np.linalg.norm(palm - ball))  # the sign as shipped
    reward = palm_to_ball
    carry = 0.0
    if ball[2] > 0.04:  # off the table
        carry = 1.0 - 0.5 * float(np.linalg.norm(palm - target)) - 0.5 * ball_to_target
        reward += 1.0
        reward += -0.5 * float(np.linalg.norm(palm - target))
        reward += -0.5 * ball_to_target

    bonus = 0.0
    if ball_to_target < 0.1:  # the success test
        bonus += 10.0
    if ball_to_target < 0.05:
        bonus += 20.0
    reward += bonus

    return reward, {"palm_to_ball": palm_to_ball, "carry": carry, "bonus": bonus}
