"""Re-export of the project's exception hierarchy (defined in the lowest layer, `sim_envs`)."""

from sim_envs.errors import (
    ConfigError,
    RewardProgramError,
    TaskFileError,
    Text2RewardError,
    UnknownTaskError,
)

__all__ = ["ConfigError", "RewardProgramError", "RunInterrupted", "TaskFileError", "Text2RewardError", "UnknownTaskError"]


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) stopped a run: it is recorded as interrupted, its finished work kept, and
    `t2r resume RUN_ID` goes on. Still a KeyboardInterrupt to whoever catches those."""

    def __init__(self, run_id: str, runs_dir: str):
        super().__init__(f"run {run_id} interrupted")
        self.run_id, self.runs_dir = run_id, runs_dir
