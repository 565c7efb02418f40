"""The state view of the planar-arm push task: what a reward reads as `self`, read from MuJoCo's data.

The prompt's environment section is rendered from these classes (field types and `attr` sentences), so the
sentences are written for a reward designer: units, shapes, frames, what touches what. The names follow the
built-in arm views (`robot.ee_position`, `obj.position`, `goal_position`), so rewards and few-shot examples written
for Fetch or Franka push read alike, and the rule-based heuristic backend recognises an arm pushing an object.

This module is also run inside the reward sandbox (from its source, before the jail closes) so that the sandbox
can rebuild these classes: keep it to the dataclasses and their reader, importing only numpy and sim_envs at
module level (the reader imports mujoco when it runs, in the training process).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sim_envs.view_base import StateView, attr, frozen


@dataclass(slots=True)
class PlanarArm:
    """The two-link arm: a shoulder at the base, an elbow, and a finger hanging from the forearm's end."""

    ee_position: np.ndarray = attr("(3,) the finger's tip, at the height of the puck's centre (z = 0.02); it touches the puck "
                                   "when about 0.045 m from the puck's centre (finger radius 0.015 + puck radius 0.03)")
    ee_velocity: np.ndarray = attr("(3,) m/s, velocity of the finger's tip (z is always 0)")
    joint_angles: np.ndarray = attr("(2,) rad, shoulder and elbow angles (shoulder 0 points along +x; elbow 0 is straight, "
                                    "limits +-2.7)")
    joint_velocities: np.ndarray = attr("(2,) rad/s, shoulder and elbow speeds")
    init_ee_position: np.ndarray = attr("(3,) ee_position at the start of the episode")


@dataclass(slots=True)
class Puck:
    """The puck on the table: 6 cm across, sliding on the table (it stops about 0.1 s after a push ends)."""

    position: np.ndarray = attr("(3,) centre of the puck; z stays 0.02")
    velocity: np.ndarray = attr("(3,) m/s, linear velocity (z is always 0)")
    init_position: np.ndarray = attr("(3,) position at the start of the episode")
    touched: bool = attr("True while the finger touches the puck (a MuJoCo contact between the two this step)")


@dataclass(slots=True)
class PlanarArmPushView(StateView):
    """A two-link planar arm on a table, a puck, and a goal position for the puck."""

    robot: PlanarArm = attr("the arm and its finger")
    obj: Puck = attr("the puck")
    goal_position: np.ndarray = attr("(3,) where the puck's centre must go (on the table, z = 0.02)")


def read_planar_arm_view(env: Any, previous: PlanarArmPushView | None) -> PlanarArmPushView:
    """The view from the env's MuJoCo data (`env` is the unwrapped PlanarArmPushEnv); `previous` carries the
    episode-start positions (None right after a reset)."""
    import mujoco

    model, data = env.model, env.data
    tip_velocity = np.zeros(6)  # [angular, linear] in the world frame
    mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_SITE, env.tip_site, tip_velocity, 0)
    puck = data.xpos[env.puck_body]
    tip = data.site_xpos[env.tip_site]
    robot = PlanarArm(
        ee_position=frozen(tip),
        ee_velocity=frozen(tip_velocity[3:]),
        joint_angles=frozen(data.qpos[:2]),
        joint_velocities=frozen(data.qvel[:2]),
        init_ee_position=frozen(tip) if previous is None else previous.robot.init_ee_position,
    )
    obj = Puck(
        position=frozen(puck),
        velocity=frozen(env.puck_velocity()),
        init_position=frozen(puck) if previous is None else previous.obj.init_position,
        touched=_touching(data, env.finger_geom, env.puck_geom),
    )
    return PlanarArmPushView(
        dt=float(env.dt),
        episode_step=0 if previous is None else previous.episode_step + 1,
        robot=robot,
        obj=obj,
        goal_position=frozen(data.site_xpos[env.goal_site]),
    )


def _touching(data: Any, first: int, second: int) -> bool:
    """A contact between the two geoms among this step's contacts."""
    geoms = data.contact.geom  # (ncon, 2): the geom ids of each contact
    return bool(np.any((geoms[:, 0] == first) & (geoms[:, 1] == second) | (geoms[:, 0] == second) & (geoms[:, 1] == first)))
