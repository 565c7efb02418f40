"""Env steps per second per candidate against n_envs, vector-env kind and device, at a kept update-to-data ratio.

Why: every decision of the loop costs an RL run, and separating rewards needs more steps and seeds. The levers are
more environments per candidate (each vector step feeds n_envs transitions) and a device that makes the updates
cheaper. To keep success per environment step unchanged, each vector step takes `gradient_steps = n_envs` updates,
which SBX compiles into one call (its `train` samples `batch * gradient_steps` rows and loops inside JIT), so more
envs buy fewer Python round trips, not fewer updates. Each configuration runs in its own process (JAX is told its
platform before it starts), warms up past `learning_starts` and the compilations, then times `--seconds` of
training; configurations run in shuffled turns so drift on a shared machine falls on all of them.

    python benchmarks/throughput.py                                   # cpu, n_envs 1 4 16, reach-v3
    python benchmarks/throughput.py --devices cpu cuda --n-envs 1 4 16 --vec dummy subproc --seconds 20
    python benchmarks/throughput.py --devices cpu cuda --n-envs 1 16 --workers 1 4 8   # candidates at once
    python benchmarks/throughput.py --devices cuda --n-envs 16 64 --vec subproc --phases  # where a vector step's time goes
    python benchmarks/throughput.py --start-latency 5                 # a job's start: fresh process vs fork server
    python benchmarks/throughput.py --job-memory --devices cpu auto cuda --n-envs 1 4 16   # GPU memory per t2r train

Prints one row per configuration: env steps/s per job (median over repeats, and over the jobs with `--workers` K > 1:
K candidates at once, each in its own process, timed together after all have warmed up), the ratio to the 1-env cpu
row, the machine's steps/s (the K jobs' sum), and for cuda the peak GPU memory JAX held for a job (what several
candidates sharing one GPU must fit in).

`--phases` adds a second, instrumented window per configuration that splits a vector step's milliseconds between the
vector env's step (the reward included), the policy's action, the replay buffer's add and sample, SBX's compiled
update call, and the rest (SB3's loop and callbacks): what bounds a configuration, read off rather than guessed.

`--job-memory` runs the product's own path instead: one `t2r train` per device and n_envs (`--devices auto cpu cuda`),
sampling `nvidia-smi` every half second for the GPU memory its process holds, CUDA context included (what several
candidates sharing one GPU must fit in; JAX's own `peak_bytes_in_use` above leaves the context out). A CPU job should
hold none. Without `nvidia-smi` it says so and measures nothing.

`--start-latency N` measures instead what a training job costs before it trains: N jobs started as fresh processes
and N forked from the launcher's preloaded server (training/forkserver.py), in alternating turns, each through
`pool.LocalLauncher` as a run starts them: the seconds from `start` to the job's first env step (its env writes the
moment, through a task file that wraps the task's env), and to the job's end (a 200-step job, no analysis).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def wait_for_the_others(barrier: str | None, workers: int, timeout: float = 300.0) -> None:
    """With several workers of one configuration, each waits after its warm-up until all have warmed up, so their
    timed windows overlap (what a machine running `workers` candidates at once sees)."""
    if not barrier or workers <= 1:
        return
    Path(barrier, f"ready-{os.getpid()}").touch()
    deadline = time.monotonic() + timeout
    while len(list(Path(barrier).glob("ready-*"))) < workers and time.monotonic() < deadline:
        time.sleep(0.05)


PHASES = ("env_step", "policy_act", "buffer_add", "buffer_sample", "update")


def time_phases(model: Any, env: Any, totals: dict[str, float]) -> None:
    """Adds each phase's wall seconds to `totals` as SB3's loop calls it: the vector env's step (reward included;
    subprocess round trips with `subproc`), the policy's action for the collected step, the replay buffer's add and
    sample, and SBX's compiled update call with its losses read back (`.item()`, which waits for the device). What
    is left of a window is SB3's Python loop and callbacks. Instance attributes shadow the methods, so only this
    model and env are timed."""

    def timed(name: str, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                totals[name] += time.perf_counter() - started
        return wrapper

    sample = model.replay_buffer.sample
    model.replay_buffer.sample = timed("buffer_sample", sample)
    train = model.train

    def update(gradient_steps: int, batch_size: int) -> None:
        before = totals["buffer_sample"]
        started = time.perf_counter()
        try:
            train(gradient_steps, batch_size)
        finally:
            totals["update"] += time.perf_counter() - started - (totals["buffer_sample"] - before)

    model.train = update
    model.predict = timed("policy_act", model.predict)
    model.replay_buffer.add = timed("buffer_add", model.replay_buffer.add)
    env.step_async = timed("env_step", env.step_async)
    env.step_wait = timed("env_step", env.step_wait)


def train_for(model: Any, chunk: int, seconds: float) -> tuple[int, float]:
    """Train in chunks of `chunk` env steps until `seconds` have passed: the steps trained and the seconds they took."""
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        model.learn(chunk, reset_num_timesteps=False)
        done += chunk
    return done, time.perf_counter() - started


def child(task_id: str, n_envs: int, vec: str, device: str, seconds: float, net: int, batch: int,
          updates: str, workers: int = 1, barrier: str | None = None, phases: bool = False) -> dict[str, Any]:
    """One configuration, in this process: SBX SAC with gradient_steps = n_envs (`ratio`) or one update of an
    n_envs-times wider batch per vector step (`wide`: the same samples per env step, fewer, larger updates), timed
    after a warm-up (and, with other workers, after all of them warmed up). With `phases`, a second window of the
    same length times each phase of a vector step (`time_phases`), so the first window's figure stays uninstrumented."""
    import jax
    from sbx import SAC
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
    from timing import without_log_folder

    from policies.reward_program import reward_from_spec
    from policies.task_env import make_task_env
    from sim_envs import get_task

    task = get_task(task_id)
    env = make_vec_env(lambda: make_task_env(task, reward_from_spec("expert"), seed=0), n_envs=n_envs, seed=0,
                       vec_env_cls=SubprocVecEnv if vec == "subproc" else DummyVecEnv)
    gradient_steps, batch_size = (n_envs, batch) if updates == "ratio" else (1, batch * n_envs)
    model = SAC("MlpPolicy", env, seed=0, learning_starts=1000, batch_size=batch_size, train_freq=1,
                gradient_steps=gradient_steps,
                policy_kwargs={"net_arch": [net, net]}, verbose=0)
    without_log_folder(model)  # a child runs as a script: benchmarks/ is on its path
    try:
        model.learn(1000 + 64 * n_envs)  # past learning_starts, updates compiled
        wait_for_the_others(barrier, workers)
        done, elapsed = train_for(model, 128 * n_envs, seconds)
        memory = None
        if device == "cuda":
            stats = jax.devices()[0].memory_stats() or {}
            memory = stats.get("peak_bytes_in_use")
        result: dict[str, Any] = {"steps_per_s": done / elapsed, "updates_per_s": done / elapsed * gradient_steps / n_envs,
                                  "gpu_peak_bytes": memory, "jax_device": str(jax.devices()[0])}
        if phases:
            totals = dict.fromkeys(PHASES, 0.0)
            time_phases(model, env, totals)
            done, elapsed = train_for(model, 128 * n_envs, seconds)
            vector_steps = done / n_envs
            result["phases_ms_per_vector_step"] = {
                **{name: 1000 * value / vector_steps for name, value in totals.items()},
                "rest": 1000 * (elapsed - sum(totals.values())) / vector_steps}
            result["phases_steps_per_s"] = done / elapsed
        return result
    finally:
        env.close()


