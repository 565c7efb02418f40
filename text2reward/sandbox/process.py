"""The parent's handle on one jailed worker process: start, talk with deadlines, kill.

Why the parent enforces time: a jailed process can ignore signals and spin; only the parent's
clock and SIGKILL are beyond its reach. Per training call it holds a wall-clock limit, and past
the CPU limit's worth of wall time it reads the worker's CPU time from the kernel (/proc), so a
busy machine never passes for a slow reward. Replies are parsed strictly (untrusted.py) and
re-checked: the reward code runs in that process and can write anything on its pipe.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import struct
import subprocess
import threading
import time
from typing import Any

from text2reward.sandbox.channel import MAX_REPLY_BYTES, ChannelClosed, ChannelTimeout, FrameReader, frame, write_all
from text2reward.sandbox.isolation import active_isolation, jail_spec, launch_argv, worker_env
from text2reward.sandbox.limits import Limits
from text2reward.sandbox.untrusted import Malformed, clean_text, loads, parse_output
from text2reward.sandbox.wire import REPLY, reply_struct


class SandboxFailure(Exception):
    """The worker did not answer properly: it timed out, died, or sent something malformed."""


class WorkerProcess:
    """One jailed worker process (see jailed.py for the modes); frames in, JSON frames out.

    Raises `SandboxUnavailable` (a ConfigError) when no jail passed its self-test: nothing starts."""

    def __init__(self, limits: Limits, mode: str):
        self.limits = limits
        isolation = active_isolation(limits.isolation)
        self.isolation = isolation.describe()
        config = {"mode": mode, "jail": jail_spec(isolation.mechanism), **limit_config(limits, cpu=False)}
        self._proc = subprocess.Popen(
            launch_argv(isolation.mechanism) + [json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd="/",
            env=worker_env(),
            close_fds=True,
            start_new_session=True,
        )
        stdin, stdout = self._proc.stdin, self._proc.stdout
        assert stdin is not None and stdout is not None  # both were asked for as pipes
        self._stdin, self._stdout = stdin, stdout
        self._in = stdin.fileno()
        self._out = stdout.fileno()
        os.set_blocking(self._in, False)
        self._reader = FrameReader(self._out)
        self._stderr = _Tail(self._proc.stderr)
        self._python_pid: int | None = None

    def alive(self) -> bool:
        return self._proc.poll() is None

    @property
    def pid(self) -> int:
        return self._proc.pid

    def start(self, hello: dict[str, Any], deadline: float) -> None:
        self.send(pickle.dumps(hello, protocol=pickle.HIGHEST_PROTOCOL), deadline)

    def send(self, payload: bytes, deadline: float) -> None:
        try:
            write_all(self._in, frame(payload), deadline)
        except ChannelTimeout:
            raise self._failure(timed_out=True) from None
        except ChannelClosed:
            raise self._failure() from None

    def receive_raw(self, deadline: float) -> bytes:
        """One frame's bytes; on a timeout or a dead worker, kill it and raise SandboxFailure."""
        try:
            return self._reader.read(deadline, MAX_REPLY_BYTES)
        except ChannelTimeout:
            raise self._failure(timed_out=True) from None
        except ChannelClosed as exc:
            raise self._failure(detail=str(exc) if "exceeds" in str(exc) else None) from None

    def receive(self, deadline: float) -> Any:
        data = self.receive_raw(deadline)
        try:
            return loads(data)
        except Malformed as exc:
            raise self._failure(detail=str(exc)) from None

    def exchange(self, data: bytes, wall_seconds: float, cpu_seconds: float | None = None) -> bytes:
        """Write ready-made frames (headers included) and return the reply frame's bytes.

        One call per env step in training: one write, one poll and usually one read. Only a call
        still running after `cpu_seconds` of wall time costs more: the worker's CPU time is read
        from the kernel every `cpu_seconds`, and the call fails once it has used more than that."""
        started = time.monotonic()
        deadline = started + wall_seconds
        try:
            write_all(self._in, data, deadline)
            if cpu_seconds is None or cpu_seconds >= wall_seconds:
                return self._reader.read(deadline, MAX_REPLY_BYTES)
            try:
                return self._reader.read(started + cpu_seconds, MAX_REPLY_BYTES)
            except ChannelTimeout:
                pass
            baseline_at, baseline_stats = time.monotonic(), self.schedstat()
            baseline = None if baseline_stats is None else baseline_stats[0]
            while True:
                try:
                    return self._reader.read(min(deadline, time.monotonic() + cpu_seconds), MAX_REPLY_BYTES)
                except ChannelTimeout:
                    now = time.monotonic()
                    if now >= deadline:
                        stats = self.schedstat()
                        waited = None if stats is None or baseline_stats is None else stats[1] - baseline_stats[1]
                        deadline = loaded_deadline(started, now, wall_seconds, waited, baseline_at)
                        if now >= deadline:
                            raise
                used = self.cpu_seconds()
                if baseline is not None and used is not None and used - baseline > cpu_seconds:
                    self.kill()
                    raise SandboxFailure(
                        f"one reward call used more than {cpu_seconds * 1000:.0f} ms of CPU time and was stopped; "
                        "a reward must cost microseconds: avoid loops and heavy computation in compute_dense_reward"
                    )
        except ChannelTimeout:
            self.kill()
            raise SandboxFailure(
                f"one reward call took longer than {wall_seconds:g} s and was stopped; "
                "the code must not wait, sleep or block in compute_dense_reward"
            ) from None
        except ChannelClosed as exc:
            raise self._failure(detail=str(exc) if "exceeds" in str(exc) else None) from None

    def cpu_seconds(self) -> float | None:
        """CPU time the worker's Python process has used, from the kernel; None where /proc cannot say."""
        stats = self.schedstat()
        return None if stats is None else stats[0]

    def schedstat(self) -> tuple[float, float] | None:
        """(CPU seconds used, seconds spent runnable but waiting for a CPU) of the worker, from the kernel."""
        return read_schedstat(f"/proc/{self._python_pid or self._find_python_pid()}/schedstat")

    def _find_python_pid(self) -> int:
        """Under bubblewrap the process we started is bwrap; the worker is its descendant."""
        pid = self._proc.pid
        for _ in range(4):
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as handle:
                    children = handle.read().split()
            except OSError:
                break
            if not children:
                break
            pid = int(children[0])
        self._python_pid = pid
        return pid

    def close(self, grace: float = 1.0) -> None:
        """Close the pipe (the worker exits on EOF) and kill it if it lingers."""
        if self._proc.returncode is None:
            try:
                self._stdin.close()
            except OSError:
                pass
            try:
                self._proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.kill()
        self._stdout.close()

    def kill(self) -> None:
        if self._proc.returncode is None:  # not reaped yet, so the process group id is still ours
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self._proc.kill()
        self._proc.wait()

    def _failure(self, timed_out: bool = False, detail: str | None = None) -> SandboxFailure:
        """Kill the worker and say, for the model, why it stopped."""
        if timed_out:
            self.kill()
            return SandboxFailure(
                "the reward code did not finish within the time limit and was stopped; "
                "avoid unbounded loops and heavy computation in compute_dense_reward"
            )
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
        return SandboxFailure(explain_exit(signal_number, None if code < 0 else code, self.limits, self._stderr.text()))


