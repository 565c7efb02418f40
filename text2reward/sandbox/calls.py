"""Reward calls to one jailed process, each judged on that process's kernel clocks: training's and validation's path.

Why one class for both: validation used to hand the child a batch and take back its verdict material; a child
that controls its own reply pipe could answer for the harness. Now the parent sends every state itself, one call
at a time, through the same frames, limits and checks as training, and computes every verdict from the raw
numbers it received. The process at the other end is a training worker (process.WorkerProcess) or a validation
child forked by the zygote (runner.py), whose pipes reach the parent directly.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

from text2reward.sandbox.channel import ChannelClosed, ChannelTimeout, FrameReader, frame, write_all
from text2reward.sandbox.clocks import CallLimits, CallTimes, CallWatch, KernelClock, Reading, own_clock
from text2reward.sandbox.untrusted import MAX_REPLY_BYTES, Malformed, loads

POLL_SECONDS = 0.02
"""How often a call still running is judged: a busy loop is stopped within this much CPU past its limit."""
STREAM_WINDOW = 16
"""Validation's requests in flight at once (`CallChannel.stream`): a few KB, far below a pipe's 64 KB."""


PARENT_WAIT_MATTERS = 1e-4
"""Blocked time (s) below which a call's own time is taken without reading this thread's clock at its end: this
thread's waits for a CPU can only shrink a call's blocked time, so skipping them errs by at most this much, far below
any limit (2 ms in validation, 20 ms in training), and saves a /proc read on almost every call."""


def _own_split(before: Reading | None, after: Reading | None, own_before: Reading | None, own: KernelClock | None,
               wall: float, watch: CallWatch | None) -> tuple[float, float] | None:
    """The reward's own seconds in a call, as (CPU, blocked): the wall clock less the process's and this thread's waits
    for a CPU and its stopped time is CPU + blocked; None where /proc could not say. Kept apart because the CPU is
    the kernel's exact count while blocked time is what is left of a wall clock, which a busy machine can inflate."""
    if before is None or after is None:
        return None
    cpu = after[0] - before[0]
    stopped = watch.stopped_seconds if watch is not None else 0.0
    blocked = wall - cpu - (after[1] - before[1]) - stopped
    if blocked > PARENT_WAIT_MATTERS and own_before is not None and own is not None:
        own_after = own.read()
        if own_after is not None:
            blocked -= own_after[1] - own_before[1]
    return cpu, max(blocked, 0.0)


class SandboxFailure(Exception):
    """The worker did not answer properly: it timed out, died, or sent something malformed."""

    by_machine = False
    """True when something other than the reward's own code ended it (the failure may be retried)."""


class CallStopped(SandboxFailure):
    """The parent stopped a reward call: which limit it broke ('cpu', 'blocked' or the 'wall' backstop) and the
    kernel's numbers. `str()` is what the code did, for the model; `numbers()` adds the machine's side, for people."""

    def __init__(self, limit: str, times: CallTimes | None, limits: CallLimits | None):
        self.limit, self.times, self.limits = limit, times, limits
        self.by_machine = limit == "wall"  # the backstop fired while the reward's own time was within its limits
        super().__init__(self.for_model())

    def for_model(self) -> str:
        times, limits = self.times, self.limits
        if self.limit == "cpu" and times is not None and limits is not None:
            return (f"one reward call used {times.cpu * 1000:.0f} ms of CPU time, over the {limits.cpu * 1000:.0f} ms limit, "
                    "and was stopped; a reward must cost microseconds: avoid loops and heavy computation in compute_dense_reward")
        if self.limit == "blocked" and limits is not None:
            spent = f"{times.blocked * 1000:.0f} ms" if times is not None else "too long"
            return (f"one reward call spent {spent} blocked (sleeping or waiting, not computing), over the "
                    f"{limits.blocked * 1000:.0f} ms limit, and was stopped; compute_dense_reward must not sleep, wait or block")
        return ("one reward call did not finish while its process was kept from running (stopped or starved by the "
                "machine, not by the reward's own computing or waiting)")

    def numbers(self) -> str:
        """The kernel's account of the call, machine's side included (for the run folder and the console)."""
        if self.times is None:
            return "the reward process stopped reading its requests"
        limit = ""
        if self.limits is not None:
            limit = {"cpu": f"CPU limit {self.limits.cpu * 1000:.0f} ms", "blocked": f"blocked limit {self.limits.blocked * 1000:.0f} ms",
                     "wall": f"wall backstop {self.limits.wall:g} s"}[self.limit]
        return f"{self.times.numbers()}" + (f" ({limit})" if limit else "")