def run_config(args: argparse.Namespace, n_envs: int, vec: str, device: str, updates: str, workers: int = 1) -> dict[str, Any]:
    """`workers` children of one configuration at once (each its own candidate); their per-job steps/s, median and sum."""
    import tempfile

    environment = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    environment["JAX_PLATFORMS"] = "cuda" if device == "cuda" else "cpu"
    with tempfile.TemporaryDirectory(prefix="t2r-throughput-") as barrier:
        command = [sys.executable, __file__, "--child", json.dumps(
            {"task_id": args.task, "n_envs": n_envs, "vec": vec, "device": device, "seconds": args.seconds,
             "net": args.net, "batch": args.batch, "updates": updates, "workers": workers, "barrier": barrier,
             "phases": args.phases})]
        processes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)
                     for _ in range(workers)]
        outputs = [process.communicate(timeout=args.seconds * 10 + 600) for process in processes]
    jobs = []
    for process, (stdout, stderr) in zip(processes, outputs):
        if process.returncode != 0:
            return {"error": (stderr.strip().splitlines() or [f"exit {process.returncode}"])[-1]}
        jobs.append(json.loads(stdout.strip().splitlines()[-1]))
    per_job = [job["steps_per_s"] for job in jobs]
    peaks = [job["gpu_peak_bytes"] for job in jobs if job.get("gpu_peak_bytes")]
    phases = [job["phases_ms_per_vector_step"] for job in jobs if "phases_ms_per_vector_step" in job]
    return {"steps_per_s": statistics.median(per_job), "machine_steps_per_s": sum(per_job), "per_job": per_job,
            "phases_ms_per_vector_step": phases[0] if len(phases) == 1 else None,
            "phases_steps_per_s": jobs[0].get("phases_steps_per_s") if len(phases) == 1 else None,
            "updates_per_s": statistics.median(job["updates_per_s"] for job in jobs),
            "gpu_peak_bytes": max(peaks) if peaks else None, "jax_device": jobs[0]["jax_device"]}


