"""Time to success with the expert reward: plain SB3 SAC defaults vs the project's training defaults.

Why: every candidate reward costs a training run, so the loop's speed is the time a reward needs to show
success. This measures, per task and seed, the env steps and wall seconds until the first evaluation with
success >= 0.8 over 10 episodes (cap 60k steps), for
  (a) plain SB3: `SAC("MlpPolicy", env)`, what a user writes first (SB3's own defaults), and
  (b) the project: `policies.train` with the family's settings (policies/hyperparams/*.yml, or --hp).
Both train on the same task env (the task's own expert reward, flattened observations) and are evaluated the
same way (policies.callbacks.SuccessEvalCallback, 10 episodes every --eval-freq steps); the arms alternate
per (seed, task), so load on a shared machine falls on both. Every attempt runs in a fresh process, as a
candidate does in the loop (the clock starts with learning, so SBX's compilations during learning count;
process start-up and model construction count for neither arm); torch's thread count is its own default
for (a) when attempts run one at a time (one thread each with --jobs 2, the faster setting on 2 cores), and
JAX's on-disk compilation cache is used as the loop uses it. Prints per task the solve rate, the median
steps and seconds to success (unsolved runs count at the cap), and the ratio (b)/(a).

    python benchmarks/time_to_success.py                                   # 5 tasks x 3 seeds x 2 arms, up to 60k steps: many hours on 2 CPU cores
    python benchmarks/time_to_success.py --tasks fetch/reach --seeds 1 --cap 20000
    python benchmarks/time_to_success.py --device cuda --hp batch_size=512   # the project arm with other settings
    python benchmarks/time_to_success.py --jobs 2      # two attempts at a time, one per core (arms still alternate)
    python benchmarks/time_to_success.py --first-seed 2 --seeds 1 --out out/tts-s2   # one more seed, in its own run
    python benchmarks/time_to_success.py --summarise out/time_to_success/attempts.json out/tts-s2/attempts.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from expert_baselines import machine
from reward_quality import parse_overrides

from policies.callbacks import SuccessEvalCallback
from policies.io import write_json_atomic
from policies.reward_program import reward_from_spec
from policies.task_env import make_task_env
from policies.train import EVAL_SEED_OFFSET, TrainConfig, train
from sim_envs import get_task

TASKS = ["metaworld/reach-v3", "metaworld/drawer-close-v3", "metaworld/button-press-topdown-v3", "metaworld/window-open-v3", "fetch/reach"]
SOLVED = 0.8
EPISODES = 10


@dataclass
class Attempt:
    task: str
    arm: str
    seed: int
    solved: bool
    steps: int
    """Env steps at the first evaluation with success >= SOLVED (the steps trained when unsolved)."""
    seconds: float
    """Wall seconds of training (evaluations included) until then."""
    best_success: float


def first_success(curve: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((p for p in curve if p["success_rate"] >= SOLVED), None)


def plain_sb3(task_id: str, seed: int, cap: int, eval_freq: int, device: str, threads: int | None) -> Attempt:
    """(a): SAC("MlpPolicy", env) with SB3's defaults, on the task env with the expert reward."""
    import torch
    from stable_baselines3 import SAC

    if threads is not None:
        torch.set_num_threads(threads)

    task = get_task(task_id)
    env = make_task_env(task, reward_from_spec("expert"), seed=seed)
    eval_env = make_task_env(task, reward_from_spec("expert"), seed=seed + EVAL_SEED_OFFSET)
    evaluator = SuccessEvalCallback(eval_env, eval_freq, EPISODES, seed + EVAL_SEED_OFFSET, stop_at_success=SOLVED)
    model = SAC("MlpPolicy", env, seed=seed, device=device, verbose=0)
    started = time.perf_counter()
    try:
        model.learn(total_timesteps=cap, callback=evaluator)
    finally:
        env.close()
        eval_env.close()
    return attempt(task_id, "sb3_defaults", seed, evaluator.curve, int(model.num_timesteps), time.perf_counter() - started)


def project(task_id: str, seed: int, cap: int, eval_freq: int, device: str, overrides: dict[str, Any], out: Path) -> Attempt:
    """(b): the project's training (family settings), stopping at the first evaluation >= SOLVED."""
    config = TrainConfig(task_id=task_id, out_dir=out, reward="expert", steps=cap, seed=seed, device=device, eval_freq=eval_freq,
                         eval_episodes=EPISODES, stop_at_success=SOLVED, overrides=overrides)
    result = train(config)
    return attempt(task_id, "project", seed, result.curve, result.steps, result.wall_seconds)


