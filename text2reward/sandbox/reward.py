"""`SandboxedReward`: a model-written reward that training calls every step, run in an isolated process.

Why a persistent worker: starting a jailed Python per step would cost ~0.2 s; one long-lived
worker per env (its own jail: one bwrap, or its own Landlock + seccomp process) costs one pipe
round trip per step. The worker starts on the first call, when the
view's class (and so the module to import before lock-down) is known. Views travel in the compact
format of wire.py (a schema once, then only numbers), not as pickles: pickling was most of the
cost of a step.

Validation saw a few hundred calls; training makes millions, so the limits hold on every call: a
wall-clock and a kernel-measured CPU limit per call, a median over each window of calls (a reward
that starts sleeping a little per call after validation), finite totals and components. The first
breach fails the reward for good (later calls raise the same error, so a time bomb cannot reset by
restarting its worker); training stops there and keeps what it had (policies.train).
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from sim_envs.errors import ConfigError, RewardProgramError
from text2reward.sandbox.hints import attribute_hint
from text2reward.sandbox.limits import Limits
from text2reward.sandbox.process import ReplyDecoder, SandboxFailure, WorkerProcess, read_schedstat
from text2reward.sandbox.runner import view_modules
from text2reward.sandbox.untrusted import clean_text
from text2reward.sandbox.wire import ViewEncoder


class SandboxedReward:
    """Implements `policies.reward_program.RewardFunction`; raises `RewardProgramError` on any failure."""

    def __init__(self, source: str, name: str = "program", limits: Limits | None = None):
        self.source = source
        self.name = name
        self.limits = limits or Limits()
        self._worker: WorkerProcess | None = None
        self._encoder: ViewEncoder | None = None
        self._replies: ReplyDecoder | None = None
        self._failure: str | None = None
        self._isolation = ""
        self._calls = 0
        self._window: list[float] = []
        self._own_times: list[float | None] = []

    def __call__(self, view: Any, action: np.ndarray, native_reward: float, step_success: bool) -> tuple[float, dict[str, float]]:
        if self._failure is not None:
            raise RewardProgramError(self._failure)
        worker = self._worker or self._start(view)
        encoder, replies = self._encoder, self._replies
        assert encoder is not None and replies is not None  # set with the worker
        data = encoder.encode(view, np.asarray(action))
        sampled = self._calls % SAMPLE_EVERY == 0
        before = (worker.schedstat(), read_schedstat(OWN_SCHEDSTAT)) if sampled else None
        started = time.perf_counter()
        try:
            reply = replies.decode(worker.exchange(data, self.limits.call_seconds, self.limits.call_cpu_seconds))
        except SandboxFailure as exc:
            self._fail(f"reward program '{self.name}' failed at call {self._calls + 1}: {exc}")
        wall = time.perf_counter() - started
        self._window.append(wall)
        if before is not None:
            self._own_times.append(_own_time(wall, before, (worker.schedstat(), read_schedstat(OWN_SCHEDSTAT))))
        self._calls += 1
        if isinstance(reply, dict):
            error = clean_text(reply["error"])
            hint = attribute_hint(error, view)
            self._fail(f"reward program '{self.name}' failed at call {self._calls}:\n{error}" + (f"\n{hint}" if hint else ""))
        total, components = reply
        if not (math.isfinite(total) and all(map(math.isfinite, components.values()))):
            bad = [name for name, value in components.items() if not math.isfinite(value)]
            what = f"component '{bad[0]}' is {components[bad[0]]}" if bad else f"the total is {total}"
            self._fail(f"reward program '{self.name}' failed at call {self._calls}: {what}; a reward must be finite on every step")
        if len(self._window) >= self.limits.slow_window:
            self._check_speed()
        return reply

    def _check_speed(self) -> None:
        """Slow means the reward's own time: the wall clock of a call less the time the worker and this
        process spent waiting for a CPU (the kernel's run-queue delay), so that a machine busy with other
        training is not mistaken for a reward that sleeps. Measured on every SAMPLE_EVERY-th call."""
        median = statistics.median(self._window)
        own = [t for t in self._own_times if t is not None]
        self._window.clear()
        self._own_times.clear()
        if median > self.limits.slow_call_seconds and own:
            median = statistics.median(own)  # the wall clock says slow: does the reward's own time?
        if median > self.limits.slow_call_seconds:
            self._fail(
                f"reward program '{self.name}' failed at call {self._calls}: its calls became slow "
                f"({median * 1000:.1f} ms median over the last {self.limits.slow_window}, limit "
                f"{self.limits.slow_call_seconds * 1000:.0f} ms); the code must not wait or sleep"
            )

    def _fail(self, message: str) -> NoReturn:
        """Stop the worker and refuse every later call with the same reason."""
        self._failure = message
        self.close()
        raise RewardProgramError(message)

    @property
    def isolation(self) -> str:
        """The jail that ran it, for result.json (known once the worker has started)."""
        return self._isolation

    def _start(self, view: Any) -> WorkerProcess:
        worker = WorkerProcess(self.limits, mode="serve")
        self._isolation = worker.isolation
        deadline = time.monotonic() + self.limits.wall_seconds
        modules = view_modules([view])
        hello = {"code": self.source, "modules": modules}
        try:
            worker.start(hello, deadline)
            reply = worker.receive(deadline)
        except SandboxFailure as exc:
            worker.close()
            self._fail(f"reward program '{self.name}' could not start: {exc}")
        if not (isinstance(reply, dict) and reply.get("ready") is True):
            worker.close()
            error = reply.get("error") if isinstance(reply, dict) else None
            self._fail(f"reward program '{self.name}' could not start:\n{clean_text(error)}")
        self._worker, self._encoder, self._replies = worker, ViewEncoder(modules), ReplyDecoder()
        return worker

    def close(self) -> None:
        """Stop the worker; a later call starts a fresh one, unless the reward has failed."""
        worker, self._worker, self._encoder, self._replies = self._worker, None, None, None
        if worker is not None:
            worker.close()

    def __enter__(self) -> SandboxedReward:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to report to
            pass

    def __getstate__(self) -> dict[str, Any]:
        """Pickles without its process: a copy in another process starts its own worker."""
        return {"source": self.source, "name": self.name, "limits": self.limits, "_failure": self._failure}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _worker=None, _encoder=None, _replies=None, _calls=0, _window=[], _own_times=[], _isolation="")


def reward_from_file(spec: str, trusted: bool = False, mode: str = "dense") -> Any:
    """A reward file for training: jailed like model-written code (refusing where no jail works), or
    in the training process only when the caller vouches for it (`--trusted-reward`).

    A jailed file gets the verdict `t2r validate` gives it: the same static pass (`check_program`),
    then the same worker and namespace (pre-imported `np` and `math`) at the first call. A trusted
    file skips the static pass (the user vouches for its imports) but runs in the same namespace. `mode` is
    the reward mode the file is written for (its function is checked; training shapes its value)."""
    from policies.reward_program import MODE_SIGNATURES, ProgramReward, runnable_source
    from text2reward.sandbox.isolation import active_isolation
    from text2reward.sandbox.static import check_program

    path = Path(spec)
    if not path.is_file():
        raise ConfigError(
            f"reward file {path} does not exist ({spec!r} is neither expert, sparse nor an existing .py file); "
            f"pass expert, sparse, or a .py file defining {MODE_SIGNATURES.get(mode, MODE_SIGNATURES['dense'])[0]}"
        )
    if trusted:
        return ProgramReward.from_file(path, mode)
    active_isolation()  # fail closed before any env or training exists
    source = path.read_text()
    check_program(source, f"reward file {path}", mode)
    return SandboxedReward(runnable_source(source, mode), name=path.stem)


SAMPLE_EVERY = 16
"""One call in this many reads the kernel's scheduler statistics (four small /proc reads, ~20 us)."""
OWN_SCHEDSTAT = "/proc/thread-self/schedstat"


def _own_time(wall: float, before: tuple[Any, Any], after: tuple[Any, Any]) -> float | None:
    """A call's wall clock less the run-queue waits of the worker and of this thread during it (None when
    /proc cannot say): what is left is the reward computing, or sleeping, or blocking."""
    (worker_before, own_before), (worker_after, own_after) = before, after
    if None in (worker_before, own_before, worker_after, own_after):
        return None
    waited = (worker_after[1] - worker_before[1]) + (own_after[1] - own_before[1])
    return max(wall - waited, 0.0)
