"""The automatic feedback for the next round: reward reflection, then trajectory analysis."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sim_envs.task import Task
from text2reward.feedback.reflection import reward_reflection
from text2reward.feedback.trajectory import describe_behaviour, trajectory_analysis


def build_feedback_text(task: Task, train_result: Any, episodes: Sequence[Any] | None = None, successes: Sequence[bool] | None = None) -> str:
    """The whole automatic feedback: reward reflection, then trajectory analysis and a summary."""
    parts = [reward_reflection(train_result)]
    if episodes:
        parts.append(trajectory_analysis(task, episodes, successes))
        parts.append("In words: " + describe_behaviour(task, episodes, successes))
    return "\n\n".join(parts)
