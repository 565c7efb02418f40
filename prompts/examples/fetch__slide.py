"""Expert reward for fetch/slide: Slide the puck across the slippery table so it stops at the goal, out of the gripper's reach.

Source: hand-written for this project. Gymnasium-Robotics' FetchSlideDense-v4 pays only minus the
puck's distance to the goal, with no signal for reaching or striking the puck, which is why dense
Fetch slide is rarely learned. This keeps that distance as its main term and adds the missing
stages: before the puck has moved, bring the gripper to a strike point just behind the puck (on the
side away from the goal); once it slides, pay its speed towards the goal while it is still far,
and a bonus while it rests within the 5 cm success radius. Checked on real Fetch states by
tests/generation/test_expert_examples.py (a puck nearer the goal, a gripper nearer the strike point and a
puck stopped on the goal all score higher).
"""

import numpy as np

SUCCESS_RADIUS = 0.05  # Gymnasium-Robotics' is_success threshold on the puck-to-goal distance


def compute_dense_reward(self, action):
    puck, goal = self.obj.position, self.goal_position
    # Main term: the native objective, the puck centre's distance to the goal.
    puck_to_goal = float(np.linalg.norm(goal - puck))
    flat = goal[:2] - puck[:2]
    direction = flat / max(float(np.linalg.norm(flat)), 1e-6)

    # Before the strike: the gripper should wait 5 cm behind the puck, at its height, so a push
    # along `direction` sends the puck towards the goal. Once the puck has moved 2 cm, the gripper
    # no longer matters (chasing a sliding puck is not needed).
    strike_point = np.array([puck[0] - 0.05 * direction[0], puck[1] - 0.05 * direction[1], puck[2]])
    struck = float(np.linalg.norm(puck - self.obj.init_position)) > 0.02
    approach = 0.0 if struck else float(np.linalg.norm(self.robot.ee_position - strike_point))

    # Sliding: the puck's speed along the goal direction, capped at 1 m/s, only while it is far
    # from the goal (near it, the puck must slow down and stop).
    towards = float(np.clip(np.dot(self.obj.velocity[:2], direction), 0.0, 1.0))
    slide = towards if puck_to_goal > 2 * SUCCESS_RADIUS else 0.0

    # At the goal: a bonus while the puck is inside the success radius and nearly still.
    speed = float(np.linalg.norm(self.obj.velocity))
    at_goal = 1.0 if puck_to_goal < SUCCESS_RADIUS and speed < 0.05 else 0.0

    reward = -1.0 * puck_to_goal - 0.5 * approach + 0.2 * slide + 1.0 * at_goal
    return reward, {"puck_to_goal": -puck_to_goal, "approach": -0.5 * approach, "slide": 0.2 * slide, "at_goal": at_goal}
