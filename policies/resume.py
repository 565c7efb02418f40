"""Resumable training: when a checkpoint is written, what it captures, and how a training goes on from one.

Why: a killed worker (a closed laptop, a machine that reclaimed its memory) used to cost a candidate's whole
training, which `t2r resume` started again from step 0. Now a training writes `resume.ckpt` (policies.checkpoint)
after an evaluation, and a training started in the same folder with the same settings goes on from it: the same
curve (points up to the checkpoint kept, the next ones at the same step counts), the step budget counted from
where it stopped (`learn(..., reset_num_timesteps=False)`, which SBX inherits from SB3), the same peak,
component statistics and early-stopping state, and the random streams where they were.

When: after each evaluation, at the start of the next rollout (SB3 stores a step's transition and makes its update
after the callbacks of that step ran; PPO's evaluation falls inside a rollout, whose update comes at its end), so the
checkpoint holds every step it counts and the update of each; and once when training ends (a kill during the final
evaluation, analysis or video then costs no training). A write waits while the last one took more than `SHARE` of
the training time since it, so a huge buffer cannot make checkpoints cost more than ~5% of training.

What a resumed run cannot repeat: the episodes in progress at the kill (the envs reset; a HER buffer closes its
last episodes, as SB3's `load_replay_buffer` does) and the steps trained after the checkpoint (trained again).
"""

from __future__ import annotations

import hashlib
import io
import random
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import stable_baselines3
import torch
from stable_baselines3.common.callbacks import BaseCallback

from policies.algorithms import get_algorithm
from policies.callbacks import ComponentStatsCallback, SuccessEvalCallback
from policies.checkpoint import Checkpoint, CheckpointUnusable, checkpoint_path, read_checkpoint, write_checkpoint

SHARE = 0.05
"""The most of its training time checkpoints may take: a write waits while the last one cost more than this share
of the training seconds since it."""


def training_settings(task_id: str, reward: str, reward_fn: Any, reward_mode: str, algo: str, seed: int, steps: int,
                      stop_at_success: float | None, hyperparams: dict[str, Any]) -> dict[str, Any]:
    """What a checkpoint must have been written with to be resumed: the task, the reward (a program by a digest of its
    code), the algorithm and its library's version, the seed, the budget and every training setting as resolved."""
    source = getattr(reward_fn, "source", None)
    if isinstance(source, str):
        reward = f"{getattr(reward_fn, 'name', reward)} (code sha256 {hashlib.sha256(source.encode()).hexdigest()[:16]})"
    written = {key: value for key, value in hyperparams.items() if NEWER_DEFAULTS.get(key, object()) != value}
    return {"task": task_id, "reward": reward, "reward_mode": reward_mode, "algo": algo, "library": library_version(algo),
            "seed": seed, "steps": steps, "stop_at_success": stop_at_success, "hyperparams": written}


NEWER_DEFAULTS = {"vec_env": "dummy"}
"""Settings added after checkpoints were first written, left out of the settings at their default so that those
checkpoints still resume; any other value is compared like every setting (`subproc` envs draw the learner's warm-up
actions from another stream than `dummy` ones on a task whose env reseeds its action space: policies.vec_envs)."""


def library_version(algo: str) -> str:
    """The version of the library that trains `algo` (a model pickled by one may not load in another)."""
    version = f"stable-baselines3 {stable_baselines3.__version__}"
    if get_algorithm(algo).backend == "sbx":
        import sbx  # JAX (~1.2 s after SB3): only an SBX training loads it

        version += f", sbx {getattr(sbx, '__version__', '?')}"
    return version


def find_checkpoint(out_dir: Path, settings: dict[str, Any]) -> Checkpoint | None:
    """The checkpoint to resume from in `out_dir`, or None (none there, or one line printed saying why it is not used)."""
    path = checkpoint_path(out_dir)
    if not path.is_file():
        return None
    try:
        return read_checkpoint(path, settings)
    except CheckpointUnusable as exc:
        print(exc, flush=True)
        return None


