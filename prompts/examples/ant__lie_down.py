"""Expert reward for ant/lie_down: Make the ant lie down flat on its belly and stay there.

Source: hand-written for this project (Gymnasium's Ant has no such reward, so there is no
environment reward to rewrite). It pays for a low torso, for keeping it level (belly down, not on
its back or side), for stillness once low and for feet on the floor, with a bonus on every step that
passes the task's success test, and charges for torque (an ant that idles its motors sinks to the
floor by itself). Checked on real Ant states by tests/generation/test_expert_examples.py (lower, level, still
and feet down each score higher).
"""

import numpy as np


def compute_dense_reward(self, action):
    torso = self.torso
    height = float(torso.position[2])
    # Low: 0 at the standing height (0.75 m), 1 at the 0.40 m the task asks for or below.
    low = float(np.clip((0.75 - height) / 0.35, 0.0, 1.0))
    # Level: the up vector's z, from 0.8 (the success limit) to 1; 0 when tipped further.
    level = float(np.clip((torso.up_vector[2] - 0.8) / 0.2, 0.0, 1.0))
    # Still: 1 when motionless, falling to 0 at 0.5 m/s; it counts only once the body is low, so it
    # never rewards standing still at full height.
    speed = float(np.linalg.norm(torso.velocity))
    still = float(np.clip(1.0 - speed / 0.5, 0.0, 1.0)) * low
    # Feet down: the mean over the four feet of 1 at 0.15 m high or lower, 0 at 0.30 m or higher.
    feet = float(np.mean(np.clip((0.30 - self.foot_positions[:, 2]) / 0.15, 0.0, 1.0)))
    # Done: a bonus on every step that meets the task's success test (judged at the last step).
    success = height <= 0.40 and torso.up_vector[2] >= 0.8 and speed <= 0.1 and bool(np.all(self.foot_positions[:, 2] <= 0.15))
    done = 2.0 if success else 0.0
    # Effort: torque costs; lying still needs none.
    control_cost = 0.05 * float(np.sum(np.square(action)))

    reward = 1.0 * low + 0.5 * level + 0.5 * still + 0.5 * feet + done - control_cost
    return reward, {"low": low, "level": 0.5 * level, "still": 0.5 * still, "feet": 0.5 * feet, "done": done, "control_cost": control_cost}
