"""First draft for metaworld/button-press-topdown-v3: reach the button, then press it down."""

import numpy as np


def compute_dense_reward(self, action):
    tcp_to_button = float(np.linalg.norm(self.robot.ee_position - self.obj.position))
    button_to_goal = abs(float(self.obj.position[2] - self.goal_position[2]))
    return -tcp_to_button - 5.0 * button_to_goal, {"tcp_to_button": tcp_to_button, "button_to_goal": button_to_goal}
