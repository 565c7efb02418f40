"""`SandboxedReward`: a model-written reward that training calls every step, run in an isolated process.

Why a persistent worker: starting a jailed Python per step would cost ~0.2 s; one long-lived
worker per env (its own jail: one bwrap, or its own Landlock + seccomp process) costs one pipe
round trip per step. The worker starts on the first call, when the
view's class (and so the module to import before lock-down) is known. Views travel in the compact
format of wire.py (a schema once, then only numbers), not as pickles: pickling was most of the
cost of a step.

Validation saw a few hundred calls; training makes millions, so the limits hold on every call, judged
on the kernel's clocks of the worker (clocks.py): CPU time and blocked time per call, with the wall
clock only as a backstop; no CPU between calls; a median of the reward's own time over each window of
calls (a reward that starts sleeping a little per call after validation); finite totals and components. The first
breach fails the reward for good (later calls raise the same error, so a time bomb cannot reset by
restarting its worker); training stops there and keeps what it had (policies.train).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from policies.reward_modes import REWARD_MODES
from policies.reward_program import ENTRY_POINT, ProgramReward, runnable_source
from sim_envs.errors import ConfigError, RewardProgramError, RewardStoppedByMachine
from text2reward.sandbox.calls import CallStopped, SandboxFailure
from text2reward.sandbox.clocks import CallLimits
from text2reward.sandbox.hints import attribute_hint
from text2reward.sandbox.isolation import active_isolation
from text2reward.sandbox.limits import Limits
from text2reward.sandbox.process import ReplyDecoder, WorkerProcess
from text2reward.sandbox.runner import view_modules, view_sources
from text2reward.sandbox.static import check_program
from text2reward.sandbox.untrusted import Malformed, clean_text, loads
from text2reward.sandbox.wire import ViewEncoder

STARTUP_CPU_SECONDS = 10.0
"""CPU a training worker may take to import numpy, the views and the allowed modules the code names, lock down and
run the module body (~0.5-1 s measured; a module-level loop is stopped here)."""
STARTUP_BLOCKED_SECONDS = 30.0
"""Blocked time a worker's start-up may take: its imports read files, which on a cold, busy disk can take seconds."""


