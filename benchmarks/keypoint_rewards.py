"""Keypoint rewards against the task's sparse success reward and its expert dense reward, at one budget.

Why: a keypoint reward (text2reward.keypoints) is only worth a vision model's call if the staged reward it writes
trains better than no shaping at all; the oracle's keypoints (the simulator's true positions projected into the
image and lifted back with the depth image) measure the pipeline — projection, lifting, anchoring, the reward —
without a model's pointing error, so this is the ceiling a vision model's keypoints can reach.

Arms, per (task, seed), trained alike (the family's algorithm and settings, HER off for all: a program cannot be
relabelled), evaluated by the task's own success test (10 episodes every --eval-freq steps, and at the end):
  sparse     1 on a success step else 0
  keypoints  the keypoint reward program written from the oracle's keypoints of the task's seed-0 scene
             (out/<...>/<task>/keypoints/reward.py; anchored to the object and the goal, so it follows every episode)
  expert     the environment's own dense reward
Prints per task and arm the mean final success over seeds, the runs that reached >= 0.8, the median steps to it, and
the environment's own reward over the final evaluation (how close each arm came where none succeeds); writes
attempts.json as it goes.

    python benchmarks/keypoint_rewards.py --jobs 2                      # 4 tasks x 3 arms x 3 seeds at 20k steps
    python benchmarks/keypoint_rewards.py --tasks fetch/push --seeds 1 --steps 5000
    python benchmarks/keypoint_rewards.py --summarise out/keypoint_rewards/attempts.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from time_to_success import read_attempts
from training_attempts import EPISODES, Attempt, run_attempts, train_attempt

from policies.train import TrainConfig

TASKS = ["metaworld/drawer-open-v3", "metaworld/pick-place-v3", "fetch/push", "franka/push"]
ARMS = ("sparse", "keypoints", "expert")
BUDGET = 20_000
"""Env steps per attempt, the same for every task and arm: what 36 attempts train in about 1.5 h with 2 jobs here."""


def oracle_reward_file(task_id: str, out: Path) -> Path:
    """The oracle keypoint reward of the task's seed-0 scene (found once, then read back)."""
    from sim_envs import get_task
    from text2reward.keypoints.find import find_keypoints

    folder = out / task_id.replace("/", "__") / "keypoints"
    find_keypoints(get_task(task_id), folder, "oracle", seed=0)
    return folder / "reward.py"


def run_attempt(job: dict[str, Any]) -> Attempt:
    from policies.reward_program import ProgramReward

    out = Path(job["out"]) / job["task"].replace("/", "__") / f"{job['arm']}-s{job['seed']}"
    reward = "code" if job["arm"] == "keypoints" else job["arm"]
    # the keypoint program is written by text2reward from the simulator's own positions: trusted, so in-process
    reward_fn = ProgramReward.from_file(job["reward_file"]) if job["arm"] == "keypoints" else None
    config = TrainConfig(task_id=job["task"], out_dir=out, reward=reward, her=False, steps=job["steps"], seed=job["seed"],
                         device="cpu", eval_freq=job["eval_freq"], eval_episodes=EPISODES)
    return train_attempt(job["task"], job["arm"], job["seed"], config, reward_fn)


def native_return(out: Path, attempt: Attempt) -> float | None:
    """The expert (environment) reward's return over the attempt's final evaluation episodes, from its result.json:
    a common yardstick of how close every arm came where none succeeds."""
    path = out / attempt.task.replace("/", "__") / f"{attempt.arm}-s{attempt.seed}" / "result.json"
    try:
        return float(json.loads(path.read_text())["mean_native_return"])
    except (OSError, KeyError, TypeError, ValueError):
        return None


def summarise(attempts: list[Attempt], out: Path) -> None:
    print("| task | arm | budget | seeds | mean final success | per seed | best during training | solved (>= 0.8) "
          "| median steps to 0.8 | env return (final eval) | steps/s |")
    print("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for task in dict.fromkeys(a.task for a in attempts):
        for arm in ARMS:
            group = sorted((a for a in attempts if a.task == task and a.arm == arm), key=lambda a: a.seed)
            if not group:
                continue
            solved = [a.steps_to_solved for a in group if a.steps_to_solved is not None]
            median = f"{statistics.median(solved):,.0f}" if solved else "-"
            returns = [r for r in (native_return(out, a) for a in group) if r is not None]
            native = f"{statistics.mean(returns):.1f}" if returns else "-"
            print(f"| {task} | {arm} | {group[0].steps:,} | {len(group)} | {statistics.mean(a.final_success for a in group):.2f} "
                  f"| {', '.join(f'{a.final_success:.1f}' for a in group)} | {statistics.mean(a.best_success for a in group):.2f} "
                  f"| {len(solved)}/{len(group)} | {median} | {native} | {statistics.mean(a.steps_per_second for a in group):.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=TASKS)
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=BUDGET, help="env steps per attempt, every task and arm")
    parser.add_argument("--eval-freq", type=int, default=2_000)
    parser.add_argument("--jobs", type=int, default=1, help="attempts at a time (2 on 2 cores gives each one)")
    parser.add_argument("--out", default="out/keypoint_rewards")
    parser.add_argument("--summarise", nargs="+", metavar="ATTEMPTS_JSON", help="print the table of earlier runs and train nothing")
    args = parser.parse_args()
    if args.summarise:
        summarise(read_attempts(args.summarise, Attempt), Path(args.summarise[0]).parent)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    reward_files = {task: str(oracle_reward_file(task, out)) for task in args.tasks} if "keypoints" in args.arms else {}
    jobs = [
        {"task": task, "arm": arm, "seed": seed, "steps": args.steps, "eval_freq": args.eval_freq, "out": str(out),
         "reward_file": reward_files.get(task)}
        for seed in range(args.first_seed, args.first_seed + args.seeds) for task in args.tasks for arm in args.arms
    ]
    attempts = run_attempts(jobs, run_attempt, args.jobs, out, {"budget": args.steps})
    summarise(attempts, out)


if __name__ == "__main__":
    main()
