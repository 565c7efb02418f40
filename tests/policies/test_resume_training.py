"""Resumable training (policies.resume): a job killed after its first checkpoint goes on from it when the pool runs it
again in the same folder (as `t2r resume` does); a checkpoint of other settings, or a torn one, is not resumed.

Real everything: `python -m text2reward.training.job` workers started as the pool's launcher starts them, a SIGKILL
sent once the checkpoint file is there, real SB3 and SBX training. The steps each attempt trained are counted from
the Monitor's episode records (fetch/reach's episodes are 50 steps; hopper/forward's end when it falls).
"""

from __future__ import annotations

import csv
import io
import json
import os
import pickle
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from policies.checkpoint import CHECKPOINT_FILE, checkpoint_path
from policies.config import TrainConfig
from policies.replay_rows import new_archive, restore_rows, save_rows
from policies.train import train
from sim_envs.registry import get_task
from text2reward.training.job import JOB_FILE, TRAIN_DIR, TrainJob
from text2reward.training.pool import run_jobs

SAC = {"learning_starts": 50, "batch_size": 32}
PPO = {"n_steps": 64, "batch_size": 32}  # 2 envs (the locomotion YAML): a rollout is 128 steps


def make_job(tmp_path: Path, task: str, algo: str, steps: int, eval_freq: int, overrides: dict[str, Any], reward: str = "expert",
             her: bool | None = None) -> TrainJob:
    out = tmp_path / "job"
    return TrainJob(train=TrainConfig(task_id=task, out_dir=out / TRAIN_DIR, reward=reward, steps=steps, eval_freq=eval_freq,
                                      eval_episodes=1, algo=algo, device="cpu", overrides=overrides, her=her),
                    analysis_episodes=0)


