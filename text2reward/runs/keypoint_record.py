"""A run's keypoints: the record of `keypoints/keypoints.json` (`KeypointsFile`), and the report's view of it.

Why here and not in text2reward.keypoints: the report and the dashboard read runs only (the dashboard may not import
a stage), and a hand-edited or cut file must read as "no keypoints", never fail a report or a page. The records
(`Keypoint`, `KeypointSet`, `KeypointsFile`) live here, so the stage that writes the file and the display that reads it
share one schema, read and written by the codec (sim_envs.codec).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sim_envs.camera import CameraModel
from sim_envs.codec import RecordError, read
from text2reward.runs.store import RunStore

KEYPOINTS_FILE = "keypoints/keypoints.json"
KEYPOINT_IMAGE = "keypoints/annotated.png"
KEYPOINT_REWARD = "keypoints/reward.py"
REPLY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


@dataclass(frozen=True)
class Keypoint:
    """One keypoint in the world: where it was pointed, where it lifted to, and what it moves with. The record of a
    point in keypoints.json, written by the keypoint stage (keypoints.scene) and read back by it and by a run's display."""

    name: str
    pixel: tuple[float, float]
    height: float
    world: tuple[float, float, float]
    """Metres, world frame, in the first state."""
    anchor: str | None = None
    offset: tuple[float, float, float] | None = None
    """world - the anchor's position in the first state: the reward puts the keypoint at anchor + offset."""


@dataclass(frozen=True)
class KeypointSet:
    """A task's keypoints in path order (grasp, waypoints, target), where they came from, and the camera."""

    task_id: str
    source: str
    """"oracle", or the backend and model that answered (e.g. "openai:gpt-4o")."""
    seed: int
    camera: CameraModel
    points: tuple[Keypoint, ...]
    effector: tuple[float, float, float]
    """The end effector in the pictured state (where a reach's path starts)."""
    reason: str = ""

    def point(self, name: str) -> Keypoint | None:
        return next((p for p in self.points if p.name == name), None)


@dataclass(frozen=True)
class KeypointsFile:
    """keypoints.json: the keypoints, the answer they were lifted from (the keypoint stage's `KeypointAnswer`, kept
    as written), and the raw replies' file names."""

    keypoints: KeypointSet
    answer: dict[str, Any] = field(default_factory=dict)
    replies: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class KeypointRecord:
    """What `keypoints/keypoints.json` says, checked field by field (a hand-edited or cut file reads as None)."""

    source: str
    seed: int
    camera: str
    width: int
    height: int
    fovy_degrees: float
    camera_position: tuple[float, float, float]
    points: tuple[Keypoint, ...]
    effector: tuple[float, float, float] | None
    reason: str
    replies: tuple[str, ...]
    """File names inside `keypoints/`: the raw model replies, in the order they came (the last one was used)."""

    @property
    def camera_text(self) -> str:
        return (f"{self.camera}, {self.width}x{self.height} px, vertical field of view {self.fovy_degrees:g}°, "
                f"at {format_world(self.camera_position)} m; reset seed {self.seed}")

    @property
    def source_text(self) -> str:
        if self.source == "oracle":
            return "oracle (the simulator's true positions projected into the image)"
        return f"{self.source} (a vision model pointed at the image)"


def parse_keypoints(data: Any) -> KeypointRecord | None:
    """The keypoints a run was given, or None when `data` (keypoints.json as loaded) is not their record."""
    try:
        file = read(KeypointsFile, data, KEYPOINTS_FILE)
    except RecordError:
        return None
    found, replies, camera = file.keypoints, file.replies, file.keypoints.camera
    return KeypointRecord(
        source=found.source, seed=found.seed, camera=camera.name, width=camera.width, height=camera.height,
        fovy_degrees=camera.fovy_degrees, camera_position=_vector(camera.position), points=found.points,
        effector=found.effector, reason=" ".join(found.reason.split()),
        replies=tuple(name for name in replies if REPLY_NAME.match(name)),
    )


def _vector(values: Any) -> tuple[float, float, float]:
    x, y, z = (float(v) for v in values)
    return x, y, z


def read_keypoint_record(store: RunStore) -> KeypointRecord | None:
    """The run's keypoints (None when it has none, or their file is unreadable: a report never fails on them)."""
    path = store.root / KEYPOINTS_FILE
    try:
        return parse_keypoints(json.loads(path.read_text())) if path.is_file() else None
    except (OSError, ValueError):
        return None


def format_pixel(pixel: tuple[float, float]) -> str:
    return f"({pixel[0]:.0f}, {pixel[1]:.0f})"


def format_metres(value: float) -> str:
    return f"{value:.3f}"


def format_world(world: Sequence[float]) -> str:
    return "(" + ", ".join(format_metres(v) for v in world) + ")"
