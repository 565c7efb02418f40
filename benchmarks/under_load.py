"""A round of legitimate rewards and the sandbox's time bombs, on an idle machine and beside other work.

Why: on a busy machine (a laptop with a compile running, a shared lab server, a CI runner) a reward call's wall
clock is mostly the machine's, not the reward's. The jail judges a call on the kernel's clocks of its worker
(CPU time, blocked time; the wall clock only as a backstop), so load must fail no legitimate reward and let
no hostile one through. Each condition below trains the same round: K candidates, the rule-based heuristic
backend's programs and the expert rewards rewritten as programs (prompts/examples), on MetaWorld and Fetch,
W at a time through the real job pool, with the same limits as `t2r run`; then the time bombs of
tests/sandbox/test_sandbox_jail.py (a sleep, a busy loop, small sleeps on every call, CPU burnt between calls by a
timer) each train until stopped. The load runs at the same priority: other trainings (SBX SAC, as `t2r train`
runs them) or plain CPU-bound processes.

    python benchmarks/under_load.py                          # 5 conditions, ~25 min on 2 cores
    python benchmarks/under_load.py --conditions idle,hogs8 --steps 1000

Prints, per condition: legitimate candidates failed by a limit (target 0), bombs stopped with their own cause
(target all), the round's wall time, and the largest per-call numbers seen (from each result.json).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from policies.config import TrainConfig
from sim_envs import get_task
from text2reward.generation.llm.heuristic import compose
from text2reward.runs.records import PromptContext
from text2reward.training.job import TrainJob
from text2reward.training.pool import run_jobs

ROOT = Path(__file__).resolve().parents[1]
TASKS = ("metaworld/reach-v3", "metaworld/drawer-close-v3", "fetch/reach", "fetch/push")
CONDITIONS = {"idle": ("none", 0), "trainers2": ("trainer", 2), "trainers4": ("trainer", 4), "hogs4": ("hog", 4), "hogs8": ("hog", 8)}

LINT_OFF = '''
import numpy as np


def lint_off():
    """The real os (past the lint layer: the jail is what stands)."""
    for cls in ().__class__.__bases__[0].__subclasses__():
        if cls.__name__ == "catch_warnings":
            return cls()._module.__builtins__["__import__"]("os")


calls = [0]


def compute_dense_reward(self, action):
    calls[0] += 1
    if calls[0] > 50:
        os = lint_off()
        BODY
    return float(self.torso.x_velocity), {"forward": float(self.torso.x_velocity)}
'''
BOMBS = {  # body, the words its failure must carry (any of them)
    "sleep": ('os.sys.modules["time"].sleep(2.0)', ("blocked (sleeping or waiting, not computing)",)),
    "busy_loop": ("while True:\n            pass", ("ms of CPU time, over the",)),
    "slow_sleep": ('os.sys.modules["time"].sleep(0.03)', ("calls became slow",)),
    "cpu_between_calls": (
        'sig, clock = os.sys.modules["signal"], os.sys.modules["time"]\n'
        '        def spin(*_):\n'
        '            started = clock.perf_counter()\n'
        '            while clock.perf_counter() - started < 0.001:\n'
        '                pass\n'
        '        if calls[0] == 51:\n'
        '            sig.signal(sig.SIGALRM, spin)\n'
        '            sig.setitimer(sig.ITIMER_REAL, 0.005, 0.005)', ("CPU time between calls", "itimer_error: [Errno 1] Operation not permitted")),
}


@dataclass
class Outcome:
    condition: str
    legit: int
    legit_failed: list[str]
    bombs_caught: list[str]
    bombs_missed: list[str]
    round_wall: float
    bomb_wall: float
    load_alive: int
    """Load processes still running when the bombs were done (all of them, or the condition did not hold)."""
    load_average: float
    """The 1-minute load average at the end of the condition."""


def legitimate_programs() -> dict[str, tuple[str, str]]:
    """{name: (task, program)}: the heuristic's program and the expert rewrite (where one exists) per task."""
    programs = {}
    for task_id in TASKS:
        heuristic, _ = compose(get_task(task_id), seed=0, round_index=0, index=0, n=1, temperature=0.0, context=PromptContext())
        programs[f"heuristic:{task_id}"] = (task_id, heuristic)
        example = ROOT / "prompts" / "examples" / f"{task_id.replace('/', '__')}.py"
        if example.is_file():
            programs[f"expert:{task_id}"] = (task_id, example.read_text())
    return programs


def start_load(kind: str, count: int, directory: Path) -> list[subprocess.Popen]:
    """Other work at the same priority: SBX SAC trainings (`t2r train`, as long as needed) or busy loops."""
    processes = []
    for index in range(count):
        if kind == "trainer":
            argv = [sys.executable, "-m", "text2reward.cli", "train", "--task", "metaworld/reach-v3", "--reward", "expert",
                    "--steps", "1000000", "--eval-freq", "1000000", "--out", str(directory / f"load{index}")]
        else:
            argv = [sys.executable, "-c", "while True: pass"]
        processes.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
    return processes


