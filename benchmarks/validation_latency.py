"""Seconds from a reply's text to a validated candidate: extraction, static pass, isolated smoke run.

Why: every candidate of every round passes through this path before any training, and a model that
gets an error back waits on it again for each fix. The loop validates in one process, so a task's
real states are collected once (cold: the first candidate of a task) and reused (warm: the rest).
Both are reported, over many programs: the 14 expert rewrites in `prompts/examples/` on their own
tasks, and programs from the rule-based `heuristic` backend for tasks across every family.

    python benchmarks/validation_latency.py                       # ~26 tasks, about 1-2 minutes
    python benchmarks/validation_latency.py --tasks fetch/reach hopper/forward --samples 1 --repeats 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass, field

from prompts import EXAMPLES_DIR, example_task_id
from sim_envs.registry import get_task
from text2reward.generation.extraction import extract_code
from text2reward.generation.llm.base import GenerationRequest
from text2reward.generation.llm.heuristic import HeuristicBackend
from text2reward.sandbox import collect_states, static_check, validate

# Heuristic programs for these (the example tasks come on top): every family, every archetype the rules know.
HEURISTIC_TASKS = (
    "metaworld/reach-v3",
    "metaworld/pick-place-v3",
    "metaworld/push-v3",
    "metaworld/drawer-open-v3",
    "metaworld/door-open-v3",
    "metaworld/button-press-v3",
    "metaworld/faucet-close-v3",
    "metaworld/hammer-v3",
    "metaworld/basketball-v3",
    "metaworld/peg-insert-side-v3",
    "metaworld/sweep-v3",
    "metaworld/stick-push-v3",
    "metaworld/dial-turn-v3",
    "fetch/reach",
    "fetch/push",
    "fetch/slide",
    "fetch/pick_and_place",
    "hopper/forward",
    "hopper/front_flip",
    "halfcheetah/forward",
    "walker2d/forward",
    "ant/forward",
    "ant/wave_leg",
    "ant/lie_down",
)


@dataclass
class Program:
    task: str
    source: str  # "example" or "heuristic sN"
    reply: str


@dataclass
class Timing:
    program: Program
    ok: bool
    extract: float
    static: float
    validate: float
    """`validate(code, task, samples)`: the static pass again plus the isolated smoke run."""
    states: float = 0.0
    """Collecting real states: only on a task's first (cold) validation."""
    errors: list[str] = field(default_factory=list)
    isolation: str = ""

    @property
    def total(self) -> float:
        return self.extract + self.states + self.validate


def example_programs() -> list[Program]:
    """Each expert rewrite, wrapped the way a model's reply would carry it (prose, then a fence)."""
    programs = []
    for path in sorted(EXAMPLES_DIR.glob("*.py")):
        reply = f"Here is a dense reward for the task.\n\n```python\n{path.read_text()}```\n"
        programs.append(Program(example_task_id(path), "example", reply))
    return programs


def heuristic_programs(tasks: list[str], samples: int, seed: int) -> list[Program]:
    backend = HeuristicBackend(seed)
    programs = []
    for task in tasks:
        replies = backend.generate(GenerationRequest(messages=[], n=samples, task_id=task))
        programs += [Program(task, f"heuristic s{i}", r.text or "") for i, r in enumerate(replies)]
    return programs


def time_one(program: Program, cold: bool) -> Timing:
    """The loop's path for one reply; `cold` also collects the task's states (first use in the process)."""
    task = get_task(program.task)
    clock = time.perf_counter
    t0 = clock()
    extraction = extract_code(program.reply)
    t1 = clock()
    if not extraction.ok:
        return Timing(program, False, t1 - t0, 0.0, 0.0, errors=[extraction.error or "no code"])
    problems = static_check(extraction.code)
    t2 = clock()
    states = collect_states(task)  # cached per task inside the process after the first call
    t3 = clock()
    report = validate(extraction.code, task, samples=states)
    t4 = clock()
    return Timing(program, report.ok and not problems, t1 - t0, t2 - t1, t4 - t3, t3 - t2 if cold else 0.0, report.errors, report.isolation)


def quantile(values: list[float], q: float) -> float:
    """Inclusive quantile (q in [0, 1]); the one value when there is only one."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(HEURISTIC_TASKS), help="tasks for heuristic programs (default: 24 across families)")
    parser.add_argument("--samples", type=int, default=2, help="heuristic programs per task (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="warm validations of each program (default 3)")
    parser.add_argument("--no-examples", action="store_true", help="leave out the prompts/examples programs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    programs = ([] if args.no_examples else example_programs()) + heuristic_programs(args.tasks, args.samples, args.seed)
    by_task: dict[str, list[Program]] = {}
    for program in programs:
        by_task.setdefault(program.task, []).append(program)
    print(f"# {len(programs)} programs on {len(by_task)} tasks; load average {os.getloadavg()[0]:.2f}", flush=True)

    cold: list[Timing] = []
    warm: list[Timing] = []
    failures: list[Timing] = []
    for task, group in by_task.items():
        first = time_one(group[0], cold=True)  # the task's first candidate: states collected here
        cold.append(first)
        runs = [time_one(p, cold=False) for p in group for _ in range(args.repeats)]
        warm += runs
        failures += [t for t in [first, *runs[:: args.repeats]] if not t.ok]
        task_warm = [t.total for t in runs]
        print(
            f"  {task:<32} {len(group)} program(s)  cold {first.total:5.2f} s (states {first.states:4.2f} s)  "
            f"warm median {statistics.median(task_warm):.3f} s",
            flush=True,
        )

    print(f"\nisolation: {next((t.isolation for t in cold if t.isolation), 'none reported')}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs\n")
    print("| path | validations | median s | p90 s | max s | extract ms | static ms | states s | smoke run s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, rows in (("cold (first program of a task)", cold), ("warm (states cached)", warm)):
        totals = [t.total for t in rows]
        print(
            f"| {label} | {len(rows)} | {statistics.median(totals):.3f} | {quantile(totals, 0.9):.3f} | {max(totals):.3f} "
            f"| {statistics.median(t.extract for t in rows) * 1e3:.2f} | {statistics.median(t.static for t in rows) * 1e3:.2f} "
            f"| {statistics.median(t.states for t in rows):.2f} | {statistics.median(t.validate for t in rows):.3f} |"
        )
    first = cold[0]
    same = [t.total for t in warm if t.program is first.program]
    print(
        f"\nvery first validation in the process ({first.program.task}): {first.total:.2f} s, of which states "
        f"{first.states:.2f} s; the same program warm: {statistics.median(same):.3f} s (the rest is starting the sandbox zygote)"
    )
    by_source = {"example": [t.total for t in warm if t.program.source == "example"],
                 "heuristic": [t.total for t in warm if t.program.source != "example"]}
    for source, totals in by_source.items():
        if totals:
            print(f"warm, {source} programs: median {statistics.median(totals):.3f} s, p90 {quantile(totals, 0.9):.3f} s over {len(totals)}")
    if failures:
        print(f"\n{len(failures)} program(s) failed validation:")
        for t in failures:
            print(f"- {t.program.task} ({t.program.source}): {'; '.join(t.errors)[:200]}")
    else:
        print(f"\nall {len(programs)} programs validated")
    target = statistics.median(t.total for t in warm)
    print(f"target: median under 2 s -> warm median {target:.3f} s, cold median {statistics.median(t.total for t in cold):.2f} s")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
