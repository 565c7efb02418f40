"""Run untrusted reward code on a batch of states in a fresh isolated process, driven call by call by the parent.

This is the runtime layer on its own: it does not run the static pass, so tests can prove that
isolation alone stops hostile code. `validate` puts the two together.

Each run is a fresh child forked from a zygote (one per isolation setting and parent process)
that imported numpy and the view classes once: tens of ms per run instead of ~0.3 s for a new
interpreter. The zygote only ever runs trusted code; each child puts itself in its own jail after
the fork (its own user, network and IPC namespaces where the kernel allows them, Landlock, seccomp),
so one candidate can neither reach nor leave anything for the next.

Why call by call: the child runs the reward, so it controls everything it writes. It is given no batch
and asked for no verdict: the parent sends each state itself over the child's own pipes (handed over
by the zygote), with training's frames, per-call limits (the kernel's CPU and blocked time of the
child: calls.py) and reply checks, and keeps every value it receives. A child can only answer each
call with numbers, which is what a reward does; validation's checks are computed here from them.
"""

from __future__ import annotations

import atexit
import dataclasses
import gc
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from text2reward.sandbox.calls import CallChannel, CallStopped, SandboxFailure
from text2reward.sandbox.clocks import CallLimits
from text2reward.sandbox.isolation import active_isolation, readable_paths
from text2reward.sandbox.leftovers import HeldProcess
from text2reward.sandbox.limits import Limits
from text2reward.sandbox.process import (
    REWARD_DEPTH,
    NewName,
    ReplyDecoder,
    WorkerProcess,
    explain_exit,
    find_reward_process,
    limit_config,
)
from text2reward.sandbox.untrusted import Malformed, clean_text, loads
from text2reward.sandbox.wire import ViewEncoder

Output = tuple[float, dict[str, float]]


class CallCost(NamedTuple):
    """One validation call's cost to a run, in seconds, kept in its two kinds because they differ in trust."""

    cpu: float
    """The reward process's CPU time (the kernel's exact count of it) plus this process's CPU time decoding its reply.
    A busy machine barely moves it."""
    blocked: float
    """Neither computing nor waiting for a CPU: a sleep or a wait of the reward's, but also whatever of the wall clock
    the kernel's clocks could not place (the machine's stolen time, this process reading the reply late), so a busy
    machine can inflate it on some calls."""


@dataclass
class RunResult:
    """What came back: per-sample outputs for each pass over the samples, or the error that stopped it."""

    passes: list[list[Output]] = field(default_factory=list)
    seconds: list[CallCost] = field(default_factory=list)
    """The reward's own time per call in the last pass (CPU and blocked, from the kernel's clocks of the child, read
    by the parent: load and waiting for a CPU do not count). Why the last: the first pass warms what a library builds
    on its first call (scipy's lazy modules took 2-4 ms on one call idle, ~30 ms on a busy machine), which training
    pays once in millions of calls, but which a mean over validation's few states would charge as the reward's cost."""
    error: str | None = None
    """Feedback text: the trimmed traceback, or why the process was stopped."""
    error_kind: str | None = None
    """'load' (the module body), 'exception' (a call raised), 'output' (a bad return value), 'process'."""
    failed_index: int | None = None
    wall_seconds: float = 0.0
    isolation: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def outputs(self) -> list[Output]:
        return self.passes[0] if self.passes else []


ZYGOTE_GRACE_SECONDS = 30.0
"""Extra time the parent gives the zygote beyond the run's own limit (its start-up, under load)."""
ENDING_SECONDS = 1.0
"""How long a child that closed its pipe has to end by itself before it is killed (its own exit tells the model why)."""
LOAD_CPU_SECONDS = 2.0
"""CPU time a child may take to jail itself and run the program's module body before it says it is ready."""
NO_CLOCK = ("the sandbox could not read the reward process's CPU time from the kernel (/proc), so its time per call "
            "cannot be judged; `t2r doctor` shows the jail's self-test")
"""Why a validation with no kernel clock reading fails: the parent's reading of the child's clocks is the only time
check, and a reward that hid its process from the parent must not pass as taking no time."""
_ZYGOTES: dict[tuple[str, int], Zygote] = {}
_LOCK = threading.Lock()


