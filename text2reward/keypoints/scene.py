"""The task's first state as a camera sees it, and keypoints lifted from its pixels to the world.

Why the first state of one seeded reset: a vision model is shown one image, and its points are lifted with that
image's depth; a keypoint anchored to a part of the view (KeypointSetup.anchors) is stored as an offset from that
part, so the reward built from it (keypoints.program) follows the part in every later state and episode.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import mujoco
import numpy as np

from sim_envs.camera import CameraShot, shoot, surface_below
from sim_envs.task import KeypointSetup, Task
from text2reward.errors import ConfigError
from text2reward.keypoints.answer import KeypointAnswer, KeypointReplyError, PixelPoint
from text2reward.runs.keypoint_record import Keypoint, KeypointSet

BACKGROUND_DEPTH = 10.0
"""Metres: a pixel deeper than this shows no surface of the scene (the sky or the far plane)."""
VISIBLE_TOLERANCE = 0.05
"""Metres: the oracle takes a true point as seen where the rendered depth at its pixel is within this of its own
depth (an object's centre sits a few cm behind its visible face); otherwise it points at the surface below it."""


def keypoint_setup(task: Task) -> KeypointSetup:
    if task.keypoints is None:
        raise ConfigError(f"task {task.id} has no keypoint setup (an arm's end effector and a goal): keypoint rewards "
                          "apply to the metaworld, fetch and franka tasks; pick one of those")
    return task.keypoints


@dataclass
class Scene:
    """What the keypoints are read from: the shot, the anchors' positions, and the oracle's true points."""

    task_id: str
    seed: int
    shot: CameraShot
    anchors: dict[str, np.ndarray]
    effector: np.ndarray
    truths: list[tuple[str, np.ndarray, str | None, np.ndarray | None]] = field(default_factory=list)
    """(keypoint, true position, anchor, surface straight below it or None) per oracle entry."""


def observe(task: Task, seed: int = 0, camera: str | None = None, size: int = 480) -> Scene:
    """Reset the task with `seed` and photograph it (RGB and depth) from `camera` (default: the task's)."""
    setup = keypoint_setup(task)
    env = task.make_env(seed=seed)
    try:
        env.reset(seed=seed)
        model, data = env.unwrapped.model, env.unwrapped.data  # type: ignore[attr-defined]
        # Positions derived from a reset's new placements: MetaWorld's drawer reports (and renders) its old place
        # until the first step, 12 cm off; no time passes in mj_forward.
        mujoco.mj_forward(model, data)
        view = task.view(env)
        name = camera or setup.camera
        shot = shoot(model, data, name, size, upside_down=setup.upside_down and name == setup.camera)
        anchors = {anchor: np.array(operator.attrgetter(path)(view), dtype=np.float64) for anchor, path, _ in setup.anchors}
        effector = np.array(operator.attrgetter(setup.effector)(view), dtype=np.float64)
        truths = []
        for keypoint, path, anchor in setup.oracle:
            true = np.array(operator.attrgetter(path)(view), dtype=np.float64)
            truths.append((keypoint, true, anchor, surface_below(model, data, true)))
    finally:
        env.close()
    return Scene(task.id, seed, shot, anchors, effector, truths)


def lift(answer: KeypointAnswer, scene: Scene, source: str) -> KeypointSet:
    """Each pixel to the world point of the surface seen there (plus its height, straight up), anchored where the
    answer names a part. A pixel that shows no surface is a KeypointReplyError (the model can point again)."""
    points = []
    for point in answer.points:
        depth = scene.shot.depth_at((point.x, point.y))
        if not 0 < depth < BACKGROUND_DEPTH:
            raise KeypointReplyError(f"{point.name} at ({point.x:g}, {point.y:g}) shows no surface of the scene (depth {depth:.1f} m): "
                                     "point at the object, the table or the floor, and give a height for a point in the air")
        world = scene.shot.lift((point.x, point.y)) + np.array([0.0, 0.0, point.height])
        offset = None
        if point.anchor is not None:
            offset = tuple(float(v) for v in world - scene.anchors[point.anchor])
        points.append(Keypoint(point.name, (point.x, point.y), point.height, _triple(world), point.anchor,
                               offset if offset is None else _triple(np.array(offset))))
    return KeypointSet(scene.task_id, source, scene.seed, scene.shot.camera, tuple(points), _triple(scene.effector), answer.reason)


def oracle_answer(scene: Scene) -> KeypointAnswer:
    """The task's true points projected into the image: a visible point at its own pixel, a point in the air (or
    hidden) at the pixel of the surface straight below it with its height above that surface."""
    camera = scene.shot.camera
    points = []
    for name, true, anchor, below in scene.truths:
        pixel, depth = camera.project(true)
        seen = camera.inside(pixel[0]) and abs(scene.shot.depth_at(pixel[0]) - depth[0]) <= VISIBLE_TOLERANCE
        if seen:
            points.append(PixelPoint(name, float(pixel[0][0]), float(pixel[0][1]), 0.0, anchor))
            continue
        if below is None:
            raise ConfigError(f"the oracle cannot place {name}: no surface below its true position {true.round(3).tolist()}")
        pixel, _ = camera.project(below)
        if not camera.inside(pixel[0]):
            raise ConfigError(f"the oracle's {name} falls outside camera {camera.name}'s image: choose another --camera")
        points.append(PixelPoint(name, float(pixel[0][0]), float(pixel[0][1]), float(true[2] - below[2]), anchor))
    return KeypointAnswer(tuple(points), "oracle: the task's true positions projected into the image")


def _triple(values: np.ndarray) -> tuple[float, float, float]:
    return (float(values[0]), float(values[1]), float(values[2]))
