"""Reward modes side by side: plain heuristic reward, the same tuned by `t2r tune`, potential mode, progress mode, expert.

Why: tuning a reward's constants, potential-based shaping and progress-with-count-bonus are meant to beat the plain
dense reward the rule-based heuristic backend writes; this measures whether they do, on the same tasks, budget and
seeds. The programs come from the heuristic backend (no language model), sample 0 of round 0 in each mode, so the
potential and progress programs are built from the same plan, terms and constants as the plain reward.

Arms, per (task, seed), each trained with the project's defaults on the same budget and evaluated by the task's own
success test (10 episodes every --eval-freq steps):
  plain      the heuristic's dense program                               (--reward-mode dense)
  tuned      the plain program after `t2r tune` (--trials trials of --trial-steps each, by default the arm's budget, on a
             run seeded seed + 1000, so the winner is chosen on other seeds than it is scored on; the parent's constants
             are kept unless a trial beats them by one evaluation episode's worth of success over its curve), then
             trained on the seed like the others
  potential  the heuristic's potential program                           (--reward-mode potential)
  progress   the heuristic's progress program                            (--reward-mode progress)
  expert     the task's expert reward, where it has one
Every program trains in the sandbox's jail, as a candidate does. Prints per task and arm the mean final success,
the runs that reached >= 0.8 at an evaluation, and the median steps to that; writes attempts.json as it goes.

    python benchmarks/reward_modes.py --jobs 2                           # 4 tasks x 3 seeds x 5 arms: hours on 2 CPU cores
    python benchmarks/reward_modes.py --tasks metaworld/button-press-v3 --seeds 1 --arms plain potential
    python benchmarks/reward_modes.py --tasks hopper/back_flip --steps 40000 --eval-freq 5000   # a budget plain does not saturate
    python benchmarks/reward_modes.py --summarise out/reward_modes/attempts.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from expert_baselines import machine
from time_to_success import read_attempts

from policies.io import write_json_atomic
from policies.reward_program import runnable_source
from policies.train import TrainConfig, train
from sim_envs import codec, get_task

TASKS = ["metaworld/drawer-open-v3", "metaworld/button-press-v3", "metaworld/lever-pull-v3", "hopper/back_flip"]
ARMS = ["plain", "tuned", "potential", "progress", "expert"]
MODE_OF_ARM = {"plain": "dense", "tuned": "dense", "potential": "potential", "progress": "progress"}
SOLVED = 0.8
EPISODES = 10
BUDGETS = {"metaworld": 20_000, "locomotion": 100_000}
"""Env steps per arm by family: about what reach-v3 needs with the expert reward (benchmarks/time_to_success.py); half
the flip tasks' own budget (PPO). Small, so that 4 tasks x 3 seeds x 5 arms fit in an afternoon on 2 cores."""
EVAL_FREQ = {"metaworld": 2_000, "locomotion": 10_000}
TUNE_SEED_OFFSET = 1000
BASE_RUN_STEPS = 1000


@dataclass
class Attempt:
    task: str
    arm: str
    seed: int
    success_rate: float
    """The final evaluation's success rate."""
    best_success: float
    solved: bool
    """An evaluation reached SOLVED."""
    steps_to_success: int | None
    trained_steps: int
    seconds: float
    """Wall seconds of this arm (for `tuned`: tuning and the scored training together)."""
    detail: dict[str, Any] = field(default_factory=dict)


def heuristic_program(task_id: str, mode: str) -> str:
    """Sample 0 of round 0 of the heuristic backend in `mode`: the base constants."""
    from text2reward.generation.extraction import extract_code
    from text2reward.generation.llm.base import GenerationRequest
    from text2reward.generation.llm.heuristic import HeuristicBackend
    from text2reward.generation.prompting import build_initial_messages
    from text2reward.runs.records import PromptContext

    task = get_task(task_id)
    request = GenerationRequest(messages=build_initial_messages(task, reward_mode=mode), n=1, task_id=task_id, round=0,
                                context=PromptContext(reward_mode=mode))
    (reply,) = HeuristicBackend(seed=0).generate(request)
    extraction = extract_code(reply.text, mode)
    if not extraction.ok or extraction.code is None:
        raise RuntimeError(f"the heuristic backend wrote no {mode} program for {task_id}: {extraction.error}")
    return extraction.code


