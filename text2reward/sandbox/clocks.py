"""How one reward call spent its time, by the kernel's clocks of the worker, read by the parent.

Why: a call's wall clock mixes what the reward did (compute, sleep, block) with what the machine did to
it (kept waiting for a CPU behind other work, stopped). The kernel keeps these apart for every task:
/proc/PID/schedstat holds the time it ran on a CPU and the time it was runnable but waiting for one;
/proc/PID/stat says whether it is stopped right now (SIGSTOP, a debugger, a frozen cgroup). What is left
of a call's wall clock was spent blocked: a sleep, a wait. So a reward is stopped for the CPU it used or
the time it blocked, both its own doing, and the wall clock is only a backstop far beyond any load.

The parent reads these files itself (never the child's word), and judges a call on numbers read at the
moment it decides. The worker is single-threaded (RLIMIT_NPROC 0 and seccomp forbid threads), so its main
thread's clocks are the whole process's.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import NamedTuple


class Reading(NamedTuple):
    """One task's scheduler clocks at one moment, in seconds (a tuple: read four times per env step)."""

    cpu: float
    """On a CPU (user and system)."""
    waited: float
    """Runnable, waiting on a run queue for a CPU: the machine's load, never the task's doing."""


class KernelClock:
    """The scheduler clocks and run state of one task, read with `pread` on files kept open (~1 us a read)."""

    def __init__(self, schedstat_path: str, stat_path: str | None = None):
        self._schedstat = os.open(schedstat_path, os.O_RDONLY | os.O_CLOEXEC)
        self._stat = os.open(stat_path, os.O_RDONLY | os.O_CLOEXEC) if stat_path else None

    @classmethod
    def of_process(cls, pid: int) -> KernelClock:
        return cls(f"/proc/{pid}/schedstat", f"/proc/{pid}/stat")

    def read(self) -> Reading | None:
        """Now; None once the task is gone or /proc cannot say."""
        try:
            cpu, waited, _ = os.pread(self._schedstat, 128, 0).split()
            return Reading(int(cpu) * 1e-9, int(waited) * 1e-9)
        except (OSError, ValueError):
            return None

    def state(self) -> bytes:
        """The task's run state now: b"R" (running or runnable), b"S" or b"D" (sleeping), b"T" or b"t" (stopped),
        b"" where /proc cannot say."""
        if self._stat is None:
            return b""
        try:
            text = os.pread(self._stat, 512, 0)
        except OSError:
            return b""
        return text[text.rfind(b")") + 2:][:1]  # the name in parentheses may hold spaces and ')'

    def stopped(self) -> bool:
        """True while the task is stopped (state T) or stopped by a tracer (t): frozen from outside."""
        return self.state() in (b"T", b"t")

    def close(self) -> None:
        for fd in (self._schedstat, self._stat):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._stat = None


_OWN = threading.local()


def own_clock() -> KernelClock | None:
    """The calling thread's own clocks (the parent's waits for a CPU while a call was in flight)."""
    clock = getattr(_OWN, "clock", None)
    if clock is None:
        try:
            clock = KernelClock(f"/proc/self/task/{threading.get_native_id()}/schedstat")
        except OSError:
            return None
        _OWN.clock = clock
    return clock


@dataclass(slots=True)
class CallTimes:
    """Where one call's wall clock went, in seconds: the reward's own time is `cpu + blocked`."""

    wall: float
    cpu: float
    waited: float
    """The worker's wait for a CPU, plus the parent's own while the call was in flight (the parent may be what
    kept the reply from being read); counted for the machine, never against the reward."""
    stopped: float = 0.0

    @property
    def blocked(self) -> float:
        """Neither on a CPU, nor waiting for one, nor stopped: sleeping or waiting, the reward's own doing."""
        return max(self.wall - self.cpu - self.waited - self.stopped, 0.0)

    @property
    def own(self) -> float:
        return self.cpu + self.blocked

    def numbers(self) -> str:
        """All four, for people and the run folder ("CPU 61 ms, blocked 0 ms, wall 1,204 ms, ...")."""
        text = f"CPU {_ms(self.cpu)}, blocked {_ms(self.blocked)}, wall {_ms(self.wall)}, waiting for a CPU {_ms(self.waited)}"
        return text + (f", stopped {_ms(self.stopped)}" if self.stopped else "")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


def between(before: Reading, after: Reading, wall: float, parent_waited: float = 0.0, stopped: float = 0.0) -> CallTimes:
    """A finished call's times from the worker's readings at its two ends."""
    return CallTimes(wall=wall, cpu=max(after.cpu - before.cpu, 0.0),
                     waited=max(after.waited - before.waited, 0.0) + max(parent_waited, 0.0), stopped=stopped)


class CallWatch:
    """A call in flight: each `sample` reads the worker's clocks and run state now.

    Two things the clocks cannot say are read from the state at each sample: time stopped (the kernel keeps no total
    of it), and the wait for a CPU still going on (schedstat adds a wait to its total only once the task gets the
    CPU, so a task kept waiting for a long stretch would look blocked). An interval between two samples whose end
    finds the worker runnable (R) or stopped (T) counts as waiting or stopped, less what it ran or had counted as
    waiting in it; one that ends with the worker asleep (S, D) is blocked time. Samples come every poll (tens of
    ms), so a stop or a wait of seconds is placed to within one poll, and a reward that sleeps is asleep when
    sampled."""

    def __init__(self, clock: KernelClock, before: Reading, started: float):
        self.clock, self.before, self.started = clock, before, started
        self._last_at, self._last = started, before
        self._stopped = 0.0
        self._queued = 0.0

    def sample(self) -> CallTimes | None:
        """The call's times so far (None when /proc cannot say: the wall clock alone judges then)."""
        now = time.monotonic()
        reading = self.clock.read()
        if reading is None:
            return None
        state = self.clock.state()
        if state in (b"R", b"T", b"t"):
            counted = (reading.cpu - self._last.cpu) + (reading.waited - self._last.waited)
            uncounted = max((now - self._last_at) - counted, 0.0)
            if state == b"R":
                self._queued += uncounted
            else:
                self._stopped += uncounted
        self._last_at, self._last = now, reading
        times = between(self.before, reading, now - self.started, stopped=self._stopped)
        times.waited += self._queued
        return times

    @property
    def stopped_seconds(self) -> float:
        return self._stopped


@dataclass(frozen=True)
class CallLimits:
    """What one reward call may take, in seconds (see `Limits` for the defaults and why)."""

    cpu: float
    blocked: float
    wall: float

    def broken(self, times: CallTimes) -> str | None:
        """'cpu', 'blocked' or 'wall' (the backstop), whichever the call went over first in that order; else None."""
        if times.cpu > self.cpu:
            return "cpu"
        if times.blocked > self.blocked:
            return "blocked"
        if times.wall > self.wall:
            return "wall"
        return None
