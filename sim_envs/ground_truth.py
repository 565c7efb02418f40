"""The positions a view reports, recomputed from the simulator's raw state, for checking what prompts state.

Why: scale hints and trajectory analyses state numbers about the gripper, the object and the goal. To test them
they must be compared with something that shares none of the view's code: here each recorded state (qpos,
qvel, mocap) is copied into a fresh `MjData`, its kinematics are computed from scratch (`mj_kinematics`), and
the points are read off named MuJoCo elements (`object_facts.tracked_points`, written from each environment's
own accessor). A stale first state (kinematics not computed after a reset moved a body), a point tracked on the
wrong element or an offset left out all show up as a difference. Goals are not physics: they are the env's
own attribute at the time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sim_envs.object_facts import Tracked, tracked_points, tracked_position
from sim_envs.scene_features import SceneFeature, episode_features, read_features
from sim_envs.view_base import dotted_attribute

EE_ELEMENTS: dict[str, tuple[Tracked, ...]] = {
    "metaworld": (Tracked("site", "rightEndEffector"), Tracked("site", "leftEndEffector")),
    "fetch": (Tracked("site", "robot0:grip"),),
    "franka": (Tracked("site", "grip"),),
    "adroit": (Tracked("site", "S_grasp"),),
    "shadow": (Tracked("body", "robot0:palm"),),
}
"""Per family: the elements whose mean is `robot.ee_position` (MetaWorld's tool-centre point is the midpoint
of its two end-effector sites)."""
ADROIT_GOAL_SITES = {"adroit/hammer": "nail_goal", "adroit/pen": "eps_ball", "adroit/relocate": "target"}
"""Adroit's goals are sites of the model; the door's is the handle's site with the hinge at its open angle."""
DOOR_OPEN_ANGLE = 1.57
LAG_TOLERANCE_M = 0.01
"""Gymnasium-Robotics' envs (Fetch, Adroit, Shadow, and our Franka built like Fetch) do not recompute kinematics
after their last physics substep, so the positions they (and their views, rewards and success tests) read lag qpos
by one substep; recomputed from qpos they differ by up to a few mm (benchmarks/feedback_fidelity.py reports the largest:
Adroit door's goal, which turns the lagging handle by the current hinge angle, is off by up to ~5 mm while the door swings).
Facts about those families are checked to this tolerance; MetaWorld and locomotion agree to 1e-6."""
EXACT_FAMILIES = ("metaworld", "locomotion")


@dataclass(frozen=True)
class RawState:
    """What the simulator holds at one moment, copied: enough to recompute every position. Resets place objects
    and goals by moving bodies and sites in the model itself (MetaWorld, Adroit), so those are copied too."""

    qpos: np.ndarray
    qvel: np.ndarray
    mocap_pos: np.ndarray
    mocap_quat: np.ndarray
    body_pos: np.ndarray
    body_quat: np.ndarray
    site_pos: np.ndarray
    goal: np.ndarray | None


def _goal(env: Any) -> np.ndarray | None:
    for name in ("_target_pos", "goal"):  # MetaWorld; Fetch, Franka, Shadow (position first)
        value = getattr(env, name, None)
        if value is not None:
            return np.array(value, dtype=float)[:3]
    return None


def snapshot(env: Any) -> RawState:
    """The raw state of `env` (unwrapped) now."""
    data, model = env.data, env.model
    return RawState(data.qpos.copy(), data.qvel.copy(), data.mocap_pos.copy(), data.mocap_quat.copy(),
                    model.body_pos.copy(), model.body_quat.copy(), model.site_pos.copy(), _goal(env))


class Recomputer:
    """Recomputes kinematics on a private copy of the model and a private `MjData`, never touching the env's."""

    def __init__(self, model: Any):
        import copy

        import mujoco

        self._mujoco = mujoco
        self.model = copy.deepcopy(model)
        self.data = mujoco.MjData(self.model)

    def load(self, state: RawState) -> Any:
        model, data = self.model, self.data
        model.body_pos[:], model.body_quat[:], model.site_pos[:] = state.body_pos, state.body_quat, state.site_pos
        data.qpos[:], data.qvel[:] = state.qpos, state.qvel
        data.mocap_pos[:], data.mocap_quat[:] = state.mocap_pos, state.mocap_quat
        self.kinematics()
        return data

    def kinematics(self) -> None:
        self._mujoco.mj_kinematics(self.model, self.data)


