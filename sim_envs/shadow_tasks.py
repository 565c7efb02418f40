"""Shadow Dexterous Hand tasks (Plappert et al. 2018, "Multi-Goal Reinforcement Learning") from Gymnasium-Robotics 1.4.2.

`shadow/reach` wraps HandReachDense-v3 (the latest HandReach 1.4.2 registers), `shadow/block`, `shadow/egg` and
`shadow/pen` wrap HandManipulate{Block,Egg,Pen}Dense-v1: the hand is mounted palm up, only the wrist and the
fingers move, and 20 actuators drive its 24 joints. These are multi-goal envs (dict observations `observation`,
`achieved_goal`, `desired_goal`): the expert reward is the Dense variant's (minus the goal distance: the 15-number
fingertip distance for reach, 10 x position distance + rotation angle for the manipulate tasks), success is the
env's own `info["is_success"]` judged at the episode's last step, as in the benchmark and like Fetch, and
`goal_success` is the same test on batches of goal vectors, for hindsight relabelling (HER), whose sparse
variant the benchmark trains with.

The manipulate tasks' test (`manipulate.py`: `_goal_distance`, `_is_success`): position within
`distance_threshold` (0.01 m; 0.05 m for the pen) and rotation angle `2 * arccos(clip(<q_a * conj(q_b)>_w, -1, 1))`
below `rotation_threshold` (0.1 rad). The angle is Gymnasium-Robotics' own: it does not identify q with -q, so the
same orientation written with the opposite sign is 2*pi - angle away. For the pen the z Euler angle of the
achieved orientation is replaced by the goal's first (`ignore_z_target_rotation`). Gymnasium-Robotics does that
replacement with `euler_a[2] = euler_b[2]`, which on a batch overwrites the third goal's row instead of every
goal's z: its batched pen distance is wrong (and with it the batched dense reward and success test HER relabels
with). `goal_success` does the replacement per goal (what its single-goal test does), and `make_shadow_env` gives
the pen env the same per-goal distance, so its own `compute_reward` is right on batches too.
"""

import weakref
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from sim_envs.adroit_tasks import FINGERTIP_SITES, HAND_JOINTS, HAND_JOINTS_DOC, Fingertips
from sim_envs.gymnasium_robotics_import import make_gymnasium_robotics_env, rotations
from sim_envs.success_progress import mean_of, progress_of, within
from sim_envs.success_rule import rule
from sim_envs.task import Task
from sim_envs.view_base import StateView, attr, frozen


@dataclass(slots=True)
class ShadowHand:
    """The Shadow Dexterous Hand, mounted palm up: only the wrist and the fingers move."""

    ee_position: np.ndarray = attr(
        "(3,) origin of the palm's body (robot0:palm), at the wrist end of the palm; it moves only with the wrist joints")
    fingertips: Fingertips = attr("the five fingertips")
    joint_angles: np.ndarray = attr(f"(24,) rad, the hand's joints {HAND_JOINTS_DOC}")
    joint_velocities: np.ndarray = attr("(24,) rad/s, in the order of joint_angles")


@dataclass(slots=True)
class ShadowObject:
    """The object lying on the palm."""

    position: np.ndarray = attr("(3,) centre of the object (its free joint's position: the env's achieved goal, with quaternion)")
    quaternion: np.ndarray = attr("(4,) orientation quaternion (w, x, y, z), world frame (its free joint's, as the env reads it)")
    velocity: np.ndarray = attr("(3,) m/s, linear velocity of the centre, world frame")
    angular_velocity: np.ndarray = attr("(3,) rad/s, angular velocity, world frame")
    init_position: np.ndarray = attr("(3,) position at the start of the episode")


@dataclass(slots=True)
class ShadowReachView(StateView):
    """A Shadow hand, palm up, and a goal position for each fingertip."""

    robot: ShadowHand = attr("the hand")
    goal_fingertips: Fingertips = attr("where each fingertip must go")


@dataclass(slots=True)
class ShadowManipulateView(StateView):
    """A Shadow hand, palm up, an object on its palm, and the goal pose of the object."""

    robot: ShadowHand = attr("the hand")
    obj: ShadowObject = attr("the object on the palm (the task notes say which)")
    goal_position: np.ndarray = attr("(3,) where the object's centre must go")
    goal_quaternion: np.ndarray = attr("(4,) the orientation (w, x, y, z) the object must take, world frame")