def kill_after_first_checkpoint(job: TrainJob) -> None:
    """Start the worker as `pool.LocalLauncher` does, and SIGKILL it as soon as its checkpoint file appears."""
    out = Path(job.out_dir)
    out.mkdir(parents=True)
    job.write()
    checkpoint = checkpoint_path(job.train.out_dir)
    with open(out / "worker.log", "w") as log:
        worker = subprocess.Popen([sys.executable, "-m", "text2reward.training.job", str(out / JOB_FILE)], stdout=log,
                                  stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while not checkpoint.is_file() and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # waiting on the file: the kill lands a few steps after it
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    assert worker.returncode == -signal.SIGKILL, f"the worker ended by itself before its first checkpoint:\n{(out / 'worker.log').read_text()}"
    assert not (out / "done.json").exists()


def checkpoint_contents(job: TrainJob) -> tuple[int, dict[str, Any]]:
    with zipfile.ZipFile(checkpoint_path(job.train.out_dir)) as archive:
        return json.loads(archive.read("meta.json"))["steps"], pickle.loads(archive.read("state.pkl"))


def episode_steps(job: TrainJob) -> list[int]:
    """The lengths of the episodes the training envs finished, from every Monitor file (a resumed run appends)."""
    lengths = []
    for path in sorted((Path(job.train.out_dir) / "monitor").glob("*.monitor.csv")):
        rows = [line for line in path.read_text().splitlines() if not line.startswith("#")]
        lengths += [int(row["l"]) for row in csv.DictReader(rows)]
    return lengths


def resume_and_check(job: TrainJob, episode_bound: int, between: Callable[[TrainJob], None] | None = None) -> dict[str, Any]:
    """Kill the job after its first checkpoint, let the pool run it again, and check that it went on from there."""
    budget, eval_freq = int(job.train.steps or 0), int(job.train.eval_freq or 0)
    kill_after_first_checkpoint(job)
    stopped_at, state = checkpoint_contents(job)
    assert 0 < stopped_at < budget and state["finished"] is False
    before = sum(episode_steps(job))
    if between is not None:
        between(job)

    (outcome,) = run_jobs([job], workers=1)  # what `t2r resume` does with a job that has no done.json
    assert outcome.ok, outcome.reason
    log = (Path(job.out_dir) / "worker.log").read_text()
    assert f"resuming from the checkpoint at step {stopped_at} of {budget}" in log
    result = json.loads((Path(job.train.out_dir) / "result.json").read_text())
    assert result["resumed_from"] == [stopped_at]
    steps = [point["steps"] for point in result["curve"]]
    assert steps == list(range(eval_freq, budget + 1, eval_freq))  # continuous, no point twice, none missing
    kept = state["evaluator"]["curve"]
    assert result["curve"][:len(kept)] == kept  # the points before the kill are the interrupted run's own
    assert result["steps"] == budget and result["requested_steps"] == budget
    after = sum(episode_steps(job)) - before
    assert budget - stopped_at - episode_bound <= after <= budget - stopped_at  # the second attempt trained what was left
    assert not (Path(job.train.out_dir) / CHECKPOINT_FILE).exists()  # the job is done: nothing will resume it
    return result


def test_a_killed_sbx_sac_job_resumes_where_its_checkpoint_stopped(tmp_path):
    job = make_job(tmp_path, "fetch/reach", "sbx-sac", steps=300, eval_freq=100, overrides=SAC)
    resume_and_check(job, episode_bound=get_task("fetch/reach").max_episode_steps)


def test_a_killed_ppo_job_resumes_at_a_rollout_boundary(tmp_path):
    """The evaluation at step 160 falls inside the second 128-step rollout: the checkpoint waits for that rollout's update
    and is written when the next one starts (step 256), so no collected step is lost to a half rollout."""
    job = make_job(tmp_path, "hopper/forward", "ppo", steps=640, eval_freq=160, overrides=PPO)
    result = resume_and_check(job, episode_bound=2 * get_task("hopper/forward").max_episode_steps)
    assert result["resumed_from"][0] % 128 == 0


def test_a_killed_her_job_resumes_with_its_episodes_closed(tmp_path):
    """SB3's SAC with HER: the buffer's episode bookkeeping comes back, and the episode the kill cut (its checkpoint at
    step 120, 20 steps into fetch/reach's third 50-step episode) is closed, as SB3's `load_replay_buffer` closes it."""
    job = make_job(tmp_path, "fetch/reach", "sac", steps=360, eval_freq=120, overrides=SAC, reward="sparse", her=True)

    def episodes_closed(job: TrainJob) -> None:
        from stable_baselines3.common.env_util import make_vec_env

        from policies.algorithms import algorithm_class
        from policies.checkpoint import read_checkpoint
        from policies.resume import load_model
        from policies.reward_program import SparseReward
        from policies.task_env import make_task_env

        path = checkpoint_path(job.train.out_dir)
        checkpoint = read_checkpoint(path, json.loads(zipfile.ZipFile(path).read("meta.json"))["settings"])
        env = make_vec_env(lambda: make_task_env(get_task("fetch/reach"), SparseReward(), seed=0, flatten=False), n_envs=1, seed=0)
        try:
            buffer = load_model(algorithm_class("sac"), checkpoint, env, "cpu", str(Path(job.out_dir) / "tb")).replay_buffer
        finally:
            env.close()
        assert type(buffer).__name__ == "HerReplayBuffer" and buffer.pos == checkpoint.steps == 120
        assert list(buffer.ep_length[:120, 0]) == [50] * 100 + [20] * 20 and list(buffer.ep_start[100:120, 0]) == [100] * 20
        assert buffer._current_ep_start[0] == 120 and buffer.dones[119, 0] and buffer.timeouts[119, 0]

    result = resume_and_check(job, episode_bound=get_task("fetch/reach").max_episode_steps, between=episodes_closed)
    assert result["her"] is True


def train_in(out: Path, algo: str, seed: int = 0, steps: int = 256) -> Any:
    return train(TrainConfig(task_id="hopper/forward", out_dir=out, steps=steps, eval_freq=128, eval_episodes=1, algo=algo, seed=seed,
                             device="cpu", overrides=PPO), resumable=True)


def test_a_checkpoint_of_other_settings_is_not_resumed(tmp_path, capsys):
    """A finished training's checkpoint resumes with no training left; another seed or budget starts over, saying why."""
    first = train_in(tmp_path, "sbx-ppo")
    again = train_in(tmp_path, "sbx-ppo")
    assert again.resumed_from == [256] and again.curve == first.curve and again.steps == 256
    other = train_in(tmp_path, "sbx-ppo", seed=1)
    output = capsys.readouterr().out
    assert "was written with other settings (seed 0 -> 1); starting over" in output
    assert other.resumed_from == [] and [p["steps"] for p in other.curve] == [128, 256]
    longer = train_in(tmp_path, "sbx-ppo", seed=1, steps=384)
    assert "(steps 256 -> 384); starting over" in capsys.readouterr().out and longer.resumed_from == []


def test_a_torn_checkpoint_is_ignored_with_one_line(tmp_path, capsys):
    """Cut short anywhere (a full disk, a copy interrupted) or with a byte changed: never resumed, one line, a fresh start."""
    from policies.checkpoint import CheckpointUnusable, read_checkpoint

    train_in(tmp_path, "ppo")
    path = tmp_path / CHECKPOINT_FILE
    whole = path.read_bytes()
    settings = json.loads(zipfile.ZipFile(path).read("meta.json"))["settings"]
    flipped = bytearray(whole)
    flipped[len(whole) // 3] ^= 0xFF
    for damaged in [whole[: int(len(whole) * share)] for share in (0.1, 0.5, 0.9)] + [whole[:-1], bytes(flipped)]:
        path.write_bytes(damaged)
        with pytest.raises(CheckpointUnusable, match="is torn or damaged"):
            read_checkpoint(path, settings)
    path.write_bytes(whole[: len(whole) // 2])
    result = train_in(tmp_path, "ppo")
    lines = [line for line in capsys.readouterr().out.splitlines() if "checkpoint" in line]
    assert len(lines) == 1 and "is torn or damaged" in lines[0] and lines[0].endswith("starting over")
    assert result.resumed_from == [] and [p["steps"] for p in result.curve] == [128, 256]


@pytest.mark.parametrize("task", ["metaworld/reach-v3", "fetch/reach"])
def test_a_restored_env_stream_draws_the_next_episode_the_interrupted_run_would_have(task):
    """After the first (seeded) reset of a resumed run, each env's generator is put back, so the next episode's placement
    is the one the interrupted run would have drawn, not a replay of the first episodes."""
    from stable_baselines3.common.env_util import make_vec_env

    from policies.resume import env_rng_states, restore_env_rng
    from policies.reward_program import SparseReward
    from policies.task_env import make_task_env

    def build() -> Any:
        return make_vec_env(lambda: make_task_env(get_task(task), SparseReward(), seed=3), n_envs=2, seed=3)

    interrupted, resumed = build(), build()
    try:
        first = interrupted.reset()
        for _ in range(3):
            interrupted.reset()
        saved = env_rng_states(interrupted)
        following = interrupted.reset()
        assert not np.array_equal(following, first)
        assert np.array_equal(resumed.reset(), first)  # a resumed run's first reset is seeded like any start
        restore_env_rng(resumed, saved)
        assert np.array_equal(resumed.reset(), following)
    finally:
        interrupted.close()
        resumed.close()


def fill(buffer: Any, steps: int, rng: np.random.Generator, episode: int = 7) -> None:
    """Real `add` calls, with next observations that are the next rows' observations except where episodes end."""
    def observation() -> Any:
        space = buffer.observation_space
        if hasattr(space, "spaces"):
            return {key: rng.normal(size=(buffer.n_envs, *sub.shape)).astype(sub.dtype) for key, sub in space.spaces.items()}
        return rng.normal(size=(buffer.n_envs, *space.shape)).astype(space.dtype)

    current = observation()
    for step in range(steps):
        following, done = observation(), np.full(buffer.n_envs, step % episode == episode - 1)
        infos = [{"TimeLimit.truncated": bool(done[0]), "is_success": float(step % 3 == 0)} for _ in range(buffer.n_envs)]
        buffer.add(current, following, rng.uniform(-1, 1, (buffer.n_envs, 2)).astype(np.float32), rng.normal(size=buffer.n_envs), done, infos)
        current = observation() if done[0] else following


def same_buffers(a: Any, b: Any) -> None:
    for name, value in vars(a).items():
        other = vars(b)[name]
        if isinstance(value, np.ndarray):
            assert value.dtype == other.dtype and value.shape == other.shape, name
            assert value.tobytes() == other.tobytes() if value.dtype != object else list(value.flat) == list(other.flat), name
        elif isinstance(value, dict) and all(isinstance(v, np.ndarray) for v in value.values()):
            assert all(value[key].tobytes() == other[key].tobytes() for key in value), name
    assert (a.pos, a.full) == (b.pos, b.full)


@pytest.mark.parametrize("kind, n_envs, steps", [("flat", 1, 30), ("flat", 2, 130), ("dict", 2, 70), ("her", 1, 40)])
def test_the_filled_rows_of_a_replay_buffer_come_back_bit_for_bit(kind, n_envs, steps):
    """Plain, wrapped (130 steps in 100 rows), dict and HER buffers; next observations saved only where they differ."""
    from gymnasium import spaces
    from stable_baselines3 import HerReplayBuffer
    from stable_baselines3.common.buffers import DictReplayBuffer, ReplayBuffer

    flat = spaces.Box(-1, 1, (5,), np.float64)
    goals = spaces.Dict({"observation": flat, "achieved_goal": spaces.Box(-1, 1, (3,), np.float32),
                         "desired_goal": spaces.Box(-1, 1, (3,), np.float32)})
    actions = spaces.Box(-1, 1, (2,), np.float32)

    def build() -> Any:
        if kind == "flat":
            return ReplayBuffer(100, flat, actions, n_envs=n_envs)
        if kind == "dict":
            return DictReplayBuffer(100, goals, actions, n_envs=n_envs)
        return HerReplayBuffer(100, goals, actions, env=None, n_envs=n_envs, copy_info_dict=True)

    original = build()
    fill(original, steps, np.random.default_rng(0))
    data = io.BytesIO()
    with new_archive(data) as archive:
        meta = save_rows(original, archive, "buffer/")
    assert meta["deduplicated"]  # next observations were stored only where an episode ended
    restored = build()
    with zipfile.ZipFile(io.BytesIO(data.getvalue())) as archive:
        restore_rows(restored, archive, "buffer/", meta)
    same_buffers(original, restored)


def test_a_worker_killed_while_writing_leaves_the_previous_checkpoint_whole(tmp_path):
    """The write goes to a temporary file renamed at the end: a kill in between leaves the old file and a stray temporary,
    which the next write or the job's end removes."""
    from policies.checkpoint import read_checkpoint, remove_checkpoint

    train_in(tmp_path, "ppo")
    path = tmp_path / CHECKPOINT_FILE
    before = path.read_bytes()
    writer = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom policies.io import atomic_file\n"
                               f"with atomic_file({str(path)!r}) as handle:\n    handle.write(b'half')\n    handle.flush()\n"
                               "    print('writing', flush=True)\n    time.sleep(60)\n"], stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline().strip() == "writing"
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    assert path.read_bytes() == before and list(tmp_path.glob(f".{CHECKPOINT_FILE}.*.tmp"))
    settings = json.loads(zipfile.ZipFile(path).read("meta.json"))["settings"]
    assert read_checkpoint(path, settings).steps == 256
    remove_checkpoint(tmp_path)
    assert not path.exists() and not list(tmp_path.glob(f".{CHECKPOINT_FILE}.*"))
