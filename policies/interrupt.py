"""Stopping a training when a person asks (Ctrl-C, SIGTERM): at the next step that ends a collection, with what it
reached kept.

Why a request polled by a callback rather than KeyboardInterrupt raised wherever the signal lands: an exception in the
middle of SB3's step could leave a transition half stored or an update half made, and the checkpoint written after it
would not be one a training can go on from. A callback that returns False ends `learn` between steps (as SB3's own
callbacks stop it); the resume checkpoint (policies.resume) is then written, marked unfinished, and `train` raises
`TrainingInterrupted` once result.json says how far it got.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.type_aliases import TrainFrequencyUnit


class TrainingInterrupted(Exception):
    """A person stopped the training; its checkpoint and result.json (marked interrupted) are written."""

    def __init__(self, steps: int, requested_steps: int, wall_seconds: float):
        super().__init__(f"training interrupted at step {steps} of {requested_steps}")
        self.steps, self.requested_steps, self.wall_seconds = steps, requested_steps, wall_seconds


class StopOnRequest(BaseCallback):
    """Ends `learn` at the first step after `requested()` turns true that ends one of the algorithm's collections.

    Why not at once: an off-policy algorithm collects `train_freq` steps (times its envs) between updates, counted from
    where `learn` starts, and keeps collecting whole chunks until the budget. A training stopped mid-chunk and resumed
    counts its chunks from the stop, and overshot its budget (401 or 402 steps of 400 with `train_freq=4`). Stopped on
    a chunk's end, a resumed training's chunks end where a fresh one's would. That waits at most `train_freq - 1` steps;
    with SAC's default of 1, and for PPO (which resumes at its rollouts' ends: policies.resume), it is the next step."""

    def __init__(self, requested: Callable[[], bool]):
        super().__init__()
        self.requested = requested

    def _on_step(self) -> bool:
        return not (self.requested() and self._at_chunk_end())

    def _at_chunk_end(self) -> bool:
        train_freq: Any = getattr(self.model, "train_freq", None)
        if getattr(train_freq, "unit", None) != TrainFrequencyUnit.STEP:  # on-policy, or chunks of episodes
            return True
        return int(self.model.num_timesteps) % (int(train_freq.frequency) * int(self.model.n_envs)) == 0


class StopRequest:
    """Set by SIGINT or SIGTERM while `catching()`; a second signal interrupts at once (KeyboardInterrupt), for a
    person who will not wait for the step to end."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def __call__(self) -> bool:
        return self.signal is not None

    def _handle(self, number: int, frame: FrameType | None) -> None:
        if self.signal is not None:
            raise KeyboardInterrupt
        self.signal = number

    @contextmanager
    def catching(self) -> Iterator[StopRequest]:
        previous = {number: signal.signal(number, self._handle) for number in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