ACTION_DOC = (
    "np.ndarray (20,) in [-1, 1]: absolute position targets for the 20 actuators, each mapped linearly from [-1, 1] onto "
    "its joint's range (one action lasts 0.04 s), in the order of `robot.joint_angles` except that each of the index, "
    "middle, ring and little fingers has one actuator for its two last joints together (FFJ1 and FFJ0 move as one, and "
    "so on): WRJ1, WRJ0, FFJ3, FFJ2, FFJ1+0, MFJ3, MFJ2, MFJ1+0, RFJ3, RFJ2, RFJ1+0, LFJ4, LFJ3, LFJ2, LFJ1+0, THJ4, "
    "THJ3, THJ2, THJ1, THJ0"
)
REACH_GOAL_ORDER = ("index", "middle", "ring", "little", "thumb")
"""Gymnasium-Robotics' fingertip order in the reach goal vector (FINGERTIP_SITE_NAMES: ff, mf, rf, lf, th)."""


@dataclass(frozen=True)
class ShadowSpec:
    gym_id: str
    description: str
    notes: str
    position_threshold: float
    """`distance_threshold`: m, for the manipulate tasks; the reach task's on the 15-number fingertip vector."""
    ignore_z: bool = False


SHADOW_TASKS: dict[str, ShadowSpec] = {
    "reach": ShadowSpec(
        "HandReachDense-v3",
        "Move the fingertips to their goal positions.",
        "there is no object. Usually the goal asks the thumb and one other finger to meet above the palm and the others to "
        "stay where they start (1 reset in 10 asks every finger back to its start).",
        0.01),
    "block": ShadowSpec(
        "HandManipulateBlockDense-v1",
        "Move and rotate the block in the hand to match the goal pose.",
        "obj is a 5 cm cube lying on the palm; the goal pose (a random rotation about every axis, and a position a few cm "
        "from the start) is drawn at each reset. A cube that falls off the palm cannot be recovered within the episode.",
        0.01),
    "egg": ShadowSpec(
        "HandManipulateEggDense-v1",
        "Move and rotate the egg in the hand to match the goal pose.",
        "obj is an egg-shaped object lying on the palm; the goal pose (a random rotation about every axis, and a position a "
        "few cm from the start) is drawn at each reset. An egg that falls off the palm cannot be recovered within the episode.",
        0.01),
    "pen": ShadowSpec(
        "HandManipulatePenDense-v1",
        "Move and rotate the pen in the hand to match the goal pose.",
        "obj is a long pen lying across the palm; the goal pose is drawn at each reset. Success leaves out the z Euler angle "
        "of the pen's orientation (Gymnasium-Robotics' ignore_z_target_rotation), and the position tolerance is 5 cm. A pen "
        "that falls off the palm cannot be recovered within the episode.",
        0.05, ignore_z=True),
}
ROTATION_THRESHOLD = 0.1
"""rad: Gymnasium-Robotics' `rotation_threshold` for every manipulate task."""

EXPERT_DOC = {
    "reach": "Gymnasium-Robotics' dense reward: minus the distance between the 15-number vector of fingertip positions and "
             "its goal (the fingertips' errors combined as one Euclidean norm)",
    "manipulate": "Gymnasium-Robotics' dense reward: -(10 x position distance + rotation angle to the goal), the angle "
                  "2*arccos(clip(w of q_obj * conj(q_goal), -1, 1)) in rad",
}

BUDGET_NOTE = (
    "Shadow-hand manipulation is among the hardest multi-goal benchmarks: Plappert et al. (2018) trained it with DDPG + "
    "hindsight experience replay (HER) on the sparse reward with many parallel workers, on the order of 10^7 env steps, "
    "learned better from the sparse reward than from this dense one, and found the full-pose block, egg and pen tasks "
    "(these) the hardest; reach is much easier. On a busy 2-core machine SBX SAC ([256, 256], one gradient update per "
    "step) trained shadow/block at about 30 steps/s (measured, compilation included), so the default 1,000,000 steps is "
    "about 9 hours per candidate: expect learning curves, not solved tasks, from budgets a laptop can afford."
)

