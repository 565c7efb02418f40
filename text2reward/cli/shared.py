"""What every command group shares: the Typer app, consoles, the error wrapper, common options.

User mistakes become one red line and exit code 1, never a traceback. Whatever the consoles print passes through
`InertText`: a control character or a bidirectional override that a reply or a reward put in a line is shown as its
escape (`\x1b`, `\u202e`), never sent to the terminal raw.
"""

from __future__ import annotations

import errno
import functools
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

import typer
from rich import box
from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderHook
from rich.markup import escape
from rich.segment import Segment
from rich.table import Table

import sim_envs
from policies.formatting import format_success
from policies.reward_modes import mode_help
from text2reward.cli.help_format import PlainHelpGroup
from text2reward.errors import ConfigError, RunInterrupted, Text2RewardError
from text2reward.inert import visible
from text2reward.runs.run_events import RunEvent
from text2reward.runs.statuses import RunStatus
from text2reward.runs.store import RunStore
from text2reward.settings import parse_hyperparams

if TYPE_CHECKING:
    from text2reward.api import SearchResult

class _InertRenderable:
    """A renderable whose text segments have their unsafe characters spelled out; our own control segments (cursor
    moves, e.g. of the progress bars) pass as they are."""

    def __init__(self, renderable: ConsoleRenderable):
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        for segment in console.render(self.renderable, options):
            yield segment if segment.control else Segment(visible(segment.text), segment.style)


class InertText(RenderHook):
    """Every console's last word on what it prints: text from a model or a reward is shown, never obeyed."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_InertRenderable(renderable) for renderable in renderables]


def inert_console(**settings: Any) -> Console:
    console = Console(**settings)
    console.push_render_hook(InertText())
    return console


app = typer.Typer(cls=PlainHelpGroup, no_args_is_help=True, add_completion=False, help="Language-model-written dense rewards for MuJoCo robot tasks.")
console = inert_console(soft_wrap=True)
"""Lines are never folded at the terminal's width (a path or an id copied from a log or a pipe stays whole); tables
still fit it (`fitted_table`)."""
err_console = inert_console(stderr=True, soft_wrap=True)

TaskFileOption = Annotated[Optional[Path], typer.Option("--task-file", help="Python file defining extra tasks (see README)")]


UNWRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR})
"""An OS error that means the place a command writes to cannot take it: the person's to fix, never a traceback."""


INTERRUPTED_EXIT = 130
"""What a shell reports for a command Ctrl-C stopped (128 + SIGINT)."""


