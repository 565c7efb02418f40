"""The parent's handle on one jailed worker process: start, talk with deadlines, kill.

Why the parent enforces time: a jailed process can ignore signals and spin; only the parent's
reading of the kernel's clocks and SIGKILL are beyond its reach. A training call is judged on the
worker's own CPU and blocked time (clocks.py), read when the parent decides, so a busy machine never
passes for a slow reward; the wall clock is only a backstop. Replies are parsed strictly
(untrusted.py) and re-checked: the reward code runs in that process and can write anything on its pipe.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import socket
import struct
import subprocess
import threading
from typing import Any

from text2reward.sandbox.calls import CallChannel, SandboxFailure
from text2reward.sandbox.clocks import CallLimits
from text2reward.sandbox.isolation import active_isolation, jail_spec, launch_argv, worker_env
from text2reward.sandbox.leftovers import HeldProcess, hold
from text2reward.sandbox.limits import Limits, limit_config
from text2reward.sandbox.untrusted import COMPONENT_REPLY_BYTES, MAX_COMPONENTS, Malformed, clean_text, loads, parse_output
from text2reward.sandbox.wire import REPLY, reply_struct


class WorkerProcess:
    """One jailed worker process (see jailed.py for the modes); frames in, JSON frames out.

    Raises `SandboxUnavailable` (a ConfigError) when no jail passed its self-test: nothing starts."""

    def __init__(self, limits: Limits, mode: str):
        self.limits = limits
        isolation = active_isolation(limits.isolation)
        self.isolation = isolation.describe()
        self.mechanism, self.mode = isolation.mechanism, mode
        # a training worker runs under `training_cpu_seconds`; a zygote (trusted) under none: its children set their own
        config = {"mode": mode, "jail": jail_spec(isolation.mechanism), "parent_pid": os.getpid(),
                  **limit_config(limits, cpu=False), "cpu_seconds": int(limits.training_cpu_seconds) if mode == "serve" else None}
        self.handoff: socket.socket | None = None
        """The zygote's Unix socket: each validation child's pipes and pidfd arrive on it (runner.py)."""
        passed: tuple[int, ...] = ()
        if mode == "zygote":
            self.handoff, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            passed, config["handoff_fd"] = (theirs.fileno(),), theirs.fileno()
        self._proc = subprocess.Popen(
            launch_argv(isolation.mechanism) + [json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd="/",
            env=worker_env(),
            close_fds=True,
            pass_fds=passed,
            start_new_session=True,
        )
        if mode == "zygote":
            theirs.close()
        stdin, stdout = self._proc.stdin, self._proc.stdout
        assert stdin is not None and stdout is not None  # both were asked for as pipes
        self._stdin, self._stdout = stdin, stdout
        self._in = stdin.fileno()
        self._out = stdout.fileno()
        os.set_blocking(self._in, False)
        self._stderr = _Tail(self._proc.stderr)
        self._reward: HeldProcess | None = None
        self.calls = CallChannel(self._in, self._out, lambda: self.python_pid, self.kill,
                                 lambda detail: self._failure(detail=detail))

    def alive(self) -> bool:
        return self._proc.poll() is None

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def python_pid(self) -> int:
        """The host pid of the process that runs the reward (the one whose clocks judge its calls). Raises ValueError
        while it is not running yet."""
        return self.reward_process().pid

    def reward_process(self) -> HeldProcess:
        """The process that runs the reward, held by a pidfd (`find_reward_process`); a training worker's only.
        Raises ValueError while it is not running yet."""
        if self._reward is None:
            if self.mode != "serve":
                raise ValueError("a zygote runs no reward itself")
            if self._proc.returncode is not None:  # reaped: its pid may be another process's by now
                raise ValueError("the jailed worker has ended")
            self._reward = find_reward_process(self._proc.pid, REWARD_DEPTH[(self.mechanism, "serve")])
        return self._reward

    def _held_reward(self) -> HeldProcess | None:
        """The reward's process if it can still be found (to end it with its worker), else None."""
        try:
            return self.reward_process() if self.mode == "serve" else None
        except ValueError:
            return None

    def start(self, hello: dict[str, Any], deadline: float) -> None:
        self.calls.send(pickle.dumps(hello, protocol=pickle.HIGHEST_PROTOCOL), deadline)

    def send(self, payload: bytes, deadline: float) -> None:
        self.calls.send(payload, deadline)

    def receive_raw(self, deadline: float) -> bytes:
        """One frame's bytes; on a timeout or a dead worker, kill it and raise SandboxFailure."""
        return self.calls.receive_raw(deadline)

    def receive(self, deadline: float) -> Any:
        return self.calls.receive(deadline)

    def exchange(self, data: bytes, limits: CallLimits) -> tuple[bytes, float | None]:
        """One reward call (see CallChannel.exchange)."""
        return self.calls.exchange(data, limits)

    @property
    def idle_cpu(self) -> float:
        return self.calls.idle_cpu

    def cpu_seconds(self) -> float | None:
        return self.calls.cpu_seconds()

    def close(self, grace: float = 1.0) -> None:
        """Close the pipe (the worker exits on EOF) and kill it if it lingers; the reward's process too, whatever it
        did to itself (its own session, no parent-death signal: it is held by a pidfd)."""
        reward = self._held_reward()
        if reward is not None:
            reward.told_to_end()
        if self._proc.returncode is None:
            try:
                self._stdin.close()
            except OSError:
                pass
            try:
                self._proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.kill()
        if reward is not None and not reward.wait(grace):
            reward.kill()
        if reward is not None and not reward.alive():
            reward.release()  # ended: nothing left to sweep
        self._stdout.close()
        self.calls.forget_clock()
        if self.handoff is not None:
            self.handoff.close()

    def kill(self) -> None:
        """SIGKILL the reward's process (through its pidfd) and the worker's process group."""
        reward = self._held_reward()
        self.calls.forget_clock()
        if reward is not None:
            reward.kill()
        if self._proc.returncode is None:  # not reaped yet, so the process group id is still ours
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self._proc.kill()
        self._proc.wait()

    def _failure(self, detail: str | None = None) -> SandboxFailure:
        """Kill the worker and say, for the model, why it stopped (timeouts are the CallChannel's to explain)."""
        if detail is not None:
            self.kill()
            return SandboxFailure(f"the reward process was stopped: {detail}")
        try:
            code = self._proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self._proc.returncode
        self._stderr.join(1.0)
        signal_number = -code if code < 0 else None
        # a SIGKILL is its own RLIMIT_CPU only where it had used (nearly) all of it when the parent last read its clock
        own_limit = self.mode != "serve" or (
            (self.calls.last_cpu or 0.0) >= self.limits.training_cpu_seconds - self.limits.call_cpu_seconds - 1.0)
        failure = SandboxFailure(explain_exit(signal_number, None if code < 0 else code, self.limits, self._stderr.text(),
                                              cpu_rlimit=own_limit, cpu_seconds=self.limits.training_cpu_seconds))
        failure.by_machine = killed_from_outside(signal_number, own_limit)
        return failure


