"""Re-export of the project's exception hierarchy (defined in the lowest layer, `sim_envs`)."""

from sim_envs.errors import (
    ConfigError,
    DuplicateChoice,
    RewardProgramError,
    TaskFileError,
    Text2RewardError,
    UnknownTaskError,
)

__all__ = ["ConfigError", "DuplicateChoice", "RewardProgramError", "RunInterrupted", "SettingTypeError", "SettingValueError", "TaskFileError",
           "Text2RewardError", "UnknownTaskError"]


class SettingTypeError(ConfigError, TypeError):
    """A Python caller gave a setting of the wrong type (`steps="abc"`): a TypeError in Python's terms, and still a
    ConfigError to whoever catches the project's errors."""


class SettingValueError(ConfigError, ValueError):
    """A Python caller gave a setting an impossible value (`rounds=0`): a ValueError naming the parameter."""


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) stopped a run: it is recorded as interrupted, its finished work kept, and
    `t2r resume RUN_ID` goes on. Still a KeyboardInterrupt to whoever catches those."""

    def __init__(self, run_id: str, runs_dir: str):
        super().__init__(f"run {run_id} interrupted")
        self.run_id, self.runs_dir = run_id, runs_dir
