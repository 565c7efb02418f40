"""What benchmarks that train arms x seeds share: one training attempt's record, and the pool that runs them.

Why a module: franka_baselines.py and keypoint_rewards.py both train (task, arm, seed) attempts to a fixed budget in
spawned processes, record the final and best success and the steps to 0.8, and write attempts.json as each one ends
(so a killed run keeps what finished); one record and one pool keep their attempts.json files alike.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from expert_baselines import machine

from policies.io import write_json_atomic
from policies.train import TrainConfig, train

SOLVED = 0.8
EPISODES = 10
"""Evaluation episodes per point of a curve."""


@dataclass
class Attempt:
    task: str
    arm: str
    seed: int
    steps: int
    final_success: float
    best_success: float
    steps_to_solved: int | None
    wall_seconds: float
    steps_per_second: float
    curve: list[dict[str, Any]] = field(default_factory=list)


def train_attempt(task: str, arm: str, seed: int, config: TrainConfig, reward_fn: Any = None) -> Attempt:
    """Train one attempt and keep what the benchmarks compare."""
    start = time.perf_counter()
    result = train(config, reward_fn=reward_fn)
    solved = next((int(point["steps"]) for point in result.curve if point["success_rate"] >= SOLVED), None)
    return Attempt(task, arm, seed, result.steps, result.success_rate, result.best_success_rate, solved,
                   round(time.perf_counter() - start, 1), result.steps_per_second,
                   [{"steps": p["steps"], "success_rate": p["success_rate"]} for p in result.curve])


def run_attempts(jobs: list[dict[str, Any]], run_attempt: Callable[[dict[str, Any]], Attempt], workers: int, out: Path,
                 extra: dict[str, Any] | None = None) -> list[Attempt]:
    """Every job in `workers` spawned processes (JAX and MuJoCo's renderers do not survive a fork), one process per
    attempt; attempts.json in `out` is rewritten as each attempt ends."""
    info = machine()
    attempts: list[Attempt] = []
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=spawn, max_tasks_per_child=1) as pool:
        futures = {pool.submit(run_attempt, job): job for job in jobs}
        for future in as_completed(futures):
            attempt = future.result()
            attempts.append(attempt)
            print(f"{attempt.task} {attempt.arm} seed {attempt.seed}: final {attempt.final_success:.2f} "
                  f"(best {attempt.best_success:.2f}), 0.8 at {attempt.steps_to_solved}, {attempt.wall_seconds:.0f} s", flush=True)
            write_json_atomic(out / "attempts.json", {"machine": info, "jobs": workers, **(extra or {}),
                                                       "attempts": [asdict(a) for a in attempts]})
    return attempts
