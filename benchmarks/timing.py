"""Helpers shared by the benchmarks (run as scripts: `benchmarks/` is on sys.path)."""

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


def parse_steps(items: list[str], defaults: dict[str, int]) -> dict[str, int]:
    """Budgets per task: `--steps N` sets every task's, `--steps TASK=N` one task's; `defaults` names the tasks."""
    budgets = dict(defaults)
    for item in items:
        task, _, value = item.rpartition("=")
        try:
            steps = int(value)
        except ValueError:
            raise SystemExit(f"--steps {item!r}: expected N or TASK=N with an integer N") from None
        if steps <= 0:
            raise SystemExit(f"--steps {item!r}: the number of steps must be positive")
        if not task:
            budgets = dict.fromkeys(budgets, steps)
        elif task in budgets:
            budgets[task] = steps
        else:
            raise SystemExit(f"--steps {item!r}: {task} is not in --tasks ({', '.join(budgets)})")
    return budgets


def without_log_folder(model: Any) -> Any:
    """`model` with a logger that writes nowhere: without one, each `learn` of a model built with no TensorBoard folder
    leaves an empty /tmp/SB3-<time> folder behind (SB3's default logger makes it)."""
    from stable_baselines3.common.logger import Logger

    model.set_logger(Logger(folder=None, output_formats=[]))
    return model
