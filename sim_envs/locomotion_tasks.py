"""Gymnasium MuJoCo locomotion with new behaviours (Hopper, Ant) and native forward tasks.

Success tests here are ours (the envs have none); each is a rule over the state view whose sentence
(`success_doc`, the prompt's) is rendered from its docstring and constants. `x_velocity` in the views is the
displacement over the last control step divided by dt, exactly what Gymnasium's forward rewards use.
"""

import weakref
from dataclasses import dataclass
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from sim_envs.success_progress import mean_of, progress_of, reaching, within
from sim_envs.success_rule import SuccessRule, rule
from sim_envs.task import SuccessMode, Task
from sim_envs.view_base import StateView, attr, frozen


@dataclass(slots=True)
class PlanarTorso:
    """The torso of a robot that moves in the x-z plane."""

    position: np.ndarray = attr("(3,) torso centre (y is always 0); z is its height above the floor")
    x_velocity: float = attr("m/s, forward speed averaged over the last step (+x is forward)")
    z_velocity: float = attr("m/s, vertical speed (+ up)")
    pitch: float = attr("rad, rotation about the y axis since the start, not wrapped: +2*pi is one full forward (nose-down) flip")
    pitch_velocity: float = attr("rad/s, d(pitch)/dt")
    init_position: np.ndarray = attr("(3,) position at the start of the episode")


@dataclass(slots=True)
class PlanarWalkerView(StateView):
    """A planar legged robot (Hopper, Walker2d or HalfCheetah) on flat ground."""

    torso: PlanarTorso = attr("the torso")
    joint_angles: np.ndarray = attr("(n,) rad, actuated joint angles, in the order of joint_names")
    joint_velocities: np.ndarray = attr("(n,) rad/s, actuated joint velocities")
    joint_names: tuple = attr("names of the actuated joints, e.g. ('thigh_joint', 'leg_joint', 'foot_joint')")


@dataclass(slots=True)
class AntTorso:
    """The Ant's round torso."""

    position: np.ndarray = attr("(3,) torso centre; z is its height above the floor (0.75 at reset; about 0.37 if the motors idle and it sinks onto outstretched legs)")
    quaternion: np.ndarray = attr("(4,) orientation quaternion (w, x, y, z)")
    up_vector: np.ndarray = attr("(3,) the torso's local z axis in the world; [0, 0, 1] when upright")
    velocity: np.ndarray = attr("(3,) m/s, linear velocity")
    x_velocity: float = attr("m/s, forward speed averaged over the last step (+x is forward)")
    angular_velocity: np.ndarray = attr("(3,) rad/s, angular velocity")
    init_position: np.ndarray = attr("(3,) position at the start of the episode")


@dataclass(slots=True)
class AntView(StateView):
    """A four-legged Ant on flat ground (+x forward, +y left)."""

    torso: AntTorso = attr("the torso")
    joint_angles: np.ndarray = attr("(8,) rad, [hip, ankle] per leg, legs in the order front_left, back_left, back_right, front_right")
    joint_velocities: np.ndarray = attr("(8,) rad/s, in the same order")
    foot_positions: np.ndarray = attr("(4, 3) world position of each foot tip, legs in the same order")


PLANAR_ACTION = "np.ndarray (n,) in [-1, 1]: torques for the actuated joints, in the order of joint_names"
ANT_ACTION = "np.ndarray (8,) in [-1, 1]: torques for [hip, ankle] of each leg, legs in the order front_right, front_left, back_left, back_right (not the order of joint_angles)"
ANT_FOOT_GEOMS = ("left_ankle_geom", "right_ankle_geom", "third_ankle_geom", "fourth_ankle_geom")


def make_locomotion_env(gym_id: str, max_episode_steps: int, render_mode: str | None = None, seed: int | None = None, size: int = 480, **kwargs: Any) -> gym.Env:
    if render_mode is not None:
        kwargs.update(width=size, height=size)
    env = gym.make(gym_id, render_mode=render_mode, max_episode_steps=max_episode_steps, **kwargs)
    if seed is not None:
        env.action_space.seed(seed)
    return env


_TORSO_IDS: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
_FOOT_GEOMS: "weakref.WeakKeyDictionary[Any, list[tuple[int, float]]]" = weakref.WeakKeyDictionary()