def train_program(task_id: str, code: str | None, mode: str, seed: int, steps: int, eval_freq: int, out: Path) -> dict[str, Any]:
    """One training run on the seed, the program jailed; `code` None trains on the expert reward."""
    from text2reward.sandbox import SandboxedReward

    reward_fn = SandboxedReward(runnable_source(code, mode), name=mode) if code is not None else None
    config = TrainConfig(task_id=task_id, out_dir=out, reward="code" if code is not None else "expert", reward_mode=mode,
                         steps=steps, seed=seed, eval_freq=eval_freq, eval_episodes=EPISODES)
    try:
        return codec.write(train(config, reward_fn=reward_fn))
    finally:
        if reward_fn is not None:
            reward_fn.close()


def tuned_program(task_id: str, seed: int, trials: int, trial_steps: int, eval_freq: int, out: Path) -> tuple[str, dict[str, Any]]:
    """Run the loop for one plain heuristic candidate on a tuning seed, then `t2r tune` it; the winner's program."""
    from sim_envs.codec import write
    from text2reward import RewardSearch
    from text2reward.runs.lock import RunLock
    from text2reward.runs.store import RunStore
    from text2reward.tuning.tune import tune_candidate

    # the run only makes the candidate to tune: its own training is short (tuning's trial 0 retrains its constants);
    # trials evaluate as the run says, so the run evaluates like every arm
    result = RewardSearch(task_id, backend="heuristic", rounds=1, samples=1, steps=BASE_RUN_STEPS, workers=1,
                          seed=seed + TUNE_SEED_OFFSET, final_seeds=0, compare_expert=False, video=False, screen=False,
                          early_stop=False, success_threshold=1.01, eval_freq=eval_freq, eval_episodes=EPISODES,
                          runs_dir=out / "runs").run()
    store = RunStore(result.run_dir)
    with RunLock(store.root):
        tuned = tune_candidate(store, "r0-s0", trials=trials, steps=trial_steps)
    return store.read_text(str(tuned.code_file)), {"run": str(store.root), "tuning": write(tuned.tuned) if tuned.tuned else {}}


def run_attempt(job: dict[str, Any]) -> Attempt:
    """One (task, seed, arm), in the fresh process the pool gives it."""
    task_id, arm, seed, steps, eval_freq = job["task"], job["arm"], job["seed"], job["steps"], job["eval_freq"]
    out = Path(job["out"])
    started = time.perf_counter()
    detail: dict[str, Any] = {}
    if arm == "expert":
        code, mode = None, "dense"
    elif arm == "tuned":
        code, detail = tuned_program(task_id, seed, job["trials"], job["trial_steps"], eval_freq, out)
        mode = "dense"
    else:
        mode = MODE_OF_ARM[arm]
        code = heuristic_program(task_id, mode)
    result = train_program(task_id, code, mode, seed, steps, eval_freq, out / "train")
    curve = result["curve"]
    hit = next((p for p in curve if p["success_rate"] >= SOLVED), None)
    return Attempt(task_id, arm, seed, float(result["success_rate"]), float(result["best_success_rate"]), hit is not None,
                   int(hit["steps"]) if hit else None, int(result["steps"]), round(time.perf_counter() - started, 1), detail)


