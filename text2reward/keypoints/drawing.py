"""The keypoints drawn on the image they were read from: what a person checks before training on them."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from text2reward.runs.keypoint_record import KeypointSet

COLOURS = {"grasp": (40, 200, 60), "target": (230, 40, 40)}
WAYPOINT_COLOUR = (250, 200, 20)
RADIUS = 6


def draw_keypoints(rgb: np.ndarray, keypoints: KeypointSet) -> np.ndarray:
    """A copy of `rgb` with each point as a ringed dot and its name, joined in path order (grasp, waypoints, target)."""
    image = Image.fromarray(np.ascontiguousarray(rgb[..., :3], dtype=np.uint8))
    pen = ImageDraw.Draw(image)
    pixels = [p.pixel for p in keypoints.points]
    if len(pixels) > 1:
        pen.line(pixels, fill=(255, 255, 255), width=2)
    for point in keypoints.points:
        colour = COLOURS.get(point.name, WAYPOINT_COLOUR)
        u, v = point.pixel
        pen.ellipse((u - RADIUS - 2, v - RADIUS - 2, u + RADIUS + 2, v + RADIUS + 2), fill=(0, 0, 0))
        pen.ellipse((u - RADIUS, v - RADIUS, u + RADIUS, v + RADIUS), fill=colour)
        label = point.name + (f" +{point.height:.2f} m" if point.height else "")
        pen.text((u + RADIUS + 4, v - RADIUS - 4), label, fill=(0, 0, 0))
        pen.text((u + RADIUS + 3, v - RADIUS - 5), label, fill=colour)
    return np.asarray(image)
