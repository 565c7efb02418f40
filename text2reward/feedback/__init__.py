"""Automatic feedback for the next round (DESIGN stage 7): reward reflection and trajectory analysis.

A person's feedback is stored with the run (`text2reward.runs.human_feedback`) and prompted from
`text2reward.generation.prompting`.
"""

from text2reward.feedback.compose import build_feedback_text
from text2reward.feedback.reflection import component_stats, reflection_tips, reward_reflection
from text2reward.feedback.trajectory import describe_behaviour, episode_facts, trajectory_analysis
from text2reward.feedback.vision import failure_messages, vision_feedback_section

__all__ = [
    "build_feedback_text",
    "component_stats",
    "describe_behaviour",
    "episode_facts",
    "failure_messages",
    "reflection_tips",
    "reward_reflection",
    "trajectory_analysis",
    "vision_feedback_section",
]
