"""Vision in failure analysis: a failed candidate's rollout keyframes go to a vision-capable model with "what went
wrong?", and the answer joins the automatic feedback of the next round.

Why beside the numbers: trajectory analysis says *that* the object never moved; a look at the frames often says
*why* (the gripper closed beside the handle, the arm pushed the drawer sideways). The answer is a model's opinion
and is labelled as such in the prompt; the numbers stay the ground truth.
"""

from __future__ import annotations

from typing import Any

from sim_envs.task import Task

SYSTEM = ("You are an expert in robot reinforcement learning. You watch keyframes of a policy's rollout and say, "
          "concretely and briefly, what the robot did and why it failed the task.")
MAX_ANSWER = 2_000
"""Characters of the model's answer kept in the next prompt."""


def failure_messages(task: Task, code: str, behaviour: str, success_rate: float, frames: int) -> list[dict[str, Any]]:
    """The question about one failed candidate; the backend attaches the `frames` keyframes (in time order)."""
    text = "\n".join([
        f"The task: {task.description}",
        f"Success test: {task.success_doc}",
        f"A policy trained with the reward below succeeded in {success_rate:.0%} of its evaluation episodes.",
        f"The {frames} attached images are keyframes of its rollout, in time order.",
        *([f"What the logged states say: {behaviour.strip()}"] if behaviour.strip() else []),
        "",
        "The reward it was trained with:",
        "```python",
        code.rstrip(),
        "```",
        "",
        "What went wrong? Say what the robot does in the frames, where it falls short of the task, and which part of "
        "the reward most likely led it there. Answer in at most 6 sentences; no code.",
    ])
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]


def vision_feedback_section(answer: str, model: str) -> str:
    """The answer as a section of the next round's feedback, labelled as a model's reading of the frames."""
    answer = " ".join(answer.split())[:MAX_ANSWER]
    return f"What a vision model ({model}) saw in the rollout's keyframes (its reading, not a measurement): {answer}"
