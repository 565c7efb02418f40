"""Train with each task's own (expert) dense reward: the reference a generated reward must match.

Why: a generated reward is only good relative to something. This trains SB3 with the environment's
own dense reward, using the project's per-family settings, and prints the success-rate learning curve,
wall time and throughput per task, so later benchmarks can put generated rewards beside it.

    python benchmarks/expert_baselines.py                      # five tasks, ~20-30 min on 2 cores
    python benchmarks/expert_baselines.py --tasks fetch/reach --steps 3000
    python benchmarks/expert_baselines.py --steps metaworld/reach-v3=20000 --device cuda
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from timing import parse_steps

from policies.io import write_json_atomic
from policies.train import TrainConfig, TrainResult, train
from sim_envs import codec

# Budgets sized for a 2-core CPU machine (measured here: SB3 SAC ~50-70 steps/s, PPO ~1,700 steps/s with 2 envs):
# MetaWorld reach-v3 was solved at ~14k SAC steps and drawer-close at ~6k; Fetch reach is quick.
DEFAULT_BUDGETS: dict[str, int] = {
    "metaworld/reach-v3": 15_000,
    "metaworld/drawer-close-v3": 15_000,
    "metaworld/button-press-topdown-v3": 15_000,
    "fetch/reach": 8_000,
    "halfcheetah/forward": 100_000,
}
SOLVED = 0.8  # a task counts as solved at the first evaluation with this success rate or more


def task_budgets(items: list[str], tasks: list[str]) -> dict[str, int]:
    return parse_steps(items, {task: DEFAULT_BUDGETS.get(task, 20_000) for task in tasks})


def machine() -> dict[str, Any]:
    import torch

    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "memory_gb": round(memory_gb, 1),
        "torch": torch.__version__,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }


def solved_at(curve: list[dict[str, Any]]) -> int | None:
    return next((int(p["steps"]) for p in curve if p["success_rate"] >= SOLVED), None)


def run_one(task: str, steps: int, args: argparse.Namespace) -> TrainResult:
    out = Path(args.out) / task.replace("/", "__")

    def report(point: dict[str, Any]) -> None:
        print(
            f"  {task} {point['steps']:>7} steps  success {point['success_rate']:.2f}  "
            f"return {point['mean_return']:9.2f}  ({point['wall_seconds']:.0f} s)",
            flush=True,
        )

    config = TrainConfig(task_id=task, out_dir=out, reward="expert", steps=steps, seed=args.seed, device=args.device)
    return train(config, on_eval=report)


def print_summary(results: list[TrainResult]) -> None:
    print("\n| task | algo | device | steps | wall s | steps/s | final success | best success | solved at (>= 0.8) |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        solved = solved_at(r.curve)
        print(
            f"| {r.task} | {r.algo.upper()} | {r.device} | {r.steps:,} | {r.wall_seconds:.0f} | {r.steps_per_second:.0f} "
            f"| {r.success_rate:.2f} | {r.best_success_rate:.2f} | {'-' if solved is None else f'{solved:,}'} |"
        )
    print("\nLearning curves (env steps: success rate):")
    for r in results:
        points = ", ".join(f"{p['steps']:,}: {p['success_rate']:.1f}" for p in r.curve)
        print(f"- {r.task}: {points}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(DEFAULT_BUDGETS), help="task ids (default: five)")
    parser.add_argument("--steps", nargs="*", default=[], metavar="N|TASK=N", help="training steps: N for every task, or TASK=N")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda (default auto)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="out/expert_baselines", help="run directories and summary.json (default out/expert_baselines)")
    args = parser.parse_args(argv)
    budgets = task_budgets(args.steps, args.tasks)
    info = machine()
    print(json.dumps(info), flush=True)
    results = []
    start = time.perf_counter()
    for task, steps in budgets.items():
        print(f"# {task}: {steps:,} steps with the expert reward", flush=True)
        result = run_one(task, steps, args)
        results.append(result)
        print(
            f"# {task}: final success {result.success_rate:.2f} in {result.wall_seconds:.0f} s "
            f"({result.steps_per_second:.0f} steps/s); total {time.perf_counter() - start:.0f} s",
            flush=True,
        )
    print_summary(results)
    summary = {
        "machine": info,
        "total_seconds": round(time.perf_counter() - start, 1),
        "results": [
            {key: value for key, value in codec.write(r).items() if key not in ("components", "final_eval")} | {"solved_at": solved_at(r.curve)}
            for r in results
        ],
    }
    write_json_atomic(Path(args.out) / "summary.json", summary)
    print(f"\ntotal {summary['total_seconds']:.0f} s; run directories and summary.json in {args.out}")


if __name__ == "__main__":
    main()
