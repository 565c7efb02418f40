"""The task file: registers `planar_arm/push_puck` for every `t2r` command given `--task-file` this file.

`t2r` runs this file and registers every `Task` it defines at module level. The modules beside it import by
name, since their folder is put on the import path. Each part of the task is here or one import away: the env
(planar_arm_env.py, on planar_arm.xml), the view a reward reads (planar_arm_view.py), the success rule, the scale
points, the training settings (planar_arm.yml) and a scripted policy (planar_arm_scripted.py).
"""

from __future__ import annotations

from pathlib import Path

from planar_arm_env import EPISODE_STEPS, MAX_FINGER_SPEED, make_planar_arm_env
from planar_arm_scripted import ScriptedPusher
from planar_arm_view import PlanarArmPushView, read_planar_arm_view

from sim_envs import Task, rule
from sim_envs.scene_features import FeatureSpec
from sim_envs.success_progress import progress_of, within
from sim_envs.success_rule import distance

SUCCESS_DISTANCE = 0.05
"""m between the puck's centre and the goal: the centre must lie on the 10 cm goal disc."""


def puck_at_goal(view: PlanarArmPushView, DISTANCE: float) -> bool:
    """`obj.position` within {DISTANCE} m of `goal_position`"""  # the prompt's sentence, with the number filled in
    return distance(view.obj.position, view.goal_position) < DISTANCE


@progress_of(puck_at_goal)
def puck_at_goal_progress(view: PlanarArmPushView, DISTANCE: float) -> float:
    """How far the puck is from the goal disc, in [0, 1]: DISTANCE over the distance (what ranking reads when no
    candidate succeeds yet); `SuccessRule.progress` makes it 1 exactly when `puck_at_goal` holds."""
    return within(distance(view.obj.position, view.goal_position), DISTANCE)


SUCCESS = rule(puck_at_goal, DISTANCE=SUCCESS_DISTANCE)

PUSH_PUCK = Task(
    id="planar_arm/push_puck",
    family="planar_arm",
    description="Push the puck across the table to the goal with the arm's finger, and leave it there.",
    env_factory=make_planar_arm_env,
    view_class=PlanarArmPushView,
    read_view=read_planar_arm_view,
    is_success=SUCCESS.judge,  # no simulator flag to read: the rule itself judges
    success_rule=SUCCESS,
    success_doc=SUCCESS.describe("final"),
    success_mode="final",
    max_episode_steps=EPISODE_STEPS,
    default_steps=100_000,  # push_reward.py: evaluation success 0.6 by 46k steps, 0.7-0.8 from 56k (one seed; README)
    expert_reward_doc="the env's own dense reward: minus the puck-to-goal distance, minus half the finger-to-puck distance, "
                      "minus 0.01 times the squared action",
    scripted_policy_factory=ScriptedPusher,
    action_doc=f"np.ndarray (2,) in [-1, 1]: the finger's velocity along x and y (1 = {MAX_FINGER_SPEED:g} m/s, "
               f"{MAX_FINGER_SPEED * 0.05 * 100:g} cm per 50 ms step); the shoulder and elbow follow through the arm's Jacobian",
    view_notes="the arm's base is at the origin; x points away from it across the table, z up; the arm moves in the plane "
               "(its finger's tip and the puck's centre stay at z = 0.02); the arm reaches 0.09-0.40 m from the base; the "
               "puck starts 0.17-0.30 m from the base and the goal 0.08-0.25 m from the puck, both within reach; the links "
               "pass above the puck, only the finger touches it; the puck slides only while pushed.",
    scale_points=(
        ("finger to puck", "robot.ee_position", "obj.position"),
        ("puck to goal", "obj.position", "goal_position"),
    ),
    hyperparams_file=Path(__file__).with_name("planar_arm.yml"),
    scene_features=(FeatureSpec("table", "table", geom="table"),),  # read from the model: the prompt states its edges
)