def run_reward(code: str, samples: list[tuple[Any, np.ndarray]], limits: Limits | None = None, *, repeats: int = 1) -> RunResult:
    """Run `compute_dense_reward` on every (view, action), `repeats` times over, in a fresh sandboxed process."""
    limits = limits or Limits()
    started = time.monotonic()
    modules = view_modules([view for view, _ in samples])
    request = {"code": code, "modules": modules, "sources": view_sources(modules), "wall_seconds": float(limits.wall_seconds),
               **limit_config(limits, cpu=True)}
    with _LOCK:
        zygote = _zygote(limits)
        result = RunResult(isolation=zygote.process.isolation)
        deadline = time.monotonic() + limits.wall_seconds + ZYGOTE_GRACE_SECONDS
        try:
            child = ValidationChild.fork(zygote, request, limits, deadline)
        except SandboxFailure as exc:  # the zygote itself failed: start a fresh one next time
            _discard(zygote)
            result.error, result.error_kind = f"the sandbox failed: {exc}", "process"
        else:
            try:
                with _collector_paused():
                    _drive(child, samples, modules, repeats, limits, result)
            finally:
                child.close()  # its end is reported later, read with the next request: its exit overlaps other work
    result.wall_seconds = time.monotonic() - started
    return result


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No garbage collection in this process while it times a child's calls, as `timeit` does: a collection of a big
    heap (seconds) leaves the reward idle on its pipe, and that wait would be charged to its blocked time."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _drive(child: ValidationChild, samples: list[tuple[Any, np.ndarray]], modules: list[str], repeats: int, limits: Limits,
           result: RunResult) -> None:
    """The calls, one at a time; the first failure of any kind ends the run with its reason."""
    calls = CallLimits(cpu=limits.call_cpu_seconds, blocked=limits.call_blocked_seconds, wall=limits.call_wall_seconds)
    try:
        loading = CallLimits(cpu=min(LOAD_CPU_SECONDS, float(limits.cpu_seconds)), blocked=limits.call_blocked_seconds * 4,
                             wall=limits.call_wall_seconds)
        ready, _ = child.calls.exchange(b"", loading)
        try:
            hello = loads(ready)
        except Malformed as exc:
            raise SandboxFailure(f"the reward process was stopped: {exc}") from None
        if isinstance(hello, dict) and "error" in hello:
            result.error, result.error_kind = clean_text(hello["error"]), "load"
            return
        if not (isinstance(hello, dict) and hello.get("ready") is True):
            raise SandboxFailure("the reward process sent a malformed reply")
        encoder, decoder = ViewEncoder(modules), ReplyDecoder()
        no_clock: int | None = None  # the first call with no kernel clock reading: fails the run unless a cause comes first
        timed = repeats - 1  # the warm pass (RunResult.seconds)
        for repeat in range(repeats):
            outputs: list[Output] = []
            frames = [encoder.encode(view, np.asarray(action)) for view, action in samples]  # schemas in the first pass only
            for index, (raw, split) in enumerate(child.calls.stream(frames, calls)):
                parsing = time.thread_time()
                reply = decoder.decode(raw)
                parsing = time.thread_time() - parsing  # this process's CPU on the reply is the candidate's too
                if isinstance(reply, dict):
                    kind = reply.get("kind")
                    result.error, result.failed_index = clean_text(reply["error"]), index
                    result.error_kind = kind if kind in ("exception", "output") else "exception"
                    return
                outputs.append(reply)
                if repeat == timed:
                    if split is None:  # no verdict on time without the kernel's clocks: never a pass (below), unless a
                        no_clock = index if no_clock is None else no_clock  # later call says why (the child had exited)
                        continue
                    result.seconds.append(CallCost(split[0] + parsing, split[1]))
            result.passes.append(outputs)
        if no_clock is not None:
            result.error, result.error_kind, result.failed_index = NO_CLOCK, "process", no_clock
    except CallStopped as exc:
        result.error, result.error_kind = str(exc), "process"
    except NewName as exc:  # more names than a run may have: the reward's output, told as such
        result.error, result.error_kind = str(exc), "output"
    except SandboxFailure as exc:  # a malformed reply or a child that died: the candidate's, never the zygote's
        result.error, result.error_kind = str(exc), "process"