def true_points(task: Any, recomputer: Recomputer, state: RawState) -> dict[str, np.ndarray]:
    """{view path: position} for the points the analysis and the hints speak of, from `state` alone:
    `robot.ee_position`, `obj.position`, `obj2.position`, `goal_position` (those the task has), and for
    locomotion `torso.position`, `torso.pitch` and `torso.up_z` (the up vector's z)."""
    model, data = recomputer.model, recomputer.load(state)
    points: dict[str, np.ndarray] = {}
    if task.family == "locomotion":
        torso = model.body("torso").id
        points["torso.position"] = np.array(data.xpos[torso])
        points["torso.up_z"] = np.array(data.xmat[torso][8])
        if model.nq and model.jnt_type[0] != 0:  # planar walkers: rootx, rootz, rooty (pitch)
            points["torso.pitch"] = np.array(state.qpos[2])
        return points
    ee = EE_ELEMENTS.get(task.family)
    if ee is not None:
        points["robot.ee_position"] = np.mean([tracked_position(model, data, p) for p in ee], axis=0)
    for field, point in tracked_points(task.id).items():
        points[f"{field}.position"] = tracked_position(model, data, point)
    if state.goal is not None:
        points["goal_position"] = state.goal
    elif task.id in ADROIT_GOAL_SITES:
        points["goal_position"] = np.array(data.site_xpos[model.site(ADROIT_GOAL_SITES[task.id]).id])
    elif task.id == "adroit/door":
        data.qpos[model.jnt_qposadr[model.joint("door_hinge").id]] = DOOR_OPEN_ANGLE
        recomputer.kinematics()
        points["goal_position"] = np.array(data.site_xpos[model.site("S_handle").id])
    return points


def tolerance(task: Any) -> float:
    """How closely a positional fact must match its recomputation (see LAG_TOLERANCE_M)."""
    return 1e-6 if task.family in EXACT_FAMILIES else LAG_TOLERANCE_M


# --------------------------------------------------------------------------- rollouts and true facts


@dataclass
class Rollout:
    """The views a task env showed (the first one right after reset) and the raw state behind each."""

    views: list[Any]
    states: list[RawState]
    model: Any
    scene: tuple[SceneFeature, ...] = ()
    """The task's fixed features as the env read them at the reset (what the analysis is given)."""


def record(env: Any, act: Any, seed: int, steps: int) -> Rollout:
    """Up to `steps` steps of `act(obs)` on a task env (one with a `view` attribute: `make_task_env`), from a
    seeded reset, recording each view and the simulator's raw state beside it."""
    unwrapped = env.unwrapped
    obs, _ = env.reset(seed=seed)
    views, states = [env.get_wrapper_attr("view")], [snapshot(unwrapped)]
    scene = episode_features(env.get_wrapper_attr("task"), env)
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(act(obs))
        views.append(env.get_wrapper_attr("view"))
        states.append(snapshot(unwrapped))
        if terminated or truncated:
            break
    return Rollout(views, states, unwrapped.model, scene)


def _gripper_closed(views: list[Any]) -> np.ndarray | None:
    for field in ("robot.gripper_openness", "robot.gripper_width"):
        if dotted_attribute(views[0], field) is not None:
            values = np.array([float(dotted_attribute(v, field)) for v in views])
            return values < 0.8 * values[0] if values[0] > 0 else np.zeros(len(values), dtype=bool)
    return None


def true_facts(task: Any, rollout: Rollout, thresholds: dict[str, float]) -> dict[str, float | bool]:
    """The trajectory analysis's facts, recomputed from raw states (`true_points`) with their stated thresholds
    (`thresholds`: MOVED_M, LIFTED_M, NEAR_M, FELL_M). The gripper's closing is read from the views (one number
    each), the goal from the env; everything positional comes from recomputed kinematics."""
    recomputer = Recomputer(rollout.model)
    series: dict[str, list[np.ndarray]] = {}
    for state in rollout.states:
        for path, value in true_points(task, recomputer, state).items():
            series.setdefault(path, []).append(value)
    track = {path: np.array(values) for path, values in series.items()}
    facts: dict[str, float | bool] = {"steps": float(len(rollout.states) - 1)}
    if task.family == "locomotion":
        facts.update(_true_locomotion(track, float(rollout.views[0].dt), len(rollout.states)))
    else:
        facts.update(_true_manipulation(track, rollout.views, thresholds))
        specs = getattr(task, "scene_features", None) or ()
        if specs:
            recomputer.load(rollout.states[0])
            scene = read_features(recomputer.model, recomputer.data, specs)
            for key, field in (("object", "obj"), ("object2", "obj2")):
                if f"{field}.position" in track:
                    facts.update(_true_relations(key, track[f"{field}.position"], scene, thresholds))
            if "robot.ee_position" in track:  # the gripper: walls only
                walls = tuple(f for f in scene if f.kind == "wall")
                facts.update(_true_relations("gripper", track["robot.ee_position"], walls, thresholds))
    return facts


def true_scene(task: Any, recomputer: Recomputer, state: RawState) -> tuple[SceneFeature, ...]:
    """The task's fixed features in `state`, from fresh kinematics on the recomputer's copy of the model."""
    recomputer.load(state)
    return read_features(recomputer.model, recomputer.data, getattr(task, "scene_features", None) or ())


def _box_distance(point: np.ndarray, low: np.ndarray, high: np.ndarray) -> float:
    nearest = np.clip(point, low, high)
    return float(np.sqrt(((point - nearest) ** 2).sum()))


