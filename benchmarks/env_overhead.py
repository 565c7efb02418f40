"""Env steps/s of each bare environment vs our wrapped task env with a program reward, side by side.

Why interleaved blocks: this machine is shared, so its speed drifts over a run. Timing one short
block of bare steps and then one of wrapped steps, over and over, and taking medians (and the
median of each adjacent pair's ratio) lets the drift hit both sides alike.

The wrapped env is exactly what training uses: `make_task_env(task, ProgramReward(...))`, i.e. the
state view read, the success test, a `compute_dense_reward` program and flat observations. After
the table, a split says where the wrapper's extra time per step goes (view read, reward call, rest).

    python benchmarks/env_overhead.py                      # all seven tasks, about 1-2 minutes
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

from policies.reward_program import ProgramReward
from policies.task_env import make_task_env
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
    view_us: float
    success_us: float
    reward_us: float


def program_for(task: Task) -> ProgramReward:
    name = task.view_class.__name__
    if name not in PROGRAMS:
        raise SystemExit(f"no benchmark reward program for {name} ({task.id}); add one to PROGRAMS")
    return ProgramReward(PROGRAMS[name], name=f"bench_{name}")


def stepper(env: Any, actions: np.ndarray, seed: int) -> Callable[[int], float]:
    """A function that steps `env` n times through `actions` (resetting on done), returning seconds."""
    env.reset(seed=seed)
    state = {"i": 0, "episode": seed}

    def run(n: int) -> float:
        i = state["i"]
        start = time.perf_counter()
        for _ in range(n):
            _, _, terminated, truncated, _ = env.step(actions[i])
            i = (i + 1) % len(actions)
            if terminated or truncated:
                state["episode"] += 1
                env.reset(seed=state["episode"])
        elapsed = time.perf_counter() - start
        state["i"] = i
        return elapsed

    return run


def per_call_us(fn: Callable[[], Any], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def split(task: Task, wrapped: Any, action: np.ndarray, n: int) -> tuple[float, float, float]:
    """Per-call microseconds of the view read, the success test and the reward, on the env's current state."""
    unwrapped = wrapped.unwrapped
    reward_fn = wrapped.get_wrapper_attr("reward_fn")
    previous = wrapped.get_wrapper_attr("view")
    view = task.read_view(unwrapped, previous)
    info = {"success": 0.0, "is_success": 0.0}
    view_us = per_call_us(lambda: task.read_view(unwrapped, previous), n)
    success_us = per_call_us(lambda: task.is_success(view, info), n)
    reward_us = per_call_us(lambda: reward_fn(view, action, 0.0, False), n)
    return view_us, success_us, reward_us


def measure(task_id: str, steps: int, repeats: int, seed: int) -> Row:
    task = get_task(task_id)
    bare = task.make_env(seed=seed)
    wrapped = make_task_env(task, program_for(task), seed=seed)
    space = bare.action_space
    space.seed(seed)
    actions = np.stack([space.sample() for _ in range(4096)])
    run_bare, run_wrapped = stepper(bare, actions, seed), stepper(wrapped, actions, seed)
    run_bare(min(steps, 200))  # warm caches and lazy imports outside the timed blocks
    run_wrapped(min(steps, 200))
    bare_rates, wrapped_rates, ratios = [], [], []
    for _ in range(repeats):
        b = steps / run_bare(steps)
        w = steps / run_wrapped(steps)
        bare_rates.append(b)
        wrapped_rates.append(w)
        ratios.append(w / b)
    view_us, success_us, reward_us = split(task, wrapped, actions[0], n=max(steps, 1000))
    bare.close()
    wrapped.close()
    b, w = statistics.median(bare_rates), statistics.median(wrapped_rates)
    return Row(task_id, b, w, statistics.median(ratios), 1e6 / w - 1e6 / b, view_us, success_us, reward_us)


def print_table(rows: list[Row]) -> None:
    print("| task | bare steps/s | wrapped steps/s | ratio | overhead µs/step | view read µs | success µs | reward µs |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(
            f"| {r.task} | {r.bare:,.0f} | {r.wrapped:,.0f} | {r.ratio:.2f} | {r.overhead_us:.1f} "
            f"| {r.view_us:.1f} | {r.success_us:.1f} | {r.reward_us:.1f} |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="env steps per timed block (default 1000)")
    parser.add_argument("--repeats", type=int, default=7, help="bare/wrapped block pairs per task (default 7)")
    parser.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS), help="task ids (default: seven, one or two per family)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows = []
    for task_id in args.tasks:
        rows.append(measure(task_id, args.steps, args.repeats, args.seed))
        print(f"# {task_id}: done ({time.perf_counter() - start:.0f} s)", flush=True)
    print()
    print(f"steps per block {args.steps}, {args.repeats} interleaved pairs; medians. ratio = median of wrapped/bare per pair;")
    print("overhead = 1/wrapped - 1/bare; view read, success test and reward call timed alone on the same state.")
    print()
    print_table(rows)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