@dataclass
class Zygote:
    """The parent's end of one zygote: its process, and the ends of handed children it has reported.

    The zygote reports a child's end whenever it comes (nursery.py), so its messages are read in order and each
    "ended" is kept only while that child's `ValidationChild` may still ask why it ended."""

    process: WorkerProcess
    ended: dict[int, dict[str, Any]] = field(default_factory=dict)
    asking: set[int] = field(default_factory=set)

    def forked(self, deadline: float) -> int:
        """The number of the child forked for the request just sent. Raises SandboxFailure."""
        while True:
            message = self._message(deadline)
            if "ended" in message:
                continue
            if message.get("forked") is True and type(message.get("child")) is int:
                self.asking.add(message["child"])
                return message["child"]
            raise SandboxFailure(clean_text(str(message.get("detail") or "the zygote did not fork a child")))

    def status(self, number: int, deadline: float) -> dict[str, Any]:
        """How child `number` ended, from the zygote's own wait (trusted), read once."""
        while number not in self.ended:
            if "ended" not in self._message(deadline):
                raise SandboxFailure("the sandbox sent a malformed status")
        self.asking.discard(number)
        return self.ended.pop(number)

    def forget(self, number: int) -> None:
        """Its end will not be asked about: drop its report when it comes."""
        self.asking.discard(number)
        self.ended.pop(number, None)

    def _message(self, deadline: float) -> dict[str, Any]:
        message = self.process.receive(deadline)
        if not isinstance(message, dict):
            raise SandboxFailure("the sandbox sent a malformed message")
        number = message.get("ended")
        if type(number) is int and number in self.asking:
            self.ended[number] = message
        return message


