"""MuJoCo's pinhole camera: render RGB and metric depth from a named camera, project world points to pixels,
and lift pixels back to world points with the depth image.

Why by hand: MuJoCo gives a camera's pose (`data.cam_xpos`, `data.cam_xmat`) and vertical field of view
(`model.cam_fovy`), and its `Renderer` gives depth in metres along the optical axis; the pinhole algebra that
joins them is a few lines, and keypoints (text2reward.keypoints) need it in both directions.

Conventions: pixels are (u, v) with u to the right and v down from the image's top-left corner, the centre of
pixel (row i, column j) at (j + 0.5, i + 0.5); the camera looks along its frame's -z with +y up (MuJoCo's);
depth is the distance along the optical axis, not along the ray; world points are metres, z up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sim_envs.codec import stored_as
from sim_envs.errors import ConfigError

Vector = tuple[float, float, float]
"""How a point or an axis is stored in a record's JSON."""


def _array(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=np.float64)


@dataclass(frozen=True)
class CameraModel:
    """A named camera's intrinsics and pose at one moment (a record: `sim_envs.codec` writes and reads it)."""

    name: str
    width: int
    height: int
    fovy_degrees: float
    position: np.ndarray = field(metadata=stored_as(Vector, _array))
    """(3,) the camera's origin in the world frame."""
    rotation: np.ndarray = field(metadata=stored_as(tuple[Vector, Vector, Vector], _array))
    """(3, 3) columns are the camera's x (right), y (up) and z (backwards) axes in the world frame."""

    @property
    def focal_pixels(self) -> float:
        """Focal length in pixels; MuJoCo's pixels are square, so one value serves both axes."""
        return 0.5 * self.height / math.tan(math.radians(self.fovy_degrees) / 2)

    def project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World points (N, 3) -> (pixels (N, 2) as (u, v), depths (N,)); a depth <= 0 is behind the camera."""
        points = np.atleast_2d(np.asarray(points, dtype=np.float64))
        in_camera = (points - self.position) @ self.rotation  # rows: R^T (p - c)
        depth = -in_camera[:, 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            u = 0.5 * self.width + self.focal_pixels * in_camera[:, 0] / depth
            v = 0.5 * self.height - self.focal_pixels * in_camera[:, 1] / depth
        return np.stack([u, v], axis=1), depth

    def lift(self, pixels: np.ndarray, depths: np.ndarray) -> np.ndarray:
        """Pixels (N, 2) at depths (N,) along the optical axis -> world points (N, 3): `project`'s inverse."""
        pixels = np.atleast_2d(np.asarray(pixels, dtype=np.float64))
        depths = np.asarray(depths, dtype=np.float64).reshape(-1)
        x = (pixels[:, 0] - 0.5 * self.width) * depths / self.focal_pixels
        y = -(pixels[:, 1] - 0.5 * self.height) * depths / self.focal_pixels
        in_camera = np.stack([x, y, -depths], axis=1)
        return self.position + in_camera @ self.rotation.T

    def inside(self, pixel: tuple[float, float] | np.ndarray) -> bool:
        u, v = float(pixel[0]), float(pixel[1])
        return 0.0 <= u < self.width and 0.0 <= v < self.height


@dataclass(frozen=True)
class CameraShot:
    """What a camera saw: RGB (H, W, 3) uint8, depth (H, W) metres along the optical axis, and the camera."""

    rgb: np.ndarray
    depth: np.ndarray
    camera: CameraModel

    def depth_at(self, pixel: tuple[float, float] | np.ndarray) -> float:
        """The depth of the pixel that contains (u, v)."""
        column = min(max(int(math.floor(float(pixel[0]))), 0), self.camera.width - 1)
        row = min(max(int(math.floor(float(pixel[1]))), 0), self.camera.height - 1)
        return float(self.depth[row, column])

    def lift(self, pixel: tuple[float, float] | np.ndarray) -> np.ndarray:
        """(u, v) -> the world point of the surface seen there (3,)."""
        return self.camera.lift(np.asarray(pixel, dtype=np.float64)[None], np.array([self.depth_at(pixel)]))[0]


def camera_names(model: Any) -> list[str]:
    import mujoco

    return [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, i) or f"#{i}" for i in range(model.ncam)]


def camera_model(model: Any, data: Any, name: str, width: int, height: int) -> CameraModel:
    """The pose and intrinsics of camera `name` in the current state (after mj_forward)."""
    import mujoco

    camera_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name)
    if camera_id < 0:
        raise ConfigError(f"this scene has no camera {name!r}: choose one of {', '.join(camera_names(model))}")
    if np.any(np.asarray(model.cam_sensorsize[camera_id]) > 0):
        raise ConfigError(f"camera {name!r} sets a sensor size (physical intrinsics), which this pinhole model does not read; "
                          "choose a camera defined by fovy")
    return CameraModel(name, int(width), int(height), float(model.cam_fovy[camera_id]),
                       np.array(data.cam_xpos[camera_id], dtype=np.float64),
                       np.array(data.cam_xmat[camera_id], dtype=np.float64).reshape(3, 3))


def shoot(model: Any, data: Any, name: str, size: int = 480, upside_down: bool = False) -> CameraShot:
    """Render camera `name` of the scene as it is now: RGB and depth at `size` x `size` pixels. `upside_down`
    (a camera mounted rolled over, as MetaWorld's corners are) turns the images 180 degrees and rolls the camera
    model with them, so pixels and world points still agree."""
    import mujoco

    camera = camera_model(model, data, name, size, size)
    if model.vis.global_.offwidth < size or model.vis.global_.offheight < size:
        raise ConfigError(f"the scene's offscreen buffer is {model.vis.global_.offwidth}x{model.vis.global_.offheight}; "
                          f"ask for at most that (--size {min(model.vis.global_.offwidth, model.vis.global_.offheight)})")
    renderer = mujoco.Renderer(model, height=size, width=size)
    try:
        renderer.update_scene(data, camera=name)
        rgb = renderer.render().copy()
        renderer.enable_depth_rendering()
        renderer.update_scene(data, camera=name)
        depth = renderer.render().copy()
    finally:
        renderer.close()
    if upside_down:
        rolled = CameraModel(camera.name, camera.width, camera.height, camera.fovy_degrees, camera.position,
                             camera.rotation * np.array([-1.0, -1.0, 1.0]))  # x and y axes reversed: a 180-degree roll
        return CameraShot(np.ascontiguousarray(rgb[::-1, ::-1]), np.ascontiguousarray(depth[::-1, ::-1], dtype=np.float64), rolled)
    return CameraShot(rgb, depth.astype(np.float64), camera)


def surface_below(model: Any, data: Any, point: np.ndarray) -> np.ndarray | None:
    """The first visible surface straight below `point` (a ray down through the scene's geoms), or None."""
    import mujoco

    geom = np.zeros(1, dtype=np.int32)
    visible = np.array([1, 1, 1, 0, 0, 0], dtype=np.uint8)  # the geom groups MuJoCo renders by default
    distance = mujoco.mj_ray(model, data, np.asarray(point, dtype=np.float64), np.array([0.0, 0.0, -1.0]),
                             visible, 1, -1, geom)
    if distance < 0:
        return None
    return np.asarray(point, dtype=np.float64) - np.array([0.0, 0.0, distance])
