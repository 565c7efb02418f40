"""The Gymnasium env of the example: a two-link planar arm pushes a puck to a goal on a table (planar_arm.xml).

Built on Gymnasium's `MujocoEnv`, which loads the model, steps it `frame_skip` times per action and renders it;
this file adds what a task needs: an action that moves the finger (turned into joint speeds through the arm's
Jacobian, as Fetch's and MetaWorld's actions move their grippers), a flat observation, a reset that places the puck
and the goal at random inside the arm's reach, and a native dense reward (the task's "expert" reference). Nothing
here knows text2reward: the task file (planar_arm_task.py) wraps it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium.envs.mujoco.mujoco_env import MujocoEnv

MODEL = Path(__file__).with_name("planar_arm.xml")
FRAME_SKIP = 5
"""Physics steps of 10 ms per action: one action every 50 ms (20 Hz)."""
EPISODE_STEPS = 100
"""Actions per episode (5 s): enough to swing round and push the puck across the workspace."""
MAX_FINGER_SPEED = 0.4
"""m/s the finger is asked to move along x (or y) at an action of 1 there (2 cm per 50 ms step)."""
MAX_JOINT_SPEED = 2.0
"""rad/s, the most a joint's velocity servo is asked for (the actuators' ctrlrange)."""
DAMPING = 1e-3
"""Damped least squares: joint speeds stay bounded near the arm's straight and folded (singular) poses."""
LINK_LENGTH = 0.2
"""m, shoulder to elbow and elbow to tip: the tip reaches 0.09-0.40 m from the base (elbow limit 2.7 rad)."""
PUCK_RADIUS = 0.03
FINGER_RADIUS = 0.015
"""m, as planar_arm.xml has them (LINK_LENGTH too; tests/sim_envs/test_own_robot.py checks): the finger touches the puck when
their centres are 0.045 m apart."""
PUCK_HEIGHT = 0.02
"""m, z of the puck's centre, the finger's tip and the goal (the links pass above the puck, at z = 0.07)."""
PUCK_RANGE = ((0.17, 0.30), (-np.pi / 3, np.pi / 3))
"""Puck start in polar coordinates about the base: radius (m) and bearing (rad, 0 = +x)."""
GOAL_RANGE = ((0.15, 0.32), (-np.pi / 2.5, np.pi / 2.5))
GOAL_DISTANCE = (0.08, 0.25)
"""m, how far the goal is drawn from the puck's start: never already solved, always a push within reach."""
ARM_START = np.array([2.6, -2.6])
"""Shoulder and elbow angles at reset (plus up to 0.05 rad of noise): the arm folded back on itself on the +y side of
the base, its finger at least 6 cm from the centre of every puck start (the two touch at 4.5 cm)."""


