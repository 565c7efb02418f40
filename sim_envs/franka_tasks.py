"""Franka Emika Panda tasks: reach, push, slide and pick-and-place on a table (sim_envs.franka_env).

The tasks of "Open-Source Reinforcement Learning Environments Implemented in MuJoCo with Franka Manipulator"
(push, slide, pick-and-place; reach as the smoke task) on the Panda that Gymnasium-Robotics ships. Expert reward =
the reference's dense reward (minus the distance from the achieved goal to the goal, like Fetch's Dense variants);
success = within 5 cm at the episode's last step, with Fetch's rules and goal test (the same threshold). The views name what they share with Fetch's alike
(`robot.ee_position`, `obj.position`, `goal_position`), so rewards and few-shot examples carry across.
"""

from dataclasses import dataclass
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from sim_envs.fetch_tasks import goals_within, gripper_near_goal, object_near_goal
from sim_envs.franka_env import MAX_MOVE, SUCCESS_DISTANCE, FrankaEnv
from sim_envs.franka_scene import BLOCK_HALF_SIZE, FINGERTIP_REACH, TABLE_HEIGHT
from sim_envs.scale_hints import ARM_SCALE_POINTS, REACH_SCALE_POINTS
from sim_envs.scene_features import FRANKA_FEATURES
from sim_envs.success_rule import rule
from sim_envs.task import REACH_ANCHORS, REACH_ORACLE, KeypointSetup, Task
from sim_envs.view_base import StateView, attr, frozen

EPISODE_STEPS = 50
"""The reference's episode length (50 steps of 50 ms)."""


@dataclass(slots=True)
class FrankaRobot:
    """The Panda's hand: its grip point between the finger pads, and the two fingers."""

    ee_position: np.ndarray = attr("(3,) the grip point, midway between the finger pads (the fingertips reach 3.4 cm below it)")
    ee_velocity: np.ndarray = attr("(3,) m/s, linear velocity of the grip point")
    gripper_width: float = attr("m, opening of the fingers (0 closed to 0.08 fully open; about 0.05 closed on the 4 cm block)")
    init_ee_position: np.ndarray = attr("(3,) ee_position at the start of the episode")


@dataclass(slots=True)
class FrankaObject:
    """The object on the table (a 4 cm block, or a puck for slide)."""

    position: np.ndarray = attr("(3,) centre of the object")
    quaternion: np.ndarray = attr("(4,) orientation quaternion (w, x, y, z)")
    velocity: np.ndarray = attr("(3,) m/s, linear velocity")
    angular_velocity: np.ndarray = attr("(3,) rad/s, angular velocity")
    init_position: np.ndarray = attr("(3,) position at the start of the episode")


@dataclass(slots=True)
class FrankaReachView(StateView):
    """A Franka Panda arm at a table, and a goal point in the air."""

    robot: FrankaRobot = attr("the arm's hand")
    goal_position: np.ndarray = attr("(3,) the point the grip point must reach")
    table_height: float = attr("m, z of the table top")


@dataclass(slots=True)
class FrankaObjectView(StateView):
    """A Franka Panda arm, an object on the table and a goal position for the object."""

    robot: FrankaRobot = attr("the arm's hand")
    obj: FrankaObject = attr("the object")
    goal_position: np.ndarray = attr("(3,) where the object's centre must go")
    table_height: float = attr("m, z of the table top")


MOVE_DOC = (
    f"action[:3] moves the grip point's target (x, y, z; 1 = {MAX_MOVE * 100:.0f} cm per 50 ms step; the hand keeps pointing "
    "down; the target stays inside the workspace, fingertips above the table)"
)
ACTION_DOCS = {
    "fingers closed": f"np.ndarray (3,) in [-1, 1]: {MOVE_DOC}; the fingers stay closed",
    "fingers": f"np.ndarray (4,) in [-1, 1]: {MOVE_DOC}; action[3] sets the fingers' opening (+1 fully open, -1 closed)",
}
FRAME_NOTE = (
    f"world frame in metres, z up; the Panda's base is at (0, 0, {TABLE_HEIGHT}) at the table's near edge, x points away "
    f"from it across the table, the table top is at z = {TABLE_HEIGHT}"
)

FRANKA_TASKS: dict[str, tuple[str, str]] = {
    # name -> (description, notes)
    "reach": ("Move the Panda's grip point to the goal point in the air.", "there is no object; only the hand and the goal matter"),
    "push": ("Push the block across the table to the goal with the closed fingers.",
             f"obj is a 4 cm block resting with its centre {BLOCK_HALF_SIZE * 100:.0f} cm above the table; the goal is on the table "
             "within reach; the fingers are locked closed, so the block must be pushed, not carried"),
    "slide": ("Strike the puck so it slides across the slippery table and stops at the goal, beyond the arm's reach.",
              "obj is a puck (6 cm across, 2 cm tall) on a low-friction table; the goal is on the table 15-75 cm further "
              "from the base than the puck starts, mostly beyond the hand's reach, so the puck must be struck, not carried"),
    "pick_and_place": ("Pick up the block and place it at the goal, which may be in the air.",
                       "obj is a 4 cm block; the goal is on the table or up to 20 cm above the block's resting height; the fingers "
                       "must close on the block to lift it"),
}
EXPERT_DOC = "the reference's dense reward: minus the distance from the achieved goal (grip point or object centre) to the goal"


