"""The one exception hierarchy of the project.

It lives in the lowest layer so that `sim_envs`, `policies` and `text2reward` can all raise it
without importing upwards. Every message names the problem *and* the fix: the CLI prints it as
one red line.
"""


class Text2RewardError(Exception):
    """Base of every error a user can cause and fix."""


class UnknownTaskError(Text2RewardError):
    """A task id that is not registered."""


class TaskFileError(Text2RewardError):
    """A user task file that cannot be loaded."""


class RewardProgramError(Text2RewardError):
    """Reward code that does not meet the `compute_dense_reward` contract."""


class ConfigError(Text2RewardError):
    """A bad option, budget or configuration value."""
