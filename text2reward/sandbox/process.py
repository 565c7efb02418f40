"""The parent's handle on one sandboxed worker process: start, talk with deadlines, kill.

Why the parent enforces time: a jailed process can ignore signals and spin; only the parent's
wall clock and SIGKILL are beyond its reach. Replies are parsed as JSON (or, for a training
worker's steady state, unpacked as doubles of a size fixed by names already checked) and re-checked,
since a compromised worker can write anything on its pipe.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import Any

from text2reward.sandbox.channel import MAX_REPLY_BYTES, ChannelClosed, ChannelTimeout, FrameReader, frame, write_all
from text2reward.sandbox.isolation import NOBODY, bubblewrap_prefix, bubblewrap_usable, describe, python_command, worker_env
from text2reward.sandbox.limits import Limits
from text2reward.sandbox.wire import REPLY, reply_struct
from text2reward.sandbox.worker import MAX_COMPONENTS, MAX_NAME_CHARS
from sim_envs.errors import ConfigError


class SandboxFailure(Exception):
    """The worker did not answer properly: it timed out, died, or sent something malformed."""


class WorkerProcess:
    """One isolated worker process (see worker.py for the modes); frames in, JSON frames out."""

    def __init__(self, limits: Limits, mode: str):
        self.limits = limits
        use_bwrap = resolve_bubblewrap(limits.bubblewrap)
        self.isolation = describe(use_bwrap)
        self.scratch = tempfile.mkdtemp(prefix="t2r-sandbox-")
        self.drop_to_uid = NOBODY if (not use_bwrap and os.geteuid() == 0) else None
        if self.drop_to_uid is not None:
            os.chown(self.scratch, NOBODY, NOBODY)
        config = {"mode": mode, **limit_config(limits, cpu=False)}
        argv = python_command() + [json.dumps(config)]
        if use_bwrap:
            argv = bubblewrap_prefix() + argv
        self._proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.scratch,
            env=worker_env(self.scratch),
            close_fds=True,
            start_new_session=True,
        )
        self._in = self._proc.stdin.fileno()
        self._out = self._proc.stdout.fileno()
        os.set_blocking(self._in, False)
        self._reader = FrameReader(self._out)
        self._stderr = _Tail(self._proc.stderr)

    def alive(self) -> bool:
        return self._proc.poll() is None

    @property
    def pid(self) -> int:
        return self._proc.pid

    def start(self, hello: dict[str, Any], deadline: float) -> None:
        hello = dict(hello, drop_to_uid=self.drop_to_uid)
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
            return json.loads(data)
        except (ValueError, RecursionError):
            raise self._failure(detail="it sent a reply that is not JSON") from None

    def exchange(self, data: bytes, seconds: float) -> bytes:
        """Write ready-made frames (headers included), return the reply frame's bytes, all within `seconds`.

        One call per env step in training: one write, one poll and usually one read."""
        deadline = time.monotonic() + seconds
        try:
            write_all(self._in, data, deadline)
            return self._reader.read(deadline, MAX_REPLY_BYTES)
        except ChannelTimeout:
            raise self._failure(timed_out=True) from None
        except ChannelClosed as exc:
            raise self._failure(detail=str(exc) if "exceeds" in str(exc) else None) from None

    def close(self, grace: float = 1.0) -> None:
        """Close the pipe (the worker exits on EOF), kill it if it lingers, remove its scratch dir."""
        if self._proc.returncode is None:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
            try:
                self._proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.kill()
        self._proc.stdout.close()
        shutil.rmtree(self.scratch, ignore_errors=True)

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


def limit_config(limits: Limits, cpu: bool) -> dict[str, Any]:
    """The limits as the worker applies them (see worker._apply_limits and _lock_down)."""
    return {
        "memory_bytes": int(limits.memory_mb) * 1024 * 1024,
        "cpu_seconds": int(limits.cpu_seconds) if cpu else None,
        "open_files": int(limits.open_files),
    }


def resolve_bubblewrap(wanted: bool | None) -> bool:
    if wanted is False:
        return False
    usable = bubblewrap_usable()
    if wanted and not usable:
        raise ConfigError("bubblewrap was required but does not work here; install it (apt-get install bubblewrap) or set bubblewrap=None")
    return usable


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
    tail = stderr.strip().splitlines()[-1][:300] if stderr.strip() else ""
    text = f"the reward process exited with code {exit_code} before answering; the code must not exit or stop the process"
    return f"{text} ({tail})" if tail and "sandbox worker failed" in tail else text


def parse_output(item: Any) -> tuple[float, dict[str, float]]:
    """Re-check one (total, components) reply from the worker: numbers and short string keys only."""
    if not (isinstance(item, list) and len(item) >= 2 and isinstance(item[1], dict)):
        raise SandboxFailure("the reward process sent a malformed reply")
    total, raw = item[0], item[1]
    if not isinstance(total, (int, float)) or isinstance(total, bool) or len(raw) > MAX_COMPONENTS:
        raise SandboxFailure("the reward process sent a malformed reply")
    components: dict[str, float] = {}
    for key, value in raw.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or len(key) > MAX_NAME_CHARS:
            raise SandboxFailure("the reward process sent a malformed reply")
        components[key] = float(value)
    return float(total), components


class ReplyDecoder:
    """Decodes a training worker's replies: JSON, checked by `parse_output`, or packed doubles.

    Packed replies carry no names: they reuse the names of the last JSON reply, which this side
    has already checked, and must be exactly one double per name plus the total."""

    def __init__(self) -> None:
        self._names: tuple[str, ...] | None = None
        self._struct = None

    def decode(self, data: bytes) -> tuple[float, dict[str, float]] | dict[str, Any]:
        """(total, components), or the worker's error reply (a dict with "error")."""
        if data[:1] == REPLY:
            if self._struct is None or len(data) != 1 + self._struct.size:
                raise SandboxFailure("the reward process sent a malformed reply")
            values = self._struct.unpack_from(data, 1)
            return values[0], dict(zip(self._names, values[1:]))
        try:
            reply = json.loads(data)
        except (ValueError, RecursionError):
            raise SandboxFailure("the reward process sent a reply that is not JSON") from None
        if isinstance(reply, dict) and "error" in reply:
            return reply
        total, components = parse_output(reply)
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
