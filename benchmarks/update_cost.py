"""What one SAC env step costs, by implementation and network: where a candidate's training time goes.

Why: a SAC run's wall time is its number of env steps times this cost, and the levers (SB3 or SBX, network
width, batch size, updates per step) each change it by a different amount. This measures, on one task with its
expert reward and one thread per process (as a loop worker trains), the milliseconds per env step once updates
have started (one update per step unless the config says otherwise), for each configuration, in turns: every
repeat runs the configurations in a new order, so drift on a shared machine falls on all of them. The row
`rollout only` takes no update at all (env step, reward, policy call, replay buffer): the floor under the rest.

    python benchmarks/update_cost.py                          # metaworld/reach-v3, 2,000 steps, 2 repeats
    python benchmarks/update_cost.py --task fetch/reach --steps 3000 --repeats 3
    python benchmarks/update_cost.py --flops    # the default update's arithmetic rate against this core's matmul

`--flops` asks whether the update is arithmetic or overhead: XLA's own count of the floating-point operations in SBX's
compiled update call (the project's MetaWorld default: 4 updates per call, the actor every 2nd), the call's time, and
the rate one core reaches on plain matrix products (the same XLA, one thread) of a large size and of one layer of the
update's size.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from typing import Any

from timing import without_log_folder

CONFIGS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "SB3 SAC defaults [256, 256], batch 256": ("sb3", {}, {}),
    "SBX SAC [256, 256], batch 256": ("sbx", {}, {"net_arch": [256, 256]}),
    "SBX SAC [128, 128], batch 256 (the project's MetaWorld/Fetch network)": ("sbx", {}, {"net_arch": [128, 128]}),
    "SBX SAC [128, 128], batch 128": ("sbx", {"batch_size": 128}, {"net_arch": [128, 128]}),
    "SBX SAC [64, 64], batch 256": ("sbx", {}, {"net_arch": [64, 64]}),
    "SBX SAC [64, 64], batch 128": ("sbx", {"batch_size": 128}, {"net_arch": [64, 64]}),
    "SBX SAC [128, 128], 2 updates per step": ("sbx", {"gradient_steps": 2}, {"net_arch": [128, 128]}),
    "SBX SAC [128, 128], the actor every 2nd update (policy_delay 2)": ("sbx", {"policy_delay": 2}, {"net_arch": [128, 128]}),
    "SBX SAC [128, 128], 4 updates in one call every 4 steps": ("sbx", {"train_freq": 4, "gradient_steps": 4}, {"net_arch": [128, 128]}),
    "SBX SAC [128, 128], both of the two above": ("sbx", {"train_freq": 4, "gradient_steps": 4, "policy_delay": 2}, {"net_arch": [128, 128]}),
    "SBX SAC [128, 128], both, batch 128": ("sbx", {"train_freq": 4, "gradient_steps": 4, "policy_delay": 2, "batch_size": 128},
                                             {"net_arch": [128, 128]}),
    "SBX SAC [128, 128], both, 8 updates in one call every 8 steps": ("sbx", {"train_freq": 8, "gradient_steps": 8, "policy_delay": 2},
                                                                     {"net_arch": [128, 128]}),
    "SBX SAC [128, 128], both, the actor every 4th update": ("sbx", {"train_freq": 4, "gradient_steps": 4, "policy_delay": 4},
                                                             {"net_arch": [128, 128]}),
    "SBX SAC [128, 128], both, one-call sampling (the project's MetaWorld default)": (
        "sbx-one-call", {"train_freq": 4, "gradient_steps": 4, "policy_delay": 2}, {"net_arch": [128, 128]}),
    "rollout only, one-call sampling (SBX [128, 128], no update)": ("sbx-one-call", {"gradient_steps": 0}, {"net_arch": [128, 128]}),
    "rollout only (SBX [128, 128], no update)": ("sbx", {"gradient_steps": 0}, {"net_arch": [128, 128]}),
}


def measure(task_id: str, library: str, algo_kwargs: dict[str, Any], policy_kwargs: dict[str, Any], steps: int) -> float:
    """Milliseconds per env step after a warm-up that starts the updates (and compiles SBX's)."""
    from policies.reward_program import reward_from_spec
    from policies.task_env import make_task_env
    from sim_envs import get_task

    env = make_task_env(get_task(task_id), reward_from_spec("expert"), seed=0)
    if library == "sb3":
        from stable_baselines3 import SAC
    else:
        from sbx import SAC
    model = without_log_folder(SAC("MlpPolicy", env, seed=0, learning_starts=200, policy_kwargs=policy_kwargs or None, **algo_kwargs))
    if library == "sbx-one-call":  # what policies.train gives an SBX SAC model (policies/sbx_sampling.py)
        from policies.sbx_sampling import sample_in_one_call

        sample_in_one_call(model)
    try:
        model.learn(600)
        started = time.perf_counter()
        model.learn(steps, reset_num_timesteps=False)
        return (time.perf_counter() - started) / steps * 1000
    finally:
        env.close()


def median_seconds(call: Any, calls: int, repeats: int = 5) -> float:
    """The median over `repeats` of the mean seconds of `calls` calls of `call` (JAX's results waited for)."""
    import jax

    jax.block_until_ready(call())
    means = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            jax.block_until_ready(call())
        means.append((time.perf_counter() - started) / calls)
    return statistics.median(means)


def update_flops(task_id: str) -> dict[str, float]:
    """The default SBX SAC update call's GFLOP (XLA's cost analysis of the compiled call), its milliseconds and
    GFLOP/s, beside one core's GFLOP/s on plain float32 matrix products."""
    import jax
    import jax.numpy as jnp
    from sbx import SAC

    from policies.reward_program import reward_from_spec
    from policies.task_env import make_task_env
    from sim_envs import get_task

    env = make_task_env(get_task(task_id), reward_from_spec("expert"), seed=0)
    model = without_log_folder(SAC("MlpPolicy", env, seed=0, learning_starts=200, policy_kwargs={"net_arch": [128, 128]},
                                   train_freq=4, gradient_steps=4, policy_delay=2))
    library_call = model._train
    arguments: list[tuple[Any, ...]] = []

    def keep_arguments(*args: Any) -> Any:
        arguments.append(args)
        return library_call(*args)

    model._train = keep_arguments  # the instance's own attribute: SBX's `train` looks it up there first
    model.learn(600)
    compiled_update = type(model).__dict__["_train"].__func__
    cost = compiled_update.lower(type(model), *arguments[-1]).compile().cost_analysis()
    flops = float((cost[0] if isinstance(cost, list) else cost)["flops"])
    seconds = median_seconds(lambda: library_call(*arguments[-1]), 50)
    rates = {"update_gflop": flops / 1e9, "update_ms": seconds * 1000, "update_gflop_per_s": flops / seconds / 1e9}
    product = jax.jit(lambda a, b: a @ b)
    for name, (m, k, n) in {"matmul_1024": (1024, 1024, 1024), "matmul_256x128x128": (256, 128, 128)}.items():
        a, b = jnp.ones((m, k), jnp.float32), jnp.ones((k, n), jnp.float32)
        rates[f"{name}_gflop_per_s"] = 2 * m * k * n / median_seconds(lambda a=a, b=b: product(a, b), 20 if m == 1024 else 500) / 1e9
    env.close()
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="metaworld/reach-v3")
    parser.add_argument("--steps", type=int, default=2000, help="env steps timed per configuration and repeat")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--only", nargs="+", default=None, metavar="TEXT",
                        help="only the configurations whose name holds one of these (the first kept is the ratios' base)")
    parser.add_argument("--flops", action="store_true", help="the default update's arithmetic rate against this core's matmul")
    args = parser.parse_args()
    if args.flops:
        os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
        rates = update_flops(args.task)
        print(json.dumps({name: round(value, 3) for name, value in rates.items()}))
        print(f"\nthe update call (4 updates): {rates['update_gflop']:.3f} GFLOP in {rates['update_ms']:.2f} ms = "
              f"{rates['update_gflop_per_s']:.1f} GFLOP/s; one core's matmul: {rates['matmul_1024_gflop_per_s']:.0f} GFLOP/s at "
              f"1024, {rates['matmul_256x128x128_gflop_per_s']:.0f} at one layer's size (256x128 by 128x128)")
        return
    configs = {name: spec for name, spec in CONFIGS.items() if args.only is None or any(text in name for text in args.only)}

    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
    import torch
    from expert_baselines import machine

    torch.set_num_threads(1)
    print(json.dumps(machine()), flush=True)
    times: dict[str, list[float]] = {name: [] for name in configs}
    order = list(configs)
    for repeat in range(args.repeats):
        random.Random(repeat).shuffle(order)
        for name in order:
            library, algo_kwargs, policy_kwargs = configs[name]
            times[name].append(measure(args.task, library, algo_kwargs, policy_kwargs, args.steps))
            print(f"  repeat {repeat}: {name}: {times[name][-1]:.2f} ms/step", flush=True)
    base_name = next(iter(configs))
    base = statistics.median(times[base_name])
    print(f"\n{args.task}, {args.steps:,} steps per measurement, {args.repeats} repeats, one thread\n")
    print(f"| configuration | ms per env step (median) | vs {base_name} |")
    print("| --- | ---: | ---: |")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.2f} | {median / base:.2f} |")


if __name__ == "__main__":
    main()