class SandboxedReward:
    """Implements `policies.reward_program.RewardFunction`; raises `RewardProgramError` on any failure."""

    def __init__(self, source: str, name: str = "program", limits: Limits | None = None, names: Iterable[str] | None = None):
        self.source = source
        self.name = name
        self.limits = limits or Limits()
        self.names = frozenset(names) if names is not None else None
        """The component names its validation saw (`ValidationReport.component_names`): a call returning another fails
        the candidate. None (a reward file, older jobs): at most `MAX_COMPONENTS` names over its training."""
        self._cpu_total = self._blocked_total = 0.0
        self._seen_names: set[str] = set()
        self._worker: WorkerProcess | None = None
        self._encoder: ViewEncoder | None = None
        self._replies: ReplyDecoder | None = None
        self._failure: str | None = None
        self._isolation = ""
        self._calls = 0
        self._own_times: list[float] = []
        self._call_limits: CallLimits | None = None
        self._idle_cpu, self._started_at = 0.0, 0.0
        self.failure_numbers = ""

    def __call__(self, view: Any, action: np.ndarray, native_reward: float, step_success: bool) -> tuple[float, dict[str, float]]:
        if self._failure is not None:
            raise RewardProgramError(self._failure)
        worker = self._worker or self._start(view)
        encoder, replies = self._encoder, self._replies
        assert encoder is not None and replies is not None  # set with the worker
        data = encoder.encode(view, np.asarray(action))
        try:
            raw, own = worker.exchange(data, self.call_limits)
            parsing = time.thread_time()
            reply = replies.decode(raw)
            parsing = time.thread_time() - parsing  # this process's CPU on the reply: the candidate's (its waits are not)
        except CallStopped as exc:
            self._fail(f"reward program '{self.name}' failed at call {self._calls + 1}: {exc}", exc.numbers(), exc.by_machine)
        except SandboxFailure as exc:
            self._fail(f"reward program '{self.name}' failed at call {self._calls + 1}: {exc}", by_machine=exc.by_machine)
        self._calls += 1
        self._idle_cpu += worker.idle_cpu
        if worker.idle_cpu and self._idle_cpu > self.limits.idle_cpu_seconds + self.limits.idle_cpu_share * (time.monotonic() - self._started_at):
            self._fail(f"reward program '{self.name}' failed at call {self._calls}: its process used {self._idle_cpu * 1000:.0f} ms "
                       f"of CPU time between calls ({self._idle_cpu / max(time.monotonic() - self._started_at, 1e-9):.0%} of a core), "
                       "while it should wait for the next state; the code must not run "
                       "anything outside compute_dense_reward (timers, signal handlers)")
        if own is not None:
            self._own_times.append(own)
        self._add_to_budgets(worker.calls.last_split, parsing)
        if isinstance(reply, dict):
            error = clean_text(reply["error"])
            hint = attribute_hint(error, view)
            self._fail(f"reward program '{self.name}' failed at call {self._calls}:\n{error}" + (f"\n{hint}" if hint else ""))
        total, components = reply
        if not (math.isfinite(total) and all(map(math.isfinite, components.values()))):
            bad = [name for name, value in components.items() if not math.isfinite(value)]
            what = f"component '{bad[0]}' is {components[bad[0]]}" if bad else f"the total is {total}"
            self._fail(f"reward program '{self.name}' failed at call {self._calls}: {what}; a reward must be finite on every step")
        if self._calls % self.limits.slow_window == 0:
            self._check_speed()
        return total, components

    @property
    def call_limits(self) -> CallLimits:
        if self._call_limits is None:
            self._call_limits = CallLimits(cpu=self.limits.call_cpu_seconds, blocked=self.limits.call_blocked_seconds,
                                           wall=self.limits.call_wall_seconds)
        return self._call_limits

    def _add_to_budgets(self, split: tuple[float, float] | None, parsing: float) -> None:
        """Add the call to the candidate's totals of CPU and blocked time; over either budget, it fails (Limits says
        why these budgets exist beside the per-call limits and the median)."""
        cpu, blocked = split if split is not None else (0.0, 0.0)
        self._cpu_total += cpu + parsing
        self._blocked_total += blocked
        limits, calls = self.limits, self._calls
        cpu_budget = limits.total_cpu_seconds + limits.total_cpu_per_call * calls
        blocked_budget = limits.total_blocked_seconds + limits.total_blocked_per_call * calls
        if self._blocked_total > blocked_budget:
            self._fail(f"reward program '{self.name}' failed at call {calls}: its calls spent {self._blocked_total:.1f} s in all "
                       f"blocked (sleeping or waiting, not computing), over its budget for {calls} calls "
                       f"({limits.total_blocked_seconds:g} s + {limits.total_blocked_per_call * 1000:g} ms a call); "
                       "compute_dense_reward must not sleep, wait or block, not even on some calls",
                       f"blocked {self._blocked_total:.3f} s, CPU {self._cpu_total:.3f} s over {calls} calls (budget {blocked_budget:.3f} s)")
        if self._cpu_total > cpu_budget:
            self._fail(f"reward program '{self.name}' failed at call {calls}: its calls used {self._cpu_total:.1f} s of CPU time "
                       f"in all, over its budget for {calls} calls ({limits.total_cpu_seconds:g} s + "
                       f"{limits.total_cpu_per_call * 1000:g} ms a call); a reward must cost microseconds on every state: "
                       "avoid loops and heavy computation in compute_dense_reward",
                       f"CPU {self._cpu_total:.3f} s (its replies' parsing included), blocked {self._blocked_total:.3f} s over "
                       f"{calls} calls (budget {cpu_budget:.3f} s)")

    def _check_speed(self) -> None:
        """Slow means the reward's own time (CPU + blocked, from the kernel's clocks of the worker, every call), so a
        machine busy with other training is never mistaken for a reward that sleeps a little on every call."""
        own, self._own_times = self._own_times, []
        if len(own) < self.limits.slow_window // 2:  # /proc could not say for most calls: nothing to judge on
            return
        median = statistics.median(own)
        if median > self.limits.slow_call_seconds:
            self._fail(
                f"reward program '{self.name}' failed at call {self._calls}: its calls became slow "
                f"({median * 1000:.1f} ms of its own time, median over the last {self.limits.slow_window}, limit "
                f"{self.limits.slow_call_seconds * 1000:.0f} ms); the code must not wait or sleep"
            )

    def _fail(self, message: str, numbers: str = "", by_machine: bool = False) -> NoReturn:
        """Stop the worker and refuse every later call with the same reason. `message` is what the code did (it
        reaches the model); `numbers`, the kernel's account with the machine's side, goes only to people."""
        self._failure = message
        self.failure_numbers = numbers
        self.close()
        error = RewardStoppedByMachine(message) if by_machine else RewardProgramError(message)
        error.numbers = numbers
        raise error

    @property
    def isolation(self) -> str:
        """The jail that ran it, for result.json (known once the worker has started)."""
        return self._isolation

    def _start(self, view: Any) -> WorkerProcess:
        worker = WorkerProcess(self.limits, mode="serve")
        self._isolation = worker.isolation
        deadline = time.monotonic() + self.limits.wall_seconds
        modules = view_modules([view])
        hello = {"code": self.source, "modules": modules, "sources": view_sources(modules)}
        try:  # the start-up judged like a call: the imports and module body on CPU, the wall clock as the backstop
            worker.start(hello, deadline)
            raw, _ = worker.exchange(b"", CallLimits(cpu=STARTUP_CPU_SECONDS, blocked=STARTUP_BLOCKED_SECONDS,
                                                     wall=self.limits.wall_seconds))
            reply = loads(raw)
        except Malformed as exc:
            worker.close()
            self._fail(f"reward program '{self.name}' could not start: the reward process sent {exc}")
        except SandboxFailure as exc:
            worker.close()
            self._fail(f"reward program '{self.name}' could not start: {exc}", by_machine=exc.by_machine)
        if not (isinstance(reply, dict) and reply.get("ready") is True):
            worker.close()
            error = reply.get("error") if isinstance(reply, dict) else None
            self._fail(f"reward program '{self.name}' could not start:\n{clean_text(error)}")
        self._worker, self._encoder, self._replies = worker, ViewEncoder(modules), ReplyDecoder(self.names, self._seen_names)
        self._idle_cpu, self._started_at = 0.0, time.monotonic()
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
        return {"source": self.source, "name": self.name, "limits": self.limits, "names": self.names, "_failure": self._failure}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _worker=None, _encoder=None, _replies=None, _calls=0, _own_times=[], _isolation="",
                             failure_numbers="", _call_limits=None, _idle_cpu=0.0, _cpu_total=0.0, _blocked_total=0.0,
                             _seen_names=set())