LOADED_WALL_FACTOR = 20.0
"""On a machine busy with other work, a call may wait for a CPU far longer than it runs: its wall limit then
stretches by that wait, up to this many times the limit (0.5 s -> 10 s), never further."""


def loaded_deadline(started: float, now: float, wall_seconds: float, waited: float | None, waited_since: float) -> float:
    """The wall-clock deadline of a call that has reached its limit: `now` (stop it) unless the kernel says the worker
    spent part of the call runnable but waiting for a CPU (`waited` seconds since `waited_since`, from
    /proc/PID/schedstat). That wait is the machine's load, not the reward's doing, so the limit applies to the rest:
    a reward that sleeps or blocks is not runnable and is stopped as before, and LOADED_WALL_FACTOR bounds it all."""
    if waited is None or waited <= 0:
        return now
    own = (now - started) - min(waited, now - waited_since)
    if own >= wall_seconds:
        return now
    return min(started + wall_seconds * LOADED_WALL_FACTOR, now + (wall_seconds - own))


def read_schedstat(path: str) -> tuple[float, float] | None:
    """A /proc schedstat file's first two fields in seconds: time on a CPU, time waiting on a run queue."""
    try:
        with open(path, "rb") as handle:
            fields = handle.read().split()
        return int(fields[0]) / 1e9, int(fields[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def limit_config(limits: Limits, cpu: bool) -> dict[str, Any]:
    """The limits as the worker applies them (see worker._apply_limits and _lock_down)."""
    return {
        "memory_bytes": int(limits.memory_mb) * 1024 * 1024,
        "cpu_seconds": int(limits.cpu_seconds) if cpu else None,
        "open_files": int(limits.open_files),
    }


def explain_exit(signal_number: int | None, exit_code: int | None, limits: Limits, stderr: str = "") -> str:
    """Why a worker ended before answering, in words the model can act on."""
    if signal_number is not None:
        try:
            name = signal.Signals(signal_number).name
        except ValueError:
            name = f"signal {signal_number}"
        if signal_number == signal.SIGKILL:
            why = f"it went over its CPU-time ({limits.cpu_seconds} s) or memory ({limits.memory_mb} MB) limit"
        elif signal_number == signal.SIGSEGV:
            why = "it crashed the interpreter (for example by recursing too deeply)"
        else:
            why = "the code must not send signals or stop the process"
        return f"the reward process was killed by {name}: {why}"
    tail = clean_text(stderr.strip().splitlines()[-1], 300) if stderr.strip() else ""
    text = f"the reward process exited with code {exit_code} before answering; the code must not exit or stop the process"
    return f"{text} ({tail})" if tail and "sandbox worker failed" in tail else text


class ReplyDecoder:
    """Decodes a training worker's replies: JSON, checked by `parse_output`, or packed doubles.

    Packed replies carry no names: they reuse the names of the last JSON reply, which this side
    has already checked, and must be exactly one double per name plus the total."""

    def __init__(self) -> None:
        self._names: tuple[str, ...] = ()  # set with _struct by the first JSON reply
        self._struct: struct.Struct | None = None

    def decode(self, data: bytes) -> tuple[float, dict[str, float]] | dict[str, Any]:
        """(total, components), or the worker's error reply (a dict with "error")."""
        if data[:1] == REPLY:
            if self._struct is None or len(data) != 1 + self._struct.size:
                raise SandboxFailure("the reward process sent a malformed reply")
            values = self._struct.unpack_from(data, 1)
            return values[0], dict(zip(self._names, values[1:]))
        try:
            reply = loads(data)
            if isinstance(reply, dict) and "error" in reply:
                return reply
            total, components = parse_output(reply)
        except Malformed as exc:
            raise SandboxFailure(str(exc)) from None
        self._names, self._struct = tuple(components), reply_struct(len(components))
        return total, components


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
