"""One process works on a run at a time: `runs/<id>/run.lock` holds the owner's pid, host and a heartbeat.

Why: `t2r resume` in a terminal and a round started from the dashboard would otherwise train the same
candidates twice and overwrite each other's files. Why a heartbeat beside the pid: a pid can be reused
after a crash, and a process on another machine sharing the folder cannot be probed; a lock whose owner
is dead, or whose heartbeat stopped, is stale and is taken over with a message.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from sim_envs.codec import RecordError, read, write
from sim_envs.errors import ConfigError

LOCK_FILE = "run.lock"
HEARTBEAT_SECONDS = 5.0
STALE_AFTER_SECONDS = 60.0
"""A heartbeat older than this means the owner is gone (it beats every few seconds while it lives)."""


@dataclass(frozen=True)
class LockHolder:
    """run.lock: who holds the run, since when, and their last heartbeat (epoch seconds)."""

    pid: int = -1
    host: str = "?"
    heartbeat: float = 0.0
    started: float | None = None


GARBLED = LockHolder()
"""What a lock that does not read stands for: an owner that cannot be alive (pid -1, no heartbeat), so it is stale."""


class RunLock:
    """Held while a process runs a round of a run; `with RunLock(root, say=print): ...`."""

    def __init__(self, root: Path, say: Callable[[str], None] | None = None,
                 heartbeat_seconds: float = HEARTBEAT_SECONDS, stale_after: float = STALE_AFTER_SECONDS) -> None:
        self.path = Path(root) / LOCK_FILE
        self.say = say or (lambda message: None)
        self.heartbeat_seconds = heartbeat_seconds
        self.stale_after = stale_after
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._record = GARBLED

    # --- acquire / release -------------------------------------------------------------------
    def acquire(self) -> None:
        self._record = LockHolder(pid=os.getpid(), host=socket.gethostname(), started=time.time())
        for _ in range(3):  # a competitor may remove a stale lock between our read and our create
            if self._create():
                break
            holder = read_lock(self.path)
            reason = stale_reason(holder, self.stale_after)
            if reason is None:
                assert holder is not None
                raise ConfigError(
                    f"run {self.path.parent.name} is being worked on by process {holder.pid} on {holder.host} "
                    f"(heartbeat {time.time() - holder.heartbeat:.0f} s ago); wait for it to finish or stop it"
                )
            self.say(f"taking over the lock of run {self.path.parent.name}: {reason}")
            self.path.unlink(missing_ok=True)
        else:
            raise ConfigError(f"could not take the lock {self.path}: another process keeps taking it; try again")
        self._thread = threading.Thread(target=self._beat, name="run-lock-heartbeat", daemon=True)
        self._thread.start()

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        holder = read_lock(self.path)
        if holder is not None and holder.pid == os.getpid() and holder.host == socket.gethostname():
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # --- internals ---------------------------------------------------------------------------
    def _create(self) -> bool:
        """Atomic create-if-absent: O_EXCL decides between two processes racing for the same run."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as handle:
            json.dump(self._beating(), handle)
        return True

    def _beating(self) -> dict[str, object]:
        return write(replace(self._record, heartbeat=time.time()))

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_seconds):
            tmp = self.path.with_name(f".{LOCK_FILE}.{os.getpid()}.tmp")
            try:
                tmp.write_text(json.dumps(self._beating()))
                os.replace(tmp, self.path)
            except OSError:
                pass  # the run folder went away: nothing to protect


def held_by_a_live_process(root: Path) -> bool:
    """Whether some process is working on the run in `root` now: its lock exists and is not stale."""
    holder = read_lock(Path(root) / LOCK_FILE)
    return holder is not None and stale_reason(holder) is None


def read_lock(path: Path) -> LockHolder | None:
    """The lock's record, or None when there is no lock; a garbled lock reads as one with no live owner."""
    try:
        return read(LockHolder, json.loads(Path(path).read_text()), str(path))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecordError):
        return GARBLED


def unrecorded_seconds(root: Path) -> float:
    """The seconds the lock's holder has worked that its state.json does not hold yet: from the lock's start to now while
    it lives, to its last heartbeat when it was killed (a process killed outright records nothing on its way out)."""
    holder = read_lock(Path(root) / LOCK_FILE)
    if holder is None or holder.started is None:
        return 0.0
    end = time.time() if stale_reason(holder) is None else holder.heartbeat
    return max(end - holder.started, 0.0)


def stale_reason(holder: LockHolder | None, stale_after: float = STALE_AFTER_SECONDS) -> str | None:
    """Why a lock no longer protects anything (None: its owner is alive and beating)."""
    if holder is None:
        return "the lock vanished"
    age = time.time() - holder.heartbeat
    if holder.host == socket.gethostname() and not _alive(holder.pid):
        return f"its process {holder.pid} is no longer running"
    if age > stale_after:
        return f"its heartbeat stopped {age:.0f} s ago (process {holder.pid} on {holder.host})"
    return None


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True
