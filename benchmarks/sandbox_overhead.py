"""What the sandbox costs training: per-call µs of a reward in-process vs in its isolated worker, and env steps/s.

Why both figures: training calls the reward once per env step, so the sandbox's round trip (encode
the view, pipe it to the locked-down worker, run the program there, read the reply back) is paid
on every step. The per-call table isolates that cost on real states of three view classes
(MetaWorld, Ant, planar walker); the env table shows what it does to `make_task_env` steps/s, which
is what PPO sees. A trivial program (`return 0.0`) run in the sandbox gives the floor: the transport
alone, whatever the program does.

Why interleaved blocks: this machine is shared, so its speed drifts over a run. Each repeat times a
block of in-process calls and then a block of sandboxed calls (or env steps), and the tables show
medians and the median of the per-pair ratios, so drift hits both sides alike.

    python benchmarks/sandbox_overhead.py                          # about 1-2 minutes
    python benchmarks/sandbox_overhead.py --calls 1000 --repeats 5 --steps 500
    python benchmarks/sandbox_overhead.py --isolation landlock     # the jail where bubblewrap is missing
    python benchmarks/sandbox_overhead.py --baseline ../old-checkout --isolation bubblewrap landlock

Validation latency: a trivial program on 5 states (the fixed cost of one candidate: a jailed child, its load and
its calls) and a model-sized program on 200 states twice (what `validate` runs), back to back (the worst case: a
child's exit and the next one's fork are not hidden by other work).

`--baseline DIR` measures another checkout of the project (its `text2reward`, `policies` and `sim_envs`, put first
on PYTHONPATH) beside this one: each pass runs this script once per tree and jail in a fresh process, alternating
baseline and current, and the table shows both medians over the passes and their ratio, so drift hits both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from timing import stepper

from policies.reward_program import ProgramReward
from policies.task_env import make_task_env
from sim_envs.registry import get_task
from text2reward.sandbox import Limits, SandboxedReward, collect_states, run_reward

# Small programs of the kind a model writes, one per view class: a few norms or exp terms and a control cost.
PROGRAMS: dict[str, str] = {
    "metaworld/reach-v3": '''
import numpy as np


def compute_dense_reward(self, action):
    to_goal = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    reach = float(np.exp(-5.0 * to_goal))
    grip = 1.0 - self.robot.gripper_openness
    ctrl = 0.01 * float(np.sum(np.square(action)))
    return reach - to_goal - 0.1 * grip - ctrl, {"reach": reach, "distance": -to_goal, "grip": -0.1 * grip, "ctrl": -ctrl}
''',
    "ant/forward": '''
import numpy as np


def compute_dense_reward(self, action):
    forward = float(self.torso.x_velocity)
    upright = float(self.torso.up_vector[2])
    height = float(np.exp(-10.0 * abs(self.torso.position[2] - 0.55)))
    ctrl = 0.5 * float(np.sum(np.square(action)))
    return forward + 0.5 * upright + 0.5 * height - ctrl, {"forward": forward, "upright": upright, "height": height, "ctrl": -ctrl}
''',
    "halfcheetah/forward": '''
import math

import numpy as np


def compute_dense_reward(self, action):
    forward = float(self.torso.x_velocity)
    upright = math.exp(-abs(self.torso.pitch))
    ctrl = 0.1 * float(np.sum(np.square(action)))
    return forward + 0.5 * upright - ctrl, {"forward": forward, "upright": upright, "ctrl": -ctrl}
''',
}
TRIVIAL = "def compute_dense_reward(self, action):\n    return 0.0\n"
ENV_TASKS = ("halfcheetah/forward", "metaworld/reach-v3")


def call_block(reward: Any, samples: list[tuple[Any, np.ndarray]]) -> Callable[[int], float]:
    """A function that makes n reward calls over `samples` (cycling) and returns the seconds taken."""
    state = {"i": 0}

    def run(n: int) -> float:
        i = state["i"]
        start = time.perf_counter()
        for _ in range(n):
            view, action = samples[i]
            reward(view, action, 0.0, False)
            i = (i + 1) % len(samples)
        elapsed = time.perf_counter() - start
        state["i"] = i
        return elapsed

    return run


def interleave(a: Callable[[int], float], b: Callable[[int], float], n: int, repeats: int) -> tuple[float, float, float]:
    """Median seconds per unit of a and of b over `repeats` adjacent pairs of blocks, and the median b/a ratio."""
    a(min(n, 200))  # warm caches, lazy imports and the worker's start-up outside the timed blocks
    b(min(n, 200))
    times_a, times_b, ratios = [], [], []
    for _ in range(repeats):
        ta, tb = a(n) / n, b(n) / n
        times_a.append(ta)
        times_b.append(tb)
        ratios.append(tb / ta)
    return statistics.median(times_a), statistics.median(times_b), statistics.median(ratios)


def check_same(task_id: str, trusted: ProgramReward, sandboxed: SandboxedReward, samples: list) -> None:
    """The figures mean nothing if the sandbox answers differently: compare on every sample first."""
    for view, action in samples:
        if sandboxed(view, action, 0.0, False) != trusted(view, action, 0.0, False):
            raise SystemExit(f"{task_id}: the sandboxed reward differs from the in-process one; fix that before timing")


def per_call_rows(calls: int, repeats: int, limits: Limits) -> tuple[list[dict[str, Any]], str]:
    rows, isolation = [], ""
    for task_id, code in PROGRAMS.items():
        task = get_task(task_id)
        samples = collect_states(task, n_random=200, n_scripted=0)
        trusted = ProgramReward(code, name="bench")
        with SandboxedReward(code, "bench", limits) as sandboxed, SandboxedReward(TRIVIAL, "trivial", limits) as floor:
            check_same(task_id, trusted, sandboxed, samples)
            inside, isolated, ratio = interleave(call_block(trusted, samples), call_block(sandboxed, samples), calls, repeats)
            trivial_in, trivial_sandboxed, _ = interleave(call_block(ProgramReward(TRIVIAL), samples), call_block(floor, samples), calls, repeats)
            isolation = sandboxed.isolation
        rows.append(
            {
                "task": task_id,
                "view": task.view_class.__name__,
                "in_process_us": inside * 1e6,
                "sandboxed_us": isolated * 1e6,
                "ratio": ratio,
                "overhead_us": (isolated - inside) * 1e6,
                "floor_us": (trivial_sandboxed - trivial_in) * 1e6,
            }
        )
    return rows, isolation


def env_rows(steps: int, repeats: int, limits: Limits, seed: int) -> list[dict[str, Any]]:
    rows = []
    for task_id in ENV_TASKS:
        task = get_task(task_id)
        code = PROGRAMS[task_id]
        trusted_env = make_task_env(task, ProgramReward(code, name="bench"), seed=seed)
        sandboxed = SandboxedReward(code, "bench", limits)
        sandboxed_env = make_task_env(task, sandboxed, seed=seed)
        space = trusted_env.action_space
        space.seed(seed)
        actions = np.stack([space.sample() for _ in range(4096)])
        try:
            trusted_s, sandboxed_s, ratio = interleave(stepper(trusted_env, actions, seed), stepper(sandboxed_env, actions, seed), steps, repeats)
        finally:
            trusted_env.close()
            sandboxed_env.close()
            sandboxed.close()
        rows.append({"task": task_id, "in_process": 1 / trusted_s, "sandboxed": 1 / sandboxed_s, "ratio": 1 / ratio, "per_step_us": (sandboxed_s - trusted_s) * 1e6})
    return rows


def validation_rows(runs: int, limits: Limits) -> list[dict[str, Any]]:
    """Median ms per `run_reward` of the trivial program on 5 states and of a model-sized one on 200 states, twice."""
    task = get_task("metaworld/reach-v3")
    states = collect_states(task, n_random=200, n_scripted=0, seed=0)
    rows = []
    for name, code, samples, repeats in (("trivial program, 5 states", TRIVIAL, states[:5], 1),
                                         ("reach program, 200 states x 2", PROGRAMS["metaworld/reach-v3"], states, 2)):
        for _ in range(3):
            run_reward(code, samples, limits, repeats=repeats)  # the zygote's start and first imports, untimed
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            result = run_reward(code, samples, limits, repeats=repeats)
            times.append(time.perf_counter() - started)
            if not result.ok:
                raise SystemExit(f"validation failed: {result.error}")
        rows.append({"validation": name, "median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3})
    return rows


def measure(args: argparse.Namespace, isolation: str) -> dict[str, Any]:
    limits = Limits(isolation=isolation)
    load = os.getloadavg()[0]
    started = time.monotonic()
    calls, described = per_call_rows(args.calls, args.repeats, limits)
    envs = env_rows(args.steps, args.repeats, limits, args.seed)
    validation = validation_rows(args.validations, limits)
    return {"calls": calls, "envs": envs, "validation": validation, "isolation": described, "load": [load, os.getloadavg()[0]],
            "seconds": time.monotonic() - started}


def print_tables(calls: list[dict[str, Any]], envs: list[dict[str, Any]], validation: list[dict[str, Any]]) -> None:
    print("| task (view) | in-process µs/call | sandboxed µs/call | ratio | sandbox overhead µs | floor µs (trivial program) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in calls:
        print(
            f"| {r['task']} ({r['view']}) | {r['in_process_us']:.1f} | {r['sandboxed_us']:.1f} | {r['ratio']:.1f}x "
            f"| {r['overhead_us']:.1f} | {r['floor_us']:.1f} |"
        )
    print()
    print("| task | ProgramReward steps/s | SandboxedReward steps/s | sandboxed / in-process | extra µs/step |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in envs:
        print(f"| {r['task']} | {r['in_process']:,.0f} | {r['sandboxed']:,.0f} | {r['ratio']:.2f} | {r['per_step_us']:.1f} |")
    print()
    print("| validation (run_reward, back to back) | median ms | min ms |")
    print("| --- | ---: | ---: |")
    for r in validation:
        print(f"| {r['validation']} | {r['median_ms']:.1f} | {r['min_ms']:.1f} |")


FIGURES = (  # (label, section, the key naming a row, value key, format)
    ("overhead µs/call, {}", "calls", "task", "overhead_us", "{:.0f}"),
    ("steps/s ratio, {}", "envs", "task", "ratio", "{:.2f}"),
    ("validation ms, {}", "validation", "validation", "median_ms", "{:.1f}"),
)


def side_by_side(args: argparse.Namespace) -> None:
    """Alternate baseline and current, each pass in fresh processes; medians over the passes and their ratio."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"baseline": os.path.abspath(args.baseline), "current": here}
    for tree in trees.values():
        if not os.path.isdir(os.path.join(tree, "text2reward", "sandbox")):
            raise SystemExit(f"--baseline {args.baseline}: {tree} holds no text2reward/sandbox; give a checkout of this project")
    passes: dict[tuple[str, str], list[dict[str, Any]]] = {}
    flags = ["--calls", str(args.calls), "--steps", str(args.steps), "--repeats", str(args.repeats), "--seed", str(args.seed),
             "--validations", str(args.validations)]
    for number in range(args.passes):
        for isolation in args.isolation:
            for name, tree in trees.items():
                env = dict(os.environ, PYTHONPATH=os.pathsep.join([tree, os.path.dirname(os.path.abspath(__file__))]))
                command = [sys.executable, os.path.abspath(__file__), "--json", "--isolation", isolation, *flags]
                print(f"# pass {number + 1}/{args.passes}: {name} ({tree}), {isolation}", file=sys.stderr, flush=True)
                done = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    raise SystemExit(f"{name} failed:\n{done.stderr[-2000:]}")
                passes.setdefault((name, isolation), []).append(json.loads(done.stdout.strip().splitlines()[-1]))
    loads = [p["load"] for runs in passes.values() for p in runs]
    print(f"# {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, load average "
          f"{min(min(x) for x in loads):.2f}-{max(max(x) for x in loads):.2f}; {args.passes} passes, baseline {trees['baseline']}")
    for isolation in args.isolation:
        print(f"# {isolation}: baseline jail: {passes[('baseline', isolation)][0]['isolation']}")
        print(f"# {isolation}: current jail: {passes[('current', isolation)][0]['isolation']}")
    print()
    header = "| figure | " + " | ".join(f"baseline {i} | current {i} | current / baseline" for i in args.isolation) + " |"
    print(header)
    print("| --- |" + " ---: | ---: | ---: |" * len(args.isolation))
    for label, section, key, value, fmt in FIGURES:
        names = [row[key] for row in passes[("current", args.isolation[0])][0][section]]
        for row_name in names:
            cells = []
            for isolation in args.isolation:
                medians = []
                for tree in ("baseline", "current"):
                    values = [next(r[value] for r in p[section] if r[key] == row_name) for p in passes[(tree, isolation)]]
                    medians.append(statistics.median(values))
                cells += [fmt.format(medians[0]), fmt.format(medians[1]), f"{medians[1] / medians[0]:.2f}"]
            print(f"| {label.format(row_name)} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="reward calls per timed block")
    parser.add_argument("--steps", type=int, default=1000, help="env steps per timed block")
    parser.add_argument("--repeats", type=int, default=7, help="pairs of blocks per figure")
    parser.add_argument("--validations", type=int, default=15, help="timed validations per figure")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--isolation", nargs="+", default=["auto"], choices=["auto", "bubblewrap", "landlock"],
                        help="the worker's jail (landlock: Landlock + seccomp + own namespaces, as where bubblewrap is missing)")
    parser.add_argument("--baseline", help="another checkout of this project, measured beside this one (see above)")
    parser.add_argument("--passes", type=int, default=2, help="with --baseline: alternating passes per tree and jail")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline:
        side_by_side(args)
        return
    for isolation in args.isolation:
        figures = measure(args, isolation)
        if args.json:
            print(json.dumps(figures))
            continue
        load = figures["load"]
        print(f"# {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, load average {load[0]:.2f} at start, {load[1]:.2f} at end")
        print(f"# worker isolation: {figures['isolation']}; {args.calls} calls / {args.steps} steps per block, {args.repeats} pairs of blocks; {figures['seconds']:.0f} s")
        print()
        print_tables(figures["calls"], figures["envs"], figures["validation"])


if __name__ == "__main__":
    main()
