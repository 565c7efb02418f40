"""Temporary folders that a killed process cannot leave behind for good.

A process killed outright (SIGKILL, the OOM killer, a Ray worker's death) runs no `finally`, so a temporary folder it
made stays in /tmp with whatever it held (a candidate's reward code, a job's log). A folder made here carries its
maker's identity in its name (the PID namespace, the pid and the process's start time, which tells a reused pid
apart), and making one removes the folders of the same prefix whose maker is gone. Only this user's folders made in
this PID namespace are ever removed; where /proc cannot say who made a folder, nothing is.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from policies.proc_stat import stat_fields


def _start_time(pid: int | str) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of proc(5)); None when there is no such process.
    Raises OSError when /proc has the process but will not say."""
    try:
        fields = stat_fields(pid)
    except (FileNotFoundError, ProcessLookupError):
        return None
    if len(fields) <= 19:
        raise OSError(f"/proc/{pid}/stat has no start time")
    return fields[19]


def process_identity(pid: int | str = "self") -> tuple[str, str] | None:
    """(PID namespace, start time) of a live process, or None when it is gone or /proc does not say."""
    try:
        digits = re.sub(r"\D", "", os.readlink(f"/proc/{pid}/ns/pid"))
        start = _start_time(pid)
    except OSError:
        return None
    return (digits, start) if digits and start is not None else None


def _maker_gone(pid: str, start: str) -> bool:
    """Whether the process that made a folder has ended: no such pid, or the pid now names a later process. A process
    /proc will not describe (another user's, under hidepid) counts as running: nothing is removed on a guess."""
    try:
        return _start_time(pid) != start
    except OSError:
        return False


def _pattern(prefix: str) -> re.Pattern[str]:
    return re.compile(re.escape(prefix) + r"(\d+)-(\d+)-(\d+)-")


def sweep_orphans(prefix: str, parent: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove the folders named `prefix` in `parent` (the temporary folder by default) whose maker is gone; returns them."""
    return _sweep(prefix, parent, process_identity())


def _sweep(prefix: str, parent: str | os.PathLike[str] | None, mine: tuple[str, str] | None) -> list[Path]:
    if mine is None:
        return []
    base = Path(parent if parent is not None else tempfile.gettempdir())
    pattern, removed = _pattern(prefix), []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return []
    for entry in entries:
        match = pattern.match(entry.name)
        if match is None or match[1] != mine[0]:
            continue  # not ours, or made in another PID namespace, whose pids mean nothing here
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue
        if not _maker_gone(match[2], match[3]):
            continue  # its maker still runs (the namespace is ours, so the pid names a process here)
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


def scratch_folder(prefix: str, parent: str | os.PathLike[str] | None = None) -> Path:
    """A new private folder (mode 0700, as `tempfile.mkdtemp` makes it), after sweeping the orphans of `prefix`."""
    mine = process_identity()
    _sweep(prefix, parent, mine)
    tag = f"{prefix}{mine[0]}-{os.getpid()}-{mine[1]}-" if mine is not None else prefix
    return Path(tempfile.mkdtemp(prefix=tag, dir=parent))


@contextmanager
def scratch_dir(prefix: str, parent: str | os.PathLike[str] | None = None) -> Iterator[Path]:
    """`tempfile.TemporaryDirectory` for a `scratch_folder`: removed on the way out, or by a later sweep if killed."""
    folder = scratch_folder(prefix, parent)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