FIRST_STEP_TASK = """
import dataclasses, os, time
import gymnasium as gym
from sim_envs import get_task

BASE = get_task({task!r})


class FirstStepMarker(gym.Wrapper):
    \"\"\"Writes the wall-clock moment of the first step to $T2R_BENCH_FIRST_STEP (once).\"\"\"

    def step(self, action):
        path = os.environ.get("T2R_BENCH_FIRST_STEP")
        if path and not os.path.exists(path):
            with open(path, "w") as handle:
                handle.write(repr(time.time()))
        return self.env.step(action)


def make(*args, **kwargs):
    return FirstStepMarker(BASE.env_factory(*args, **kwargs))


MARKED = dataclasses.replace(BASE, id="bench/first-step", env_factory=make)
"""


def start_latency(task_id: str, repeats: int, algo: str = "sbx-sac") -> dict[str, Any]:
    """Start `repeats` tiny jobs of `algo` each way, alternating; the seconds to each job's first env step and to its end."""
    import tempfile

    from policies.config import TrainConfig
    from text2reward.training.job import TrainJob
    from text2reward.training.pool import LocalLauncher
    from text2reward.training.preloaded import fork_server

    root = Path(tempfile.mkdtemp(prefix="t2r-start-latency-"))
    task_file = root / "first_step_task.py"
    task_file.write_text(FIRST_STEP_TASK.format(task=task_id))
    said: list[str] = []
    started = time.perf_counter()
    fork_server(said.append)  # a run starts its server once, before its first job: its own cost, reported apart
    server_start = time.perf_counter() - started
    times: dict[str, dict[str, list[float]]] = {way: {"first_step": [], "end": []} for way in ("fresh", "preloaded")}
    for turn in range(repeats):
        for way in (("fresh", "preloaded") if turn % 2 == 0 else ("preloaded", "fresh")):
            out = root / f"{way}{turn}"
            out.mkdir()
            job = TrainJob(train=TrainConfig(task_id="bench/first-step", out_dir=out / "train", reward="expert", steps=200, algo=algo,
                                             eval_freq=100, eval_episodes=1, overrides={"learning_starts": 50, "batch_size": 32}),
                           task_file=str(task_file), analysis_episodes=0)
            job.write()
            launcher = LocalLauncher(said.append, preload=way == "preloaded")
            os.environ["T2R_BENCH_FIRST_STEP"] = str(out / "first_step")
            begun = time.time()
            launcher.start(0, job)
            ended = []
            while not ended:
                ended = launcher.collect()
                time.sleep(0.05)
            done = time.time()
            ok = ended[0][1].ok
            first = float((out / "first_step").read_text()) if (out / "first_step").is_file() else float("nan")
            times[way]["first_step"].append(first - begun)
            times[way]["end"].append(done - begun)
            print(f"# {way} turn {turn}: first step {first - begun:.2f} s, end {done - begun:.2f} s, ok {ok}", flush=True)
    return {"server_start_s": server_start, "said": said,
            **{f"{way}_{what}_s": statistics.median(values) for way, kinds in times.items() for what, values in kinds.items()},
            "runs": times}


def gpu_memory_by_pid(csv_text: str) -> dict[int, int]:
    """MiB per process from `nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits`."""
    held: dict[int, int] = {}
    for line in csv_text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
            held[int(fields[0])] = held.get(int(fields[0]), 0) + int(fields[1])
    return held