def summarise(attempts: list[Attempt], tasks: list[str]) -> None:
    print("\n| task | arm | mean final success | solved (>= 0.8) | median steps to 0.8 | median wall s |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    raised = []
    for task in tasks:
        means: dict[str, float] = {}
        for arm in ARMS:
            mine = [a for a in attempts if a.task == task and a.arm == arm]
            if not mine:
                continue
            means[arm] = statistics.mean(a.success_rate for a in mine)
            hits = [a.steps_to_success for a in mine if a.steps_to_success is not None]
            steps = f"{statistics.median(hits):,.0f}" if hits else "-"
            print(f"| {task} | {arm} | {means[arm]:.2f} | {sum(a.solved for a in mine)}/{len(mine)} | {steps} | "
                  f"{statistics.median(a.seconds for a in mine):,.0f} |")
        if "plain" in means and "tuned" in means and means["tuned"] > means["plain"]:
            raised.append(task)
        studies = [a.detail.get("tuning", {}) for a in attempts if a.task == task and a.arm == "tuned"]
        unchanged = sum(all(c["ratio"] == 1 for c in s.get("constants_diff", [])) for s in studies)
        by_margin = sum(bool(s.get("kept_parent")) for s in studies)
        if studies:
            print(f"| {task} | (tuning) | parent's constants won {unchanged}/{len(studies)} studies ({by_margin} by the margin) | | | |")
    print(f"\ntuning raised the plain reward's mean final success on {len(raised)} task(s): {', '.join(raised) or 'none'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=TASKS)
    parser.add_argument("--arms", nargs="+", default=ARMS, choices=ARMS)
    parser.add_argument("--seeds", type=int, default=3, help="how many seeds (default 3)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=None, help="env steps per arm (default: by family, see BUDGETS)")
    parser.add_argument("--eval-freq", type=int, default=None, help="steps between evaluations (default: by family, see EVAL_FREQ)")
    parser.add_argument("--trials", type=int, default=6, help="tuning trials of the tuned arm (default 6)")
    parser.add_argument("--trial-steps", type=int, default=None, help="steps per tuning trial (default: the arm's budget: a trial "
                        "shorter than the budget at which the parent succeeds at all scores every trial 0)")
    parser.add_argument("--jobs", type=int, default=1, help="attempts at a time (2 on 2 cores gives each one)")
    parser.add_argument("--out", default="out/reward_modes")
    parser.add_argument("--summarise", nargs="+", metavar="ATTEMPTS_JSON", help="print the table of earlier runs and train nothing")
    args = parser.parse_args()
    if args.summarise:
        merged = read_attempts(args.summarise, Attempt)
        summarise(merged, [t for t in args.tasks if any(a.task == t for a in merged)])
        return
    out = Path(args.out)
    info = machine()
    print(json.dumps(info), flush=True)
    jobs = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for task_id in args.tasks:
            task = get_task(task_id)
            steps = args.steps or BUDGETS.get(task.family, task.default_steps)
            for arm in args.arms:
                if arm == "expert" and not task.has_expert_reward:
                    continue
                jobs.append({"task": task_id, "arm": arm, "seed": seed, "steps": steps,
                             "eval_freq": min(args.eval_freq or EVAL_FREQ.get(task.family, 2_000), steps), "trials": args.trials,
                             "trial_steps": args.trial_steps or steps,
                             "out": str(out / f"{task_id.replace('/', '__')}-s{seed}" / arm)})
    attempts: list[Attempt] = []
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=spawn, max_tasks_per_child=1) as pool:
        futures = {pool.submit(run_attempt, job): job for job in jobs}
        for future in as_completed(futures):
            job = futures[future]
            try:
                result = future.result()
            except Exception as exc:  # one arm's failure is reported, and the others go on
                print(f"  {job['task']} seed {job['seed']} {job['arm']}: FAILED: {exc}", flush=True)
                continue
            attempts.append(result)
            print(f"  {result.task} seed {result.seed} {result.arm}: success {result.success_rate:.1f} (best {result.best_success:.1f}), "
                  f"{'solved at ' + format(result.steps_to_success, ',') if result.solved else 'not solved'}, {result.seconds:.0f} s",
                  flush=True)
            write_json_atomic(out / "attempts.json", {"machine": info, "jobs": args.jobs, "attempts": [asdict(a) for a in attempts]})
    summarise(attempts, args.tasks)


if __name__ == "__main__":
    main()