class ValidationChild:
    """The parent's end of one validation child: its two pipes and a pidfd, handed over by the zygote."""

    def __init__(self, zygote: Zygote, number: int, calls_fd: int, replies_fd: int, pidfd: int, limits: Limits):
        self.zygote, self.number, self.limits = zygote, number, limits
        self._calls_fd, self._replies_fd, self._pidfd = calls_fd, replies_fd, pidfd
        os.set_blocking(calls_fd, False)
        self._status: dict[str, Any] | None = None
        self._deadline = time.monotonic() + limits.wall_seconds + ZYGOTE_GRACE_SECONDS
        self._reward: HeldProcess | None = None
        self.calls = CallChannel(calls_fd, replies_fd, self._host_pid, self.kill, self._ended)
        try:  # held from the start: the reward's process exists before the zygote hands its child over
            self.reward_process()
        except ValueError:
            pass  # it has ended already: its end is reported as the first call's

    @classmethod
    def fork(cls, zygote: Zygote, request: dict[str, Any], limits: Limits, deadline: float) -> ValidationChild:
        """Ask the zygote for a child; its pipes and pidfd arrive on the handoff socket. Raises SandboxFailure."""
        handoff = zygote.process.handoff
        assert handoff is not None  # a zygote always has one
        zygote.process.start(request, deadline)
        number = zygote.forked(deadline)
        handoff.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            _, fds, _, _ = socket.recv_fds(handoff, 16, 3)
        except OSError as exc:
            raise SandboxFailure(f"the zygote did not hand over its child ({exc})") from None
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            raise SandboxFailure("the zygote handed over a malformed child")
        return cls(zygote, number, fds[0], fds[1], fds[2], limits)

    def _host_pid(self) -> int:
        return self.reward_process().pid

    def reward_process(self) -> HeldProcess:
        """The process that runs the reward, held by a pidfd: the child the zygote's pidfd names (under bubblewrap),
        or the one it forked into a pid namespace of its own (namespaces.py): found by where it is, never by what it
        says (`find_reward_process`). Raises ValueError once the child has ended."""
        if self._reward is None:
            pid = self._child_pid()
            reward = find_reward_process(pid, REWARD_DEPTH[(self.zygote.process.mechanism, "child")])
            if self._child_pid() != pid:  # the child ended meanwhile: the pid found may be another's by now
                reward.release()
                raise ValueError("the child has ended")
            self._reward = reward
        return self._reward

    def _child_pid(self) -> int:
        """The zygote's child, by the pidfd handed over (race-free: -1 in fdinfo once it has ended)."""
        if self._pidfd >= 0:
            with open(f"/proc/self/fdinfo/{self._pidfd}") as handle:
                for line in handle:
                    if line.startswith("Pid:") and int(line.split()[1]) > 0:
                        return int(line.split()[1])
        raise ValueError("the child has ended")

    def kill(self) -> None:
        """SIGKILL the child and the reward's process (the same one under bubblewrap), each through its pidfd."""
        if self._reward is not None:
            self._reward.kill()
        try:
            signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        except OSError:
            pass  # already ended

    def _ended(self, detail: str | None) -> SandboxFailure:
        """The child closed its pipe: say why, from how the zygote saw it end (trusted), never from the child. It is
        given a moment to end by itself (its exit code is the reason), then killed."""
        if not select.select([self._pidfd], [], [], ENDING_SECONDS)[0]:  # a pidfd is readable once its process ended
            self.kill()
        if detail is not None:
            return SandboxFailure(f"the reward process was stopped: {detail}")
        try:
            status = self.status(self._deadline)
        except SandboxFailure as exc:
            return exc
        signal_number, exit_code = status.get("signal"), status.get("exit")
        if status.get("timeout"):
            return SandboxFailure(f"the reward code did not finish within {self.limits.wall_seconds:g} s and was stopped; "
                                  "avoid unbounded loops and heavy computation in compute_dense_reward")
        return SandboxFailure(explain_exit(signal_number if type(signal_number) is int else None,
                                           exit_code if type(exit_code) is int else None, self.limits))

    def close(self) -> None:
        """Close the pipes (the child exits on EOF) and kill it if it is still running: the run is over either way."""
        self.calls.forget_clock()
        for fd in (self._calls_fd, self._replies_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.kill()
        if self._status is None:
            self.zygote.forget(self.number)
        self._close_pidfd()

    def status(self, deadline: float) -> dict[str, Any]:
        """How the child ended, from the zygote (read once)."""
        if self._status is None:
            self._status = self.zygote.status(self.number, deadline)
        return self._status

    def _close_pidfd(self) -> None:
        if self._pidfd >= 0:
            try:
                os.close(self._pidfd)
            except OSError:
                pass
            self._pidfd = -1


def _zygote(limits: Limits) -> Zygote:
    active_isolation(limits.isolation)  # cached; refuses (fail closed) if the jail was since hidden
    key = (limits.isolation, os.getpid())
    zygote = _ZYGOTES.get(key)
    if zygote is None or not zygote.process.alive():
        if zygote is not None:
            _discard(zygote)
        zygote = Zygote(WorkerProcess(limits, mode="zygote"))
        _ZYGOTES[key] = zygote
    return zygote


def _discard(zygote: Zygote) -> None:
    for key, value in list(_ZYGOTES.items()):
        if value is zygote:
            del _ZYGOTES[key]
    zygote.process.kill()
    zygote.process.close()


@atexit.register
def shutdown_zygotes() -> None:
    """Close this process's zygotes (they also exit on their own when the pipe closes)."""
    with _LOCK:
        for key, zygote in list(_ZYGOTES.items()):
            if key[1] == os.getpid():
                zygote.process.close()
            del _ZYGOTES[key]


def view_modules(views: list[Any]) -> list[str]:
    """Modules defining the views' classes (nested dataclasses included): the worker imports them first."""
    found: set[str] = set()
    seen: set[type] = set()

    def visit(obj: Any) -> None:
        if not dataclasses.is_dataclass(obj) or isinstance(obj, type) or type(obj) in seen:
            return
        seen.add(type(obj))
        found.add(type(obj).__module__)
        for f in dataclasses.fields(obj):
            visit(getattr(obj, f.name))

    for view in views:
        visit(view)
    return sorted(found)


def view_sources(modules: list[str]) -> dict[str, str]:
    """The source of each view module the jail does not show (a task file's own, beside it): the worker runs it
    before it locks down, so it can rebuild those views. The user's code, trusted as their task file is."""
    shown = tuple(path.rstrip("/") + "/" for path in readable_paths())
    files = {name: getattr(sys.modules.get(name), "__file__", None) for name in modules}
    return {name: Path(file).read_text() for name, file in files.items()
            if file and file.endswith(".py") and not os.path.realpath(file).startswith(shown)}
