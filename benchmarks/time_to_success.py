"""Time to success with the expert reward: plain SB3 SAC defaults vs the project's training defaults (or any arms).

Why: every candidate reward costs a training run, so the loop's speed is the time a reward needs to show
success. This measures, per task and seed, the env steps and wall seconds until the first evaluation with
success >= 0.8 over 10 episodes (cap 60k steps), for two arms by default:
  (a) plain SB3: `SAC("MlpPolicy", env)`, what a user writes first (SB3's own defaults), and
  (b) the project: `policies.train` with the family's settings (policies/hyperparams/*.yml, or --hp).
`--arms` picks others: `project:KEY=VALUE[:KEY=VALUE...]` is the project arm with those settings on top of --hp
(e.g. `--arms project project:n_envs=2`: one env against two, the update ratio kept by policies.plan); the first arm
is the baseline the ratios divide by. All arms train on the same task env (the task's own expert reward, flattened
observations) and are evaluated the same way (policies.callbacks.SuccessEvalCallback, 10 episodes every --eval-freq
steps); the arms alternate per (seed, task), so load on a shared machine falls on all of them. Every attempt runs in a
fresh process, as a candidate does in the loop (the clock starts with learning, so SBX's compilations during learning
count; process start-up and model construction count for no arm); torch's thread count is its own default for (a)
when attempts run one at a time (one thread each with --jobs 2, the faster setting on 2 cores), and JAX's on-disk
compilation cache is used as the loop uses it. Prints per task and arm the solve rate, the median steps and seconds
to success (unsolved runs count at the cap), the median env steps/s (evaluations included), the
ratios to the first arm, and each seed's figures.

    python benchmarks/time_to_success.py                                   # 5 tasks x 3 seeds x 2 arms, up to 60k steps: many hours on 2 CPU cores
    python benchmarks/time_to_success.py --tasks fetch/reach --seeds 1 --cap 20000
    python benchmarks/time_to_success.py --device cuda --hp batch_size=512   # the project arm with other settings
    python benchmarks/time_to_success.py --arms project project:n_envs=2 --tasks metaworld/reach-v3 --cap 20000
    python benchmarks/time_to_success.py --jobs 2      # two attempts at a time, one per core (arms still alternate)
    python benchmarks/time_to_success.py --first-seed 2 --seeds 1 --out out/tts-s2   # one more seed, in its own run
    python benchmarks/time_to_success.py --summarise out/time_to_success/attempts.json out/tts-s2/attempts.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import statistics
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml
from expert_baselines import machine
from reward_quality import parse_overrides
from timing import without_log_folder

from policies.callbacks import SuccessEvalCallback
from policies.cpu_affinity import HOLD_VARIABLE
from policies.io import write_json_atomic
from policies.reward_program import reward_from_spec
from policies.task_env import make_task_env
from policies.train import EVAL_SEED_OFFSET, TrainConfig, train
from sim_envs import get_task

TASKS = ["metaworld/reach-v3", "metaworld/drawer-close-v3", "metaworld/button-press-topdown-v3", "metaworld/window-open-v3", "fetch/reach"]
SOLVED = 0.8
EPISODES = 10
ARMS = ("sb3_defaults", "project")
"""The arms' kinds; `project:KEY=VALUE[:KEY=VALUE...]` is the project arm with those settings."""


def arm_spec(text: str) -> str:
    """An `--arms` entry, checked: `sb3_defaults`, `project`, or `project:KEY=VALUE[:KEY=VALUE...]`."""
    kind, _, settings = text.partition(":")
    if kind not in ARMS:
        raise argparse.ArgumentTypeError(f"unknown arm {text!r}; use sb3_defaults, project or project:KEY=VALUE (e.g. project:n_envs=2)")
    if settings and kind != "project":
        raise argparse.ArgumentTypeError(f"{text!r}: only the project arm takes settings (sb3_defaults is SB3's own)")
    if settings:
        try:
            arm_overrides(text)
        except (SystemExit, yaml.YAMLError) as error:
            raise argparse.ArgumentTypeError(f"{text!r}: {error}") from None
    return text


def arm_overrides(arm: str) -> dict[str, Any]:
    """The settings an arm adds to --hp: `project:n_envs=2:batch_size=128` -> {n_envs: 2, batch_size: 128} (a `:` inside
    a value stays in it: the split is only before `KEY=`)."""
    settings = arm.partition(":")[2]
    return parse_overrides(re.split(r":(?=\w+=)", settings)) if settings else {}


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
    model = without_log_folder(SAC("MlpPolicy", env, seed=seed, device=device, verbose=0))
    started = time.perf_counter()
    try:
        model.learn(total_timesteps=cap, callback=evaluator)
    finally:
        env.close()
        eval_env.close()
    return attempt(task_id, "sb3_defaults", seed, evaluator.curve, int(model.num_timesteps), time.perf_counter() - started)


def project(task_id: str, arm: str, seed: int, cap: int, eval_freq: int, device: str, overrides: dict[str, Any], out: Path) -> Attempt:
    """(b): the project's training (family settings, then --hp, then the arm's own), stopping at the first evaluation
    >= SOLVED."""
    config = TrainConfig(task_id=task_id, out_dir=out, reward="expert", steps=cap, seed=seed, device=device, eval_freq=eval_freq,
                         eval_episodes=EPISODES, stop_at_success=SOLVED, overrides={**overrides, **arm_overrides(arm)})
    result = train(config)
    return attempt(task_id, arm, seed, result.curve, result.steps, result.wall_seconds)


