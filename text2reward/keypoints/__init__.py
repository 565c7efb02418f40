"""Keypoint rewards (KAGI): a vision model points at what matters in an image of the task's first state (where to
grasp, where to go, which way), the points are lifted to the world with the depth image, and a staged reward
program is written from them; `oracle` points come from the simulator's true positions instead.

    scene = observe(task, seed=0)                       # RGB + depth from the task's keypoint camera
    answer = oracle_answer(scene)                       # or parse_answer(model_reply, ...)
    keypoints = lift(answer, scene, source="oracle")    # pixels -> world points, anchored to parts of the view
    code = keypoint_program(keypoints, task.keypoints)  # an ordinary reward program
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "KeypointAnswer": "answer", "KeypointReplyError": "answer", "PixelPoint": "answer", "parse_answer": "answer",
    "combine": "program", "keypoint_program": "program",
    "Keypoint": "scene", "KeypointSet": "scene", "Scene": "scene", "keypoint_setup": "scene", "lift": "scene", "observe": "scene",
    "oracle_answer": "scene",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """The stage's names, imported on first use (PEP 562): a run's settings import `keypoints.sources` on every `t2r`
    command, and the scene's rendering (MuJoCo's GL context) costs ~0.3 s that only a keypoint run needs."""
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"text2reward.keypoints.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'text2reward.keypoints' has no attribute {name!r}")