class PlanarArmPushEnv(MujocoEnv):
    """Push the puck to the goal. Action (2,) in [-1, 1]: the finger's velocity in x and y, 1 = MAX_FINGER_SPEED.
    Observation (18,): cos and sin of both joint angles, joint speeds, tip xy, puck xy, puck velocity xy, goal xy,
    puck - tip xy, goal - puck xy."""

    metadata = {"render_modes": ["human", "rgb_array", "depth_array"], "render_fps": 20}

    def __init__(self, render_mode: str | None = None, width: int = 480, height: int = 480, **kwargs: Any):
        observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(18,), dtype=np.float64)
        super().__init__(str(MODEL), FRAME_SKIP, observation_space, render_mode=render_mode, width=width, height=height,
                         camera_name="top", **kwargs)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.tip_site = self.model.site("tip").id
        self.goal_site = self.model.site("goal").id
        self.puck_body = self.model.body("puck").id
        self.finger_geom = self.model.geom("finger").id
        self.puck_geom = self.model.geom("puck").id
        self.puck_qpos = int(self.model.jnt_qposadr[self.model.joint("puck_x").id])  # puck_x, puck_y: two qpos in a row
        self.puck_qvel = int(self.model.jnt_dofadr[self.model.joint("puck_x").id])

    # --- what the view and the reward read ---

    @property
    def tip(self) -> np.ndarray:
        return self.data.site_xpos[self.tip_site]

    @property
    def puck(self) -> np.ndarray:
        return self.data.xpos[self.puck_body]

    @property
    def goal(self) -> np.ndarray:
        return self.data.site_xpos[self.goal_site]

    def puck_velocity(self) -> np.ndarray:
        return np.array([self.data.qvel[self.puck_qvel], self.data.qvel[self.puck_qvel + 1], 0.0])

    # --- the action ---

    def joint_speeds(self, finger_velocity: np.ndarray) -> np.ndarray:
        """Shoulder and elbow speeds that move the finger at `finger_velocity` (x, y), from MuJoCo's Jacobian of the
        tip site (damped least squares), within the servos' range."""
        jacobian = np.zeros((3, self.model.nv))
        mujoco.mj_jacSite(self.model, self.data, jacobian, None, self.tip_site)
        arm = jacobian[:2, :2]  # x, y rows; shoulder, elbow columns
        speeds = arm.T @ np.linalg.solve(arm @ arm.T + DAMPING * np.eye(2), finger_velocity)
        return np.clip(speeds, -MAX_JOINT_SPEED, MAX_JOINT_SPEED)

    # --- Gymnasium ---

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        action = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0)
        self.do_simulation(self.joint_speeds(action * MAX_FINGER_SPEED), self.frame_skip)
        if self.render_mode == "human":
            self.render()
        to_goal = float(np.linalg.norm(self.puck - self.goal))
        to_puck = float(np.linalg.norm(self.tip - self.puck))
        reward = -to_goal - 0.5 * to_puck - 0.01 * float(np.sum(action**2))
        return self._get_obs(), reward, False, False, {"puck_to_goal": to_goal, "tip_to_puck": to_puck}

    def reset_model(self) -> np.ndarray:
        puck = self._polar(*PUCK_RANGE)
        goal = self._polar(*GOAL_RANGE)
        while not GOAL_DISTANCE[0] <= np.linalg.norm(goal - puck) <= GOAL_DISTANCE[1]:
            goal = self._polar(*GOAL_RANGE)
        self.model.site_pos[self.goal_site] = [goal[0], goal[1], PUCK_HEIGHT]
        qpos = self.init_qpos.copy()
        qpos[:2] = ARM_START + self.np_random.uniform(-0.05, 0.05, size=2)
        body_start = self.model.body_pos[self.puck_body][:2]  # the slide joints measure from the body's place in the XML
        qpos[self.puck_qpos : self.puck_qpos + 2] = puck - body_start
        self.set_state(qpos, np.zeros_like(self.init_qvel))  # runs mj_forward: positions are current
        return self._get_obs()

    def _polar(self, radius: tuple[float, float], bearing: tuple[float, float]) -> np.ndarray:
        r, a = self.np_random.uniform(*radius), self.np_random.uniform(*bearing)
        return np.array([r * np.cos(a), r * np.sin(a)])

    def _get_obs(self) -> np.ndarray:
        angles = self.data.qpos[:2]  # shoulder, elbow: the first joints of planar_arm.xml
        tip, puck, goal = self.tip[:2], self.puck[:2], self.goal[:2]
        return np.concatenate([np.cos(angles), np.sin(angles), self.data.qvel[:2], tip, puck, self.puck_velocity()[:2], goal,
                               puck - tip, goal - puck])


def make_planar_arm_env(render_mode: str | None = None, seed: int | None = None, size: int = 480,
                        max_episode_steps: int = EPISODE_STEPS) -> gym.Env:
    """The env in a Gymnasium TimeLimit: the factory a text2reward `Task` calls (`size` is the rendered image's side)."""
    env: gym.Env = gym.wrappers.TimeLimit(PlanarArmPushEnv(render_mode=render_mode, width=size, height=size), max_episode_steps)
    if seed is not None:
        env.action_space.seed(seed)
    return env