REWARD_DEPTH = {("bubblewrap", "serve"): 2, ("landlock", "serve"): 1, ("bubblewrap", "child"): 0, ("landlock", "child"): 1}
"""How many generations below the process the parent started (or was handed) the reward runs, by mechanism and kind
of worker: under bubblewrap, bwrap's init and then the command (pid 2 of bwrap's pid namespace), or a zygote's child
itself (in bwrap's namespace already); without it, the child a worker forks into a pid namespace of its own, as its
pid 1 (namespaces.py)."""


def find_reward_process(root: int, generations: int) -> HeldProcess:
    """The process that runs the reward, found from what the parent knows: `generations` below `root` (the pid it
    started, or the one a pidfd it holds names), each the only child of the one above, and in a pid namespace below
    this process's. Held by a pidfd from here on (leftovers.py). Nothing the child can write (its command line, its
    name) is read, so a reward that rewrites its own cannot pass another process's clocks for its own.

    Raises ValueError while there is no such process yet: a waiting parent's or bwrap's clocks must never stand for
    the reward's."""
    chain = [root]
    for _ in range(generations):
        children = _children(chain[-1])
        if len(children) != 1:
            raise ValueError("the jailed worker is not running yet" if not children else
                             f"process {chain[-1]} of the jail has {len(children)} children, where it forks one")
        chain.append(children[0])
    pid = chain[-1]
    if _pid_depth(str(pid)) <= _pid_depth("self"):
        raise ValueError("the jailed worker is not in a pid namespace of its own yet")
    try:
        held = hold(pid)
    except OSError:
        raise ValueError("the jailed worker has ended") from None
    if len(chain) > 1 and _children(chain[-2]) != [pid]:  # the pidfd names the process found, not a later one
        held.release()
        raise ValueError("the jailed worker has ended")
    return held


def _children(pid: int) -> list[int]:
    """The kernel's list of `pid`'s children (its one thread: nothing of ours in a jail starts threads)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(child) for child in handle.read().split()]
    except (OSError, ValueError):
        return []


def _pid_depth(pid: str) -> int:
    """How many pid namespaces deep a process is (the length of its NSpid line); 0 where /proc cannot say."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("NSpid:"):
                    return len(line.split()) - 1
    except OSError:
        pass
    return 0




SIGSYS_EXIT = 128 + signal.SIGSYS
"""bubblewrap reports a child killed by a signal as its own exit code 128 + the signal."""


