"""The loop's best reward vs the task's expert reward: success at the same training budget and seeds.

Why: a synthesised reward is only as good as the policies it trains, next to the reward the
environment's authors wrote. For each task this runs the whole loop (`start_run`: generate, validate,
screen, train K candidates, feedback, more rounds), whose final stage re-trains the best reward and
the expert reward on the same fresh seeds and budget; the table reads `final/summary.json`.

    python benchmarks/reward_quality.py                          # heuristic backend, 3 SAC tasks: ~35-40 min on 2 cores
    python benchmarks/reward_quality.py --tasks hopper/forward   # PPO, 100k steps per job: ~6 min
    python benchmarks/reward_quality.py --backend openai --base-url http://127.0.0.1:8000/v1 --model my-model
    python benchmarks/reward_quality.py --show RUN_ID ...        # re-print the table from finished runs
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from timing import parse_steps

from policies.hyperparams import load_hyperparams
from sim_envs.registry import get_task
from text2reward import RewardSearch
from text2reward.runs.records import FinalArm
from text2reward.runs.store import RunStore

# Budgets that fit a shared 2-core CPU: each task trains K candidates plus 2 x final_seeds jobs, two at a
# time, at ~25-50 SAC steps/s each. With the expert reward (benchmarks/RESULTS.md, expert_baselines)
# drawer-close was solved at ~4k steps, Fetch reach reached 0.7 at 6k, MetaWorld reach needed ~14k.
DEFAULT_BUDGETS: dict[str, int] = {
    "metaworld/reach-v3": 8_000,
    "metaworld/drawer-close-v3": 8_000,
    "fetch/reach": 6_000,
}
OTHER_BUDGETS: dict[str, int] = {"hopper/forward": 100_000, "halfcheetah/forward": 100_000}
"""Budgets for tasks outside the default list (PPO steps for locomotion)."""


@dataclass
class Row:
    task: str
    algo: str
    steps: int
    loop_size: str
    """rounds x samples actually run."""
    run_id: str
    best: str | None
    round_success: float | None
    loop: FinalArm | None
    expert: FinalArm | None
    wall: float
    candidates: str


def task_budgets(items: list[str], tasks: list[str]) -> dict[str, int]:
    defaults = {**OTHER_BUDGETS, **DEFAULT_BUDGETS}
    return parse_steps(items, {task: defaults.get(task) or get_task(task).default_steps for task in tasks})


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`--hp KEY=VALUE` (YAML values), as `t2r run --hp`."""
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--hp {item!r}: expected KEY=VALUE, e.g. learning_starts=500")
        overrides[key.strip()] = yaml.safe_load(value)
    return overrides


def run_task(task: str, steps: int, args: argparse.Namespace) -> Row:
    search = RewardSearch(
        task, backend=args.backend, model=args.model, base_url=args.base_url, rounds=args.rounds,
        samples=args.samples, steps=steps, workers=args.workers, seed=args.seed, final_seeds=args.final_seeds,
        compare_expert=True, video=False, eval_freq=args.eval_freq, eval_episodes=args.eval_episodes,
        overrides=parse_overrides(args.hp), early_stop=args.early_stop, runs_dir=args.runs_dir,
        callbacks=[lambda event: print(f"  [{task}] {event.text}", flush=True) if event.text else None],
    )
    return row_of(RunStore(search.run().run_dir))


def row_of(store: RunStore) -> Row:
    """The table row of a finished run, from its files alone (so `--show` can re-print old runs)."""
    header, state = store.header(), store.state()
    summary = store.final_summary()
    candidates = store.candidates()
    statuses = [c.status.value for c in candidates]
    best_id = summary.best_candidate if summary else None
    best = next((c for c in candidates if c.id == best_id), None)
    return Row(
        task=header.task_id, algo=load_hyperparams(get_task(header.task_id).family).algo,
        steps=header.steps or get_task(header.task_id).default_steps,
        loop_size=f"{state.rounds_done}×{header.samples}", run_id=store.run_id, best=best_id,
        round_success=best.success if best else None,
        loop=summary.best if summary else None, expert=summary.expert if summary else None, wall=state.wall_seconds,
        candidates=f"{statuses.count('trained') + statuses.count('stopped_early')}/{len(statuses)} trained"
                   + (f" ({statuses.count('stopped_early')} stopped early)" if "stopped_early" in statuses else ""),
    )