def run_attempt(job: dict[str, Any]) -> Attempt:
    """One attempt, in the fresh process the pool gives it."""
    if job["arm"] == "sb3_defaults":
        return plain_sb3(job["task"], job["seed"], job["cap"], job["eval_freq"], job["device"], job["threads"])
    return project(job["task"], job["seed"], job["cap"], job["eval_freq"], job["device"], job["overrides"], Path(job["out"]))


def attempt(task: str, arm: str, seed: int, curve: list[dict[str, Any]], trained: int, wall: float) -> Attempt:
    hit = first_success(curve)
    best = max((p["success_rate"] for p in curve), default=0.0)
    if hit is None:
        return Attempt(task, arm, seed, False, trained, round(wall, 1), best)
    return Attempt(task, arm, seed, True, int(hit["steps"]), round(float(hit["wall_seconds"]), 1), best)


def summarise(attempts: list[Attempt], tasks: list[str]) -> None:
    print("\n| task | arm | solved | median steps | median s | (b)/(a) steps | (b)/(a) s |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    ratios = []
    for task in tasks:
        rows = {}
        for arm in ("sb3_defaults", "project"):
            mine = [a for a in attempts if a.task == task and a.arm == arm]
            if mine:
                rows[arm] = (sum(a.solved for a in mine), len(mine), statistics.median(a.steps for a in mine),
                             statistics.median(a.seconds for a in mine))
        for arm, (solved, total, steps, seconds) in rows.items():
            ratio_steps = ratio_seconds = ""
            if arm == "project" and "sb3_defaults" in rows:
                base = rows["sb3_defaults"]
                ratio_steps, ratio_seconds = f"{steps / base[2]:.2f}", f"{seconds / base[3]:.2f}"
                ratios.append(seconds / base[3])
            print(f"| {task} | {arm} | {solved}/{total} | {steps:,.0f} | {seconds:,.0f} | {ratio_steps} | {ratio_seconds} |")
    if ratios:
        print(f"\nmedian over tasks of (b)/(a) wall seconds to success: {statistics.median(ratios):.2f}")


def read_attempts(paths: list[str], record: Any) -> list[Any]:
    """The attempts of earlier runs' attempts.json files, as `record` objects (one seed per run can be merged)."""
    return [record(**row) for path in paths for row in json.loads(Path(path).read_text())["attempts"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=TASKS)
    parser.add_argument("--seeds", type=int, default=3, help="how many seeds (default 3)")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds run from this one (default 0)")
    parser.add_argument("--cap", type=int, default=60_000, help="env steps at most per attempt (default 60k)")
    parser.add_argument("--eval-freq", type=int, default=2000, help="env steps between evaluations (both arms)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--hp", nargs="*", default=[], metavar="KEY=VALUE", help="overrides of the project arm's settings")
    parser.add_argument("--arms", nargs="+", default=["sb3_defaults", "project"], choices=["sb3_defaults", "project"])
    parser.add_argument("--jobs", type=int, default=1, help="attempts at a time (default 1; 2 on 2 cores gives each one)")
    parser.add_argument("--out", default="out/time_to_success")
    parser.add_argument("--summarise", nargs="+", metavar="ATTEMPTS_JSON",
                        help="print the table over the attempts of earlier runs (e.g. one seed per run) and train nothing")
    args = parser.parse_args()
    if args.summarise:
        merged = read_attempts(args.summarise, Attempt)
        summarise(merged, [task for task in args.tasks if any(a.task == task for a in merged)])
        return
    out = Path(args.out)
    info = machine()
    print(json.dumps(info), flush=True)
    overrides = parse_overrides(args.hp)
    jobs = [{"task": task, "arm": arm, "seed": seed, "cap": args.cap, "eval_freq": args.eval_freq, "device": args.device,
             "threads": None if args.jobs == 1 else 1, "overrides": overrides,
             "out": str(out / f"{task.replace('/', '__')}-s{seed}")}
            for seed in range(args.first_seed, args.first_seed + args.seeds) for task in args.tasks for arm in args.arms]  # arms alternate: shared load falls on both
    attempts: list[Attempt] = []
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=spawn, max_tasks_per_child=1) as pool:
        for future in as_completed([pool.submit(run_attempt, job) for job in jobs]):
            result = future.result()
            attempts.append(result)
            print(f"  {result.task} seed {result.seed} {result.arm}: {'solved' if result.solved else 'not solved'} at "
                  f"{result.steps:,} steps, {result.seconds:.0f} s (best {result.best_success:.1f})", flush=True)
            write_json_atomic(out / "attempts.json", {"machine": info, "jobs": args.jobs, "attempts": [asdict(a) for a in attempts]})
    summarise(attempts, args.tasks)


if __name__ == "__main__":
    main()
