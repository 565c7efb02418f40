"""Errors a model backend raises when retrying cannot help (bad key, unknown model, missing files).

Transient failures (429, 5xx, timeouts) never raise: they come back as `Reply.error`, so a flaky
endpoint cannot cost results that already finished.
"""

from __future__ import annotations

from text2reward.errors import Text2RewardError


class BackendError(Text2RewardError):
    """A backend that cannot serve any request until the user fixes its configuration."""
