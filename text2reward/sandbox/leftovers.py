"""Every process that runs a candidate's code, held by a pidfd from the moment the parent finds it, so none outlives its
jail: killed with its call or candidate, and swept when the command that made it ends.

Why a pidfd: a jailed reward controls its own process (its name, its session, its parent-death signal), so the parent
names it by what it knows itself (process.find_reward_process: where in the tree it forked it), then holds it by a
descriptor the kernel ties to that one process: a signal through it can never reach another process that later got
the same pid. Nothing here reads a word the child wrote.

The sweep at exit (also `sweep()`) kills every held process still running; one that was told to end (its pipe
closed, or killed) and is still there is reported as a leftover: it outlived its jail. `t2r doctor` lists processes
of the jail's uid that no command of ours runs any more (`stray_processes`), whoever started them.
"""

from __future__ import annotations

import atexit
import os
import select
import signal
import sys
import threading
import time
from dataclasses import dataclass

from policies.proc_stat import stat_fields

NOBODY = 65534
"""The uid a root parent's jail runs as (isolation.NOBODY; repeated here so this module imports no other module of the sandbox)."""
SWEEP_GRACE_SECONDS = 2.0
"""How long the sweep waits for processes already killed to finish ending before it names them."""


class HeldProcess:
    """One process of a jail, held by a pidfd (opened by `hold`)."""

    def __init__(self, pid: int, pidfd: int):
        self.pid, self.pidfd = pid, pidfd
        self.owner = os.getpid()
        """The process that holds it: a fork of that process inherits the registry, never the duty to sweep it."""
        self.ending = False
        """Set once its jail told it to end (its pipe closed, or a SIGKILL sent): still running after that, it is a
        leftover."""

    def alive(self) -> bool:
        """True until the process has ended (a pidfd turns readable then, zombie or reaped)."""
        if self.pidfd < 0:
            return False
        try:
            return not select.select([self.pidfd], [], [], 0)[0]
        except (OSError, ValueError):
            return False

    def told_to_end(self) -> None:
        """Its jail closed its pipe: it should end by itself now."""
        self.ending = True

    def kill(self) -> None:
        """SIGKILL, through the pidfd: only ever this process."""
        self.ending = True
        if self.pidfd >= 0:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except OSError:
                pass  # ended already

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for it to end; True once it has."""
        if self.pidfd < 0:
            return True
        try:
            return bool(select.select([self.pidfd], [], [], max(timeout, 0.0))[0])
        except (OSError, ValueError):
            return True

    def release(self) -> None:
        with _LOCK:
            _HELD.discard(self)
        if self.pidfd >= 0:
            try:
                os.close(self.pidfd)
            except OSError:
                pass
            self.pidfd = -1


_HELD: set[HeldProcess] = set()
_LOCK = threading.Lock()


def hold(pid: int) -> HeldProcess:
    """A pidfd on `pid`, registered for the sweep. The caller checks afterwards that `pid` is still the process it
    found (still the child of its parent: `process.find_reward_process`). Raises OSError when it has ended."""
    _prune()
    held = HeldProcess(pid, os.pidfd_open(pid))
    with _LOCK:
        _HELD.add(held)
    return held


def _prune() -> None:
    """Close the pidfds of held processes that have ended (a run validates hundreds of candidates)."""
    with _LOCK:
        ended = [held for held in _HELD if not held.alive()]
    for held in ended:
        held.release()


@dataclass(frozen=True)
class Leftover:
    pid: int
    uid: int | None
    cpu_seconds: float | None
    name: str

    def describe(self) -> str:
        cpu = f", {self.cpu_seconds:.1f} s of CPU" if self.cpu_seconds is not None else ""
        return f"pid {self.pid} ({self.name}, uid {self.uid}{cpu})"


def sweep(grace: float = SWEEP_GRACE_SECONDS) -> list[Leftover]:
    """Kill every held process still running; return those its jail had told to end (closed its pipe or killed it)
    that are still there after `grace` seconds: they outlived their jail."""
    with _LOCK:
        held = [process for process in _HELD if process.owner == os.getpid()]
    running = [process for process in held if process.alive()]
    told = [process for process in running if process.ending]
    for process in running:
        if not process.ending:
            process.kill()  # still in use as its command ends (an open training worker): its jail ends now
    deadline = time.monotonic() + grace
    leftovers = []
    for process in told:
        if not process.wait(deadline - time.monotonic()):
            leftovers.append(_describe(process.pid))
            process.kill()
    for process in running:
        process.wait(deadline - time.monotonic())
    for process in held:
        process.release()
    return leftovers


def _sweep_at_exit() -> None:
    leftovers = sweep()
    if leftovers:
        try:
            sys.stderr.write(f"warning: {len(leftovers)} process(es) of a reward's jail outlived it and were killed: "
                             f"{'; '.join(left.describe() for left in leftovers)}\n")
        except (OSError, ValueError):
            pass


atexit.register(_sweep_at_exit)


def _describe(pid: int) -> Leftover:
    status = _status(pid)
    uid = int(status["Uid"].split()[0]) if "Uid" in status else None
    return Leftover(pid, uid, _cpu_seconds(pid), _printable(status.get("Name", "?")))


def _status(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/status") as handle:
            return dict(line.rstrip("\n").partition(":\t")[::2] for line in handle if ":\t" in line)
    except OSError:
        return {}


def _cpu_seconds(pid: int) -> float | None:
    try:
        fields = stat_fields(pid)
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _printable(name: str) -> str:
    """A process's name is the child's word: shown, never interpreted (no control characters, bounded)."""
    return "".join(c if c.isprintable() else "?" for c in name)[:32]


@dataclass(frozen=True)
class Stray:
    """A process of the jail's uid; `left_over` when no command of ours runs it (its first ancestor of another uid is
    the machine's init: the command that made its jail has ended)."""

    pid: int
    parent: int
    name: str
    cpu_seconds: float | None
    left_over: bool


def stray_processes(uid: int = NOBODY) -> list[Stray]:
    """Every process of `uid` on this machine, read from /proc (running jails of other commands included, marked as
    not left over)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        status = _status(int(entry))
        if not status.get("Uid", "").split()[:1] == [str(uid)]:
            continue
        parent = int(status.get("PPid", "0") or 0)
        found.append(Stray(int(entry), parent, _printable(status.get("Name", "?")), _cpu_seconds(int(entry)),
                           _runs_under_init(parent, uid)))
    return sorted(found, key=lambda stray: stray.pid)


def _runs_under_init(parent: int, uid: int) -> bool:
    """Whether the first ancestor not of `uid` is the machine's init (pid 1) or none: no command above it any more."""
    for _ in range(64):
        if parent <= 1:
            return True
        status = _status(parent)
        if not status:
            return True
        if status.get("Uid", "").split()[:1] != [str(uid)]:
            return False
        parent = int(status.get("PPid", "0") or 0)
    return False