def run_attempt(job: dict[str, Any]) -> Attempt:
    """One attempt, in the fresh process the pool gives it; with `--pin`, on a free core of its own, as the product's
    launcher runs its jobs (policies/cpu_affinity.py)."""
    if job.get("pin"):
        os.environ[HOLD_VARIABLE] = "1"
    return attempt_of(job)


def attempt_of(job: dict[str, Any]) -> Attempt:
    if job["arm"] == "sb3_defaults":
        return plain_sb3(job["task"], job["seed"], job["cap"], job["eval_freq"], job["device"], job["threads"])
    return project(job["task"], job["arm"], job["seed"], job["cap"], job["eval_freq"], job["device"], job["overrides"], Path(job["out"]))


def attempt(task: str, arm: str, seed: int, curve: list[dict[str, Any]], trained: int, wall: float) -> Attempt:
    hit = first_success(curve)
    best = max((p["success_rate"] for p in curve), default=0.0)
    if hit is None:
        return Attempt(task, arm, seed, False, trained, round(wall, 1), best)
    return Attempt(task, arm, seed, True, int(hit["steps"]), round(float(hit["wall_seconds"]), 1), best)


def summarise(attempts: list[Attempt], tasks: list[str], arms: list[str]) -> None:
    """Per task and arm: solved, median steps and seconds (unsolved at the cap), median env steps/s (evaluations
    included), the ratios to the first arm; then each seed's steps and seconds."""
    arms = [arm for arm in arms if any(a.arm == arm for a in attempts)]
    arms += [arm for arm in dict.fromkeys(a.arm for a in attempts) if arm not in arms]  # arms of merged runs, as met
    base_arm = arms[0] if arms else ""
    print(f"\n| task | arm | solved | median steps | median s | median steps/s | steps x {base_arm} | s x {base_arm} | steps/s x {base_arm} |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    ratios = []
    for task in tasks:
        rows = {}
        for arm in arms:
            mine = [a for a in attempts if a.task == task and a.arm == arm]
            if mine:
                rows[arm] = (sum(a.solved for a in mine), len(mine), statistics.median(a.steps for a in mine),
                             statistics.median(a.seconds for a in mine), statistics.median(a.steps / a.seconds for a in mine))
        for arm, (solved, total, steps, seconds, rate) in rows.items():
            ratio_steps = ratio_seconds = ratio_rate = ""
            if arm != base_arm and base_arm in rows:
                base = rows[base_arm]
                ratio_steps, ratio_seconds, ratio_rate = f"{steps / base[2]:.2f}", f"{seconds / base[3]:.2f}", f"{rate / base[4]:.2f}"
                ratios.append(seconds / base[3])
            print(f"| {task} | {arm} | {solved}/{total} | {steps:,.0f} | {seconds:,.0f} | {rate:,.0f} | {ratio_steps} | {ratio_seconds} | {ratio_rate} |")
    if ratios:
        print(f"\nmedian over tasks and arms of wall seconds to success x {base_arm}: {statistics.median(ratios):.2f}")
    seeds = sorted({a.seed for a in attempts})
    print(f"\n| task | arm | {' | '.join(f'seed {seed}' for seed in seeds)} |")
    print(f"| --- | --- |{' --- |' * len(seeds)}")
    for task in tasks:
        for arm in arms:
            cells = {a.seed: seed_cell(a) for a in attempts if a.task == task and a.arm == arm}
            if cells:
                print(f"| {task} | {arm} | {' | '.join(cells.get(seed, '') for seed in seeds)} |")


def seed_cell(a: Attempt) -> str:
    """One attempt as `14k / 91 s`, or `unsolved (best 0.4) / 381 s`."""
    reached = f"{a.steps / 1000:g}k" if a.solved else f"unsolved (best {a.best_success:.1f})"
    return f"{reached} / {a.seconds:,.0f} s"


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
    parser.add_argument("--arms", nargs="+", default=list(ARMS), type=arm_spec, metavar="ARM",
                        help="sb3_defaults, project, or project:KEY=VALUE[:KEY=VALUE...] (the project arm with those "
                             "settings on top of --hp); the first is the baseline of the ratios (default: sb3_defaults project)")
    parser.add_argument("--jobs", type=int, default=1, help="attempts at a time (default 1; 2 on 2 cores gives each one)")
    parser.add_argument("--pin", action="store_true",
                        help="each attempt on a free core of its own, as the product's launcher runs its jobs")
    parser.add_argument("--out", default="out/time_to_success")
    parser.add_argument("--summarise", nargs="+", metavar="ATTEMPTS_JSON",
                        help="print the table over the attempts of earlier runs (e.g. one seed per run) and train nothing")
    args = parser.parse_args()
    if args.summarise:
        merged = read_attempts(args.summarise, Attempt)
        summarise(merged, [task for task in args.tasks if any(a.task == task for a in merged)], args.arms)
        return
    if len(set(args.arms)) != len(args.arms):
        parser.error(f"--arms names an arm twice: {' '.join(args.arms)}")
    out = Path(args.out)
    info = machine()
    print(json.dumps(info), flush=True)
    overrides = parse_overrides(args.hp)
    jobs = [{"task": task, "arm": arm, "seed": seed, "cap": args.cap, "eval_freq": args.eval_freq, "device": args.device,
             "threads": None if args.jobs == 1 else 1, "overrides": overrides, "pin": args.pin,
             "out": str(out / f"{task.replace('/', '__')}-s{seed}{arm_folder(arm)}")}
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
    summarise(attempts, args.tasks, args.arms)


def arm_folder(arm: str) -> str:
    """The suffix of an arm's training folder: none for the plain arms (as before), the settings for the others."""
    settings = arm.partition(":")[2]
    return "-" + re.sub(r"[^\w.=-]+", "_", settings) if settings else ""


if __name__ == "__main__":
    main()
