"""Expert reward for ant/wave_leg: Make the ant wave its front left leg in the air while keeping its body upright.

Source: hand-written for this project (Gymnasium's Ant has no such reward, so there is no
environment reward to rewrite). It pays for an upright torso, for the front-left foot held high and
for that leg's hip swinging while the foot is up, with a bonus when all three meet the task's success
test; checked on real Ant states by tests/generation/test_expert_examples.py (a raised, swinging front-left
leg on an upright body scores higher than a lowered, still or tipped-over one).
"""

import numpy as np

FRONT_LEFT = 0  # foot_positions row; its [hip, ankle] are joint_angles / joint_velocities [0, 1]


def compute_dense_reward(self, action):
    # Upright: the torso's up vector has z from 0.7 (the success limit) to 1 (level); 0 below.
    upright = float(np.clip((self.torso.up_vector[2] - 0.7) / 0.3, 0.0, 1.0))
    # Raise: the front-left foot tip's height, in [0, 1] up to the 0.3 m the task asks for.
    foot_height = float(self.foot_positions[FRONT_LEFT, 2])
    raised = float(np.clip(foot_height / 0.3, 0.0, 1.0))
    # Wave: that leg's hip speed, in [0, 1] up to the 1 rad/s asked for, counted only while the foot
    # is up and the body upright (swinging a leg on the floor or while falling is no wave).
    hip_speed = abs(float(self.joint_velocities[0]))
    wave = float(np.clip(hip_speed / 1.0, 0.0, 1.0)) * raised * upright
    # Done: a bonus on every step that passes the task's success test.
    success = foot_height >= 0.3 and hip_speed >= 1.0 and self.torso.up_vector[2] >= 0.7
    done = 5.0 if success else 0.0
    # Effort: a small torque cost; the action is ordered front_right, front_left, back_left, back_right.
    control_cost = 0.05 * float(np.sum(np.square(action)))

    reward = 1.0 * upright + 1.0 * raised * upright + 1.0 * wave + done - control_cost
    return reward, {"upright": upright, "raised": raised * upright, "wave": wave, "done": done, "control_cost": control_cost}
