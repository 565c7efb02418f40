"""A Franka Panda tabletop environment on the Gymnasium-Robotics multi-goal API (reach, push, slide, pick-and-place).

Why written here: the reference environments ("Open-Source Reinforcement Learning Environments Implemented in
MuJoCo with Franka Manipulator") are not on the package index and load a Panda downloaded at run time. This env
keeps their task definitions (object and goal ranges, a 5 cm success threshold, 50-step episodes, a grip point
moved by up to 5 cm per step, sparse and dense goal rewards, dict observations `observation`, `achieved_goal`,
`desired_goal`) on the Panda that Gymnasium-Robotics ships (sim_envs.franka_scene).

The arm's start pose is settled once per env (the weld pulls the arm to the start grip point) and saved; every
reset restores that state exactly and samples the object and the goal from the env's seeded generator, so a reset
with a seed is reproduced bit for bit.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from sim_envs.franka_scene import BLOCK_HALF_SIZE, FINGERTIP_REACH, PUCK_HALF_HEIGHT, TABLE_HEIGHT, scene_xml

SUBSTEPS = 25
"""MuJoCo steps of 2 ms per env step: 50 ms, 20 Hz control (the reference's rate)."""
MAX_MOVE = 0.05
"""m the grip point's target moves per step at |action| = 1 (the reference and Fetch)."""
FINGER_MAX = 0.04
"""m each finger opens (the Panda's 8 cm stroke)."""
SUCCESS_DISTANCE = 0.05
START_XY = (0.45, 0.0)
"""Where the grip point starts above the table, m (world frame; the Panda's base is at (0, 0, 0.4)); its height is
the task's `start_height`."""
OBJECT_CLEARANCE = 0.1
"""m the object starts at least from the grip point (horizontally), as in Fetch: never under the hand."""
WORKSPACE_LOW = np.array([0.2, -0.45, TABLE_HEIGHT + FINGERTIP_REACH])
WORKSPACE_HIGH = np.array([0.85, 0.45, TABLE_HEIGHT + 0.55])
"""The grip point's target is kept in this box: fingertips above the table, inside the arm's comfortable reach."""
HOME_QPOS = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.785])
"""A start for the settle (the weld then pulls the grip point to the task's start)."""
SETTLE_STEPS = 1000


_COMPILED_SCENES: dict[str, Any] = {}


def compiled_scene(xml: str) -> Any:
    """A model of the scene `xml`, compiled once per process and copied for each env (MuJoCo's own `mj_copyModel`).

    Why: compiling the Panda's scene (its meshes) takes ~0.5 s, most of an env's construction, and a training job, a
    keypoint search or a test makes many envs of one task. An env that edits its model edits only its copy; the meshes
    it names are the package's own files, never rewritten while it runs (sim_envs.model_cache does the same for scenes
    read from a path)."""
    import mujoco

    model = _COMPILED_SCENES.get(xml)
    if model is None:
        model = _COMPILED_SCENES[xml] = mujoco.MjModel.from_xml_string(xml)
    return copy.copy(model)


@dataclass(frozen=True)
class FrankaTaskSpec:
    """What differs between the four tasks (ranges in m, around the centres)."""

    object_kind: str | None  # "block", "puck" or None
    block_gripper: bool
    object_centre: tuple[float, float] = (0.6, 0.0)
    object_range: float = 0.15
    goal_centre: tuple[float, float] = (0.6, 0.0)
    goal_range: float = 0.15
    goal_air: float = 0.0
    """Goals rise up to this height above the object's resting height (pick-and-place), on 70% of resets."""
    slippery: bool = False
    start_height: float = 0.15
    """m above the table where the grip point starts: low for push and slide (the closed fingers at the object's
    height, as Fetch's push starts), higher where the hand must travel or grasp (Fetch raises pick-and-place's)."""


SPECS: dict[str, FrankaTaskSpec] = {
    "reach": FrankaTaskSpec(object_kind=None, block_gripper=True, goal_centre=(0.5, 0.0)),
    "push": FrankaTaskSpec(object_kind="block", block_gripper=True, start_height=0.05),
    "slide": FrankaTaskSpec(object_kind="puck", block_gripper=True, object_centre=(0.55, 0.0), goal_centre=(1.0, 0.0), slippery=True,
                            start_height=0.05),
    "pick_and_place": FrankaTaskSpec(object_kind="block", block_gripper=False, goal_air=0.2),
}
AIR_PROBABILITY = 0.7