SCALE_POINTS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "reach": (("thumb to its goal", "robot.fingertips.thumb", "goal_fingertips.thumb"),
              ("thumb to index fingertip", "robot.fingertips.thumb", "robot.fingertips.index")),
    "manipulate": (("palm to object", "robot.ee_position", "obj.position"),
                   ("object to goal", "obj.position", "goal_position")),
}



@dataclass(frozen=True)
class _ShadowIds:
    """Addresses the view reads, looked up once per model."""

    palm_body: int
    tip_sites: tuple[int, int, int, int, int]
    """thumb, index, middle, ring, little."""
    hand_qpos: np.ndarray
    hand_dof: np.ndarray
    object_qpos: int | None
    object_dof: int | None


_SHADOW_IDS: "weakref.WeakKeyDictionary[Any, _ShadowIds]" = weakref.WeakKeyDictionary()


def _shadow_ids(model: Any) -> _ShadowIds:
    ids = _SHADOW_IDS.get(model)
    if ids is None:
        import mujoco

        hand = [model.joint(f"robot0:{name}").id for name in HAND_JOINTS]
        obj = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "object:joint")
        thumb, index, middle, ring, little = (model.site(f"robot0:{FINGERTIP_SITES[f]}").id
                                              for f in ("thumb", "index", "middle", "ring", "little"))
        ids = _ShadowIds(
            palm_body=model.body("robot0:palm").id,
            tip_sites=(thumb, index, middle, ring, little),
            hand_qpos=np.array([model.jnt_qposadr[j] for j in hand]),
            hand_dof=np.array([model.jnt_dofadr[j] for j in hand]),
            object_qpos=None if obj == -1 else int(model.jnt_qposadr[obj]),
            object_dof=None if obj == -1 else int(model.jnt_dofadr[obj]),
        )
        _SHADOW_IDS[model] = ids
    return ids


def _hand(data: Any, ids: _ShadowIds) -> ShadowHand:
    thumb, index, middle, ring, little = (frozen(data.site_xpos[i]) for i in ids.tip_sites)
    return ShadowHand(
        ee_position=frozen(data.xpos[ids.palm_body]),
        fingertips=Fingertips(thumb=thumb, index=index, middle=middle, ring=ring, little=little),
        joint_angles=frozen(data.qpos[ids.hand_qpos]),
        joint_velocities=frozen(data.qvel[ids.hand_dof]),
    )


def read_shadow_reach_view(env: Any, previous: ShadowReachView | None) -> ShadowReachView:
    ids = _shadow_ids(env.model)
    goal = np.asarray(env.goal, dtype=np.float64).reshape(5, 3)
    tips = dict(zip(REACH_GOAL_ORDER, (frozen(row) for row in goal)))
    return ShadowReachView(
        dt=float(env.dt),
        episode_step=0 if previous is None else previous.episode_step + 1,
        robot=_hand(env.data, ids),
        goal_fingertips=Fingertips(**tips),
    )


def read_shadow_manipulate_view(env: Any, previous: ShadowManipulateView | None) -> ShadowManipulateView:
    import mujoco

    data, ids = env.data, _shadow_ids(env.model)
    assert ids.object_qpos is not None and ids.object_dof is not None, "a manipulate scene has an 'object:joint'"
    pose = data.qpos[ids.object_qpos : ids.object_qpos + 7]  # free joint: position (3), quaternion (4)
    twist = data.qvel[ids.object_dof : ids.object_dof + 6]  # free joint: linear (world), angular (the body's frame)
    rotation = np.zeros(9)
    mujoco.mju_quat2Mat(rotation, pose[3:7])
    obj = ShadowObject(
        position=frozen(pose[:3]),
        quaternion=frozen(pose[3:7]),
        velocity=frozen(twist[:3]),
        angular_velocity=frozen(rotation.reshape(3, 3) @ twist[3:6]),
        init_position=frozen(pose[:3]) if previous is None else previous.obj.init_position,
    )
    goal = np.asarray(env.goal, dtype=np.float64)
    return ShadowManipulateView(
        dt=float(env.dt),
        episode_step=0 if previous is None else previous.episode_step + 1,
        robot=_hand(data, ids),
        obj=obj,
        goal_position=frozen(goal[:3]),
        goal_quaternion=frozen(goal[3:7]),
    )