ECHO_SECONDS = 1.0
"""A signal this soon after the first is the same request arriving twice (a `timeout` or a process manager signals the
process and then its group): ignored, so the run's record of the interruption is written whole. A later one interrupts."""


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM (a `kill`, a scheduler's stop) ends the command as Ctrl-C does: the run is recorded as interrupted and
    the resume command printed, instead of the process vanishing mid-write."""
    first: list[float] = []

    def interrupt(number: int, frame: object) -> None:
        if first and time.monotonic() - first[0] < ECHO_SECONDS:
            return
        first.append(time.monotonic())
        raise KeyboardInterrupt

    previous = {number: signal.signal(number, interrupt) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def friendly(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn project errors into one red line and a non-zero exit."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except Text2RewardError as exc:
            err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None
        except RunInterrupted as exc:
            err_console.print(f"interrupted; resume with `t2r resume {exc.run_id} --runs-dir {exc.runs_dir}`", highlight=False,
                              markup=False, soft_wrap=True)
            raise typer.Exit(INTERRUPTED_EXIT) from None
        except KeyboardInterrupt:
            err_console.print("interrupted", highlight=False)
            raise typer.Exit(INTERRUPTED_EXIT) from None
        except OSError as exc:
            if exc.errno not in UNWRITABLE or exc.filename is None:
                raise
            err_console.print(f"[red]error:[/red] cannot write {escape(str(exc.filename))} ({escape(exc.strerror or '')}); choose a "
                              "place you can write to (--out, --runs-dir)", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None

    return wrapper


def load_extra_tasks(task_file: Path | None) -> None:
    if task_file is not None:
        for task in sim_envs.load_task_file(task_file):
            err_console.print(f"loaded task {task.id} from {task_file}")


RunsDirOption = Annotated[Path, typer.Option("--runs-dir", help="where runs live (with index.sqlite)")]
DEFAULT_RUNS_DIR = Path("runs")

RewardModeOption = Annotated[str, typer.Option("--reward-mode", help=mode_help())]


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """`--hp KEY=VALUE` options as a mapping (the run settings' own parser: one way to read them everywhere)."""
    return parse_hyperparams(items)


def read_source_file(path: Path, what: str, expected: str) -> str:
    """A text file a person names (a reward, a task file...); a missing or binary one is one line naming it and the fix."""
    if not path.is_file():
        raise ConfigError(f"{what} {path} does not exist; pass {expected}")
    try:
        return path.read_text()
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {path} is not text (it holds bytes no editor wrote as UTF-8); pass {expected}") from None


@dataclass(frozen=True)
class Column:
    """A table column: ids (`keep_whole`) are never cut; `optional` columns are dropped, last first, when the terminal
    is too narrow for the table; other text folds."""

    header: str
    keep_whole: bool = False
    optional: bool = False
    justify: Literal["left", "right"] = "left"


READABLE_WIDTH = 12
"""The narrowest a folding column gets before an optional column is dropped instead."""
COLUMN_GAP = 3
"""What a column adds to its text's width in the table's layout (its padding and the space between columns)."""


def fitted_table(columns: list[Column], rows: list[list[str]], title: str | None = None, width: int | None = None) -> Table:
    """A table that fits the terminal: optional columns dropped (from the last) until the rest fit without cutting an
    id, and any other text folded. Copy-pasting an id from it always works (`t2r runs` at 80 columns)."""
    width = width or console.width
    kept = list(range(len(columns)))

    def least(index: int) -> int:
        """An id keeps its whole width; other text may fold, but not below its header or a readable width."""
        longest = max((len(row[index]) for row in rows), default=0)
        return longest if columns[index].keep_whole else max(len(columns[index].header), min(longest, READABLE_WIDTH))

    optional = [index for index in kept if columns[index].optional]
    while optional and sum(least(i) + COLUMN_GAP for i in kept) > width:
        kept.remove(optional.pop())
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    for index in kept:
        column = columns[index]
        table.add_column(column.header, no_wrap=column.keep_whole, overflow="fold", justify=column.justify, min_width=least(index))
    for row in rows:
        table.add_row(*(row[index] for index in kept))
    return table


def say(message: str) -> None:
    """A progress line, never wrapped mid-word (logs and scripts read it whole)."""
    console.print(message, highlight=False, markup=False, soft_wrap=True)


def progress_bars() -> Any:
    from text2reward.training.progress import TrainingBars  # rich's live display (~7 ms): only the commands that train show it

    return TrainingBars(console)


def print_event(event: RunEvent) -> None:
    """The CLI's listener: each event's line, as the run says it (events with no text, e.g. evaluations, are the bars')."""
    if event.text:
        say(event.text)


def reply_file_flags(needed: int) -> str:
    """One `--reply-file` per reply a run waits for (the flag repeats; one file per sample)."""
    if needed <= 1:
        return "--reply-file REPLY.md"
    return " ".join(f"--reply-file REPLY{i}.md" for i in range(1, needed + 1)) + " (one --reply-file per reply)"


def print_run_outcome(result: SearchResult) -> None:
    """The run's outcome; exit code 1 when nothing trained, so scripts never mistake it for success."""
    store = RunStore(result.run_dir)
    state = store.state()
    if state.status == RunStatus.WAITING_FOR_REPLIES:
        prompt = store.root / str(state.pending_prompt)
        console.print(f"run {store.run_id}: waiting for {state.replies_needed or 1} reply(ies) to the prompt in {prompt}",
                      highlight=False, soft_wrap=True)
        console.print(f"paste it into a chat window (or `t2r prompt --run {store.run_id} --runs-dir {store.runs_dir}`), save "
                      f"each reply to a file, then `t2r resume {store.run_id} --runs-dir {store.runs_dir} {reply_file_flags(state.replies_needed or 1)}`",
                      highlight=False, soft_wrap=True)
        return
    if state.status == RunStatus.NO_RESULT:
        err_console.print(f"[red]error:[/red] run {store.run_id} ended with no result: {escape(str(state.reason))}",
                          highlight=False, soft_wrap=True)
        console.print(f"outputs in {store.root}", highlight=False)
        raise typer.Exit(1)
    best = format_success(result.best.success_rate, result.best.episodes) if result.best is not None else format_success(state.best_success)
    console.print(f"run {store.run_id}: {state.status.value} - best success {best}", highlight=False, soft_wrap=True)
    if state.status == RunStatus.FINISHED:
        console.print(f"more rounds: `t2r resume {store.run_id} --runs-dir {store.runs_dir} --rounds N` (N above "
                      f"{state.rounds_done})", highlight=False, soft_wrap=True, markup=False)
    console.print(f"outputs in {store.root} (report: {store.root / (state.report or 'report.md')})", highlight=False, soft_wrap=True)
