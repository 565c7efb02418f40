"""Keypoint rewards (KAGI): a vision model points at what matters in an image of the task's first state (where to
grasp, where to go, which way), the points are lifted to the world with the depth image, and a staged reward
program is written from them; `oracle` points come from the simulator's true positions instead.

    scene = observe(task, seed=0)                       # RGB + depth from the task's keypoint camera
    answer = oracle_answer(scene)                       # or parse_answer(model_reply, ...)
    keypoints = lift(answer, scene, source="oracle")    # pixels -> world points, anchored to parts of the view
    code = keypoint_program(keypoints, task.keypoints)  # an ordinary reward program
"""

from text2reward.keypoints.answer import KeypointAnswer, KeypointReplyError, PixelPoint, parse_answer
from text2reward.keypoints.program import combine, keypoint_program
from text2reward.keypoints.scene import Keypoint, KeypointSet, Scene, keypoint_setup, lift, observe, oracle_answer

__all__ = [
    "Keypoint",
    "KeypointAnswer",
    "KeypointReplyError",
    "KeypointSet",
    "PixelPoint",
    "Scene",
    "combine",
    "keypoint_program",
    "keypoint_setup",
    "lift",
    "observe",
    "oracle_answer",
    "parse_answer",
]