def explain_exit(signal_number: int | None, exit_code: int | None, limits: Limits, stderr: str = "",
                 cpu_rlimit: bool = True, cpu_seconds: float | None = None) -> str:
    """Why a worker ended before answering, in words the model can act on; the same words on every path.

    `cpu_rlimit`: a SIGKILL may be its own CPU limit (RLIMIT_CPU of `cpu_seconds`, default `limits.cpu_seconds`):
    always so in validation; in training only once it had used nearly all of `training_cpu_seconds`, else the
    SIGKILL came from outside it (see `killed_from_outside`)."""
    if signal_number is None and exit_code == SIGSYS_EXIT:
        signal_number, exit_code = int(signal.SIGSYS), None
    if signal_number is not None:
        try:
            name = signal.Signals(signal_number).name
        except ValueError:
            name = f"signal {signal_number}"
        if signal_number == signal.SIGSYS:
            # the filter denies every named call with EPERM (the code sees PermissionError); it kills only a call made
            # through another architecture's entry point, which is all the kernel tells the parent of it
            return ("the reward process was killed for a forbidden system call (SIGSYS: a call through the x32 or i386 "
                    "entry point); reward code may only compute on `self` and `action`")
        if signal_number == signal.SIGKILL and not cpu_rlimit:
            return f"the reward process was killed from outside by {name}, not by its own limits (the machine's memory or another process)"
        if signal_number == signal.SIGKILL:
            why = f"it went over its CPU-time ({cpu_seconds or limits.cpu_seconds:g} s) or memory ({limits.memory_mb} MB) limit"
        elif signal_number == signal.SIGSEGV:
            why = "it crashed the interpreter (for example by recursing too deeply)"
        else:
            why = "the code must not send signals or stop the process"
        return f"the reward process was killed by {name}: {why}"
    tail = clean_text(stderr.strip().splitlines()[-1], 300) if stderr.strip() else ""
    text = f"the reward process exited with code {exit_code} before answering; the code must not exit or stop the process"
    return f"{text} ({tail})" if tail and "sandbox worker failed" in tail else text


def killed_from_outside(signal_number: int | None, cpu_rlimit: bool) -> bool:
    """A training worker killed by SIGKILL far from its RLIMIT_CPU: its own code cannot do that to itself in the jail."""
    return signal_number == signal.SIGKILL and not cpu_rlimit


class ReplyDecoder:
    """Decodes a training worker's replies: JSON, checked by `parse_output`, or packed doubles.

    Packed replies carry no names: they reuse the names of the last JSON reply, which this side
    has already checked, and must be exactly one double per name plus the total.

    The names a candidate may use are bounded per run: `names`, the set its validation saw, when given (a name
    outside it is the candidate's error: `NewName`); else at most `MAX_COMPONENTS` distinct names over the
    process's life. A JSON reply with components longer than any such reply can be is refused before it is parsed."""

    def __init__(self, names: frozenset[str] | None = None, seen: set[str] | None = None) -> None:
        self._names: tuple[str, ...] = ()  # set with _struct by the first JSON reply
        self._struct: struct.Struct | None = None
        self.allowed = names
        self.seen = seen if seen is not None else set()
        """Every name this candidate has returned so far (shared by the decoders of its successive workers)."""

    def decode(self, data: bytes) -> tuple[float, dict[str, float]] | dict[str, Any]:
        """(total, components), or the worker's error reply (a dict with "error")."""
        if data[:1] == REPLY:
            if self._struct is None or len(data) != 1 + self._struct.size:
                raise SandboxFailure("the reward process sent a malformed reply")
            values = self._struct.unpack_from(data, 1)
            return values[0], dict(zip(self._names, values[1:]))
        if data[:1] != b"{" and len(data) > COMPONENT_REPLY_BYTES:  # not an error, and longer than any answer
            raise SandboxFailure(f"the reward process sent a reply of {len(data):,} bytes, longer than any answer can be "
                                 f"({COMPONENT_REPLY_BYTES:,})")
        try:
            reply = loads(data)
            if isinstance(reply, dict) and "error" in reply:
                return reply
            total, components = parse_output(reply)
        except Malformed as exc:
            raise SandboxFailure(str(exc)) from None
        self._check_names(components)
        self._names, self._struct = tuple(components), reply_struct(len(components))
        return total, components

    def _check_names(self, components: dict[str, float]) -> None:
        new = [name for name in components if name not in self.seen]
        if not new:
            return
        if self.allowed is not None:
            unknown = [name for name in new if name not in self.allowed]
            if unknown:
                raise NewName(f"the reward returned component {unknown[0]!r}, which it never returned in validation "
                              f"(there: {', '.join(sorted(self.allowed)) or 'none'}); return the same named terms on every state")
        if len(self.seen) + len(new) > MAX_COMPONENTS:
            raise NewName(f"the reward returned more than {MAX_COMPONENTS} different component names; return a fixed, small set "
                          "of named terms (never names made from the state)")
        self.seen.update(new)


class NewName(SandboxFailure):
    """A candidate's component name beyond its set: one its validation never saw, or past the bound per run."""


class _Tail:
    """Drains a pipe in a daemon thread, keeping only the last few kilobytes (for crash messages)."""

    def __init__(self, stream: Any, keep: int = 4096):
        self._stream, self._keep, self._data = stream, keep, b""
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for chunk in iter(lambda: self._stream.read1(65536), b""):
                self._data = (self._data + chunk)[-self._keep:]
        except (OSError, ValueError):
            pass
        finally:
            try:
                self._stream.close()
            except OSError:
                pass

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def text(self) -> str:
        return self._data.decode("utf-8", "replace")
