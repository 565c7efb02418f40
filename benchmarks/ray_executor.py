"""One round of K candidates on the local pool vs a local 2-CPU Ray instance: wall per round, per-job overhead.

Why: `--executor ray` is only free to offer if it costs (nearly) nothing where one machine is enough: the
target is Ray within 10% of the local pool per round. Each round trains the same K heuristic programs (validated
as the loop does) with the loop's job settings (analysis rollouts, a video), W=2 jobs in flight, from scratch in
fresh folders. Rounds alternate (local, ray, then ray, local, ...) so a shared machine's drift falls on both.
Every Ray round starts its own Ray instance (127.0.0.1 only, `--ray-cpus` CPUs): its start-up is timed apart,
because a run pays it once, not per round.

Per job it records the driver's wall from start to outcome (both executors, through the same `pool.schedule`)
and the bytes a job's folder holds (what a Ray task ships back to the driver); the overhead Ray adds per job is
the difference of the medians. From those figures it projects a round of 64 candidates on 16 machines.

    python benchmarks/ray_executor.py                                  # fetch/reach, K=4, 2,000 steps, 2 pairs
    python benchmarks/ray_executor.py --task metaworld/reach-v3 --steps 4000 --pairs 3
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import time
from pathlib import Path

from parallel_training import write_candidates

from policies.config import TrainConfig
from text2reward.runs.store import STOP_FILE
from text2reward.training.job import TRAIN_DIR, TrainJob
from text2reward.training.pool import JobOutcome, Launcher, LocalLauncher, schedule
from text2reward.training.ray_pool import RayLauncher, ray_session


class Timed:
    """A launcher that notes each job's wall on the driver, from its start to its outcome being collected."""

    def __init__(self, inner: Launcher):
        self.inner = inner
        self.started: dict[int, float] = {}
        self.walls: dict[int, float] = {}

    def start(self, index: int, job: TrainJob) -> None:
        self.started[index] = time.perf_counter()
        self.inner.start(index, job)

    def collect(self) -> list[tuple[int, JobOutcome]]:
        ended = self.inner.collect()
        for index, _ in ended:
            self.walls[index] = time.perf_counter() - self.started[index]
        return ended

    def mirror(self) -> None:
        self.inner.mirror()

    def relay_stops(self) -> None:
        self.inner.relay_stops()

    def abort(self) -> None:
        self.inner.abort()


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def run_round(executor: str, label: str, programs: list[Path], args: argparse.Namespace) -> dict:
    """Train every program once on `executor`; the round's wall, start-up, per-job walls and sizes."""
    round_dir = Path(args.out) / label
    shutil.rmtree(round_dir, ignore_errors=True)  # finished jobs are skipped: start clean
    jobs = []
    for i, path in enumerate(programs):
        out = round_dir / f"c{i}"
        jobs.append(TrainJob(
            train=TrainConfig(task_id=args.task, out_dir=out / TRAIN_DIR, reward="code", steps=args.steps, seed=args.seed, device="cpu",
                              eval_freq=args.eval_freq, eval_episodes=args.eval_episodes,
                              overrides={"learning_starts": args.learning_starts}, stop_file=str(out / STOP_FILE)),
            code_path=str(path.resolve()), analysis_episodes=args.analysis_episodes, video=True,
        ))
    load = os.getloadavg()[0]
    start = time.perf_counter()
    startup = 0.0
    if executor == "ray":
        with ray_session(num_cpus=args.ray_cpus):
            startup = time.perf_counter() - start
            launcher = Timed(RayLauncher())
            outcomes = schedule(jobs, args.workers, launcher)
    else:
        launcher = Timed(LocalLauncher())
        outcomes = schedule(jobs, args.workers, launcher)
    wall = time.perf_counter() - start
    failed = [o for o in outcomes if not o.ok]
    if failed:
        raise SystemExit(f"{label}: {len(failed)} job(s) failed, first: {failed[0].reason}")
    return {"executor": executor, "label": label, "wall": wall, "startup": startup, "load": load, "after": os.getloadavg()[0],
            "job_walls": [launcher.walls[i] for i in range(len(jobs))],
            "train_s": [o.record["result"]["wall_seconds"] for o in outcomes if o.record],
            "bytes": [folder_bytes(Path(job.out_dir)) for job in jobs]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="fetch/reach", help="an SAC task (default fetch/reach)")
    parser.add_argument("--k", type=int, default=4, help="candidates per round (default 4)")
    parser.add_argument("--steps", type=int, default=2000, help="training steps per candidate (default 2000)")
    parser.add_argument("--eval-freq", type=int, default=500, help="steps between evaluations (default 500)")
    parser.add_argument("--eval-episodes", type=int, default=3)
    parser.add_argument("--learning-starts", type=int, default=200)
    parser.add_argument("--analysis-episodes", type=int, default=3, help="rollouts analysed for feedback, as the loop does (default 3)")
    parser.add_argument("--workers", type=int, default=2, help="jobs in flight, W (default 2)")
    parser.add_argument("--ray-cpus", type=int, default=2, help="CPUs of the local Ray instance (default 2)")
    parser.add_argument("--pairs", type=int, default=2, help="local/ray pairs, order alternating (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="out/ray_executor", help="job folders (default out/ray_executor)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    programs = write_candidates(args.task, args.k, args.seed, Path(args.out))
    print(f"# {args.k} heuristic candidates for {args.task}, {args.steps:,} steps each, W={args.workers}, Ray on {args.ray_cpus} CPUs; "
          f"{os.cpu_count()} CPUs here, load average {os.getloadavg()[0]:.2f}", flush=True)

    rows, ratios = [], []
    for pair in range(args.pairs):
        order = ("local", "ray") if pair % 2 == 0 else ("ray", "local")
        walls = {}
        for executor in order:
            row = run_round(executor, f"p{pair}-{executor}", programs, args)
            rows.append(row)
            walls[executor] = row["wall"] - row["startup"]
            print(f"  pair {pair}: {executor:5s} {row['wall']:6.1f} s (Ray start-up {row['startup']:.1f} s; load {row['load']:.2f} -> "
                  f"{row['after']:.2f})", flush=True)
        ratios.append(walls["ray"] / walls["local"])

    print("\n| pair | executor | round wall s | Ray start-up s | round less start-up s | median job wall s | median job train s | MB per job |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for pair, row in zip((r for r in range(args.pairs) for _ in (0, 1)), rows):
        print(f"| {pair} | {row['executor']} | {row['wall']:.1f} | {row['startup']:.1f} | {row['wall'] - row['startup']:.1f} "
              f"| {statistics.median(row['job_walls']):.1f} | {statistics.median(row['train_s']):.1f} "
              f"| {statistics.median(row['bytes']) / 1e6:.2f} |")

    def median_of(executor: str, key: str) -> float:
        return statistics.median(v for row in rows if row["executor"] == executor for v in row[key])

    overhead = median_of("ray", "job_walls") - median_of("local", "job_walls")
    startup = statistics.median(row["startup"] for row in rows if row["executor"] == "ray")
    size = median_of("ray", "bytes")
    job = median_of("local", "job_walls")
    ratio = statistics.median(ratios)
    print(f"\nRay / local wall per round, Ray start-up excluded (median of per-pair ratios): {ratio:.3f} "
          f"(pairs: {', '.join(f'{r:.3f}' for r in ratios)}); target <= 1.10")
    print(f"per-job overhead Ray adds (median job wall, Ray - local): {overhead:+.2f} s; Ray start-up once per run: {startup:.1f} s; "
          f"a job's folder: {size / 1e6:.2f} MB shipped back")

    machines, cpus, candidates, link = 16, 4, 64, 1e9 / 8
    waves = math.ceil(candidates / (machines * cpus))
    transfer = candidates * size / link
    print(f"\nprojection, {candidates} candidates on {machines} machines x {cpus} CPUs (W={candidates}): {waves} wave(s) of jobs of "
          f"~{job + overhead:.0f} s (this machine's job time + Ray's overhead) and {candidates * size / 1e6:.0f} MB into the driver "
          f"(~{transfer:.1f} s at 1 Gb/s if all arrive at once): a round ~{waves * (job + overhead) + transfer:.0f} s, against "
          f"{math.ceil(candidates / cpus)} waves (~{math.ceil(candidates / cpus) * job:.0f} s) on one such machine. "
          "An estimate from the figures above, not a measurement.")
    print(f"\ntotal {time.perf_counter() - started:.0f} s; job folders in {args.out}")


if __name__ == "__main__":
    main()
