"""The offline `heuristic` backend: a rule-based composer of staged dense rewards (no language model).

Why it exists: the toolkit must run end to end with no model and no network, and a loop needs a
baseline that any model's rewards should beat. It reads the task's text (description, view notes,
success test) and its state view's fields, picks a plan by fixed rules (reach, pick-and-place, push,
operate an articulated part, tool use, forward locomotion, flips, leg raise, lie down, or a
documented fallback), and writes a program of bounded, gated terms. Every program says in its first
line that rules, not a model, composed it; replies carry `rule_based=True`.

The rules live beside it: heuristic_plans.py (task text and view -> a plan), heuristic_rules.py
(feedback -> the next constants), primitives.py (the terms a plan is made of). This module draws the
samples and is the backend.

Samples of one round differ in weights, kernel scales and kernel shape, drawn by an RNG seeded with
(seed, task id, round, sample index), so reruns are reproducible. Feedback (component statistics,
success rate, a human critique) changes the next round's constants by deterministic rules, and each
rule that fired is written into the program as a comment.
"""

from __future__ import annotations

import math
import time
import zlib
from typing import TYPE_CHECKING, Any

import sim_envs
from policies.reward_modes import DEFAULT_REWARD_MODE, reward_mode
from text2reward.generation.llm import primitives as P
from text2reward.generation.llm.base import GenerationRequest, Reply
from text2reward.generation.llm.heuristic_plans import HEADER, build_plan, header_for, one_line
from text2reward.generation.llm.heuristic_rules import apply_feedback, parse_constants
from text2reward.generation.llm.spec import BackendSettings, BackendSpec
from text2reward.runs.records import PromptContext

if TYPE_CHECKING:
    import numpy as np

    from sim_envs.task import Task

__all__ = ["HEADER", "HeuristicBackend", "compose", "parse_constants"]

NAME = "heuristic"
MODEL = "rule-based-v1"
BASE_SIGMA = 0.3
"""Log-normal spread of a sample's constants around the base, at temperature 1."""


def sample_rng(seed: int, task_id: str, round_index: int, sample_index: int, attempt: int = 0) -> np.random.Generator:
    """Reproducible across processes: a stable hash of the task id, never Python's salted `hash`."""
    import numpy as np  # the backend's samples need it, the registry of backends that `t2r --help` lists does not

    words = [seed & 0xFFFFFFFF, zlib.crc32(task_id.encode()), round_index & 0xFFFFFFFF, sample_index & 0xFFFFFFFF, attempt]
    return np.random.default_rng(words)


def jitter(plan: P.Plan, rng: np.random.Generator, sigma: float) -> None:
    for param in plan.params.values():
        if param.jitter:
            param.value = float(param.value * math.exp(rng.normal(0.0, sigma)))


def compose(task: Task, seed: int, round_index: int, index: int, n: int, temperature: float, context: PromptContext, attempt: int = 0) -> tuple[str, P.Plan]:
    """One program: nominal plan -> feedback rules -> (samples after the first) jitter -> text."""
    plan = build_plan(task)
    kernel = ["tanh"]
    fb = apply_feedback(plan, task, context, kernel)
    sigma = BASE_SIGMA * min(max(float(temperature), 0.1), 2.0) * fb.sigma_factor
    if index == 0 and attempt == 0:
        sample_line = f"Sample 1 of {n} (round {round_index}): the base constants, undisturbed."
    else:
        rng = sample_rng(seed, task.id, round_index, index, attempt)
        if rng.random() < 0.5:
            kernel[0] = "exp" if kernel[0] == "tanh" else "tanh"
        jitter(plan, rng, sigma)
        shape = f" and the '{kernel[0]}' kernel" if plan.uses("closeness") else ""
        sample_line = (
            f"Sample {index + 1} of {n} (round {round_index}, seed {seed}): constants drawn around the base "
            f"(log-normal spread {sigma:.2f}){shape}, by an RNG seeded with (seed, task id, round, sample index)."
        )
    header = [
        header_for(task.id),
        f"Rule-based program (backend '{NAME}', model '{MODEL}'): written by fixed rules, not by a language model.",
        f'Task: "{one_line(task.description)}"',
        f"Plan: {plan.archetype}, because {plan.reason}.",
        "Stages: " + " -> ".join(plan.stages) + ".",
        *(["Gated terms pay only once the stage before them holds (see each term's condition)."] if plan.gated else []),
        "Every raw term is bounded (in [0, 1]; velocities clipped) before its weight, so the scales stay comparable.",
        *[one_line(note, 200) for note in plan.notes],
        sample_line,
    ]
    if fb.rules:
        header.append("Feedback rules that fired:")
        header += ["- " + one_line(rule, 200) for rule in fb.rules]
    return P.render_program(plan, header, kernel[0], reward_mode(context.reward_mode or DEFAULT_REWARD_MODE)), plan


def reply_text(task: Task, plan: P.Plan, program: str, index: int, n: int, mode: str = "dense") -> str:
    return (
        f"Rule-based {reward_mode(mode).noun} from text2reward's heuristic backend (no language model was used), sample {index + 1} of {n}.\n"
        f"Plan for {task.id}: {plan.archetype} ({plan.reason}).\n\n"
        f"```python\n{program}```\n"
    )


class HeuristicBackend:
    """The `Backend` that composes rewards by rules; its replies say so (`rule_based=True`)."""

    name = NAME
    model = MODEL
    rule_based = True

    def __init__(self, seed: int = 0):
        self.seed = int(seed)

    def cache_params(self) -> dict[str, Any]:
        """The seed draws every sample after the first: a cached reply of another seed is another reply."""
        return {"seed": self.seed}

    def generate(self, request: GenerationRequest) -> list[Reply]:
        task = sim_envs.get_task(request.task_id)
        seed = self.seed if request.seed is None else request.seed
        context = request.context
        replies: list[Reply] = []
        seen: set[str] = set()
        total = request.first_sample + max(int(request.n), 0)
        for index in range(request.first_sample, total):
            start = time.perf_counter()
            program, plan = compose(task, seed, request.round, index, total, request.temperature, context)
            attempt = 0
            while program in seen and attempt < 20:  # identical draws are vanishingly rare; never hand back duplicates
                attempt += 1
                program, plan = compose(task, seed, request.round, index, total, request.temperature, context, attempt)
            seen.add(program)
            replies.append(
                Reply(
                    text=reply_text(task, plan, program, index, total, context.reward_mode or DEFAULT_REWARD_MODE),
                    backend=NAME,
                    model=MODEL,
                    latency_seconds=time.perf_counter() - start,
                    rule_based=True,
                )
            )
        return replies


# --- the backend's spec (generation.llm.spec) ---


def _check(settings: BackendSettings, task: Task | None) -> None:
    if task is not None:
        build_plan(task)  # a task the rules cannot plan for is refused now, not after a round of nothing


SPEC = BackendSpec(
    name=NAME, summary="(rule-based, no model)", build=lambda settings: HeuristicBackend(seed=settings.seed), check=_check,
    rule_based=True,
)