def stop_load(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()


def train_round(programs: dict[str, tuple[str, str]], directory: Path, steps: int, workers: int) -> tuple[list[str], float]:
    """The legitimate candidates through the real pool; returns those a limit failed, and the wall time."""
    jobs = []
    for name, (task_id, program) in programs.items():
        folder = directory / name.replace("/", "_").replace(":", "_")
        folder.mkdir(parents=True)
        (folder / "reward.py").write_text(program)
        train = TrainConfig(task_id=task_id, out_dir=folder / "train", reward="code", steps=steps, seed=0,
                            eval_freq=steps, eval_episodes=2, overrides={"learning_starts": 100})
        jobs.append(TrainJob(train=train, code_path=str(folder / "reward.py"), analysis_episodes=0))
    started = time.perf_counter()
    outcomes = run_jobs(jobs, workers)
    failed = [f"{name}: {outcome.reason}" for name, outcome in zip(programs, outcomes) if not outcome.ok]
    return failed, time.perf_counter() - started


def train_bombs(directory: Path, workers: int) -> tuple[list[str], list[str], float]:
    """Each time bomb on halfcheetah with tiny PPO (as in the sandbox tests); caught = failed with its own cause."""
    jobs = []
    for name, (body, _) in BOMBS.items():
        folder = directory / f"bomb_{name}"
        folder.mkdir(parents=True)
        (folder / "reward.py").write_text(LINT_OFF.replace("BODY", body))
        train = TrainConfig(task_id="halfcheetah/forward", out_dir=folder / "train", reward="code", steps=2048, seed=0,
                            eval_freq=1024, eval_episodes=1, overrides={"n_steps": 64, "batch_size": 64, "n_epochs": 1})
        jobs.append(TrainJob(train=train, code_path=str(folder / "reward.py"), analysis_episodes=0))
    started = time.perf_counter()
    outcomes = run_jobs(jobs, workers)
    caught, missed = [], []
    for (name, (_, words)), outcome in zip(BOMBS.items(), outcomes):
        stopped = not outcome.ok and any(w in (outcome.reason or "") for w in words)
        (caught if stopped else missed).append(name if stopped else f"{name}: {outcome.reason or 'trained to the end'}")
    return caught, missed, time.perf_counter() - started


def run_condition(name: str, programs: dict[str, tuple[str, str]], args: argparse.Namespace, root: Path) -> Outcome:
    kind, count = CONDITIONS[name]
    directory = root / name
    load = start_load(kind, count, directory) if kind != "none" else []
    try:
        if kind == "trainer":
            time.sleep(args.warmup)  # the trainers past their start-up (imports, JIT), into steady training
        failed, round_wall = train_round(programs, directory / "round", args.steps, args.workers)
        caught, missed, bomb_wall = train_bombs(directory / "bombs", args.workers)
        alive, load_average = sum(p.poll() is None for p in load), os.getloadavg()[0]
    finally:
        stop_load(load)
    return Outcome(name, len(programs), failed, caught, missed, round_wall, bomb_wall, alive, load_average)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conditions", default=",".join(CONDITIONS), help=f"comma-separated, of {', '.join(CONDITIONS)}")
    parser.add_argument("--steps", type=int, default=1500, help="SAC steps per legitimate candidate")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds the load trainers run before the round")
    parser.add_argument("--keep", type=Path, help="keep the job folders here")
    args = parser.parse_args()
    programs = legitimate_programs()
    print(f"{len(programs)} legitimate candidates ({', '.join(programs)}), {args.steps} steps each, {args.workers} workers; "
          f"{len(BOMBS)} time bombs; load {os.getloadavg()[0]:.1f} before", flush=True)
    root = args.keep or Path(tempfile.mkdtemp(prefix="t2r-under-load-"))
    results = []
    for name in args.conditions.split(","):
        outcome = run_condition(name.strip(), programs, args, root)
        results.append(outcome)
        print(json.dumps(outcome.__dict__), flush=True)
    idle = next((r for r in results if r.condition == "idle"), None)
    print("\n| condition | load avg at end | legitimate failed by a limit | bombs stopped with their own cause | round wall | vs idle | bombs wall |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        ratio = f"{r.round_wall / idle.round_wall:.2f}x" if idle else "-"
        kind, count = CONDITIONS[r.condition]
        held = "" if r.load_alive == count else f" (only {r.load_alive} of {count} load processes lasted)"
        print(f"| {r.condition}{held} | {r.load_average:.1f} | {len(r.legit_failed)} of {r.legit} | {len(r.bombs_caught)} of {len(BOMBS)} | "
              f"{r.round_wall:.0f} s | {ratio} | {r.bomb_wall:.0f} s |")
    for r in results:
        for line in r.legit_failed + r.bombs_missed:
            print(f"{r.condition}: {line}")


if __name__ == "__main__":
    main()
