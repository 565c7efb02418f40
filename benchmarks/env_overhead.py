"""Env steps/s of each bare environment vs our wrapped task env with a program reward, side by side.

Why interleaved blocks: this machine is shared, so its speed drifts over a run. Timing one short
block of bare steps and then one of wrapped steps, over and over, and taking medians (and the
median of each adjacent pair's ratio) lets the drift hit both sides alike.

The wrapped env is exactly what training uses: `make_task_env(task, ProgramReward(...))`, i.e. the
state view read, the success test, a `compute_dense_reward` program and flat observations. The
table also splits the wrapper's extra time per step into its parts (view read, success test, reward
program, output check, the env step's own slowdown, rest).

    python benchmarks/env_overhead.py                      # seven tasks, about 2 minutes
    python benchmarks/env_overhead.py --tasks fetch/reach --steps 500 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from timing import stepper

from policies.reward_program import ProgramReward, normalise_output
from policies.task_env import TaskRewardWrapper, make_task_env
from sim_envs.registry import get_task
from sim_envs.task import Task

DEFAULT_TASKS = (
    "metaworld/reach-v3",
    "metaworld/pick-place-v3",
    "fetch/reach",
    "fetch/push",
    "halfcheetah/forward",
    "hopper/forward",
    "ant/forward",
)

# Small programs of the kind a model writes: a few norms / exp terms and a control cost, one per view class.
PROGRAMS: dict[str, str] = {
    "SawyerView": '''
def compute_dense_reward(self, action):
    to_obj = np.linalg.norm(self.robot.ee_position - self.obj.position)
    to_goal = np.linalg.norm(self.obj.position - self.goal_position)
    reach = np.exp(-5.0 * to_obj)
    place = np.exp(-5.0 * to_goal)
    grip = 1.0 - self.robot.gripper_openness if to_obj < 0.05 else 0.0
    ctrl = 0.01 * float(np.sum(np.square(action)))
    total = reach + 2.0 * place + 0.5 * grip - ctrl
    return total, {"reach": reach, "place": place, "grip": grip, "ctrl": -ctrl}
''',
    "FetchReachView": '''
def compute_dense_reward(self, action):
    distance = np.linalg.norm(self.robot.ee_position - self.goal_position)
    reach = np.exp(-10.0 * distance)
    speed = np.linalg.norm(self.robot.ee_velocity)
    ctrl = 0.01 * float(np.sum(np.square(action)))
    total = -distance + reach - 0.01 * speed - ctrl
    return total, {"distance": -distance, "reach": reach, "speed": -0.01 * speed, "ctrl": -ctrl}
''',
    "FetchObjectView": '''
def compute_dense_reward(self, action):
    to_obj = np.linalg.norm(self.robot.ee_position - self.obj.position)
    to_goal = np.linalg.norm(self.obj.position[:2] - self.goal_position[:2])
    reach = np.exp(-10.0 * to_obj)
    push = np.exp(-10.0 * to_goal)
    ctrl = 0.01 * float(np.sum(np.square(action)))
    total = 0.5 * reach + push - ctrl
    return total, {"reach": reach, "push": push, "ctrl": -ctrl}
''',
    "PlanarWalkerView": '''
def compute_dense_reward(self, action):
    forward = self.torso.x_velocity
    upright = math.exp(-abs(self.torso.pitch))
    height = np.clip(self.torso.position[2], 0.0, 1.5)
    ctrl = 0.1 * float(np.sum(np.square(action)))
    total = forward + 0.5 * upright + 0.1 * height - ctrl
    return total, {"forward": forward, "upright": upright, "height": height, "ctrl": -ctrl}
''',
    "AntView": '''
def compute_dense_reward(self, action):
    forward = self.torso.x_velocity
    upright = float(self.torso.up_vector[2])
    height = np.exp(-10.0 * abs(self.torso.position[2] - 0.55))
    ctrl = 0.5 * float(np.sum(np.square(action)))
    total = forward + 0.5 * upright + 0.5 * height - ctrl
    return total, {"forward": forward, "upright": upright, "height": height, "ctrl": -ctrl}
''',
}


@dataclass
class Row:
    task: str
    bare: float
    wrapped: float
    ratio: float
    overhead_us: float
    parts: dict[str, float]
    """µs per step, medians over the repeats: env, view, success, program, check, slowdown, rest (see `phase_stepper`)."""


def program_for(task: Task) -> ProgramReward:
    name = task.view_class.__name__
    if name not in PROGRAMS:
        raise SystemExit(f"no benchmark reward program for {name} ({task.id}); add one to PROGRAMS")
    return ProgramReward(PROGRAMS[name], name=f"bench_{name}")


PARTS = ("env", "view", "success", "program", "check")


def phase_stepper(task: Task, wrapped: Any, actions: np.ndarray, seed: int) -> Callable[[int], dict[str, float]]:
    """A function that runs n steps of the wrapper's work part by part, returning µs per step of each part.

    Timing each part alone on one state would flatter it (warm caches); here the parts run in the
    wrapper's order after real env steps: the env step, the view read, the success test, the reward
    program itself and `normalise_output` (the check of its `(total, {name: value})` contract).
    """
    inner = wrapped
    while not isinstance(inner, TaskRewardWrapper):
        inner = inner.env
    env, unwrapped, program = inner.env, wrapped.unwrapped, inner.reward_fn
    clock = time.perf_counter

    def run(n: int) -> dict[str, float]:
        totals = dict.fromkeys(PARTS, 0.0)
        env.reset(seed=seed)  # untimed, like the bare blocks' state carried over from the block before
        view = task.read_view(unwrapped, None)
        for i in range(n):
            action = actions[i % len(actions)]
            t0 = clock()
            _, _, terminated, truncated, info = env.step(action)
            t1 = clock()
            view = task.read_view(unwrapped, view)
            t2 = clock()
            task.is_success(view, info)
            t3 = clock()
            raw = program.function(view, action)
            t4 = clock()
            normalise_output(raw)
            t5 = clock()
            for key, seconds in zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                totals[key] += seconds
            if terminated or truncated:  # resets count too: the bare and wrapped blocks include theirs
                t0 = clock()
                env.reset(seed=seed + i + 1)
                t1 = clock()
                view = task.read_view(unwrapped, None)
                totals["env"] += t1 - t0
                totals["view"] += clock() - t1
        wrapped.reset(seed=seed)  # leave the wrapper consistent with its env again
        return {key: seconds / n * 1e6 for key, seconds in totals.items()}

    return run


def measure(task_id: str, steps: int, repeats: int, seed: int) -> Row:
    task = get_task(task_id)
    bare = task.make_env(seed=seed)
    wrapped = make_task_env(task, program_for(task), seed=seed)
    space = bare.action_space
    space.seed(seed)
    actions = np.stack([space.sample() for _ in range(4096)])
    run_bare, run_wrapped = stepper(bare, actions, seed), stepper(wrapped, actions, seed)
    run_parts = phase_stepper(task, wrapped, actions, seed)
    run_bare(min(steps, 200))  # warm caches and lazy imports outside the timed blocks
    run_wrapped(min(steps, 200))
    bare_rates, wrapped_rates, ratios, overheads, parts = [], [], [], [], []
    for _ in range(repeats):
        bare_us = run_bare(steps) / steps * 1e6
        wrapped_us = run_wrapped(steps) / steps * 1e6
        block = run_parts(max(steps // 2, 100))
        block["slowdown"] = block["env"] - bare_us  # the env step, run between Python work vs back to back
        block["rest"] = wrapped_us - bare_us - sum(block[k] for k in ("view", "success", "program", "check", "slowdown"))
        bare_rates.append(1e6 / bare_us)
        wrapped_rates.append(1e6 / wrapped_us)
        ratios.append(bare_us / wrapped_us)
        overheads.append(wrapped_us - bare_us)
        parts.append(block)
    bare.close()
    wrapped.close()
    medians = {key: statistics.median(p[key] for p in parts) for key in parts[0]}
    return Row(
        task_id,
        statistics.median(bare_rates),
        statistics.median(wrapped_rates),
        statistics.median(ratios),
        statistics.median(overheads),
        medians,
    )


def print_table(rows: list[Row]) -> None:
    print(
        "| task | bare steps/s | wrapped steps/s | ratio | overhead µs/step | view read µs | success µs "
        "| reward program µs | output check µs | env slowdown µs | rest µs |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        p = r.parts
        print(
            f"| {r.task} | {r.bare:,.0f} | {r.wrapped:,.0f} | {r.ratio:.2f} | {r.overhead_us:.1f} | {p['view']:.1f} "
            f"| {p['success']:.1f} | {p['program']:.1f} | {p['check']:.1f} | {p['slowdown']:.1f} | {p['rest']:.1f} |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="env steps per timed block (default 1000)")
    parser.add_argument("--repeats", type=int, default=7, help="rounds of bare, wrapped and part-by-part blocks per task (default 7)")
    parser.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS), help="task ids (default: seven, one or two per family)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows = []
    for task_id in args.tasks:
        rows.append(measure(task_id, args.steps, args.repeats, args.seed))
        print(f"# {task_id}: done ({time.perf_counter() - start:.0f} s)", flush=True)
    print()
    print(f"steps per block {args.steps}, {args.repeats} interleaved rounds; medians. ratio = median of wrapped/bare per round;")
    print("overhead = 1/wrapped - 1/bare (median per round). Each round also runs half a block of the wrapper's work")
    print("part by part: the view read, the success test, the reward program itself and normalise_output's check of its")
    print("output; env slowdown is how much slower the env step runs between that Python work than back to back; rest is")
    print("what is left (the wrapper's bookkeeping, Fetch's FlattenObservation, and timing noise).")
    print()
    print_table(rows)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
