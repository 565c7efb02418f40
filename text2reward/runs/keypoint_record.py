"""A run's keypoints as a report reads them: `keypoints/keypoints.json` checked field by field, and formatted.

Why here and not in text2reward.keypoints: the report and the dashboard read runs only (the dashboard may not import
a stage), and a hand-edited or cut file must read as "no keypoints", never fail a report or a page. The point record
(`Keypoint`) lives here too, so the stage that writes the file and the display that reads it share one schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "pixel": list(self.pixel), "height": self.height, "world": list(self.world),
                "anchor": self.anchor, "offset": list(self.offset) if self.offset is not None else None}

    @classmethod
    def from_dict(cls, data: Any) -> Keypoint:
        """A point as `to_dict` wrote it; a malformed one raises KeyError, TypeError or ValueError."""
        anchor, offset = data.get("anchor"), data.get("offset")
        return cls(str(data["name"]), _pair(data["pixel"]), float(data.get("height") or 0.0), _triple(data["world"]),
                   None if anchor is None else str(anchor), None if offset is None else _triple(offset))


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


def _pair(value: Any) -> tuple[float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ValueError(f"expected 2 numbers, got {value!r}")
    return float(value[0]), float(value[1])


def _triple(value: Any) -> tuple[float, float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise ValueError(f"expected 3 numbers, got {value!r}")
    return float(value[0]), float(value[1]), float(value[2])


def parse_keypoints(data: Any) -> KeypointRecord | None:
    """The keypoints a run was given, or None when `data` (keypoints.json as loaded) is not their record."""
    try:
        found = data["keypoints"]
        camera = found["camera"]
        replies = [str(name) for name in data.get("replies") or []]
        return KeypointRecord(
            source=str(found["source"]), seed=int(found.get("seed") or 0), camera=str(camera["name"]),
            width=int(camera["width"]), height=int(camera["height"]), fovy_degrees=float(camera["fovy_degrees"]),
            camera_position=_triple(camera["position"]), points=tuple(Keypoint.from_dict(p) for p in found["points"]),
            effector=_triple(found["effector"]) if found.get("effector") is not None else None,
            reason=" ".join(str(found.get("reason") or "").split()),
            replies=tuple(name for name in replies if REPLY_NAME.match(name)),
        )
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return None


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
