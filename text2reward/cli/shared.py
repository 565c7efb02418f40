"""What every command group shares: the Typer app, consoles, the error wrapper, common options.

User mistakes become one red line and exit code 1, never a traceback.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from text2reward.cli.help_format import PlainHelpGroup
from text2reward.errors import ConfigError, Text2RewardError

app = typer.Typer(cls=PlainHelpGroup, no_args_is_help=True, add_completion=False, help="Language-model-written dense rewards for MuJoCo robot tasks.")
console = Console()
err_console = Console(stderr=True)

TaskFileOption = Annotated[Optional[Path], typer.Option("--task-file", help="Python file defining extra tasks (see README)")]


def friendly(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn project errors into one red line and a non-zero exit."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except Text2RewardError as exc:
            err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None

    return wrapper


def load_extra_tasks(task_file: Path | None) -> None:
    if task_file is not None:
        from sim_envs import load_task_file

        for task in load_task_file(task_file):
            err_console.print(f"loaded task {task.id} from {task_file}")


RunsDirOption = Annotated[Path, typer.Option("--runs-dir", help="where runs live (with index.sqlite)")]
DEFAULT_RUNS_DIR = Path("runs")

HyperparamOption = Annotated[Optional[list[str]], typer.Option("--hp", help="hyper-parameter override KEY=VALUE (YAML value), repeatable")]
RewardModeOption = Annotated[str, typer.Option(
    "--reward-mode", help="dense (the program is the reward), potential (compute_potential shapes the sparse success reward) "
    "or progress (compute_progress, with a count bonus)")]
ExecutorOption = Annotated[str, typer.Option("--executor", help="where candidates train: local (worker processes here) or ray (a Ray cluster; pip install -e '.\\[ray]')")]
RayAddressOption = Annotated[Optional[str], typer.Option("--ray-address", envvar="RAY_ADDRESS", metavar="ADDR",
                                                         help="with --executor ray: the cluster to join (host:port of its head); "
                                                              "unset: a local Ray on 127.0.0.1 for the run")]


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    import yaml

    overrides: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--hp {item!r} is not KEY=VALUE; e.g. --hp batch_size=64")
        overrides[key.strip()] = yaml.safe_load(value)
    return overrides


def say(message: str) -> None:
    """A progress line, never wrapped mid-word (logs and scripts read it whole)."""
    console.print(message, highlight=False, markup=False, soft_wrap=True)


def progress_bars() -> Any:
    from text2reward.training.progress import TrainingBars

    return TrainingBars(console)


def print_run_outcome(store: Any) -> None:
    """The run's outcome; exit code 1 when nothing trained, so scripts never mistake it for success."""
    state = store.state()
    status = state.get("status")
    if status == "waiting_for_replies":
        prompt = store.root / str(state.get("pending_prompt"))
        console.print(f"run {store.run_id}: waiting for {state.get('replies_needed', 1)} reply(ies) to the prompt in {prompt}",
                      highlight=False, soft_wrap=True)
        console.print(f"paste it into a chat window (or `t2r prompt --run {store.run_id} --runs-dir {store.runs_dir}`), save "
                      f"each reply to a file, then `t2r resume {store.run_id} --runs-dir {store.runs_dir} --reply-file REPLY.md`",
                      highlight=False, soft_wrap=True)
        return
    if status == "no_result":
        err_console.print(f"[red]error:[/red] run {store.run_id} ended with no result: {escape(str(state.get('reason')))}",
                          highlight=False, soft_wrap=True)
        console.print(f"outputs in {store.root}", highlight=False)
        raise typer.Exit(1)
    console.print(f"run {store.run_id}: {status} - best success {state.get('best_success')}", highlight=False, soft_wrap=True)
    console.print(f"outputs in {store.root} (report: {store.root / state.get('report', 'report.md')})", highlight=False, soft_wrap=True)

