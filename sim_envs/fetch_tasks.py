"""Gymnasium-Robotics Fetch tasks (7-DoF arm, parallel gripper, 50-step episodes).

Expert reward = the Dense variant's reward (minus the distance from the achieved goal to the goal);
success = the env's own `info["is_success"]` (within 5 cm), judged at the episode's last step as in
the Fetch benchmark.
"""

import weakref
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from sim_envs.errors import ConfigError
from sim_envs.gymnasium_robotics_import import make_gymnasium_robotics_env
from sim_envs.scale_hints import ARM_SCALE_POINTS, REACH_SCALE_POINTS
from sim_envs.scene_features import FETCH_FEATURES
from sim_envs.success_progress import progress_of, within
from sim_envs.success_rule import distance, rule
from sim_envs.task import REACH_ANCHORS, REACH_ORACLE, KeypointSetup, Task
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



@dataclass(frozen=True)
class _FetchIds:
    """Addresses the view reads, looked up once per model (Gymnasium-Robotics' helpers look names up on every call)."""

    grip_site: int
    right_finger_qpos: int
    left_finger_qpos: int
    object_site: int | None
    object_qpos: int | None
    object_qvel: int | None


_FETCH_IDS: "weakref.WeakKeyDictionary[Any, _FetchIds]" = weakref.WeakKeyDictionary()


def _fetch_ids(model: Any) -> _FetchIds:
    ids = _FETCH_IDS.get(model)
    if ids is None:
        import mujoco

        def find(kind: Any, name: str) -> int | None:
            index = mujoco.mj_name2id(model, kind, name)
            return None if index == -1 else index

        joint, site = mujoco.mjtObj.mjOBJ_JOINT, mujoco.mjtObj.mjOBJ_SITE
        obj_joint = find(joint, "object0:joint")
        ids = _FetchIds(
            grip_site=model.site("robot0:grip").id,
            right_finger_qpos=int(model.jnt_qposadr[model.joint("robot0:r_gripper_finger_joint").id]),
            left_finger_qpos=int(model.jnt_qposadr[model.joint("robot0:l_gripper_finger_joint").id]),
            object_site=find(site, "object0"),
            object_qpos=None if obj_joint is None else int(model.jnt_qposadr[obj_joint]),
            object_qvel=None if obj_joint is None else int(model.jnt_dofadr[obj_joint]),
        )
        _FETCH_IDS[model] = ids
    return ids


def _robot(env: Any, previous_init: np.ndarray | None, ids: _FetchIds) -> FetchRobot:
    import mujoco

    model, data = env.model, env.data
    grip = data.site_xpos[ids.grip_site]
    qpos = data.qpos
    fingers = qpos[ids.right_finger_qpos] + qpos[ids.left_finger_qpos]
    # Gymnasium-Robotics' get_site_xvelp: the site's translational Jacobian times qvel.
    jacp = np.zeros((3, model.nv))
    mujoco.mj_jacSite(model, data, jacp, None, ids.grip_site)
    return FetchRobot(
        ee_position=frozen(grip),
        ee_velocity=frozen(jacp @ data.qvel),
        gripper_width=float(fingers),
        init_ee_position=frozen(grip) if previous_init is None else previous_init,
    )


def read_fetch_reach_view(env: Any, previous: FetchReachView | None) -> FetchReachView:
    ids = _fetch_ids(env.model)
    return FetchReachView(
        dt=float(env.dt),
        episode_step=0 if previous is None else previous.episode_step + 1,
        robot=_robot(env, None if previous is None else previous.robot.init_ee_position, ids),
        goal_position=frozen(env.goal),
        table_height=TABLE_HEIGHT,
    )


def read_fetch_object_view(env: Any, previous: FetchObjectView | None) -> FetchObjectView:
    data, ids = env.data, _fetch_ids(env.model)
    if ids.object_site is None or ids.object_qpos is None or ids.object_qvel is None:
        raise ConfigError("this Fetch scene has no 'object0' block; use read_fetch_reach_view for tasks without an object")
    position = data.site_xpos[ids.object_site]
    qpos = data.qpos[ids.object_qpos : ids.object_qpos + 7]  # free joint: position (3), quaternion (4)
    qvel = data.qvel[ids.object_qvel : ids.object_qvel + 6]  # free joint: linear (3), angular (3)
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
        robot=_robot(env, None if previous is None else previous.robot.init_ee_position, ids),
        obj=obj,
        goal_position=frozen(env.goal),
        table_height=TABLE_HEIGHT,
    )


def fetch_success(view: StateView, info: dict[str, Any]) -> bool:
    return bool(info.get("is_success", 0.0))


SUCCESS_DISTANCE = 0.05
"""Gymnasium-Robotics' `distance_threshold` for every Fetch task; `is_success` is a strict `<` on it."""


def goals_within(achieved: np.ndarray, desired: np.ndarray, threshold: float = SUCCESS_DISTANCE) -> np.ndarray:
    """Gymnasium-Robotics' success test on batches of goal vectors (HER relabelling): within `threshold` m."""
    return np.linalg.norm(np.asarray(achieved) - np.asarray(desired), axis=-1) < threshold


def gripper_near_goal(view: Any, DISTANCE: float) -> bool:
    """`robot.ee_position` less than {DISTANCE} m from `goal_position`"""
    return distance(view.robot.ee_position, view.goal_position) < DISTANCE


def object_near_goal(view: Any, DISTANCE: float) -> bool:
    """`obj.position` less than {DISTANCE} m from `goal_position`"""
    return distance(view.obj.position, view.goal_position) < DISTANCE


@progress_of(gripper_near_goal)
def gripper_near_goal_progress(view: Any, DISTANCE: float) -> float:
    return within(distance(view.robot.ee_position, view.goal_position), DISTANCE)


@progress_of(object_near_goal)
def object_near_goal_progress(view: Any, DISTANCE: float) -> float:
    return within(distance(view.obj.position, view.goal_position), DISTANCE)



def fetch_tasks() -> list[Task]:
    tasks = []
    for name, (gym_id, description, notes) in FETCH_TASKS.items():
        reach = name == "reach"
        success_rule = rule(gripper_near_goal if reach else object_near_goal, DISTANCE=SUCCESS_DISTANCE)
        tasks.append(
            Task(
                id=f"fetch/{name}",
                family="fetch",
                description=description,
                env_factory=partial(make_gymnasium_robotics_env, gym_id),
                view_class=FetchReachView if reach else FetchObjectView,
                read_view=read_fetch_reach_view if reach else read_fetch_object_view,
                is_success=fetch_success,
                success_doc=success_rule.describe("final"),
                success_mode="final",
                success_rule=success_rule,
                keypoints=KeypointSetup("external_camera_0", anchors=REACH_ANCHORS, oracle=REACH_ORACLE) if reach else KeypointSetup("external_camera_0"),
                scale_points=REACH_SCALE_POINTS if reach else ARM_SCALE_POINTS,
                max_episode_steps=50,
                default_steps=20_000,
                expert_reward_doc=EXPERT_DOC,
                action_doc=ACTION_DOC,
                view_notes=notes,
                scene_features=FETCH_FEATURES,
                goal_success=goals_within,
            )
        )
    return tasks