def _true_relations(key: str, obj: np.ndarray, scene: tuple[SceneFeature, ...], thresholds: dict[str, float]) -> dict[str, float | bool]:
    """The analysis's relations to fixed features (trajectory.scene_relations), written again from the box's corners:
    off the table, the side of a wall (its thinnest axis) and the distance to it, inside a container."""
    start, final = obj[0], obj[-1]
    facts: dict[str, float | bool] = {}
    for feature in scene:
        centre, half = np.array(feature.centre), np.array(feature.half_size)
        low, high = centre - half, centre + half
        if feature.kind == "table":
            inside_top = bool(low[0] <= final[0] <= high[0] and low[1] <= final[1] <= high[1])
            facts[f"{key}_off_{feature.name}"] = not inside_top or bool(final[2] < high[2] - thresholds["FELL_M"])
        elif feature.kind != "rim":
            gap = _box_distance(final, low, high)
            facts[f"{key}_{feature.name}_gap"] = gap
            if feature.kind == "wall":
                axis = int(np.argmin(half))
                crossed = (final[axis] - centre[axis]) * (start[axis] - centre[axis]) < 0
                facts[f"{key}_past_{feature.name}"] = bool(crossed)
                facts[f"{key}_blocked_by_{feature.name}"] = bool(not crossed and gap < thresholds["NEAR_M"])
            elif feature.kind in ("net", "bin", "box", "shelf", "cabinet", "hoop", "hole"):
                facts[f"{key}_in_{feature.name}"] = bool(np.all(low <= final) and np.all(final <= high))
    return facts


def _dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sqrt(((a - b) ** 2).sum(axis=-1))


def _true_manipulation(track: dict[str, np.ndarray], views: list[Any], thresholds: dict[str, float]) -> dict[str, float | bool]:
    facts: dict[str, float | bool] = {}
    ee, goal = track.get("robot.ee_position"), track.get("goal_position")
    if ee is not None and goal is not None:
        d = _dist(ee, goal)
        facts.update(gripper_goal_start=d[0], gripper_goal_min=d.min(), gripper_goal_final=d[-1])
    for key, field in (("object", "obj"), ("object2", "obj2")):
        obj = track.get(f"{field}.position")
        if obj is None:
            continue
        if ee is not None:
            near = _dist(ee, obj)
            facts.update({f"gripper_{key}_min": near.min(), f"gripper_{key}_final": near[-1]})
            closed = _gripper_closed(views)
            if closed is not None:
                facts[f"{key}_grasped"] = bool(np.any(closed & (near < thresholds["NEAR_M"])))
        start = obj[0]
        shift = _dist(obj, start)
        rise = obj[:, 2] - start[2]
        table = dotted_attribute(views[0], "table_height")
        floor = float(start[2]) if table is None else float(table)
        facts.update({
            f"{key}_max_displacement": shift.max(), f"{key}_final_displacement": shift[-1],
            f"{key}_moved": bool(shift.max() > thresholds["MOVED_M"]), f"{key}_max_rise": rise.max(),
            f"{key}_lifted": bool(rise.max() > thresholds["LIFTED_M"]),
            f"{key}_fell": bool(obj[:, 2].min() < floor - thresholds["FELL_M"]),
        })
        if goal is not None:
            d = _dist(obj, goal)
            facts.update({f"{key}_goal_start": d[0], f"{key}_goal_min": d.min(), f"{key}_goal_final": d[-1]})
            if "PROGRESS_M" in thresholds:  # the direction of progress: ended nearer the goal, or farther
                facts.update({f"{key}_goal_closer": bool(d[-1] - d[0] < -thresholds["PROGRESS_M"]),
                              f"{key}_goal_farther": bool(d[-1] - d[0] > thresholds["PROGRESS_M"])})
    return facts


def _true_locomotion(track: dict[str, np.ndarray], dt: float, count: int) -> dict[str, float | bool]:
    pos = track["torso.position"]
    duration = max(count - 1, 1) * (dt or 1.0)
    facts: dict[str, float | bool] = {"forward_distance": pos[-1, 0] - pos[0, 0], "mean_forward_speed": (pos[-1, 0] - pos[0, 0]) / duration,
                                      "height_start": pos[0, 2], "height_min": pos[:, 2].min(), "height_max": pos[:, 2].max(),
                                      "height_final": pos[-1, 2]}
    if np.ptp(pos[:, 1]) > 1e-9:
        facts["sideways_distance"] = pos[-1, 1] - pos[0, 1]
    up = track["torso.up_z"]
    if "torso.pitch" in track:
        pitch = track["torso.pitch"]
        rotation = pitch[-1] - pitch[0]
        facts.update(pitch_rotation=rotation, pitch_turns=rotation / (2 * np.pi), pitch_max=pitch.max(), pitch_min=pitch.min())
        final = (float(pitch[-1]) + np.pi) % (2 * np.pi) - np.pi
        facts["fell"] = bool(pos[-1, 2] < 0.5 * pos[0, 2] or abs(final) > np.pi / 2)
    else:
        facts.update(upright_min=up.min(), upright_final=up[-1], fell=bool(up.min() < 0.3), upside_down_at_end=bool(up[-1] < 0.0))
    return facts
