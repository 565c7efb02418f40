"""The Franka Panda tasks against their reference: the expert dense reward, and the sparse reward with HER.

Why: "Open-Source Reinforcement Learning Environments Implemented in MuJoCo with Franka Manipulator" validates its
push, slide and pick-and-place with off-policy algorithms and hindsight experience replay; this trains the same two
configurations on the project's Franka tasks (sim_envs.franka_tasks), so a user knows which one learns, how fast,
and what budget each task needs on their machine before they put a generated reward beside them.

Arms, per (task, seed), trained with the family's settings (SBX SAC, [128, 128], policies/hyperparams/franka.yml),
evaluated by the task's own success test (10 episodes every --eval-freq steps, final step within 5 cm):
  expert      the reference's dense reward (minus the distance to the goal), flat observations, no HER
  sparse-her  1 on success else 0, dict observations, SB3's HerReplayBuffer (4 future goals per transition)
Prints per task and arm the mean final success, the runs that reached >= 0.8, and the median steps to it; writes
attempts.json as it goes.

    python benchmarks/franka_baselines.py --jobs 2                        # reach + push, 3 seeds (about an hour on 2 cores)
    python benchmarks/franka_baselines.py --tasks franka/slide franka/pick_and_place --seeds 1 --jobs 2
    python benchmarks/franka_baselines.py --summarise out/franka_baselines/attempts.json
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from time_to_success import read_attempts
from training_attempts import EPISODES, Attempt, run_attempts, train_attempt

from policies.train import TrainConfig

TASKS = ["franka/reach", "franka/push"]
ALL_TASKS = ["franka/reach", "franka/push", "franka/pick_and_place", "franka/slide"]
ARMS = {"expert": ("expert", False), "sparse-her": ("sparse", True)}
"""arm -> (reward, HER)."""
BUDGETS = {"franka/reach": 8_000, "franka/push": 100_000, "franka/pick_and_place": 100_000, "franka/slide": 100_000}
"""Env steps per arm: what two jobs on 2 cores train in about an hour for reach and push x 3 seeds x 2 arms."""
EVAL_FREQ = {"franka/reach": 1_000}


def run_attempt(job: dict[str, Any]) -> Attempt:
    reward, her = ARMS[job["arm"]]
    out = Path(job["out"]) / f"{job['task'].replace('/', '__')}-{job['arm']}-s{job['seed']}"
    config = TrainConfig(task_id=job["task"], out_dir=out, reward=reward, her=her, steps=job["steps"], seed=job["seed"],
                         device="cpu", eval_freq=job["eval_freq"], eval_episodes=EPISODES)
    return train_attempt(job["task"], job["arm"], job["seed"], config)


def summarise(attempts: list[Attempt]) -> None:
    print("| task | arm | budget | seeds | mean final success | best | solved (>= 0.8) | median steps to 0.8 | steps/s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for task in dict.fromkeys(a.task for a in attempts):
        for arm in ARMS:
            group = [a for a in attempts if a.task == task and a.arm == arm]
            if not group:
                continue
            solved = [a.steps_to_solved for a in group if a.steps_to_solved is not None]
            median = f"{statistics.median(solved):,.0f}" if solved else "-"
            print(f"| {task} | {arm} | {group[0].steps:,} | {len(group)} | {statistics.mean(a.final_success for a in group):.2f} "
                  f"| {statistics.mean(a.best_success for a in group):.2f} | {len(solved)}/{len(group)} | {median} "
                  f"| {statistics.mean(a.steps_per_second for a in group):.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=TASKS, choices=ALL_TASKS)
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=None, help="env steps per attempt (default: per task, see BUDGETS)")
    parser.add_argument("--eval-freq", type=int, default=2_000)
    parser.add_argument("--jobs", type=int, default=1, help="attempts at a time (2 on 2 cores gives each one)")
    parser.add_argument("--out", default="out/franka_baselines")
    parser.add_argument("--summarise", nargs="+", metavar="ATTEMPTS_JSON", help="print the table of earlier runs and train nothing")
    args = parser.parse_args()
    if args.summarise:
        summarise(read_attempts(args.summarise, Attempt))
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = [
        {"task": task, "arm": arm, "seed": seed, "steps": args.steps or BUDGETS[task],
         "eval_freq": EVAL_FREQ.get(task, args.eval_freq), "out": str(out)}
        for task in args.tasks for seed in range(args.first_seed, args.first_seed + args.seeds) for arm in args.arms
    ]
    attempts = run_attempts(jobs, run_attempt, args.jobs, out)
    summarise(attempts)


if __name__ == "__main__":
    main()