def reward_from_file(spec: str, trusted: bool = False, mode: str = "dense") -> Any:
    """A reward file for training: jailed like model-written code (refusing where no jail works), or
    in the training process only when the caller vouches for it (`--trusted-reward`).

    A jailed file gets the verdict `t2r validate` gives it: the same static pass (`check_program`),
    then the same worker and namespace (pre-imported `np` and `math`) at the first call. A trusted
    file skips the static pass (the user vouches for its imports) but runs in the same namespace. `mode` is
    the reward mode the file is written for (its function is checked; training shapes its value)."""
    path = Path(spec)
    function = REWARD_MODES[mode].function if mode in REWARD_MODES else ENTRY_POINT
    if not path.is_file():
        raise ConfigError(
            f"reward file {path} does not exist ({spec!r} is neither expert, sparse nor an existing .py file); "
            f"pass expert, sparse, or a .py file defining {function}"
        )
    if trusted:
        return ProgramReward.from_file(path, mode)
    active_isolation()  # fail closed before any env or training exists
    try:
        source = path.read_text()
    except UnicodeDecodeError:
        raise ConfigError(f"reward file {path} is not text (it holds bytes no editor wrote as UTF-8); pass a .py file defining "
                          f"{function}") from None
    check_program(source, f"reward file {path}", mode)
    return SandboxedReward(runnable_source(source, mode), name=path.stem)