def _torso_id(model: Any) -> int:
    """The torso body's id, looked up once per model (a name lookup costs ~1 µs, a tenth of a fast env's step)."""
    index = _TORSO_IDS.get(model)
    if index is None:
        index = _TORSO_IDS[model] = model.body("torso").id
    return index


def _read_only(array: np.ndarray) -> np.ndarray:
    """Mark an array this module just built as read-only (what `frozen` does, without a second copy)."""
    array.setflags(write=False)
    return array


def read_planar_view(env: Any, previous: PlanarWalkerView | None) -> PlanarWalkerView:
    model, data = env.model, env.data
    qpos, qvel, dt = data.qpos, data.qvel, float(env.dt)
    # From qpos, not data.xpos: Gymnasium does not run mj_forward after stepping, so xpos lags a substep.
    # Slide joints displace the body by (qpos - qpos0) from its model position.
    # Python floats for the scalar arithmetic: the same IEEE results as numpy scalars, a fraction of the cost.
    bx, by, bz = model.body_pos[_torso_id(model)].tolist()
    rx, rz = model.qpos0[:2].tolist()
    x, z, pitch = qpos[:3].tolist()
    vx, vz, vpitch = qvel[:3].tolist()
    torso_xpos = np.array([bx + x - rx, by, bz + z - rz])
    if previous is None:
        x_velocity, init = vx, frozen(torso_xpos)
        names = tuple(model.joint(i).name for i in range(3, model.njnt))
    else:
        x_velocity = (torso_xpos[0] - previous.torso.position[0]) / dt  # positions on both sides: no offset bias
        init, names = previous.torso.init_position, previous.joint_names
    torso = PlanarTorso(
        position=_read_only(torso_xpos),
        x_velocity=x_velocity,
        z_velocity=vz,
        pitch=pitch,
        pitch_velocity=vpitch,
        init_position=init,
    )
    return PlanarWalkerView(
        dt=dt,
        episode_step=0 if previous is None else previous.episode_step + 1,
        torso=torso,
        joint_angles=frozen(qpos[3:]),
        joint_velocities=frozen(qvel[3:]),
        joint_names=names,
    )


def _foot_geoms(model: Any) -> list[tuple[int, float]]:
    """(geom id, half-length) of the four lower-leg capsules, looked up once per model."""
    found = _FOOT_GEOMS.get(model)
    if found is None:
        found = _FOOT_GEOMS[model] = [(model.geom(name).id, float(model.geom(name).size[1])) for name in ANT_FOOT_GEOMS]
    return found


def _foot_tips(env: Any) -> np.ndarray:
    """The far end of each lower-leg capsule (the end farther from the torso).

    Plain float arithmetic on four 3-vectors: about half the time of small numpy operations.
    """
    import mujoco

    data, model = env.data, env.model
    mujoco.mj_kinematics(model, data)  # refresh geom poses: Gymnasium leaves them one substep stale
    tx, ty, tz = data.xpos[_torso_id(model)].tolist()
    centres, rotations = data.geom_xpos, data.geom_xmat
    tips = []
    for geom, half_length in _foot_geoms(model):
        cx, cy, cz = centres[geom].tolist()
        rotation = rotations[geom].tolist()  # row-major 3x3: the capsule's axis is column 2
        ax, ay, az = rotation[2] * half_length, rotation[5] * half_length, rotation[8] * half_length
        a, b = (cx + ax, cy + ay, cz + az), (cx - ax, cy - ay, cz - az)
        a_distance = (a[0] - tx) ** 2 + (a[1] - ty) ** 2 + (a[2] - tz) ** 2
        b_distance = (b[0] - tx) ** 2 + (b[1] - ty) ** 2 + (b[2] - tz) ** 2
        tips.append(a if a_distance > b_distance else b)
    return np.array(tips)


