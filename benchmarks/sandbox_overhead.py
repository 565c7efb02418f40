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
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from timing import stepper

from policies.reward_program import ProgramReward
from policies.task_env import make_task_env
from sim_envs.registry import get_task
from text2reward.sandbox import Limits, SandboxedReward, collect_states

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


def print_tables(calls: list[dict[str, Any]], envs: list[dict[str, Any]]) -> None:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="reward calls per timed block")
    parser.add_argument("--steps", type=int, default=1000, help="env steps per timed block")
    parser.add_argument("--repeats", type=int, default=7, help="pairs of blocks per figure")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--isolation", default="auto", choices=["auto", "bubblewrap", "landlock"],
                        help="the worker's jail (landlock: Landlock + seccomp, as where bubblewrap is missing)")
    args = parser.parse_args()
    limits = Limits(isolation=args.isolation)
    load = os.getloadavg()[0]
    started = time.monotonic()
    calls, isolation = per_call_rows(args.calls, args.repeats, limits)
    envs = env_rows(args.steps, args.repeats, limits, args.seed)
    print(f"# {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, load average {load:.2f} at start, {os.getloadavg()[0]:.2f} at end")
    print(f"# worker isolation: {isolation}; {args.calls} calls / {args.steps} steps per block, {args.repeats} pairs of blocks; {time.monotonic() - started:.0f} s")
    print()
    print_tables(calls, envs)


if __name__ == "__main__":
    main()
