"""The zygote's children: one spare forked ahead of each request, handed to the parent, reaped as it ends.

Why a spare: a validation child needs two forks before it can run anything (the zygote's, then its own into a
fresh pid namespace) and its own namespaces; on these machines a fork of the zygote costs 1-2 ms and its exit as
much. So the next child is forked, and enters its namespaces, while the parent is still driving the current one;
a request only writes the candidate's code to the spare and hands its pipes over. Why children are reaped as they
end, not one request at a time: a child's exit then overlaps the next child's work instead of delaying it.

The zygote runs trusted code only. It says two things to the parent, each a JSON frame on its stdout:
`{"forked": true, "child": N}` (or `{"forked": false, "detail": ...}`) once per request, in order, and
`{"ended": N, "signal": ..., "exit": ..., "timeout": ...}` whenever a handed child has ended (from its own
`wait4`: the child's word never reaches the parent through the zygote).
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from text2reward.sandbox.channel import ChannelClosed, frame, read_frame, write_all

SpareMain = Callable[[int, int, int, int], None]
"""What a spare runs after the fork, given its control pipe (the request arrives there), its ready pipe (one byte
once it is in its own namespaces, closed without one if it could not enter them), its calls pipe and its replies
pipe; it never returns (it ends with os._exit)."""


class Spare(NamedTuple):
    """The zygote's end of a forked child: its pid, a pidfd, and the parent-facing ends of its three pipes."""

    pid: int
    pidfd: int
    control: int
    ready: int
    calls: int
    replies: int

    def close(self) -> None:
        for fd in (self.pidfd, self.control, self.ready, self.calls, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass  # handed over and closed already


class Handed(NamedTuple):
    number: int
    pid: int
    deadline: float


class Nursery:
    """The spare and the handed children of one zygote."""

    def __init__(self, spare_main: SpareMain, send: Callable[[dict[str, Any]], None], handoff: socket.socket):
        self._spare_main, self._send, self._handoff = spare_main, send, handoff
        self._spare: Spare | None = None
        self._handed: dict[int, Handed] = {}  # by pidfd
        self._count = 0

    def serve(self, requests: int, import_for: Callable[[dict[str, Any]], object]) -> int:
        """Answer requests until the parent closes the pipe; report each handed child's end as it comes.

        `import_for(request)` imports what the request's code and views need, in the zygote, so later spares have it
        (a spare forked before a new import is replaced: imports never count against a candidate's clocks)."""
        self._spare = self._fork_spare()
        try:
            while True:
                ready = select.select([requests, *self._handed], [], [], self._timeout())[0]
                for pidfd in ready:
                    if pidfd != requests:
                        self._report(pidfd, timed_out=False)
                self._stop_overdue()
                if requests in ready:
                    try:
                        request = pickle.loads(read_frame(requests))
                    except ChannelClosed:
                        return 0
                    self._hand_over(request, import_for)
        finally:
            self.stop_all()

    def _hand_over(self, request: dict[str, Any], import_for: Callable[[dict[str, Any]], object]) -> None:
        known = len(sys.modules)
        try:
            import_for(request)
        except Exception as exc:  # e.g. a view class that cannot be imported here
            self._send({"forked": False, "detail": f"the sandbox could not import the views: {type(exc).__name__}: {exc}"})
            return
        if len(sys.modules) != known:  # the spare lacks what was just imported: a fresh one has it
            self._discard_spare()
        spare, self._spare = self._spare or self._fork_spare(), None
        if os.read(spare.ready, 1) != b"1":  # it could not enter its namespaces: never hand over such a child
            self._send({"forked": False, "detail": self._why_spare_failed(spare)})
            self._spare = self._fork_spare()
            return
        write_all(spare.control, frame(pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)))
        os.close(spare.control)
        os.close(spare.ready)
        socket.send_fds(self._handoff, [b"child"], [spare.calls, spare.replies, spare.pidfd])
        os.close(spare.calls)
        os.close(spare.replies)
        self._count += 1
        self._handed[spare.pidfd] = Handed(self._count, spare.pid, time.monotonic() + float(request["wall_seconds"]))
        self._send({"forked": True, "child": self._count})
        self._spare = self._fork_spare()

    def _fork_spare(self) -> Spare:
        gc.freeze()  # the child's collections then skip the zygote's objects: no copy-on-write storm
        control_read, control_write = os.pipe()
        ready_read, ready_write = os.pipe()
        calls_read, calls_write = os.pipe()
        replies_read, replies_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                self._spare_main(control_read, ready_write, calls_read, replies_write)
            finally:
                os._exit(SPARE_JAIL_FAILED)
        for fd in (control_read, ready_write, calls_read, replies_write):
            os.close(fd)
        return Spare(pid, os.pidfd_open(pid), control_write, ready_read, calls_write, replies_read)

    def _why_spare_failed(self, spare: Spare) -> str:
        """A spare that closed its ready pipe without a byte could not enter its namespaces."""
        os.kill(spare.pid, signal.SIGKILL)
        os.waitpid(spare.pid, 0)
        spare.close()
        return "the sandbox could not build a validation child's own namespaces (`t2r doctor` shows the jail's self-test)"

    def _discard_spare(self) -> None:
        spare, self._spare = self._spare, None
        if spare is None:
            return
        os.kill(spare.pid, signal.SIGKILL)  # our own child, not yet reaped: its pid is still its own
        os.waitpid(spare.pid, 0)
        spare.close()

    def _timeout(self) -> float | None:
        if not self._handed:
            return None
        return max(min(h.deadline for h in self._handed.values()) - time.monotonic(), 0.0)

    def _stop_overdue(self) -> None:
        """The wall-clock backstop of each handed child (the parent judges its calls; this is the last resort)."""
        now = time.monotonic()
        for pidfd, handed in list(self._handed.items()):
            if handed.deadline <= now:
                os.kill(handed.pid, signal.SIGKILL)
                self._report(pidfd, timed_out=True)

    def _report(self, pidfd: int, timed_out: bool) -> None:
        handed = self._handed.pop(pidfd)
        _, code, usage = os.wait4(handed.pid, 0)
        os.close(pidfd)
        status: dict[str, Any] = {"ended": handed.number, "timeout": timed_out, "cpu_seconds": float(usage.ru_utime + usage.ru_stime)}
        if os.WIFSIGNALED(code):
            status.update(signal=os.WTERMSIG(code), exit=None)
        else:
            status.update(signal=None, exit=os.WEXITSTATUS(code))
        self._send(status)

    def stop_all(self) -> None:
        """Kill and reap every child (the zygote is ending)."""
        self._discard_spare()
        for pidfd, handed in list(self._handed.items()):
            try:
                os.kill(handed.pid, signal.SIGKILL)
                os.waitpid(handed.pid, 0)
            except OSError:
                pass
            os.close(pidfd)
        self._handed.clear()


SPARE_JAIL_FAILED = 3
"""A spare's exit code when its main returned or raised before its request (it never answers then)."""
