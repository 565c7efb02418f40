"""Gymnasium-Robotics Fetch tasks (7-DoF arm, parallel gripper, 50-step episodes).

Expert reward = the Dense variant's reward (minus the distance from the achieved goal to the goal);
success = the env's own `info["is_success"]` (within 5 cm), judged at the episode's last step as in
the Fetch benchmark.
"""

from dataclasses import dataclass
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from sim_envs.task import Task
from sim_envs.view_base import StateView, attr, frozen


@dataclass(slots=True)
class FetchRobot:
    """The Fetch arm's gripper."""

    ee_position: np.ndarray = attr("(3,) the grip point between the two fingers")
    ee_velocity: np.ndarray = attr("(3,) m/s, linear velocity of the grip point")
    gripper_width: float = attr("m, distance between the fingers (about 0 closed to 0.1 fully open)")
    init_ee_position: np.ndarray = attr("(3,) ee_position at the start of the episode")


@dataclass(slots=True)
class FetchObject:
    """The block on the table."""

    position: np.ndarray = attr("(3,) centre of the 5 cm block")
    quaternion: np.ndarray = attr("(4,) orientation quaternion (w, x, y, z)")
    velocity: np.ndarray = attr("(3,) m/s, linear velocity")
    angular_velocity: np.ndarray = attr("(3,) rad/s, angular velocity")
    init_position: np.ndarray = attr("(3,) position at the start of the episode")


@dataclass(slots=True)
class FetchReachView(StateView):
    """A Fetch arm in front of a table, and a goal point in the air."""

    robot: FetchRobot = attr("the arm's gripper")
    goal_position: np.ndarray = attr("(3,) the point the gripper must reach")
    table_height: float = attr("m, z of the table top")


@dataclass(slots=True)
class FetchObjectView(StateView):
    """A Fetch arm, a block on the table and a goal position for the block."""

    robot: FetchRobot = attr("the arm's gripper")
    obj: FetchObject = attr("the block")
    goal_position: np.ndarray = attr("(3,) where the block must go")
    table_height: float = attr("m, z of the table top (the block rests with its centre 2.5 cm above it)")


ACTION_DOC = (
    "np.ndarray (4,) in [-1, 1]: action[:3] moves the gripper (x, y, z; 1 = 5 cm per step), "
    "action[3] opens (+1) or closes (-1) the fingers"
)

FETCH_TASKS: dict[str, tuple[str, str, str]] = {
    # name -> (gymnasium id, description, notes)
    "reach": ("FetchReachDense-v4", "Move the gripper to the goal point in the air.", "there is no object; only the gripper and the goal matter."),
    "push": ("FetchPushDense-v4", "Push the block across the table to the goal.", "the fingers are locked closed; the goal is on the table."),
    "slide": ("FetchSlideDense-v4", "Slide the puck across the slippery table so it stops at the goal, out of the gripper's reach.", "obj is a puck; the goal is on the table, often beyond the arm's reach, so the puck must be struck, not carried."),
    "pick_and_place": ("FetchPickAndPlaceDense-v4", "Pick up the block and move it to the goal, which may be in the air.", "the goal is on the table or up to 45 cm above it."),
}

EXPERT_DOC = "Gymnasium-Robotics' dense reward: minus the distance from the achieved goal to the goal"
TABLE_HEIGHT = 0.4


def make_fetch_env(gym_id: str, render_mode: str | None = None, seed: int | None = None, size: int = 480) -> gym.Env:
    import gymnasium_robotics

    gym.register_envs(gymnasium_robotics)
    kwargs: dict[str, Any] = {"render_mode": render_mode}
    if render_mode is not None:
        kwargs.update(width=size, height=size)
    env = gym.make(gym_id, **kwargs)
    if seed is not None:
        env.action_space.seed(seed)
    return env


def _robot(env: Any, previous_init: np.ndarray | None) -> FetchRobot:
    utils, model, data = env._utils, env.model, env.data
    grip = utils.get_site_xpos(model, data, "robot0:grip")
    fingers = (
        utils.get_joint_qpos(model, data, "robot0:r_gripper_finger_joint")[0]
        + utils.get_joint_qpos(model, data, "robot0:l_gripper_finger_joint")[0]
    )
    return FetchRobot(
        ee_position=frozen(grip),
        ee_velocity=frozen(utils.get_site_xvelp(model, data, "robot0:grip")),
        gripper_width=float(fingers),
        init_ee_position=frozen(grip) if previous_init is None else previous_init,
    )


def read_fetch_reach_view(env: Any, previous: FetchReachView | None) -> FetchReachView:
    return FetchReachView(
        dt=float(env.dt),
        episode_step=0 if previous is None else previous.episode_step + 1,
        robot=_robot(env, None if previous is None else previous.robot.init_ee_position),
        goal_position=frozen(env.goal),
        table_height=TABLE_HEIGHT,
    )


def read_fetch_object_view(env: Any, previous: FetchObjectView | None) -> FetchObjectView:
    utils, model, data = env._utils, env.model, env.data
    position = utils.get_site_xpos(model, data, "object0")
    qpos = utils.get_joint_qpos(model, data, "object0:joint")
    qvel = utils.get_joint_qvel(model, data, "object0:joint")
    obj = FetchObject(
        position=frozen(position),
        quaternion=frozen(qpos[3:7]),
        velocity=frozen(qvel[:3]),
        angular_velocity=frozen(qvel[3:6]),
        init_position=frozen(position) if previous is None else previous.obj.init_position,
    )
    return FetchObjectView(
        dt=float(env.dt),
        episode_step=0 if previous is None else previous.episode_step + 1,
        robot=_robot(env, None if previous is None else previous.robot.init_ee_position),
        obj=obj,
        goal_position=frozen(env.goal),
        table_height=TABLE_HEIGHT,
    )


def fetch_success(view: StateView, info: dict[str, Any]) -> bool:
    return bool(info.get("is_success", 0.0))


def fetch_tasks() -> list[Task]:
    tasks = []
    for name, (gym_id, description, notes) in FETCH_TASKS.items():
        reach = name == "reach"
        tasks.append(
            Task(
                id=f"fetch/{name}",
                family="fetch",
                description=description,
                env_factory=partial(make_fetch_env, gym_id),
                view_class=FetchReachView if reach else FetchObjectView,
                read_view=read_fetch_reach_view if reach else read_fetch_object_view,
                is_success=fetch_success,
                success_doc="Gymnasium-Robotics' is_success (achieved goal within 5 cm of the goal) at the last step",
                success_mode="final",
                max_episode_steps=50,
                default_steps=20_000,
                expert_reward_doc=EXPERT_DOC,
                action_doc=ACTION_DOC,
                view_notes=notes,
            )
        )
    return tasks
