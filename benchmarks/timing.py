"""Timing helpers shared by the benchmarks (run as scripts: `benchmarks/` is on sys.path)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np


def stepper(env: Any, actions: np.ndarray, seed: int) -> Callable[[int], float]:
    """A function that steps `env` n times through `actions` (resetting on done), returning seconds."""
    env.reset(seed=seed)
    state = {"i": 0, "episode": seed}

    def run(n: int) -> float:
        i = state["i"]
        start = time.perf_counter()
        for _ in range(n):
            _, _, terminated, truncated, _ = env.step(actions[i])
            i = (i + 1) % len(actions)
            if terminated or truncated:
                state["episode"] += 1
                env.reset(seed=state["episode"])
        elapsed = time.perf_counter() - start
        state["i"] = i
        return elapsed

    return run