def read_ant_view(env: Any, previous: AntView | None) -> AntView:
    qpos, qvel, dt = env.data.qpos, env.data.qvel, float(env.dt)
    quat = qpos[3:7]
    w, x, y, z = quat.tolist()  # Python floats: same IEEE results as numpy scalars, a fraction of the cost
    up = np.array([2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)])
    if previous is None:
        x_velocity, init = float(qvel[0]), frozen(qpos[:3])
    else:
        x_velocity, init = (float(qpos[0]) - previous.torso.position[0]) / dt, previous.torso.init_position
    torso = AntTorso(
        position=frozen(qpos[:3]),
        quaternion=frozen(quat),
        up_vector=_read_only(up),
        velocity=frozen(qvel[:3]),
        x_velocity=x_velocity,
        angular_velocity=frozen(qvel[3:6]),
        init_position=init,
    )
    return AntView(
        dt=dt,
        episode_step=0 if previous is None else previous.episode_step + 1,
        torso=torso,
        joint_angles=frozen(qpos[7:15]),
        joint_velocities=frozen(qvel[6:14]),
        foot_positions=_read_only(_foot_tips(env)),
    )


# --- success rules (stated in prompts from these docstrings, tested in tests/sim_envs/test_locomotion_success.py) ---


def moved_forward(view: Any, DISTANCE: float) -> bool:
    """`torso.position[0] - torso.init_position[0]` (distance moved forward, +x) at least {DISTANCE} m"""
    return float(view.torso.position[0] - view.torso.init_position[0]) >= DISTANCE


def flipped_forward(view: PlanarWalkerView, ANGLE: float) -> bool:
    """`torso.pitch` at least +{ANGLE} rad (one full forward rotation)"""
    return view.torso.pitch >= ANGLE


def flipped_backward(view: PlanarWalkerView, ANGLE: float) -> bool:
    """`torso.pitch` at most -{ANGLE} rad (one full backward rotation)"""
    return view.torso.pitch <= -ANGLE


def waving_leg(view: AntView, HEIGHT: float, HIP_SPEED: float, UPRIGHT: float) -> bool:
    """`foot_positions[0, 2]` (the front-left foot tip's height) at least {HEIGHT} m, `abs(joint_velocities[0])`
    (its hip) at least {HIP_SPEED} rad/s, and `torso.up_vector[2]` at least {UPRIGHT}, all on the same step"""
    foot_raised = view.foot_positions[0, 2] >= HEIGHT
    hip_moving = abs(view.joint_velocities[0]) >= HIP_SPEED
    return bool(foot_raised and hip_moving and view.torso.up_vector[2] >= UPRIGHT)


def lying_down(view: AntView, HEIGHT: float, UPRIGHT: float, SPEED: float, FOOT_HEIGHT: float) -> bool:
    """`torso.position[2]` at most {HEIGHT} m, `torso.up_vector[2]` at least {UPRIGHT}, `np.linalg.norm(torso.velocity)`
    at most {SPEED} m/s, and every foot tip's height `foot_positions[:, 2]` at most {FOOT_HEIGHT} m"""
    low_and_upright = view.torso.position[2] <= HEIGHT and view.torso.up_vector[2] >= UPRIGHT
    still = float(np.linalg.norm(view.torso.velocity)) <= SPEED
    return bool(low_and_upright and still and np.all(view.foot_positions[:, 2] <= FOOT_HEIGHT))


@progress_of(moved_forward)
def moved_forward_progress(view: Any, DISTANCE: float) -> float:
    return reaching(view.torso.position[0] - view.torso.init_position[0], DISTANCE)


@progress_of(flipped_forward)
def flipped_forward_progress(view: PlanarWalkerView, ANGLE: float) -> float:
    return reaching(view.torso.pitch, ANGLE)


@progress_of(flipped_backward)
def flipped_backward_progress(view: PlanarWalkerView, ANGLE: float) -> float:
    return reaching(-view.torso.pitch, ANGLE)


@progress_of(waving_leg)
def waving_leg_progress(view: AntView, HEIGHT: float, HIP_SPEED: float, UPRIGHT: float) -> float:
    return mean_of([reaching(view.foot_positions[0, 2], HEIGHT), reaching(abs(view.joint_velocities[0]), HIP_SPEED),
                    reaching(view.torso.up_vector[2], UPRIGHT)])


@progress_of(lying_down)
def lying_down_progress(view: AntView, HEIGHT: float, UPRIGHT: float, SPEED: float, FOOT_HEIGHT: float) -> float:
    feet = mean_of(within(max(float(z), 0.0), FOOT_HEIGHT) for z in view.foot_positions[:, 2])
    return mean_of([within(max(float(view.torso.position[2]), 0.0), HEIGHT), reaching(view.torso.up_vector[2], UPRIGHT),
                    within(float(np.linalg.norm(view.torso.velocity)), SPEED), feet])