def shadow_success(view: StateView, info: dict[str, Any]) -> bool:
    return bool(info.get("is_success", 0.0))


# --- the success test on goal vectors (HER) and on the view ---


def fingertips_within(achieved: np.ndarray, desired: np.ndarray, threshold: float) -> np.ndarray:
    """HandReach's test on batches of 15-number fingertip goals: their Euclidean distance below `threshold`."""
    return np.asarray(np.linalg.norm(np.asarray(achieved, dtype=np.float64) - np.asarray(desired, dtype=np.float64), axis=-1) < threshold)


def pose_distances(achieved: np.ndarray, desired: np.ndarray, ignore_z: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(position distance, rotation angle) between batches of 7-number poses (position, quaternion w x y z), as
    Gymnasium-Robotics' `_goal_distance` computes them (with the z Euler angle replaced per goal when `ignore_z`)."""
    a = np.asarray(achieved, dtype=np.float64)
    d = np.asarray(desired, dtype=np.float64)
    if a.shape != d.shape or a.shape[-1] != 7:
        raise ValueError(f"goal batches must have equal shapes ending in 7, got {a.shape} and {d.shape}")
    batch = a.shape[:-1]
    a2, d2 = a.reshape(-1, 7), d.reshape(-1, 7)
    d_pos = np.linalg.norm(a2[:, :3] - d2[:, :3], axis=-1)
    rot = rotations()
    quat_a, quat_b = a2[:, 3:], d2[:, 3:]
    if ignore_z:
        euler_a, euler_b = rot.quat2euler(quat_a), rot.quat2euler(quat_b)
        euler_a[:, 2] = euler_b[:, 2]
        quat_a = rot.euler2quat(euler_a)
    quat_diff = rot.quat_mul(quat_a, rot.quat_conjugate(quat_b))
    d_rot = 2 * np.arccos(np.clip(quat_diff[..., 0], -1.0, 1.0))
    return d_pos.reshape(batch), d_rot.reshape(batch)


def make_shadow_env(gym_id: str, ignore_z: bool = False, **kwargs: Any) -> Any:
    """Gymnasium-Robotics' env `gym_id` (make_gymnasium_robotics_env's arguments); with `ignore_z` (the pen) its
    `_goal_distance` is replaced by `pose_distances`, which keeps the env's single-goal numbers and fixes its batched
    ones (see the module docstring): its `compute_reward` and `_is_success` then judge each relabelled goal as
    the env judges the one it steps with."""
    env = make_gymnasium_robotics_env(gym_id, **kwargs)
    if ignore_z:
        raw = env.unwrapped
        if not raw.ignore_z_target_rotation:
            raise ValueError(f"{gym_id} does not ignore the z rotation; build it without ignore_z")

        def goal_distance(goal_a: np.ndarray, goal_b: np.ndarray) -> tuple[Any, Any]:
            d_pos, d_rot = pose_distances(goal_a, goal_b, ignore_z=True)
            return d_pos[()], d_rot[()]  # one goal: numpy scalars, as the env's own

        raw._goal_distance = goal_distance
    return env


def pose_within(achieved: np.ndarray, desired: np.ndarray, distance: float, angle: float, ignore_z: bool = False) -> np.ndarray:
    """The manipulate tasks' `_is_success` on batches of 7-number poses: position within `distance` m and rotation
    within `angle` rad (strict `<`, like the env)."""
    d_pos, d_rot = pose_distances(achieved, desired, ignore_z)
    return np.asarray((d_pos < distance) & (d_rot < angle))


def _reach_vectors(view: Any) -> tuple[np.ndarray, np.ndarray]:
    tips, goals = view.robot.fingertips, view.goal_fingertips
    achieved = np.concatenate([getattr(tips, f) for f in REACH_GOAL_ORDER])
    desired = np.concatenate([getattr(goals, f) for f in REACH_GOAL_ORDER])
    return achieved, desired


def fingertips_at_goals(view: Any, DISTANCE: float) -> bool:
    """the distance between the fingertips and their goals, all five taken as one vector (`np.linalg.norm` of the 15 stacked coordinate differences), less than {DISTANCE} m"""
    return bool(fingertips_within(*_reach_vectors(view), DISTANCE))


def object_at_goal_pose(view: Any, DISTANCE: float, ANGLE: float) -> bool:
    """`obj.position` less than {DISTANCE} m from `goal_position` and `obj.quaternion` less than {ANGLE} rad from `goal_quaternion` (angle `2 * arccos(clip(np.dot(obj.quaternion, goal_quaternion), -1, 1))`: q and -q are not the same here)"""
    achieved = np.concatenate([view.obj.position, view.obj.quaternion])
    desired = np.concatenate([view.goal_position, view.goal_quaternion])
    return bool(pose_within(achieved, desired, DISTANCE, ANGLE))


def pen_at_goal_pose(view: Any, DISTANCE: float, ANGLE: float) -> bool:
    """`obj.position` less than {DISTANCE} m from `goal_position` and `obj.quaternion` less than {ANGLE} rad from `goal_quaternion` once the z Euler angle of `obj.quaternion` is replaced by the goal's (angle `2 * arccos(clip(w, -1, 1))` of the quaternion difference: q and -q are not the same here)"""
    achieved = np.concatenate([view.obj.position, view.obj.quaternion])
    desired = np.concatenate([view.goal_position, view.goal_quaternion])
    return bool(pose_within(achieved, desired, DISTANCE, ANGLE, ignore_z=True))


@progress_of(fingertips_at_goals)
def fingertips_at_goals_progress(view: Any, DISTANCE: float) -> float:
    achieved, desired = _reach_vectors(view)
    return within(float(np.linalg.norm(np.asarray(achieved, dtype=np.float64) - np.asarray(desired, dtype=np.float64))), DISTANCE)


def _pose_progress(view: Any, DISTANCE: float, ANGLE: float, ignore_z: bool) -> float:
    achieved = np.concatenate([view.obj.position, view.obj.quaternion])
    desired = np.concatenate([view.goal_position, view.goal_quaternion])
    d_pos, d_rot = pose_distances(achieved, desired, ignore_z)
    return mean_of([within(float(d_pos), DISTANCE), within(float(d_rot), ANGLE)])


@progress_of(object_at_goal_pose)
def object_at_goal_pose_progress(view: Any, DISTANCE: float, ANGLE: float) -> float:
    return _pose_progress(view, DISTANCE, ANGLE, ignore_z=False)


@progress_of(pen_at_goal_pose)
def pen_at_goal_pose_progress(view: Any, DISTANCE: float, ANGLE: float) -> float:
    return _pose_progress(view, DISTANCE, ANGLE, ignore_z=True)


def shadow_tasks() -> list[Task]:
    tasks = []
    for name, spec in SHADOW_TASKS.items():
        reach = name == "reach"
        if reach:
            success_rule = rule(fingertips_at_goals, DISTANCE=spec.position_threshold)
            goal_success: Any = partial(fingertips_within, threshold=spec.position_threshold)
        else:
            success_rule = rule(pen_at_goal_pose if spec.ignore_z else object_at_goal_pose,
                                DISTANCE=spec.position_threshold, ANGLE=ROTATION_THRESHOLD)
            goal_success = partial(pose_within, distance=spec.position_threshold, angle=ROTATION_THRESHOLD, ignore_z=spec.ignore_z)
        tasks.append(
            Task(
                id=f"shadow/{name}",
                family="shadow",
                description=spec.description,
                env_factory=partial(make_shadow_env, spec.gym_id, ignore_z=spec.ignore_z),
                view_class=ShadowReachView if reach else ShadowManipulateView,
                read_view=read_shadow_reach_view if reach else read_shadow_manipulate_view,
                is_success=shadow_success,
                success_doc=success_rule.describe("final"),
                success_mode="final",
                success_rule=success_rule,
                scale_points=SCALE_POINTS["reach" if reach else "manipulate"],
                max_episode_steps=50 if reach else 100,
                default_steps=1_000_000,
                expert_reward_doc=EXPERT_DOC["reach" if reach else "manipulate"],
                action_doc=ACTION_DOC,
                view_notes=spec.notes,
                goal_success=goal_success,
                budget_note=BUDGET_NOTE,
            )
        )
    return tasks
