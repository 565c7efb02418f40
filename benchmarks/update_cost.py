"""What one SAC env step costs, by implementation and network: where a candidate's training time goes.

Why: a SAC run's wall time is its number of env steps times this cost, and the levers (SB3 or SBX, network
width, batch size, updates per step) each change it by a different amount. This measures, on one task with its
expert reward and one thread per process (as a loop worker trains), the milliseconds per env step once updates
have started (one update per step unless the config says otherwise), for each configuration, in turns: every
repeat runs the configurations in a new order, so drift on a shared machine falls on all of them. The row
`rollout only` takes no update at all (env step, reward, policy call, replay buffer): the floor under the rest.

    python benchmarks/update_cost.py                          # metaworld/reach-v3, 2,000 steps, 2 repeats
    python benchmarks/update_cost.py --task fetch/reach --steps 3000 --repeats 3
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="metaworld/reach-v3")
    parser.add_argument("--steps", type=int, default=2000, help="env steps timed per configuration and repeat")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--only", nargs="+", default=None, metavar="TEXT",
                        help="only the configurations whose name holds one of these (the first kept is the ratios' base)")
    args = parser.parse_args()
    configs = {name: spec for name, spec in CONFIGS.items() if args.only is None or any(text in name for text in args.only)}

    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
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
