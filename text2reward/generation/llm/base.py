"""The backend contract: a request (chat messages + task context) in, K replies out.

Why a context beside the messages: the rule-based `heuristic` backend composes rewards from the
task and its view, not from prose, and must never pretend to be a model; model backends read only its images.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from text2reward.runs.records import PromptContext

ChatMessage = dict[str, Any]
"""One OpenAI chat message: {"role": "system"|"user"|"assistant", "content": str | list[content parts]}."""


@dataclass
class GenerationRequest:
    messages: list[ChatMessage]
    n: int
    task_id: str
    round: int = 0
    temperature: float = 1.0
    max_tokens: int | None = None
    seed: int | None = None
    """The run's sampling seed: part of the reply cache key (a new seed means new samples) and sent to
    servers that take one (sample i of a fanned-out request gets seed + i, so the K replies differ)."""
    first_sample: int = 0
    """The place of this request's first sample among the round's samples: a cache that holds samples
    0..m-1 asks for the rest with first_sample=m, so their seeds and draws are those of samples m..K-1."""
    context: PromptContext = field(default_factory=PromptContext)
    """Structured facts for rule-based backends (previous_best_code, component_stats, critique...) and the images a
    vision model is shown."""


@dataclass
class Reply:
    text: str | None
    backend: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_seconds: float = 0.0
    cached: bool = False
    rule_based: bool = False
    error: str | None = None
    """Set when no text came back (a failed request after retries): recorded, never retried forever."""


class Backend(Protocol):
    name: str
    model: str
    rule_based: bool

    def generate(self, request: GenerationRequest) -> list[Reply]:
        """Exactly `request.n` replies (failed ones carry `error`)."""
        ...
