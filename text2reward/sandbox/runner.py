"""Run untrusted reward code on a batch of states in a fresh isolated process.

This is the runtime layer on its own: it does not run the static pass, so tests can prove that
isolation alone stops hostile code. `validate` puts the two together.

Each run is a fresh child forked from a zygote (one per isolation setting and parent process)
that imported numpy and the view classes once: tens of ms per run instead of ~0.3 s for a new
interpreter. The zygote only ever runs trusted code; each child puts itself in its own jail after
the fork (its own user, network and IPC namespaces where the kernel allows them, Landlock, seccomp),
so one candidate can neither reach nor leave anything for the next.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import pickle
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from text2reward.sandbox.isolation import active_isolation
from text2reward.sandbox.limits import Limits
from text2reward.sandbox.process import SandboxFailure, WorkerProcess, explain_exit, limit_config
from text2reward.sandbox.untrusted import Malformed, clean_text, loads, parse_output

Output = tuple[float, dict[str, float]]


class MalformedReply(SandboxFailure):
    """The child (untrusted) answered garbage: its candidate fails, the zygote stays."""


@dataclass
class RunResult:
    """What came back: per-sample outputs for each pass over the samples, or the error that stopped it."""

    passes: list[list[Output]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    """Seconds per reward call in the first pass, measured inside the worker."""
    error: str | None = None
    """Feedback text: the trimmed traceback, or why the process was stopped."""
    error_kind: str | None = None
    """'load' (the module body), 'exception' (a call raised), 'output' (a bad return value), 'process'."""
    failed_index: int | None = None
    wall_seconds: float = 0.0
    child_cpu_seconds: float | None = None
    """The child's CPU time from fork to exit, from the kernel via the zygote (trusted code), not from the child."""
    isolation: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def outputs(self) -> list[Output]:
        return self.passes[0] if self.passes else []


ZYGOTE_GRACE_SECONDS = 30.0
"""Extra time the parent gives the zygote beyond the run's own limit (its start-up, under load)."""
_ZYGOTES: dict[tuple[str, int], WorkerProcess] = {}
_LOCK = threading.Lock()


def run_reward(code: str, samples: list[tuple[Any, np.ndarray]], limits: Limits | None = None, *, repeats: int = 1) -> RunResult:
    """Run `compute_dense_reward` on every (view, action), `repeats` times over, in a fresh sandboxed process."""
    limits = limits or Limits()
    started = time.monotonic()
    request = {
        "code": code,
        "modules": view_modules([view for view, _ in samples]),
        "samples": [pickle.dumps((view, np.asarray(action)), protocol=pickle.HIGHEST_PROTOCOL) for view, action in samples],
        "repeats": int(repeats),
        "wall_seconds": float(limits.wall_seconds),
        **limit_config(limits, cpu=True),
    }
    with _LOCK:
        zygote = _zygote(limits)
        result = RunResult(isolation=zygote.isolation)
        deadline = time.monotonic() + limits.wall_seconds + ZYGOTE_GRACE_SECONDS
        try:
            zygote.start(request, deadline)
            status = zygote.receive(deadline)
            reply = zygote.receive_raw(deadline) if isinstance(status, dict) and status.get("reply") else None
            _fill(result, status, reply, len(samples), repeats, limits)
        except MalformedReply as exc:  # the child's doing: report it, keep the zygote
            result.error, result.error_kind = str(exc), "process"
        except SandboxFailure as exc:  # the zygote itself failed: start a fresh one next time
            _discard(zygote)
            result.error, result.error_kind = f"the sandbox failed: {exc}", "process"
    result.wall_seconds = time.monotonic() - started
    return result


def _zygote(limits: Limits) -> WorkerProcess:
    active_isolation(limits.isolation)  # cached; refuses (fail closed) if the jail was since hidden
    key = (limits.isolation, os.getpid())
    zygote = _ZYGOTES.get(key)
    if zygote is None or not zygote.alive():
        if zygote is not None:
            _discard(zygote)
        zygote = WorkerProcess(limits, mode="zygote")
        _ZYGOTES[key] = zygote
    return zygote


def _discard(zygote: WorkerProcess) -> None:
    for key, value in list(_ZYGOTES.items()):
        if value is zygote:
            del _ZYGOTES[key]
    zygote.kill()
    zygote.close()


@atexit.register
def shutdown_zygotes() -> None:
    """Close this process's zygotes (they also exit on their own when the pipe closes)."""
    with _LOCK:
        for key, zygote in list(_ZYGOTES.items()):
            if key[1] == os.getpid():
                zygote.close()
            del _ZYGOTES[key]


def _fill(result: RunResult, status: Any, reply_bytes: bytes | None, n_samples: int, repeats: int, limits: Limits) -> None:
    """Turn the zygote's status and the child's reply into the result; distrust both shapes."""
    if not isinstance(status, dict):
        raise SandboxFailure("the sandbox sent a malformed status")
    cpu = status.get("cpu_seconds")
    result.child_cpu_seconds = float(cpu) if type(cpu) is float and 0 <= cpu < 1e6 else None
    if reply_bytes is None:
        result.error_kind = "process"
        signal_number, exit_code = status.get("signal"), status.get("exit")
        if status.get("timeout"):
            result.error = (
                f"the reward code did not finish within {limits.wall_seconds:g} s and was stopped; "
                "avoid unbounded loops and heavy computation in compute_dense_reward"
            )
        elif status.get("detail"):
            result.error = clean_text(status["detail"])
        else:
            result.error = explain_exit(
                signal_number if type(signal_number) is int else None, exit_code if type(exit_code) is int else None, limits
            )
        return
    try:
        reply = loads(reply_bytes)
    except Malformed as exc:
        raise MalformedReply(str(exc)) from None
    if not isinstance(reply, dict):
        raise MalformedReply("the reward process sent a malformed reply")
    if "error" in reply:
        result.error = clean_text(reply["error"])
        kind = reply.get("kind")
        result.error_kind = kind if kind in ("load", "exception", "output") else "exception"
        index = reply.get("index")
        result.failed_index = index if type(index) is int and 0 <= index < n_samples else None
        return
    passes = reply.get("passes")
    if not isinstance(passes, list) or len(passes) != repeats or any(not isinstance(p, list) or len(p) != n_samples for p in passes):
        raise MalformedReply("the reward process sent a malformed reply")
    try:
        result.passes = [[parse_output(item) for item in one] for one in passes]
        result.seconds = [_nanoseconds(item) / 1e9 for item in passes[0]] if passes else []
    except (SandboxFailure, Malformed) as exc:
        raise MalformedReply(str(exc)) from None


def _nanoseconds(item: list) -> float:
    value = item[2] if len(item) > 2 else None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < 1e15:
        raise SandboxFailure("the reward process sent a malformed reply")
    return float(value)


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
