"""The `t2r` command line: Typer commands, one module per command group, that print where their outputs went.

- shared: the Typer app, consoles, the error wrapper, common options
- policy_commands: tasks, train, evaluate, video
- loop_commands: prompt, validate, run, resume, demo, doctor
- run_commands: runs, feedback, dashboard, report
- tune_commands: tune
- keypoint_commands: keypoints
"""

import warnings  # noqa: I001

# imported for their commands, in the order `t2r --help` lists them
from text2reward.cli import policy_commands  # noqa: F401, I001
from text2reward.cli import loop_commands  # noqa: F401
from text2reward.cli import run_commands  # noqa: F401
from text2reward.cli import tune_commands  # noqa: F401
from text2reward.cli import keypoint_commands  # noqa: F401
from text2reward.cli.shared import app
from text2reward.process_exit import collect_once_at_exit

__all__ = ["app", "main"]


THIRD_PARTY_NOISE = (
    r".*Constant\(s\) may be too high.*",   # MetaWorld, on every env it builds: nothing a user can act on
)


def main() -> None:
    collect_once_at_exit()
    for message in THIRD_PARTY_NOISE:
        warnings.filterwarnings("ignore", message=message)
    app()
