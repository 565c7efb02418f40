"""Wall time to train one round of K candidates with W=1 vs W=2 parallel workers, side by side.

Why: each round of the loop trains K candidate rewards, and `run_jobs` runs them in W worker
processes. On a 2-core machine W=2 can at best halve a round; how close it gets (each job also runs
its reward in a sandboxed process, and the machine is shared) decides the default. Blocks of W=1
and W=2 alternate in order (1,2 then 2,1 ...), so a shared machine's drift hits both alike; the
speedup is the median of each pair's ratio.

The candidates are the rule-based `heuristic` backend's programs for one task, validated exactly as
the loop does, each trained from scratch in every block (fresh output directories).

    python benchmarks/parallel_training.py                         # K=4, 2,000 SAC steps, 2 pairs: ~10-15 min
    python benchmarks/parallel_training.py --task fetch/reach --steps 1000 --pairs 1
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from pathlib import Path

from policies.config import TrainConfig
from sim_envs.registry import get_task
from text2reward.generation.extraction import extract_code
from text2reward.generation.llm.base import GenerationRequest
from text2reward.generation.llm.heuristic import HeuristicBackend
from text2reward.sandbox import validate
from text2reward.training.job import TRAIN_DIR, TrainJob
from text2reward.training.pool import JobOutcome, run_jobs


def write_candidates(task_id: str, k: int, seed: int, out: Path) -> list[Path]:
    """K heuristic programs for the task, each validated (as the loop would) and written to a file."""
    task = get_task(task_id)
    replies = HeuristicBackend(seed).generate(GenerationRequest(messages=[], n=k, task_id=task_id))
    paths = []
    for index, reply in enumerate(replies):
        extraction = extract_code(reply.text)
        report = validate(extraction.code, task)
        if not report.ok:
            raise SystemExit(f"heuristic program {index} for {task_id} failed validation: {'; '.join(report.errors)}")
        path = out / "programs" / f"candidate_{index}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(extraction.code)
        paths.append(path)
    return paths


def run_block(label: str, programs: list[Path], workers: int, args: argparse.Namespace) -> tuple[float, list[JobOutcome], float]:
    """Train every program once on `workers` workers; (wall seconds, outcomes, load average before)."""
    block_dir = Path(args.out) / label
    shutil.rmtree(block_dir, ignore_errors=True)  # run_jobs skips finished jobs: start clean
    jobs = [
        TrainJob(
            train=TrainConfig(task_id=args.task, out_dir=block_dir / f"c{i}" / TRAIN_DIR, reward="code", steps=args.steps,
                              seed=args.seed, device="cpu", eval_freq=args.steps, eval_episodes=args.eval_episodes,
                              overrides={"learning_starts": args.learning_starts}),
            code_path=str(path.resolve()), analysis_episodes=args.analysis_episodes,
        )
        for i, path in enumerate(programs)
    ]
    load = os.getloadavg()[0]
    start = time.perf_counter()
    outcomes = run_jobs(jobs, workers)
    wall = time.perf_counter() - start
    failed = [o for o in outcomes if not o.ok]
    if failed:
        raise SystemExit(f"{label}: {len(failed)} job(s) failed, first: {failed[0].reason}")
    return wall, outcomes, load


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="metaworld/reach-v3", help="an SAC task (default metaworld/reach-v3)")
    parser.add_argument("--k", type=int, default=4, help="candidates per round (default 4)")
    parser.add_argument("--steps", type=int, default=2000, help="training steps per candidate (default 2000)")
    parser.add_argument("--learning-starts", type=int, default=200, help="SAC learning_starts (default 200)")
    parser.add_argument("--eval-episodes", type=int, default=3, help="episodes of the one evaluation at the end (default 3)")
    parser.add_argument("--analysis-episodes", type=int, default=3, help="rollouts analysed for feedback, as the loop does (default 3)")
    parser.add_argument("--workers", type=int, nargs=2, default=[1, 2], metavar=("A", "B"), help="the two worker counts (default 1 2)")
    parser.add_argument("--pairs", type=int, default=2, help="A/B pairs, order alternating (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="out/parallel_training", help="job directories (default out/parallel_training)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    programs = write_candidates(args.task, args.k, args.seed, Path(args.out))
    print(f"# {args.k} heuristic candidates for {args.task}, {args.steps:,} steps each (learning_starts {args.learning_starts}); "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)

    a, b = args.workers
    walls: dict[int, list[float]] = {a: [], b: []}
    rates: dict[int, list[float]] = {a: [], b: []}
    job_walls: dict[int, list[float]] = {a: [], b: []}
    ratios: list[float] = []
    rows = []
    for pair in range(args.pairs):
        order = (a, b) if pair % 2 == 0 else (b, a)
        pair_walls = {}
        for workers in order:
            wall, outcomes, load = run_block(f"p{pair}-w{workers}", programs, workers, args)
            results = [o.record["result"] for o in outcomes]
            walls[workers].append(wall)
            rates[workers] += [r["steps_per_second"] for r in results]
            job_walls[workers] += [r["wall_seconds"] for r in results]
            pair_walls[workers] = wall
            rows.append((pair, workers, wall, load, os.getloadavg()[0], results))
            print(f"  pair {pair}: W={workers}  {wall:6.1f} s  (load {load:.2f} -> {os.getloadavg()[0]:.2f}; "
                  f"per-job SAC steps/s {statistics.mean(r['steps_per_second'] for r in results):.0f})", flush=True)
        ratios.append(pair_walls[a] / pair_walls[b])

    print("\n| pair | W | wall s | load before -> after | mean job train s | mean job steps/s | success (final eval) |")
    print("| ---: | ---: | ---: | --- | ---: | ---: | --- |")
    for pair, workers, wall, before, after, results in rows:
        print(
            f"| {pair} | {workers} | {wall:.1f} | {before:.2f} -> {after:.2f} | {statistics.mean(r['wall_seconds'] for r in results):.1f} "
            f"| {statistics.mean(r['steps_per_second'] for r in results):.0f} | {' '.join(format(r['success_rate'], '.1f') for r in results)} |"
        )
    total_steps = args.k * args.steps
    print("\n| W | median wall s | round steps/s | median job steps/s |")
    print("| ---: | ---: | ---: | ---: |")
    for workers in (a, b):
        median = statistics.median(walls[workers])
        print(f"| {workers} | {median:.1f} | {total_steps / median:.0f} | {statistics.median(rates[workers]):.0f} |")
    print(f"\nspeedup W={b} over W={a} (median of per-pair ratios): {statistics.median(ratios):.2f}x "
          f"(pairs: {', '.join(f'{r:.2f}' for r in ratios)}); at most {min(b / a, os.cpu_count() or 1):.1f}x on {os.cpu_count()} CPUs")
    print("'mean job train s' is model.learn alone; the rest of a block is worker start-up (imports), the sandboxed")
    print("reward process, evaluation and the feedback rollouts.")
    print(f"\ntotal {time.perf_counter() - started:.0f} s; job directories in {args.out}")


if __name__ == "__main__":
    main()
