"""Errors a model backend raises when retrying cannot help (bad key, unknown model, missing files).

Transient failures (429, 5xx, timeouts) never raise: they come back as `Reply.error`, so a flaky
endpoint cannot cost results that already finished.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from text2reward.errors import Text2RewardError

if TYPE_CHECKING:
    from text2reward.generation.llm.base import GenerationRequest


class BackendError(Text2RewardError):
    """A backend that cannot serve any request until the user fixes its configuration."""


class RepliesExhausted(BackendError):
    """The file backend has no reply file left for a request: a run waits here for a person's replies.

    Carries the request so the loop can write its prompt where the person will find it."""

    def __init__(self, message: str, request: GenerationRequest, needed: int) -> None:
        super().__init__(message)
        self.request = request
        self.needed = needed