def job_memory(task_id: str, devices: list[str], n_envs: list[int], steps: int, vecs: tuple[str, ...] = ("dummy",),
               rewards: tuple[str, ...] = ("expert",)) -> list[dict[str, Any]]:
    """The product's own path: one `t2r train` (SBX SAC, evaluations off but one final episode) per device, n_envs,
    `--hp vec_env` and reward (`expert` in-process, or a reward file, jailed); its steps/s and the GPU memory its process
    held at most."""
    import shutil
    import tempfile

    smi = shutil.which("nvidia-smi")
    query = [smi or "nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
    rows = []
    for device, n, vec, reward in itertools.product(devices, n_envs, vecs, rewards):
        out = Path(tempfile.mkdtemp(prefix="t2r-job-memory-"))
        command = [sys.executable, "-m", "text2reward.cli", "train", "--task", task_id, "--reward", reward,
                   "--algo", "sbx-sac", "--steps", str(steps), "--device", device, "--hp", f"n_envs={n}",
                   "--hp", f"vec_env={vec}", "--eval-freq", str(steps), "--eval-episodes", "1", "--out", str(out)]
        with open(out / "stderr.txt", "w") as stderr:  # a file, not a pipe: a full pipe would stall the job
            process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
            peak = 0
            while process.poll() is None:
                if smi:
                    sampled = subprocess.run(query, capture_output=True, text=True, timeout=30).stdout
                    peak = max(peak, gpu_memory_by_pid(sampled).get(process.pid, 0))
                time.sleep(0.5)
        error = (out / "stderr.txt").read_text().strip().splitlines()[-1:] if process.returncode else []
        result = json.loads((out / "result.json").read_text()) if (out / "result.json").is_file() else {}
        rows.append({"device_asked": device, "n_envs": n, "vec": vec, "reward": Path(reward).name, "trained_on": result.get("device"),
                     "steps_per_s": result.get("steps_per_second"), "gpu_mib": peak if smi else None,
                     "error": error[0] if error else None})
        print(f"# {rows[-1]}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--task", default="metaworld/reach-v3")
    parser.add_argument("--devices", nargs="+", default=["cpu"])
    parser.add_argument("--n-envs", nargs="+", type=int, default=[1, 4, 16])
    parser.add_argument("--vec", nargs="+", default=["dummy"], choices=["dummy", "subproc"])
    parser.add_argument("--updates", nargs="+", default=["ratio"], choices=["ratio", "wide"],
                        help="ratio: n_envs updates per vector step; wide: one update of an n_envs-times batch")
    parser.add_argument("--seconds", type=float, default=15.0, help="timed training per configuration and repeat")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--workers", nargs="+", type=int, default=[1],
                        help="candidates training at once, each in its own process (per job and per machine steps/s)")
    parser.add_argument("--net", type=int, default=128, help="hidden width of SAC's two layers")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--start-latency", type=int, metavar="N",
                        help="measure N job starts each way (fresh process, fork server) instead of throughput")
    parser.add_argument("--job-memory", action="store_true",
                        help="the product's path: one `t2r train` per --devices, --n-envs, --vec and --rewards, its steps/s and "
                             "the GPU memory its process holds (nvidia-smi, where there is one)")
    parser.add_argument("--phases", action="store_true",
                        help="after the timed window, a second one that splits a vector step's milliseconds by phase "
                             "(env step, policy action, buffer add and sample, update, the rest); one worker only")
    parser.add_argument("--steps", type=int, default=3000, help="steps per `t2r train` of --job-memory")
    parser.add_argument("--rewards", nargs="+", default=["expert"],
                        help="--job-memory's rewards: expert (in-process) and/or reward files (each in the jail)")
    parser.add_argument("--algo", default="sbx-sac", help="the algorithm of --start-latency's jobs (sac, ppo: SB3's)")
    args = parser.parse_args()
    if args.job_memory:
        rows = job_memory(args.task, args.devices, args.n_envs, args.steps, tuple(args.vec), tuple(args.rewards))
        if rows and rows[0]["gpu_mib"] is None:
            print("no nvidia-smi here: the GPU memory per job needs a machine with an NVIDIA GPU")
        print(f"\n{args.task}, SBX SAC, {args.steps} steps per job, {os.cpu_count()} cores")
        print(f"{'--device':<9} {'n_envs':>6} {'vec_env':>8} {'reward':>24} {'trained on':>10} {'steps/s':>8} {'GPU MiB held':>13}")
        for row in rows:
            held = "-" if row["gpu_mib"] is None else str(row["gpu_mib"])
            print(f"{row['device_asked']:<9} {row['n_envs']:>6} {row['vec']:>8} {row['reward']:>24} "
                  f"{row['trained_on'] or row['error'] or '-':>10} {row['steps_per_s'] or float('nan'):>8.0f} {held:>13}")
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(rows, handle, indent=1)
        return
    if args.child:
        print(json.dumps(child(**json.loads(args.child))))
        return
    if args.start_latency:
        result = start_latency(args.task, args.start_latency, args.algo)
        print(f"\n{args.task}, 200-step {args.algo} jobs, {os.cpu_count()} cores, median of {args.start_latency} each way; fork server "
              f"ready {result['server_start_s']:.1f} s after it was asked for")
        print(f"{'start':<10} {'to first step (s)':>18} {'to end (s)':>11}")
        for way in ("fresh", "preloaded"):
            print(f"{way:<10} {result[f'{way}_first_step_s']:>18.2f} {result[f'{way}_end_s']:>11.2f}")
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(result, handle, indent=1)
        return

    configs = [(n, vec, device, updates, workers) for device in args.devices for updates in args.updates for vec in args.vec
               for n in args.n_envs for workers in args.workers if not (n == 1 and (vec == "subproc" or updates == "wide"))]
    measured: dict[tuple[int, str, str, str, int], list[dict[str, Any]]] = {c: [] for c in configs}
    for repeat in range(args.repeats):
        order = configs[:]
        random.Random(repeat).shuffle(order)
        for config in order:
            row = run_config(args, *config)
            measured[config].append(row)
            print(f"# repeat {repeat} n_envs={config[0]} vec={config[1]} device={config[2]} updates={config[3]} "
                  f"workers={config[4]}: {row}", flush=True)

    def median(config: tuple[int, str, str, str, int], key: str = "steps_per_s") -> float | None:
        values = [r[key] for r in measured[config] if key in r]
        return statistics.median(values) if values else None

    baseline = (1, "dummy", "cpu", "ratio", 1)
    base = median(baseline) if baseline in measured else None
    print(f"\n{args.task}, SBX SAC [{args.net}, {args.net}], batch {args.batch}, "
          f"{os.cpu_count()} cores, {args.seconds:.0f} s timed x {args.repeats}")
    print(f"{'device':<6} {'updates':<7} {'vec':<8} {'n_envs':>6} {'workers':>7} {'steps/s per job':>16} "
          f"{'x 1-env cpu':>12} {'per machine':>12} {'GPU peak MB':>12}")
    rows = []
    for config in configs:
        value, machine = median(config), median(config, "machine_steps_per_s")
        peaks = [r.get("gpu_peak_bytes") for r in measured[config] if r.get("gpu_peak_bytes")]
        peak = max(peaks) / 2**20 if peaks else None
        ratio = value / base if value and base else None
        rows.append({"n_envs": config[0], "vec": config[1], "device": config[2], "updates": config[3], "workers": config[4],
                     "steps_per_s": value, "machine_steps_per_s": machine, "ratio_to_1env_cpu": ratio, "gpu_peak_mb": peak,
                     "per_job": [r.get("per_job") for r in measured[config]],
                     "phases_ms_per_vector_step": [r.get("phases_ms_per_vector_step") for r in measured[config]],
                     "errors": [r["error"] for r in measured[config] if "error" in r]})
        print(f"{config[2]:<6} {config[3]:<7} {config[1]:<8} {config[0]:>6} {config[4]:>7} {value or float('nan'):>16.0f} "
              f"{ratio or float('nan'):>12.2f} {machine or float('nan'):>12.0f} {peak or float('nan'):>12.0f}")
    if args.phases:
        print("\nmilliseconds per vector step by phase (a second, instrumented window; one worker's figures)")
        print(f"{'device':<6} {'vec':<8} {'n_envs':>6} " + " ".join(f"{name:>13}" for name in (*PHASES, "rest"))
              + f" {'steps/s':>8}")
        for config in configs:
            for row in measured[config]:
                split = row.get("phases_ms_per_vector_step")
                if split:
                    print(f"{config[2]:<6} {config[1]:<8} {config[0]:>6} "
                          + " ".join(f"{split[name]:>13.2f}" for name in (*PHASES, "rest"))
                          + f" {row['phases_steps_per_s']:>8.0f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