def make_franka_env(task: str, render_mode: str | None = None, seed: int | None = None, size: int = 480,
                    max_episode_steps: int | None = None, reward_type: str = "dense") -> gym.Env:
    """The Franka env in a Gymnasium TimeLimit (50 steps unless `max_episode_steps`)."""
    env: gym.Env = FrankaEnv(task, reward_type=reward_type, render_mode=render_mode, width=size, height=size)
    env = gym.wrappers.TimeLimit(env, max_episode_steps or EPISODE_STEPS)
    if seed is not None:
        env.action_space.seed(seed)
    return env


def _robot(env: FrankaEnv, previous: FrankaRobot | None) -> FrankaRobot:
    grip = env.data.site_xpos[env.grip_site]
    return FrankaRobot(
        ee_position=frozen(grip),
        ee_velocity=frozen(env.grip_velocity()),
        gripper_width=env.finger_width(),
        init_ee_position=frozen(grip) if previous is None else previous.init_ee_position,
    )


def read_franka_reach_view(env: Any, previous: FrankaReachView | None) -> FrankaReachView:
    return FrankaReachView(
        dt=float(env.dt),
        episode_step=0 if previous is None else previous.episode_step + 1,
        robot=_robot(env, None if previous is None else previous.robot),
        goal_position=frozen(env.goal),
        table_height=TABLE_HEIGHT,
    )


def read_franka_object_view(env: Any, previous: FrankaObjectView | None) -> FrankaObjectView:
    data, qpos, qvel = env.data, env.object_qpos, env.object_qvel
    position = data.qpos[qpos : qpos + 3]
    obj = FrankaObject(
        position=frozen(position),
        quaternion=frozen(data.qpos[qpos + 3 : qpos + 7]),
        velocity=frozen(data.qvel[qvel : qvel + 3]),
        angular_velocity=frozen(data.qvel[qvel + 3 : qvel + 6]),
        init_position=frozen(position) if previous is None else previous.obj.init_position,
    )
    return FrankaObjectView(
        dt=float(env.dt),
        episode_step=0 if previous is None else previous.episode_step + 1,
        robot=_robot(env, None if previous is None else previous.robot),
        obj=obj,
        goal_position=frozen(env.goal),
        table_height=TABLE_HEIGHT,
    )


def franka_success(view: StateView, info: dict[str, Any]) -> bool:
    return bool(info.get("is_success", 0.0))


def _scripted(name: str) -> Any:
    from sim_envs.franka_scripted import POLICIES

    return POLICIES[name]()


def franka_tasks() -> list[Task]:
    from sim_envs.franka_scripted import POLICIES

    tasks = []
    for name, (description, notes) in FRANKA_TASKS.items():
        reach = name == "reach"
        success_rule = rule(gripper_near_goal if reach else object_near_goal, DISTANCE=SUCCESS_DISTANCE)
        tasks.append(
            Task(
                id=f"franka/{name}",
                family="franka",
                description=description,
                env_factory=partial(make_franka_env, name),
                view_class=FrankaReachView if reach else FrankaObjectView,
                read_view=read_franka_reach_view if reach else read_franka_object_view,
                is_success=franka_success,
                success_doc=success_rule.describe("final"),
                success_mode="final",
                success_rule=success_rule,
                keypoints=KeypointSetup("front", anchors=REACH_ANCHORS, oracle=REACH_ORACLE) if reach else KeypointSetup("front"),
                scale_points=REACH_SCALE_POINTS if reach else ARM_SCALE_POINTS,
                max_episode_steps=EPISODE_STEPS,
                default_steps=20_000 if reach else 200_000,
                expert_reward_doc=EXPERT_DOC,
                scripted_policy_factory=partial(_scripted, name) if name in POLICIES else None,
                action_doc=ACTION_DOCS["fingers" if name == "pick_and_place" else "fingers closed"],
                view_notes=f"{notes}; {FRAME_NOTE}; the fingertips reach {FINGERTIP_REACH * 100:.1f} cm below the grip point.",
                scene_features=FRANKA_FEATURES,
                goal_success=goals_within,
                budget_note="" if reach else (
                    "push, slide and pick-and-place learn in 10^5-10^6 steps with SAC + HER (the reference trains to 10^6); "
                    "on a 2-core machine push reached 0.9 with the sparse reward and HER at 150-190k steps (3 of 3 seeds, about 30 "
                    "minutes each) and not at all with the dense reward alone by 100k; pick-and-place and slide learned nothing "
                    "by 60k with either (benchmarks/RESULTS.md, franka_baselines)"),
            )
        )
    return tasks