class FrankaEnv(gym.Env):
    """Move a Panda's grip point (and its fingers) to bring the grip point or an object to a goal."""

    metadata = {"render_modes": ["rgb_array", "depth_array"], "render_fps": 20}

    def __init__(self, task: str = "push", reward_type: str = "dense", render_mode: str | None = None,
                 width: int = 480, height: int = 480, camera_name: str = "front"):
        import mujoco

        if task not in SPECS:
            raise ValueError(f"unknown Franka task {task!r}; use one of {', '.join(SPECS)}")
        if reward_type not in ("dense", "sparse"):
            raise ValueError(f"reward_type must be 'dense' or 'sparse', got {reward_type!r}")
        self.task, self.task_spec, self.reward_type = task, SPECS[task], reward_type
        self.model = compiled_scene(scene_xml(self.task_spec.object_kind, self.task_spec.slippery))
        self.data = mujoco.MjData(self.model)
        self._mujoco = mujoco
        self.dt = self.model.opt.timestep * SUBSTEPS
        self.grip_site = self.model.site("grip").id
        self.goal_site = self.model.site("goal").id
        self.finger_qpos = [int(self.model.jnt_qposadr[self.model.joint(f"robot:panda0_finger_joint{i}").id]) for i in (1, 2)]
        self.finger_qvel = [int(self.model.jnt_dofadr[self.model.joint(f"robot:panda0_finger_joint{i}").id]) for i in (1, 2)]
        has_object = self.task_spec.object_kind is not None
        self.object_qpos = int(self.model.jnt_qposadr[self.model.joint("object:joint").id]) if has_object else None
        self.object_qvel = int(self.model.jnt_dofadr[self.model.joint("object:joint").id]) if has_object else None
        self.object_rest_z = TABLE_HEIGHT + (BLOCK_HALF_SIZE if self.task_spec.object_kind == "block" else PUCK_HALF_HEIGHT)
        self.start_grip = np.array([*START_XY, TABLE_HEIGHT + self.task_spec.start_height])
        self._settle()
        self.goal = np.zeros(3)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(3 if self.task_spec.block_gripper else 4,), dtype=np.float32)
        obs = self._observation()
        self.observation_space = gym.spaces.Dict({
            key: gym.spaces.Box(-np.inf, np.inf, shape=value.shape, dtype=np.float64) for key, value in obs.items()
        })
        self.render_mode = render_mode
        self._renderer: Any = None
        self._render_size = (width, height)
        self._camera = camera_name

    # ------------------------------------------------------------------ simulation

    def _settle(self) -> None:
        """Pull the arm to the start grip point once and keep that state: every reset starts from it."""
        mujoco, data = self._mujoco, self.data
        data.qpos[:7] = HOME_QPOS
        data.mocap_pos[0] = self.start_grip
        data.ctrl[:] = 0.0 if self.task_spec.block_gripper else FINGER_MAX
        for _ in range(SETTLE_STEPS):
            mujoco.mj_step(self.model, data)
        data.qvel[:] = 0.0
        data.mocap_pos[0] = data.site_xpos[self.grip_site]
        mujoco.mj_forward(self.model, data)
        self._start = (data.qpos.copy(), data.qvel.copy(), data.mocap_pos.copy(), data.mocap_quat.copy(), data.ctrl.copy())

    def _fingers(self, action: np.ndarray) -> float:
        if self.task_spec.block_gripper:
            return 0.0
        return float(np.clip((action[3] + 1.0) / 2.0, 0.0, 1.0) * FINGER_MAX)

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        action = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0)
        if action.shape != self.action_space.shape:
            raise ValueError(f"action must have shape {self.action_space.shape}, got {action.shape}")
        data = self.data
        target = data.site_xpos[self.grip_site] + action[:3] * MAX_MOVE
        data.mocap_pos[0] = np.clip(target, WORKSPACE_LOW, WORKSPACE_HIGH)
        data.ctrl[:] = self._fingers(action)
        self._mujoco.mj_step(self.model, data, nstep=SUBSTEPS)
        obs = self._observation()
        info = {"is_success": float(self._distance(obs["achieved_goal"], self.goal) < SUCCESS_DISTANCE)}
        reward = float(self.compute_reward(obs["achieved_goal"], self.goal, info))
        return obs, reward, False, False, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        qpos, qvel, mocap_pos, mocap_quat, ctrl = self._start
        data = self.data
        data.qpos[:], data.qvel[:], data.mocap_pos[:], data.mocap_quat[:], data.ctrl[:] = qpos, qvel, mocap_pos, mocap_quat, ctrl
        data.time = 0.0
        data.act[:] = 0.0
        data.qacc_warmstart[:] = 0.0
        rng = self.np_random
        spec = self.task_spec
        if self.object_qpos is not None:
            start_xy = np.array(START_XY)
            xy = start_xy
            while np.linalg.norm(xy - start_xy) < OBJECT_CLEARANCE:
                xy = np.array(spec.object_centre) + rng.uniform(-spec.object_range, spec.object_range, size=2)
            data.qpos[self.object_qpos : self.object_qpos + 7] = [xy[0], xy[1], self.object_rest_z, 1.0, 0.0, 0.0, 0.0]
            goal_xy = np.array(spec.goal_centre) + rng.uniform(-spec.goal_range, spec.goal_range, size=2)
            height = self.object_rest_z
            if spec.goal_air > 0 and rng.uniform() < AIR_PROBABILITY:
                height += rng.uniform(0.0, spec.goal_air)
            self.goal = np.array([goal_xy[0], goal_xy[1], height])
        else:
            offset = rng.uniform(-spec.goal_range, spec.goal_range, size=3)
            self.goal = np.clip(np.array([*spec.goal_centre, self.start_grip[2]]) + offset, WORKSPACE_LOW + [0, 0, 0.02], WORKSPACE_HIGH)
        self.model.site_pos[self.goal_site] = self.goal
        self._mujoco.mj_forward(self.model, data)
        return self._observation(), {"is_success": float(self._distance(self._achieved(), self.goal) < SUCCESS_DISTANCE)}

    # ------------------------------------------------------------------ goals

    @staticmethod
    def _distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.linalg.norm(np.asarray(a) - np.asarray(b), axis=-1)

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        """The goal reward, vectorised for hindsight relabelling: dense -distance, sparse -1 until within 5 cm."""
        d = self._distance(achieved_goal, desired_goal)
        if self.reward_type == "sparse":
            return -(d >= SUCCESS_DISTANCE).astype(np.float64)
        return -d

    def _achieved(self) -> np.ndarray:
        if self.object_qpos is None:
            return self.data.site_xpos[self.grip_site].copy()
        return self.data.qpos[self.object_qpos : self.object_qpos + 3].copy()

    def grip_velocity(self) -> np.ndarray:
        """m/s of the grip point (the site's translational Jacobian times qvel)."""
        jacp = np.zeros((3, self.model.nv))
        self._mujoco.mj_jacSite(self.model, self.data, jacp, None, self.grip_site)
        return jacp @ self.data.qvel

    def finger_width(self) -> float:
        return float(sum(self.data.qpos[i] for i in self.finger_qpos))

    def _observation(self) -> dict[str, np.ndarray]:
        data = self.data
        grip = data.site_xpos[self.grip_site]
        fingers = [self.finger_width(), float(sum(data.qvel[i] for i in self.finger_qvel))]
        parts = [grip, self.grip_velocity() * self.dt, fingers]
        if self.object_qpos is not None and self.object_qvel is not None:
            position = data.qpos[self.object_qpos : self.object_qpos + 3]
            quaternion = data.qpos[self.object_qpos + 3 : self.object_qpos + 7]
            velocity = data.qvel[self.object_qvel : self.object_qvel + 6]
            parts += [position, position - grip, quaternion, velocity * self.dt]
        return {
            "observation": np.concatenate(parts).astype(np.float64),
            "achieved_goal": self._achieved(),
            "desired_goal": self.goal.copy(),
        }

    # ------------------------------------------------------------------ rendering

    def render(self) -> np.ndarray | None:
        if self.render_mode is None:
            return None
        if self._renderer is None:
            from gymnasium.envs.mujoco.mujoco_rendering import MujocoRenderer

            width, height = self._render_size
            self._renderer = MujocoRenderer(self.model, self.data, width=width, height=height, camera_name=self._camera)
        return self._renderer.render(self.render_mode)

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