def spread(result: FinalArm | None) -> str:
    """mean ± std of the final success rates, then each seed's."""
    if result is None or result.mean is None:
        failures = result.failed_seeds if result is not None else []
        return f"failed ({failures[0].reason[:60]})" if failures else "-"
    return f"{result.mean:.2f} ± {result.std or 0:.2f} ({', '.join(f'{r:.1f}' for r in result.success_rates)})"


def peaks(result: FinalArm | None) -> str:
    """Each seed's best evaluation during training: one final evaluation of a few episodes is noisy."""
    curves, finals = (result.curves, result.success_rates) if result is not None else ([], [])
    best = [max([p.success_rate for p in curve] + [final]) for curve, final in zip(curves, finals)]
    return ", ".join(f"{b:.1f}" for b in best) or "-"


def print_table(rows: list[Row]) -> None:
    print("\n| task | algo | budget (steps) | rounds×K | candidates | best | its round success "
          "| loop best: final success | expert: final success | peak per seed, loop / expert | wall s |")
    print("| --- | --- | ---: | --- | --- | --- | ---: | --- | --- | --- | ---: |")
    for r in rows:
        round_success = "-" if r.round_success is None else f"{r.round_success:.2f}"
        print(f"| {r.task} | {r.algo.upper()} | {r.steps:,} | {r.loop_size} | {r.candidates} | {r.best or '-'} | {round_success} "
              f"| {spread(r.loop)} | {spread(r.expert)} | {peaks(r.loop)} / {peaks(r.expert)} | {r.wall:.0f} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(DEFAULT_BUDGETS), help="task ids (default: three SAC tasks)")
    parser.add_argument("--steps", nargs="*", default=[], metavar="N|TASK=N", help="training steps per job: N for every task, or TASK=N")
    parser.add_argument("--rounds", type=int, default=1, help="loop rounds (default 1)")
    parser.add_argument("--samples", type=int, default=2, help="candidates per round (default 2)")
    parser.add_argument("--final-seeds", type=int, default=2, help="seeds for the final best-vs-expert comparison (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="parallel training workers (default 2)")
    parser.add_argument("--backend", default="heuristic", help="heuristic (default, no model), openai or file")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint for --backend openai")
    parser.add_argument("--model", default=None, help="model name for --backend openai")
    parser.add_argument("--eval-freq", type=int, default=None, help="env steps between success evaluations (default: the family's)")
    parser.add_argument("--eval-episodes", type=int, default=None, help="episodes per evaluation (default: the family's)")
    parser.add_argument("--hp", nargs="*", default=[], metavar="KEY=VALUE", help="hyper-parameter overrides, as `t2r run --hp`")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-early-stop", dest="early_stop", action="store_false",
                        help="train every candidate to its full budget (as before early stopping existed)")
    parser.add_argument("--runs-dir", default="out/reward_quality", help="run directories (default out/reward_quality)")
    parser.add_argument("--show", nargs="+", metavar="RUN_ID", help="only print the table for these finished runs in --runs-dir")
    args = parser.parse_args(argv)
    if args.show:
        print_table([row_of(RunStore.open(Path(args.runs_dir), run_id)) for run_id in args.show])
        return
    if args.backend == "openai" and not (args.model and (args.base_url or os.environ.get("OPENAI_BASE_URL"))):
        raise SystemExit("--backend openai needs --model and --base-url (or OPENAI_BASE_URL)")
    budgets = task_budgets(args.steps, args.tasks)
    print(f"# {len(budgets)} task(s); {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)
    started = time.perf_counter()
    rows = []
    for task, steps in budgets.items():
        print(f"# {task}: {steps:,} steps per training job", flush=True)
        rows.append(run_task(task, steps, args))
        print(f"# {task}: done in {rows[-1].wall:.0f} s; load average {os.getloadavg()[0]:.2f}; "
              f"total {time.perf_counter() - started:.0f} s", flush=True)
    print(f"\nbackend {args.backend}{':' + args.model if args.model else ''}; the loop's best reward and the expert reward "
          f"re-trained on {args.final_seeds} fresh seed(s) each; success: mean ± std over seeds (each seed's value)")
    print_table(rows)
    print("\nRuns: " + ", ".join(f"{args.runs_dir}/{r.run_id}" for r in rows))
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