def capture_rng(model: Any, env: Any) -> dict[str, Any]:
    """Every random stream a continuation draws from: Python's, numpy's and torch's global ones (SB3's exploration,
    minibatches), the action space's (SAC's random steps before `learning_starts`), SBX's JAX keys, and each training
    env's (its next episode's placement)."""
    state: dict[str, Any] = {
        "python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state().numpy(),
        "action_space": model.action_space.np_random.bit_generator.state,
        "envs": env_rng_states(env),
        "jax": {f"{owner}.{name}": np.asarray(getattr(target, name))
                for owner, target in (("model", model), ("policy", model.policy)) for name in ("key", "noise_key")
                if _is_jax_key(getattr(target, name, None))},
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = [s.numpy() for s in torch.cuda.get_rng_state_all()]
    return state


def _is_jax_key(value: Any) -> bool:
    return type(value).__module__.startswith("jax") and hasattr(value, "shape")


def restore_model_rng(model: Any, state: dict[str, Any]) -> None:
    """Put the learner's streams back (loading a model reseeds them all with its seed)."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(torch.from_numpy(state["torch"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.from_numpy(s) for s in state["cuda"]])
    model.action_space.np_random.bit_generator.state = state["action_space"]
    if state["jax"]:
        import jax.numpy as jnp  # only an SBX model holds JAX keys, and it has imported JAX already

        for path, value in state["jax"].items():
            owner, name = path.split(".")
            setattr(model if owner == "model" else model.policy, name, jnp.asarray(value))


def env_rng_states(env: Any) -> list[dict[str, Any]]:
    """Each training env's generator state (what its next reset draws the episode's placement from)."""
    return [generator.bit_generator.state for generator in env.get_attr("np_random")]


def restore_env_rng(env: Any, states: list[dict[str, Any]]) -> None:
    """Put each training env's generator back; called after the first (seeded) reset, so the episodes after it are
    drawn where the interrupted run would have drawn them."""
    for index, state in enumerate(states):
        generator = np.random.Generator(getattr(np.random, state["bit_generator"])())
        generator.bit_generator.state = state
        env.set_attr("np_random", generator, indices=[index])


def load_model(algorithm: Any, checkpoint: Checkpoint, env: Any, device: str, tensorboard_log: str) -> Any:
    """The checkpoint's model on `env`, with its replay buffer and random streams as they were."""
    model = algorithm.load(io.BytesIO(checkpoint.model), env=env, device=device, tensorboard_log=tensorboard_log)
    if getattr(model, "replay_buffer", None) is not None:
        checkpoint.restore_buffer(model.replay_buffer)
        if hasattr(model.replay_buffer, "truncate_last_trajectory"):  # HER: the episodes in progress ended at the kill
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # SB3 warns that it does exactly this
                model.replay_buffer.truncate_last_trajectory()
    restore_model_rng(model, checkpoint.state["rng"])
    return model


class ResumeCheckpoint(BaseCallback):
    """Writes the resume checkpoint after evaluations and at the end of training (see the module's docstring)."""

    def __init__(self, path: Path, settings: dict[str, Any], evaluator: SuccessEvalCallback, components: ComponentStatsCallback,
                 peak_model: Path, elapsed_before: float = 0.0, resumed_from: list[int] | None = None,
                 env_rng: list[dict[str, Any]] | None = None):
        super().__init__()
        self.path, self.settings, self.evaluator, self.components = path, settings, evaluator, components
        self.peak_model = peak_model
        self.elapsed_before = elapsed_before
        self.resumed_from = list(resumed_from or [])
        self._env_rng = env_rng
        self._evaluations = len(evaluator.curve)
        self._due = False
        self._start = time.perf_counter()
        self._last_write_at = self._start
        self._last_cost = 0.0
        self.unfinished: Callable[[], bool] = lambda: False
        """True when training ends because a person stopped it (policies.interrupt): the checkpoint is not the last."""
        self.writes: list[dict[str, float]] = []
        """Each write's step, seconds and bytes (summed in result.json's `checkpoints`: `cost`)."""

    def _on_training_start(self) -> None:
        self._start = self._last_write_at = time.perf_counter()
        if self._env_rng is not None:
            restore_env_rng(self.training_env, self._env_rng)

    def _on_step(self) -> bool:
        if len(self.evaluator.curve) > self._evaluations:  # the evaluator (before this callback) just evaluated
            self._evaluations = len(self.evaluator.curve)
            self._due = True
        return True

    def _on_rollout_start(self) -> None:
        if self._due:  # the steps so far are stored and their updates made
            self._maybe_write()

    def _on_training_end(self) -> None:
        self.write(finished=not self.unfinished())

    def _maybe_write(self) -> None:
        since = time.perf_counter() - self._last_write_at
        if self.writes and self._last_cost > SHARE * since:
            return  # stays due: a later rollout start writes it
        self.write(finished=False)

    def cost(self) -> dict[str, Any]:
        """What the writes of this attempt cost (result.json's `checkpoints`)."""
        seconds = [write["seconds"] for write in self.writes]
        return {"writes": len(self.writes), "seconds": round(sum(seconds), 3), "max_seconds": round(max(seconds, default=0.0), 3),
                "bytes": int(self.writes[-1]["bytes"]) if self.writes else 0}

    def elapsed(self) -> float:
        """Training seconds so far, the attempts before this one included."""
        return self.elapsed_before + time.perf_counter() - self._start

    def write(self, finished: bool) -> None:
        steps = int(self.model.num_timesteps)
        began = time.perf_counter()
        state = {"finished": finished, "wall_seconds": self.elapsed(), "evaluator": self.evaluator.state(),
                 "components": self.components.state(), "rng": capture_rng(self.model, self.training_env),
                 "resumed_from": self.resumed_from}
        size = write_checkpoint(self.path, self.settings, steps, self.model, state,
                                buffer=getattr(self.model, "replay_buffer", None), peak_model=self.peak_model)
        self._last_write_at = time.perf_counter()
        self._last_cost = self._last_write_at - began
        self._due = False
        self.writes.append({"steps": steps, "seconds": self._last_cost, "bytes": size})
