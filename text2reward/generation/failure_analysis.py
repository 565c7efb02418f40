"""`--vision-analysis`: each trained candidate that failed shows its keyframes to the vision model with "what went
wrong?"; the answer is kept beside it and joins the feedback when it is the one shown next.

Why a failing endpoint costs only the analysis: it is an opinion added to measurements the run already has; the round
never waits on it or fails by it.
"""

from __future__ import annotations

from sim_envs.task import Task
from text2reward.feedback import failure_messages
from text2reward.generation.llm.base import Backend, GenerationRequest
from text2reward.generation.llm.errors import BackendError
from text2reward.runs.records import PromptContext, VisionAnalysis
from text2reward.runs.run_events import Emit, Note
from text2reward.runs.store import RunStore


def analyse_failures(store: RunStore, task: Task, backend: Backend, round_index: int, success_threshold: float, seed: int,
                     emit: Emit) -> None:
    """Ask once per failed candidate of the round that has keyframes and no analysis yet."""
    for candidate in store.candidates(round_index):
        if not candidate.has_training or candidate.vision_analysis is not None or not candidate.keyframes:
            continue
        if candidate.success >= success_threshold or candidate.code_file is None:
            continue
        messages = failure_messages(task, store.read_text(candidate.code_file), candidate.behaviour_text, candidate.success,
                                    len(candidate.keyframes))
        images = [str(store.root / k) for k in candidate.keyframes]
        try:
            reply = backend.generate(GenerationRequest(
                messages=messages, n=1, task_id=task.id, round=round_index, temperature=0.0, seed=seed,
                context=PromptContext(images=images, vision_candidate=candidate.id)))[0]
        except BackendError as exc:
            emit(Note(f"{candidate.id}: vision analysis failed ({str(exc)[:120]}); the feedback goes on without it"))
            continue
        if reply.text is None:
            emit(Note(f"{candidate.id}: vision analysis got no answer ({reply.error}); the feedback goes on without it"))
            continue
        path = store.write_text(store.paths.vision_answer(round_index, candidate.sample), reply.text)
        candidate.vision_analysis = VisionAnalysis(file=store.relative(path), images=list(candidate.keyframes),
                                                   model=f"{reply.backend}:{reply.model}")
        store.write_candidate(candidate)
        emit(Note(f"{candidate.id}: a vision model looked at its rollout"))
