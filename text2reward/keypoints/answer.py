"""A vision model's keypoint answer, parsed strictly.

Why strict: the answer becomes a reward that trains for hours; a point outside the image, an unknown anchor or
a paragraph of prose must stop here with one line that names the problem (that line goes back to the model once),
never be guessed into a point.

The answer is one JSON object, alone or in one fenced block:

    {"grasp": {"x": 241, "y": 221, "anchor": "obj"},
     "waypoints": [{"x": 230, "y": 250, "height": 0.05}],
     "target": {"x": 222, "y": 300, "anchor": "goal", "height": 0.0},
     "reason": "grasp the handle, pull toward the camera"}

`x`, `y`: pixels from the image's top-left corner; `height`: metres above the surface seen at that pixel (for a
point in the air); `anchor`: the part the point moves with (KeypointSetup.anchors), or null for a fixed point.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from text2reward.errors import ConfigError, Text2RewardError

MAX_WAYPOINTS = 4
MAX_HEIGHT = 1.0
"""Metres: a keypoint in the air is at most this far above the surface it is pointed at."""
MAX_REASON = 500
POINT_KEYS = {"x", "y", "height", "anchor"}


class KeypointReplyError(Text2RewardError):
    """The reply is not a keypoint answer; the message says why, in words that go back to the model."""


@dataclass(frozen=True)
class PixelPoint:
    name: str
    """grasp, target, or waypoint_<i> (1-based, in order)."""
    x: float
    y: float
    height: float = 0.0
    anchor: str | None = None


@dataclass(frozen=True)
class KeypointAnswer:
    """The points in path order (grasp, waypoints, target) and the model's reason."""

    points: tuple[PixelPoint, ...]
    reason: str = ""

    def point(self, name: str) -> PixelPoint | None:
        return next((p for p in self.points if p.name == name), None)


def _unfenced(body: str) -> str:
    """The inside of a reply that is one fenced block (```json ... ```), else the reply. A scan, not a pattern: a
    backtracking one cost quadratic time on a reply of blank lines after a fence."""
    if not (body.startswith("```") and body.endswith("```")):
        return body
    label, newline, rest = body[3:].partition("\n")
    word = label.rstrip()
    if not newline or len(rest) < 3 or (word and not (word.isascii() and word.isalpha())):
        return body
    return rest[:-3].strip()


def parse_answer(text: str, width: int, height: int, anchors: tuple[str, ...], wants_grasp: bool) -> KeypointAnswer:
    """The answer in `text`, checked against the image's size and the task's anchor names; KeypointReplyError
    (one line naming the problem and what is expected) otherwise."""
    body = _unfenced((text or "").strip())
    if not body.startswith("{"):
        raise KeypointReplyError("the reply is not a JSON object: answer with the JSON object alone (no prose around it)")
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise KeypointReplyError(f"the reply is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): "
                                 "answer with the JSON object alone") from None
    if not isinstance(data, dict):
        raise KeypointReplyError("the reply must be a JSON object with target (and grasp, waypoints, reason)")
    allowed = {"target", "waypoints", "reason"} | ({"grasp"} if wants_grasp else set())
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise KeypointReplyError(f"unknown key(s) {', '.join(map(repr, unknown))}: the object takes only {', '.join(sorted(allowed))}")
    if "target" not in data:
        raise KeypointReplyError("the reply has no 'target' point: say where the object (or the gripper) must end up")
    if wants_grasp and "grasp" not in data:
        raise KeypointReplyError("the reply has no 'grasp' point: say where the gripper should take the object")
    waypoints = data.get("waypoints") or []
    if not isinstance(waypoints, list):
        raise KeypointReplyError("'waypoints' must be a list of points in order (or left out)")
    if len(waypoints) > MAX_WAYPOINTS:
        raise KeypointReplyError(f"{len(waypoints)} waypoints: give at most {MAX_WAYPOINTS}")
    reason = data.get("reason", "")
    if not isinstance(reason, str):
        raise KeypointReplyError("'reason' must be a short string")
    named: list[tuple[str, Any]] = []
    if wants_grasp:
        named.append(("grasp", data["grasp"]))
    named.extend((f"waypoint_{i + 1}", point) for i, point in enumerate(waypoints))
    named.append(("target", data["target"]))
    points = tuple(_point(name, raw, width, height, anchors) for name, raw in named)
    return KeypointAnswer(points, " ".join(reason.split())[:MAX_REASON])


def _point(name: str, raw: Any, width: int, height: int, anchors: tuple[str, ...]) -> PixelPoint:
    if not isinstance(raw, dict):
        raise KeypointReplyError(f"{name} must be an object like {{\"x\": 120, \"y\": 200}}, not {type(raw).__name__}")
    unknown = sorted(set(raw) - POINT_KEYS)
    if unknown:
        raise KeypointReplyError(f"{name} has unknown key(s) {', '.join(map(repr, unknown))}: a point takes x, y, height, anchor")
    values = {}
    for key, low, high in (("x", 0.0, float(width)), ("y", 0.0, float(height)), ("height", 0.0, MAX_HEIGHT)):
        value = raw.get(key, 0.0 if key == "height" else None)
        if value is None:
            raise KeypointReplyError(f"{name} has no {key}: give pixel coordinates x (0..{width - 1}) and y (0..{height - 1})")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise KeypointReplyError(f"{name}.{key} must be a number, got {value!r}")
        inside = low <= value <= high if key == "height" else low <= value < high
        if not inside:
            where = f"the image is {width}x{height} pixels, so x is 0..{width - 1} and y 0..{height - 1}" if key != "height" \
                else f"height is metres above the surface at the pixel, 0..{MAX_HEIGHT}"
            raise KeypointReplyError(f"{name}.{key} = {value} is outside the image: {where}")
        values[key] = float(value)
    anchor = raw.get("anchor")
    if anchor is not None and anchor not in anchors:
        choices = ", ".join(anchors) if anchors else "none in this task"
        raise KeypointReplyError(f"{name}.anchor {anchor!r} is not a part of this scene: use one of {choices}, or null")
    return PixelPoint(name, values["x"], values["y"], values["height"], anchor)


def with_anchors(answer: KeypointAnswer, overrides: Mapping[str, str | None], anchors: tuple[str, ...]) -> KeypointAnswer:
    """The answer with a person's anchors (`--anchor grasp=obj`, `--anchor waypoint_1=none`) in place of the model's;
    a ConfigError names an unknown keypoint or part."""
    names = [p.name for p in answer.points]
    for name, part in overrides.items():
        if name not in names:
            raise ConfigError(f"--anchor {name}=...: the keypoints are {', '.join(names)}")
        if part is not None and part not in anchors:
            raise ConfigError(f"--anchor {name}={part}: the parts a keypoint can move with are {', '.join(anchors) or 'none'} (or none)")
    return replace(answer, points=tuple(replace(p, anchor=overrides[p.name]) if p.name in overrides else p for p in answer.points))


def parse_anchor_options(options: list[str] | None) -> dict[str, str | None]:
    """`["grasp=obj", "target=none"]` -> {"grasp": "obj", "target": None}; a ConfigError for anything else."""
    parsed: dict[str, str | None] = {}
    for option in options or []:
        name, equals, part = option.partition("=")
        if not equals or not name.strip() or not part.strip():
            raise ConfigError(f"--anchor {option!r}: write KEYPOINT=PART, e.g. --anchor grasp=obj (PART none for a fixed point)")
        parsed[name.strip()] = None if part.strip().lower() in ("none", "null") else part.strip()
    return parsed