FULL_TURN = 2 * np.pi


def _task(id: str, description: str, gym_id: str, steps: int, view: str, success: SuccessRule, mode: SuccessMode = "any", expert: str | None = None, budget: int = 100_000, notes: str = "", **env_kwargs: Any) -> Task:
    planar = view == "planar"
    return Task(
        id=id,
        family="locomotion",
        description=description,
        env_factory=partial(make_locomotion_env, gym_id, max_episode_steps=steps),
        view_class=PlanarWalkerView if planar else AntView,
        read_view=read_planar_view if planar else read_ant_view,
        is_success=success.judge,
        success_doc=success.describe(mode),
        success_mode=mode,
        success_rule=success,
        max_episode_steps=steps,
        default_steps=budget,
        expert_reward_doc=expert,
        action_doc=PLANAR_ACTION if planar else ANT_ACTION,
        view_notes=notes,
        env_kwargs=env_kwargs,
    )


NATIVE = "Gymnasium's native {} reward: forward velocity{} minus control cost"


def locomotion_tasks() -> list[Task]:
    no_fall: dict[str, Any] = {"terminate_when_unhealthy": False}
    return [
        _task("hopper/forward", "Make the hopper hop forward as fast as it can without falling.", "Hopper-v5", 1000, "planar",
              rule(moved_forward, DISTANCE=2.0),
              expert=NATIVE.format("Hopper-v5", " plus a bonus for staying healthy"), budget=200_000,
              notes="the episode ends early if the hopper falls (torso below 0.7 m or tilted over 0.2 rad)."),
        _task("hopper/front_flip", "Make the hopper do a front flip.", "Hopper-v5", 300, "planar",
              rule(flipped_forward, ANGLE=FULL_TURN),
              budget=200_000, notes="the episode does not end when the hopper falls.", **no_fall),
        _task("hopper/back_flip", "Make the hopper do a back flip.", "Hopper-v5", 300, "planar",
              rule(flipped_backward, ANGLE=FULL_TURN),
              budget=200_000, notes="the episode does not end when the hopper falls.", **no_fall),
        _task("halfcheetah/forward", "Make the half cheetah run forward as fast as it can.", "HalfCheetah-v5", 1000, "planar",
              rule(moved_forward, DISTANCE=20.0),
              expert=NATIVE.format("HalfCheetah-v5", ""), budget=100_000),
        _task("walker2d/forward", "Make the walker walk forward as fast as it can without falling.", "Walker2d-v5", 1000, "planar",
              rule(moved_forward, DISTANCE=3.0),
              expert=NATIVE.format("Walker2d-v5", " plus a bonus for staying healthy"), budget=300_000,
              notes="the episode ends early if the walker falls (torso below 0.8 m or tilted over 1 rad)."),
        _task("ant/forward", "Make the ant walk forward (+x) as fast as it can.", "Ant-v5", 1000, "ant",
              rule(moved_forward, DISTANCE=3.0),
              expert=NATIVE.format("Ant-v5", " plus a healthy bonus,") + " and contact cost", budget=300_000,
              notes="the episode ends early if the torso leaves the 0.2-1.0 m height band."),
        _task("ant/wave_leg", "Make the ant wave its front left leg in the air while keeping its body upright.", "Ant-v5", 500, "ant",
              rule(waving_leg, HEIGHT=0.3, HIP_SPEED=1.0, UPRIGHT=0.7),
              budget=200_000, notes="the episode does not end when the ant falls or flips.", **no_fall),
        _task("ant/lie_down", "Make the ant lie down flat on its belly and stay there.", "Ant-v5", 500, "ant",
              rule(lying_down, HEIGHT=0.40, UPRIGHT=0.8, SPEED=0.1, FOOT_HEIGHT=0.15),
              mode="final", budget=200_000, notes="the episode does not end when the ant falls or flips. Gymnasium's Ant sinks to "
              "about 0.37 m when its motors idle, so a reward mainly has to let it lie still.", **no_fall),
    ]
