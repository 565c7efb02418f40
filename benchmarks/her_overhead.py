"""What hindsight experience replay (`t2r train --her`) costs per step, and whether it learns a sparse Fetch task.

Why: HER replays 4 of every 5 sampled steps with another goal, relabelled through the training wrapper
(`TaskRewardWrapper.compute_reward`) on every update, and keeps the observation a dict (SB3's DictReplayBuffer,
a MultiInputPolicy); that costs time per step against the flat buffer. This trains the same task and reward
with and without HER, as `t2r train` does (`policies.train.train`, one thread, CPU), in turns (every repeat
runs both, in a new order, so drift on a shared machine falls on both), and reports each run's steps per
second (its whole `learn`, evaluations and SBX's compilation included, as result.json does) and the CPU
milliseconds per step of the whole `train` call (the process's CPU time: on a machine other processes load,
wall time swings with them and CPU time much less). With
`--learn-steps N`, one run per setting of N steps with sparse reward, evaluated every `--eval-freq` steps on
10 episodes, answers whether the sparse task is learned at all.

    python benchmarks/her_overhead.py                                  # fetch/reach, sbx-sac, 2,000 steps, 3 repeats
    python benchmarks/her_overhead.py --repeats 0 --learn-steps 5000   # only the learning curves
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def run(task: str, algo: str, reward: str, her: bool, steps: int, eval_freq: int, eval_episodes: int, seed: int) -> dict[str, Any]:
    from policies.train import TrainConfig, train

    with tempfile.TemporaryDirectory() as out:
        config = TrainConfig(task_id=task, out_dir=Path(out), reward=reward, steps=steps, seed=seed, device="cpu", algo=algo,
                             eval_freq=eval_freq, eval_episodes=eval_episodes, her=her)
        cpu = time.process_time()
        result = train(config)
        cpu = time.process_time() - cpu
    return {"her": her, "steps_per_second": result.steps_per_second, "wall_seconds": result.wall_seconds,
            "cpu_ms_per_step": round(cpu / steps * 1000, 2), "curve": [(p["steps"], p["success_rate"]) for p in result.curve]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="fetch/reach")
    parser.add_argument("--algo", default="sbx-sac")
    parser.add_argument("--reward", default="sparse")
    parser.add_argument("--steps", type=int, default=2000, help="env steps per timed run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--learn-steps", type=int, default=0, help="also train this long with and without HER, with evaluations")
    parser.add_argument("--eval-freq", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    timed: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    if args.repeats:  # imports and SBX's first compilations, counted by neither arm
        for her in (False, True):
            run(args.task, args.algo, args.reward, her, 300, 300, 1, args.seed)
    for repeat in range(args.repeats):
        order = [False, True]
        random.Random(repeat).shuffle(order)
        for her in order:
            point = run(args.task, args.algo, args.reward, her, args.steps, args.steps, 1, args.seed)
            timed[her].append(point["steps_per_second"])
            cpu[her].append(point["cpu_ms_per_step"])
            print(json.dumps({"repeat": repeat, **point}), flush=True)
    if args.repeats:
        flat, her = statistics.median(timed[False]), statistics.median(timed[True])
        flat_cpu, her_cpu = statistics.median(cpu[False]), statistics.median(cpu[True])
        print(f"{args.task} {args.algo} {args.reward}, {args.steps} steps: {flat:.0f} steps/s flat, {her:.0f} with HER "
              f"({her / flat:.2f}x); CPU {flat_cpu:.2f} ms/step flat, {her_cpu:.2f} with HER ({her_cpu / flat_cpu:.2f}x; medians of {args.repeats})")
    if args.learn_steps:
        for her in (True, False):
            point = run(args.task, args.algo, args.reward, her, args.learn_steps, args.eval_freq, 10, args.seed)
            print(json.dumps({"learning": True, **point}), flush=True)


if __name__ == "__main__":
    main()
