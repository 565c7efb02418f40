"""`SandboxedReward`: a model-written reward that training calls every step, run in an isolated process.

Why a persistent worker: starting a jailed Python per step would cost ~0.2 s; one long-lived
worker per env costs one pipe round trip per step. The worker starts on the first call, when the
view's class (and so the module to import before lock-down) is known. Views travel in the compact
format of wire.py (a schema once, then only numbers), not as pickles: pickling was most of the
cost of a step.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from sim_envs.errors import RewardProgramError
from text2reward.sandbox.limits import Limits
from text2reward.sandbox.process import ReplyDecoder, SandboxFailure, WorkerProcess
from text2reward.sandbox.runner import view_modules
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

    def __call__(self, view: Any, action: np.ndarray, native_reward: float, step_success: bool) -> tuple[float, dict[str, float]]:
        worker = self._worker or self._start(view)
        data = self._encoder.encode(view, np.asarray(action))
        try:
            reply = self._replies.decode(worker.exchange(data, self.limits.call_seconds))
        except SandboxFailure as exc:
            self.close()
            raise RewardProgramError(f"reward program '{self.name}' failed: {exc}") from None
        if type(reply) is dict:
            raise RewardProgramError(f"reward program '{self.name}' failed:\n{str(reply['error'])[:4000]}")
        return reply

    @property
    def isolation(self) -> str:
        return self._worker.isolation if self._worker else ""

    def _start(self, view: Any) -> WorkerProcess:
        worker = WorkerProcess(self.limits, mode="serve")
        deadline = time.monotonic() + self.limits.wall_seconds
        modules = view_modules([view])
        hello = {"code": self.source, "modules": modules}
        try:
            worker.start(hello, deadline)
            reply = worker.receive(deadline)
        except SandboxFailure as exc:
            worker.close()
            raise RewardProgramError(f"reward program '{self.name}' could not start: {exc}") from None
        if not (isinstance(reply, dict) and reply.get("ready") is True):
            worker.close()
            error = reply.get("error") if isinstance(reply, dict) else None
            raise RewardProgramError(f"reward program '{self.name}' could not start:\n{str(error)[:4000]}")
        self._worker, self._encoder, self._replies = worker, ViewEncoder(modules), ReplyDecoder()
        return worker

    def close(self) -> None:
        """Stop the worker; the next call starts a fresh one."""
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
        return {"source": self.source, "name": self.name, "limits": self.limits}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _worker=None, _encoder=None, _replies=None)
