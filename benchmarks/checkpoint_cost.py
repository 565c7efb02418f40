"""What resume checkpoints cost (issue 32): seconds per write, size on disk, and their share of the training time between
two evaluations, for sbx-sac on a MetaWorld task and PPO on a locomotion task, each trained with checkpointing off and
on (`policies.train.train(..., resumable=...)`, as a training job runs it) in turns whose order is shuffled per repeat,
with the families' own settings (evaluation interval, episodes, network, buffer size).

Then, on the SAC run's last checkpoint, the replay buffer alone: its filled rows as the checkpoint saves them
(policies.replay_rows: next observations only where they differ, observations deflated) against SB3's
`save_replay_buffer`, which pickles the whole preallocated buffer (1,000,000 rows here); and the same rows tiled to
larger buffers, to see where a write would outgrow the share `policies.resume.SHARE` lets it take.

    python benchmarks/checkpoint_cost.py                        # reach-v3 10k steps + halfcheetah 50k steps, 2 repeats
    python benchmarks/checkpoint_cost.py --repeats 1 --no-sb3-pickle
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any


def run(task: str, algo: str, steps: int, seed: int, resumable: bool, keep: Path | None) -> dict[str, Any]:
    """One training; with `keep`, its folder (and its last checkpoint) is left there."""
    from policies.train import TrainConfig, train

    with tempfile.TemporaryDirectory() as scratch:
        out = keep or Path(scratch)
        config = TrainConfig(task_id=task, out_dir=out, steps=steps, seed=seed, device="cpu", algo=algo,
                             overrides={"final_eval_episodes": 1})  # the final evaluation is outside what is measured
        cpu = time.process_time()
        result = train(config, resumable=resumable)
        cpu = time.process_time() - cpu
    return {"task": task, "algo": algo, "checkpointing": resumable, "steps": result.steps, "wall_seconds": result.wall_seconds,
            "cpu_seconds": round(cpu, 2), "eval_freq": result.eval_freq, "checkpoints": result.checkpoints}


def buffer_formats(checkpoint_dir: Path, algo: str, sb3_pickle: bool, tiled: list[int]) -> list[dict[str, Any]]:
    """The checkpoint's replay buffer saved as the checkpoint saves it and as SB3 pickles it; then tiled to `tiled` rows."""
    import numpy as np
    from stable_baselines3.common.buffers import ReplayBuffer

    from policies.algorithms import algorithm_class
    from policies.checkpoint import CHECKPOINT_FILE, read_checkpoint
    from policies.replay_rows import new_archive, save_rows
    from policies.resume import load_model

    path = checkpoint_dir / CHECKPOINT_FILE
    settings = json.loads(zipfile.ZipFile(path).read("meta.json"))["settings"]
    model = load_model(algorithm_class(algo), read_checkpoint(path, settings), None, "cpu", str(checkpoint_dir / "tb"))
    buffer = model.replay_buffer
    rows: list[dict[str, Any]] = []

    def ours(target: Any, label: str) -> None:
        with tempfile.TemporaryDirectory() as scratch:
            file = Path(scratch) / "rows.zip"
            began = time.perf_counter()
            with open(file, "wb") as handle, new_archive(handle) as archive:
                save_rows(target, archive, "buffer/")
            seconds = time.perf_counter() - began
            raw = sum(a.nbytes // a.shape[0] * min(target.pos + 1, target.buffer_size) for a in
                      (target.observations, target.next_observations, target.actions, target.rewards, target.dones, target.timeouts))
            rows.append({"buffer": label, "format": "filled rows", "rows": int(target.pos), "seconds": round(seconds, 3),
                         "mb": round(file.stat().st_size / 1e6, 2), "raw_mb": round(raw / 1e6, 2)})

    ours(buffer, "checkpoint's")
    if sb3_pickle:
        with tempfile.TemporaryDirectory() as scratch:
            file = Path(scratch) / "buffer.pkl"
            began = time.perf_counter()
            model.save_replay_buffer(file)
            rows.append({"buffer": "checkpoint's", "format": "SB3 save_replay_buffer", "rows": int(buffer.pos),
                         "seconds": round(time.perf_counter() - began, 3), "mb": round(file.stat().st_size / 1e6, 2),
                         "raw_mb": round(sum(a.nbytes for a in (buffer.observations, buffer.next_observations, buffer.actions,
                                                                 buffer.rewards, buffer.dones, buffer.timeouts)) / 1e6, 2)})
    filled = int(buffer.pos)
    for size in tiled:
        big = ReplayBuffer(size, buffer.observation_space, buffer.action_space, n_envs=buffer.n_envs)
        for name in ("observations", "next_observations", "actions", "rewards", "dones", "timeouts"):
            source = getattr(buffer, name)[:filled]
            getattr(big, name)[: size - 1] = np.resize(source, (size - 1, *source.shape[1:]))
        big.pos = size - 1
        ours(big, f"tiled to {size:,} rows")
        del big
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sac-task", default="metaworld/reach-v3")
    parser.add_argument("--sac-steps", type=int, default=10_000)
    parser.add_argument("--ppo-task", default="halfcheetah/forward")
    parser.add_argument("--ppo-steps", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tiled", type=int, nargs="*", default=[100_000, 1_000_000], help="buffer sizes for the projection")
    parser.add_argument("--no-sb3-pickle", dest="sb3_pickle", action="store_false", help="skip SB3's whole-buffer pickle (~630 MB)")
    args = parser.parse_args()

    workloads = [(args.sac_task, "sbx-sac", args.sac_steps), (args.ppo_task, "ppo", args.ppo_steps)]
    run(args.sac_task, "sbx-sac", 300, args.seed, False, None)  # imports and SBX's first compilation, counted by neither arm
    runs: list[dict[str, Any]] = []
    kept = Path(tempfile.mkdtemp(prefix="checkpoint-cost-"))
    for repeat in range(args.repeats):
        turns = [(workload, resumable) for workload in workloads for resumable in (False, True)]
        random.Random(repeat).shuffle(turns)
        for (task, algo, steps), resumable in turns:
            keep = kept if (repeat == 0 and resumable and algo == "sbx-sac") else None
            point = run(task, algo, steps, args.seed, resumable, keep)
            runs.append(point)
            print(json.dumps({"repeat": repeat, **point}), flush=True)

    print()
    for task, algo, _ in workloads:
        off = [r for r in runs if r["task"] == task and not r["checkpointing"]]
        on = [r for r in runs if r["task"] == task and r["checkpointing"]]
        wall_off, wall_on = statistics.median(r["wall_seconds"] for r in off), statistics.median(r["wall_seconds"] for r in on)
        cpu_off, cpu_on = statistics.median(r["cpu_seconds"] for r in off), statistics.median(r["cpu_seconds"] for r in on)
        per_write = statistics.median(r["checkpoints"]["seconds"] / max(r["checkpoints"]["writes"], 1) for r in on)
        largest = max(r["checkpoints"]["max_seconds"] for r in on)
        size = statistics.median(r["checkpoints"]["bytes"] for r in on) / 1e6
        between = wall_off * on[0]["eval_freq"] / on[0]["steps"]  # training seconds per evaluation interval, checkpointing off
        print(f"{task} {algo}, {on[0]['steps']} steps, an evaluation every {on[0]['eval_freq']}, {on[0]['checkpoints']['writes']} "
              f"writes: {per_write:.3f} s per write (max {largest:.3f}), {size:.1f} MB on disk at the end; {between:.1f} s of "
              f"training between two evaluations with checkpointing off, so a write is {100 * per_write / between:.1f}% of it; "
              f"learn wall {wall_off:.1f} s off, {wall_on:.1f} s on ({wall_on / wall_off:.3f}x); process CPU {cpu_off:.1f} s off, "
              f"{cpu_on:.1f} s on ({cpu_on / cpu_off:.3f}x; medians of {len(on)})")
    print()
    try:
        for row in buffer_formats(kept, "sbx-sac", args.sb3_pickle, args.tiled):
            print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(kept, ignore_errors=True)


if __name__ == "__main__":
    main()
