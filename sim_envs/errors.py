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

    numbers = ""
    """The sandbox's account of a stopped call (CPU, blocked, wall and waiting times), for people; never for the model."""

    cause = "reward"
    """Whose doing the failure was: "reward" (its code), or "machine" for `RewardStoppedByMachine`."""


class RewardStoppedByMachine(RewardProgramError):
    """The reward's process was stopped by something other than its own code (starved or stopped past the wall
    backstop, killed from outside): training with it may be retried, and the model is never told it erred."""

    cause = "machine"


class ConfigError(Text2RewardError):
    """A bad option, budget or configuration value."""


class DuplicateChoice(ConfigError):
    """A pluggable choice (a backend, an executor, a reward mode...) registered under a name that is taken."""
