"""A round's prompt, assembled from the run's records: the task prompt for round 0, then feedback on the best so far
(or a person's critique or choice, which comes first), the round's other candidates beside it, and the keyframes a
vision model is shown.

Why here and written once: the prompt is what the model sees of everything the run measured, so each fact it states
is taken from the records (the best candidate's code, feedback file, vision analysis, the contrast) in one place, and
saved in rounds/r<R>/prompt.json: a resumed round re-sends exactly what the first attempt sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sim_envs.task import Task
from text2reward.errors import ConfigError
from text2reward.feedback import component_stats, vision_feedback_section
from text2reward.feedback.compose import candidate_summary, round_contrast, seed_spread_section
from text2reward.generation import prompting
from text2reward.runs.ranking import best_candidate, tie_summary
from text2reward.runs.records import Candidate, FeedbackEvent, PromptContext, RoundPrompt, ShownAnalysis, TrainingResult, read, write
from text2reward.runs.store import RunStore


@dataclass(frozen=True)
class KeypointSection:
    """What round 0's prompt shows of the keypoints (a `code+keypoints` source): their summary, program and file."""

    summary: str
    code: str
    file: str
    """The keypoints file, relative to the run folder."""


class RoundPrompts:
    """The prompts of one run's rounds."""

    def __init__(self, store: RunStore, task: Task, reward_mode: str, few_shot: int, vision: bool):
        self.store, self.task, self.reward_mode, self.few_shot, self.vision = store, task, reward_mode, few_shot, vision

    def prompt(self, round_index: int, keypoints: KeypointSection | None = None, from_keypoints: bool = False) -> RoundPrompt:
        """Round `round_index`'s prompt: the saved one, else assembled and saved. `from_keypoints`: the round's candidate
        is the keypoint program (the prompt is kept as the record of what a model would have been asked)."""
        path = self.store.paths.round_prompt(round_index)
        saved = self.store.read_json(path)
        if saved is not None:
            return read(RoundPrompt, saved, str(path))
        best = best_candidate(self.store.candidates())
        human = [e for e in self.store.events() if e.for_round == round_index]
        if human:
            messages, context = self.human_prompt(human[-1])
            context.feedback_event = human[-1].id
        elif best is None:
            messages, context = self.first_prompt(keypoints)
        else:
            messages, context = self.feedback_prompt(round_index, best)
        shown = self.shown_candidate(human[-1] if human else None, best)
        if self.vision and shown is not None and shown.keyframes:
            # a vision-capable model sees what the robot did (the backend attaches these to the prompt)
            context.images = [str(self.store.root / k) for k in shown.keyframes]
        context.round, context.reward_mode = round_index, self.reward_mode  # the rule-based backend reads the mode too
        context.written_from_keypoints = from_keypoints
        prompt = RoundPrompt(messages=messages, context=context)
        self.store.write_json(path, write(prompt))
        return prompt

    def first_prompt(self, keypoints: KeypointSection | None) -> tuple[list[dict[str, Any]], PromptContext]:
        messages = prompting.build_initial_messages(self.task, few_shot=self.few_shot, reward_mode=self.reward_mode)
        context = PromptContext()
        if keypoints is not None:
            messages = prompting.with_keypoint_section(messages, keypoints.summary, keypoints.code)
            context.keypoints = keypoints.file
        return messages, context

    def feedback_prompt(self, round_index: int, best: Candidate) -> tuple[list[dict[str, Any]], PromptContext]:
        """Feedback on the best so far: its code, its feedback file (and a vision model's reading, labelled as one),
        and the previous round's other candidates beside it."""
        code = self.code(best)
        feedback = self.store.read_text(best.feedback_file) if best.feedback_file else ""
        seeds = seed_spread_section(best)
        if seeds:
            feedback = (seeds + "\n\n" + feedback).strip()
        analysis = best.vision_analysis
        if analysis is not None:
            answer = self.store.read_text(analysis.file)
            feedback = (feedback.rstrip() + "\n\n" + vision_feedback_section(answer, analysis.model)).strip()
        contrast = self.contrast(round_index - 1, best)
        messages = prompting.build_feedback_messages(self.task, code, feedback, self.reward_mode, contrast_text=contrast)
        context = PromptContext(previous_best_code=code, component_stats=component_stats(best.training_result or TrainingResult()),
                                success_rate=best.success)
        if analysis is not None:
            context.vision_analysis = ShownAnalysis(candidate=best.id, images=list(analysis.images), model=analysis.model)
        return messages, context

    def contrast(self, round_index: int, best: Candidate) -> str:
        """The previous round's other candidates beside the best so far (feedback.compose.round_contrast)."""
        others = [c for c in self.store.candidates(round_index) if c.id != best.id]
        ties = tie_summary([best, *(c for c in others if c.has_training)])
        return round_contrast(candidate_summary(best, self.code(best)), [candidate_summary(c, self.code(c) or None) for c in others],
                              ties.get("tied", []), ties.get("tie_break", ""))

    def human_prompt(self, event: FeedbackEvent) -> tuple[list[dict[str, Any]], PromptContext]:
        """A person's critique of one candidate, or their choice of a best and a worst."""
        if event.type == "preference":
            best, worst = self.event_candidate(event, event.best), self.event_candidate(event, event.worst)
            best_code = self.code(best)
            messages = prompting.build_preference_messages(self.task, best_code, self.code(worst), best.behaviour_text,
                                                           worst.behaviour_text, event.text, self.reward_mode)
            return messages, PromptContext(previous_best_code=best_code, critique=event.text)
        candidate = self.event_candidate(event, event.candidate)
        code = self.code(candidate)
        messages = prompting.build_human_feedback_messages(self.task, code, candidate.behaviour_text, event.text, self.reward_mode)
        return messages, PromptContext(previous_best_code=code, critique=event.text)

    def event_candidate(self, event: FeedbackEvent, candidate_id: str | None) -> Candidate:
        candidate = self.store.candidate(candidate_id)
        if candidate is None:
            raise ConfigError(f"human feedback {event.id} names candidate {candidate_id!r}, which run "
                              f"{self.store.run_id} does not have; fix or remove it in events.json")
        return candidate

    def shown_candidate(self, event: FeedbackEvent | None, best: Candidate | None) -> Candidate | None:
        """The candidate whose rollout the next prompt talks about."""
        if event is None:
            return best
        return self.store.candidate(event.shown)

    def code(self, candidate: Candidate) -> str:
        if candidate.code_file is None:
            return ""
        return self.store.read_text(candidate.code_file)