class CallChannel:
    """Frames to one jailed process over its pipes, and its replies; `kill` stops it, `closed` explains its end.

    `pid` gives the host pid of the process that runs the reward (looked up when first needed: under bubblewrap it
    is a descendant of the process started), whose clocks judge every call."""

    def __init__(self, write_fd: int, read_fd: int, pid: Callable[[], int], kill: Callable[[], None],
                 closed: Callable[[str | None], SandboxFailure]):
        self._in = write_fd
        self._reader = FrameReader(read_fd)
        self._pid, self._kill, self._closed = pid, kill, closed
        self._clock: KernelClock | None = None
        self._last: Reading | None = None
        self.idle_cpu = 0.0
        """CPU seconds the process used between the previous call's reply and this call's request (it should idle)."""
        self.last_split: tuple[float, float] | None = None
        """The last `exchange`'s own time as (CPU, blocked) seconds; None where /proc could not say."""

    # --- plain frames (hello, start-up) ---

    def send(self, payload: bytes, deadline: float) -> None:
        try:
            write_all(self._in, frame(payload), deadline)
        except ChannelTimeout:
            raise self._timed_out() from None
        except ChannelClosed:
            raise self._closed(None) from None

    def receive_raw(self, deadline: float) -> bytes:
        """One frame's bytes; on a timeout or a dead process, kill it and raise SandboxFailure."""
        try:
            return self._reader.read(deadline, MAX_REPLY_BYTES)
        except ChannelTimeout:
            raise self._timed_out() from None
        except ChannelClosed as exc:
            raise self._closed(str(exc) if "exceeds" in str(exc) else None) from None

    def receive(self, deadline: float) -> Any:
        data = self.receive_raw(deadline)
        try:
            return loads(data)
        except Malformed as exc:
            self._kill()
            raise SandboxFailure(f"the reward process was stopped: {exc}") from None

    def _timed_out(self) -> SandboxFailure:
        self._kill()
        return SandboxFailure("the reward code did not finish within the time limit and was stopped; "
                              "avoid unbounded loops and heavy computation in compute_dense_reward")

    # --- reward calls ---

    def exchange(self, data: bytes, limits: CallLimits) -> tuple[bytes, float | None]:
        """Write ready-made frames (headers included); return the reply frame's bytes and the reward's own time in
        seconds (CPU + blocked: the wall clock less the process's and this thread's waits for a CPU, and stopped time;
        None where /proc cannot say).

        One call per env step in training: one write, one poll, one read, and three ~2 us reads of the kernel's
        clocks (the process's at both ends, this thread's at the start; at the end too when the call blocked long
        enough for this thread's waits to matter: `PARENT_WAIT_MATTERS`). A call still running after `POLL_SECONDS`
        is judged every poll on the process's clocks read then (clocks.py): over `limits.cpu` of CPU or
        `limits.blocked` of blocked time it is stopped for what the code did; `limits.wall` is the backstop for
        a process that is neither (stopped, or starved beyond any real load). Raises `CallStopped` then."""
        clock, own = self.clock(), own_clock()
        before, own_before = clock.read() if clock else None, own.read() if own else None
        if data and self._reader.ready():  # bytes before the request: the process answers calls it was not sent
            self._check_unasked()
        self._write_call(data, time.monotonic() + limits.wall, limits=limits)
        started = time.monotonic()
        try:
            reply = self._reader.read(started + POLL_SECONDS, MAX_REPLY_BYTES)
            watch = None
        except ChannelTimeout:
            watch = CallWatch(clock, before, started) if clock is not None and before is not None else None
            reply = self._wait_judged(limits, started, watch)
        except ChannelClosed as exc:
            raise self._closed(str(exc) if "exceeds" in str(exc) else None) from None
        wall = time.monotonic() - started
        if data and self._reader.buffered():  # more than one reply to one request
            self._unasked()
        after = clock.read() if clock else None
        self.idle_cpu = 0.0 if before is None or self._last is None else max(before[0] - self._last[0], 0.0)
        self._last = after
        split = self.last_split = _own_split(before, after, own_before, own, wall, watch)
        return reply, None if split is None else split[0] + split[1]

    def _check_unasked(self) -> None:
        """Bytes wait before a request was sent: a reply no one asked for, unless the process simply ended (its end is
        then named by the write that follows, as on any call)."""
        try:
            self._reader.read(0.0, MAX_REPLY_BYTES)
        except ChannelClosed as exc:
            if "exceeds" not in str(exc):
                return
        except ChannelTimeout:
            pass  # part of a frame: unasked all the same
        self._unasked()

    def _unasked(self) -> NoReturn:
        """The process wrote a reply no request asked for: one request, one reply is the protocol, so it is the reward
        code writing on the pipe itself (the harness never does). The candidate's failure, never the machine's."""
        self._kill()
        raise SandboxFailure("the reward process wrote replies it was not asked for (reward code must only compute "
                             "and return its value, never write to the process's pipes)")

    def stream(self, frames: Sequence[bytes], limits: CallLimits,
               window: int = STREAM_WINDOW) -> Iterator[tuple[bytes, tuple[float, float] | None]]:
        """Validation's calls, pipelined: up to `window` requests in flight, each reply judged as `exchange` judges one,
        a call's share of the process's clocks (CPU, blocked) being what it used between the previous reply and its own.

        Why: a round trip costs ~100 us of wake-ups on these machines, so 400 lock-step calls (a validation) cost
        ~40 ms of waiting; queued requests let the process run them back to back. The process runs one call at a time
        (its only thread reads a frame, computes, replies), so the shares add up exactly to its clocks over the pass;
        a share may hold a moment of the next call's work when this thread read a reply late, which the median over
        a pass does not feel. The limits apply to each share: a busy loop is stopped within `POLL_SECONDS` past the
        CPU limit, as in training."""
        clock, own = self.clock(), own_clock()
        started = time.monotonic()
        before, own_before = clock.read() if clock else None, own.read() if own else None
        sent, gone = 0, False
        for index in range(len(frames)):
            while not gone and sent < len(frames) and sent - index < window:
                gone = not self._write_call(frames[sent], time.monotonic() + limits.wall, in_flight=sent > index)
                sent += 0 if gone else 1
            try:
                reply = self._reader.read(time.monotonic() + POLL_SECONDS, MAX_REPLY_BYTES)
                watch = None
            except ChannelTimeout:
                watch = CallWatch(clock, before, started) if clock is not None and before is not None else None
                reply = self._wait_judged(limits, started, watch)
            except ChannelClosed as exc:
                raise self._closed(str(exc) if "exceeds" in str(exc) else None) from None
            now = time.monotonic()
            after, own_now = clock.read() if clock else None, own.read() if own else None
            yield reply, _own_split(before, after, own_before, own, now - started, watch)
            started, before, own_before = now, after, own_now

    def _write_call(self, data: bytes, deadline: float, in_flight: bool = False, limits: CallLimits | None = None) -> bool:
        """Send one call; False (instead of raising) when the process is gone while earlier calls are `in_flight`.
        Why: what it wrote before it ended is still in the pipe and is judged first (a forged reply is named as one,
        not as an early exit). A process that stops reading its requests is judged on its clocks meanwhile (`limits`):
        running or blocked past a limit, it is the reward's doing; only one kept from running reaches the backstop."""
        try:
            if limits is None:
                write_all(self._in, data, deadline)
            else:
                self._write_judged(data, deadline, limits)
        except ChannelTimeout:
            self._kill()
            raise CallStopped("wall", None, None) from None
        except ChannelClosed as exc:
            if in_flight:
                return False
            raise self._closed(str(exc) if "exceeds" in str(exc) else None) from None
        return True

    def _write_judged(self, data: bytes, deadline: float, limits: CallLimits) -> None:
        """`write_all`, looking at the process's clocks every `POLL_SECONDS` while the pipe stays full."""
        view = memoryview(data)
        watch: CallWatch | None = None
        while view:
            try:
                view = view[os.write(self._in, view):]
                continue
            except BlockingIOError:
                pass
            except OSError as exc:
                raise ChannelClosed(f"the other end closed the pipe ({exc.strerror})") from exc
            if select.select([], [self._in], [], POLL_SECONDS)[1]:
                continue
            if time.monotonic() >= deadline:
                raise ChannelTimeout("the other end stopped reading")
            clock = self.clock()
            if watch is None:
                reading = clock.read() if clock is not None else None
                watch = CallWatch(clock, reading, time.monotonic()) if clock is not None and reading is not None else None
                continue
            times = watch.sample()
            broken = limits.broken(times) if times is not None else None
            if broken == "wall":  # kept from running, not reading: the backstop's, as on any call
                raise ChannelTimeout("the other end stopped reading")
            if broken is not None and times is not None:
                self._kill()
                spent = f"{times.cpu * 1000:.0f} ms of CPU" if broken == "cpu" else f"{times.blocked * 1000:.0f} ms blocked"
                raise SandboxFailure(f"the reward process stopped reading its requests ({spent} while the next one waited); "
                                     "reward code must only compute and return its value")

    def _wait_judged(self, limits: CallLimits, started: float, watch: CallWatch | None) -> bytes:
        """Poll for the reply; between polls, judge the call on the process's clocks read at that moment."""
        while True:
            try:
                return self._reader.read(time.monotonic() + POLL_SECONDS, MAX_REPLY_BYTES)
            except ChannelTimeout:
                pass
            except ChannelClosed as exc:
                raise self._closed(str(exc) if "exceeds" in str(exc) else None) from None
            if watch is None:  # the process's clocks could not be read when the call began (it was still starting)
                clock = self.clock()
                reading = clock.read() if clock is not None else None
                if clock is not None and reading is not None:
                    watch = CallWatch(clock, reading, time.monotonic())
                    started = watch.started  # judged from here on: what came before was the start-up's
                    continue
            times = watch.sample() if watch is not None else None
            if times is None:  # /proc cannot say: the wall clock alone, at the blocked limit
                times = CallTimes(wall=time.monotonic() - started, cpu=0.0, waited=0.0)
                broken = "blocked" if times.wall > limits.blocked else None
            else:
                broken = limits.broken(times)
            if broken is None:
                continue
            try:  # the reply may have come in since the last poll: a call that answered is never stopped
                return self._reader.read(0.0, MAX_REPLY_BYTES)
            except ChannelTimeout:
                pass
            except ChannelClosed as exc:
                raise self._closed(str(exc) if "exceeds" in str(exc) else None) from None
            self._kill()
            raise CallStopped(broken, times, limits)

    def clock(self) -> KernelClock | None:
        """The process's kernel clocks, opened on first use; None where /proc cannot say."""
        if self._clock is None:
            try:
                self._clock = KernelClock.of_process(self._pid())
            except (OSError, ValueError):
                return None
        return self._clock

    def cpu_seconds(self) -> float | None:
        """CPU time the process has used, from the kernel; None where /proc cannot say."""
        clock = self.clock()
        reading = clock.read() if clock is not None else None
        return None if reading is None else reading.cpu

    @property
    def last_cpu(self) -> float | None:
        """The process's CPU seconds when the last call ended (read then: its clocks are gone once it is reaped)."""
        return None if self._last is None else self._last.cpu

    def forget_clock(self) -> None:
        """Close the clock's files (before the process is reaped: its pid may then be reused)."""
        clock, self._clock = self._clock, None
        if clock is not None:
            clock.close()
