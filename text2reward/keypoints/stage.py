"""A run's keypoint stage: the task's keypoints found once (or read back) in the run's `keypoints/` folder, and what
the rest of the run takes from them: the summary a prompt shows, the program, round 0's candidate, a combined program.

Why a stage module: the loop asks these few questions of the run's keypoint folder, and nothing else in the loop
needs to know how keypoints are found or written.
"""

from __future__ import annotations

from pathlib import Path

from sim_envs.task import Task
from text2reward.generation.llm.base import Backend, Reply
from text2reward.keypoints.find import find_keypoints, read_keypoints
from text2reward.keypoints.program import KEYPOINT_FUNCTION, combine
from text2reward.runs.run_events import Emit, Note

REWARD_FILE = "reward.py"
KEYPOINT_AUTHOR = "keypoints"
"""The `backend` of round 0's keypoint program: written by text2reward from the keypoints, never by a model."""


class KeypointStage:
    """The keypoints of one run (its `keypoints/` folder)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def ensure(self, task: Task, finder: str, backend: Backend | None, seed: int, camera: str | None,
               anchors: dict[str, str | None], emit: Emit) -> None:
        """Find the task's keypoints once (a resume reads them back) and say where they are."""
        keypoints = find_keypoints(task, self.folder, finder, backend, seed=seed, camera=camera,
                                   say=lambda message: emit(Note(message)), anchors=anchors)
        emit(Note(f"keypoints ({keypoints.source}): " + ", ".join(
            f"{p.name} {tuple(round(v, 3) for v in p.world)}" + (f" on {p.anchor}" if p.anchor else "") for p in keypoints.points)))

    def code(self) -> str:
        return (self.folder / REWARD_FILE).read_text()

    def summary(self) -> str:
        """The keypoints as a prompt shows them: each point, where it is, what it moves with."""
        keypoints = read_keypoints(self.folder)
        assert keypoints is not None  # ensure() ran first
        lines = [f"- {p.name}: world {[round(v, 3) for v in p.world]} m" + (f", moves with {p.anchor}" if p.anchor else ", fixed")
                 for p in keypoints.points]
        return f"Keypoints from {keypoints.source} (camera {keypoints.camera.name}):\n" + "\n".join(lines)

    def first_round_reply(self) -> Reply:
        """Round 0 of a keypoint source: one reply holding the keypoint program, said to be written by text2reward from
        the keypoints (never presented as a model's code)."""
        keypoints = read_keypoints(self.folder)
        assert keypoints is not None  # ensure() ran first
        text = "A reward written by text2reward from the task's keypoints.\n\n```python\n" + self.code() + "```\n"
        return Reply(text=text, backend=KEYPOINT_AUTHOR, model=f"program from {keypoints.source} keypoints", rule_based=True)

    def with_keypoint_reward(self, code: str) -> str:
        """The model's program plus the keypoint reward, unless it already holds it (a later round edits the
        combined program it was shown)."""
        if f"def {KEYPOINT_FUNCTION}(" in code:
            return code
        return combine(code, self.code())

    def replies_asked(self) -> int:
        """Replies the keypoint finder asked its backend for (a reply-file backend counts them as used)."""
        return len(list(self.folder.glob("reply_*.md")))
