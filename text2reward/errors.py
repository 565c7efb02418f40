"""Re-export of the project's exception hierarchy (defined in the lowest layer, `sim_envs`)."""

from sim_envs.errors import (
    ConfigError,
    DuplicateChoice,
    RewardProgramError,
    TaskFileError,
    Text2RewardError,
    UnknownTaskError,
)

__all__ = ["ConfigError", "DuplicateChoice", "RewardProgramError", "TaskFileError", "Text2RewardError", "UnknownTaskError"]
