"""SB3 callbacks: reward-component statistics during training and periodic success evaluation."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from policies.evaluate import EvalResult, evaluate, model_actor
from policies.io import atomic_file


class ComponentStatsCallback(BaseCallback):
    """Every `log_every` env steps, record each reward component's mean/min/max over the window.

    The history feeds TensorBoard (`reward/<name>`) and the reward-reflection feedback, which
    needs each component's trajectory over training. Each entry is
    `{"steps", "components": {name: {mean, min, max}}, "native", "step_success"}`: the reward's names are data, kept
    only as keys of `components` (a reward naming a component `_steps` or `step_success` can neither overwrite nor
    forge a key of ours), and `native`/`step_success` come from the environment's own `info`, never from the reward.
    """

    def __init__(self, log_every: int = 1000):
        super().__init__()
        self.log_every = log_every
        self.history: list[dict[str, Any]] = []
        self._window: dict[str, list[float]] = {}
        """The reward's components this window, by the reward's names."""
        self._env_window: dict[str, list[float]] = {}
        """The environment's figures this window (ENV_FIGURES), apart from the reward's names."""
        self._last_flush = 0

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", []):
            for key, value in info.get("reward_components", {}).items():
                self._window.setdefault(key, []).append(value)
            if "native_reward" in info:
                self._env_window.setdefault("native", []).append(float(info["native_reward"]))
                self._env_window.setdefault("step_success", []).append(float(info["step_success"]))
        if self.num_timesteps - self._last_flush >= self.log_every:
            self.flush()
        return True

    def _on_training_end(self) -> None:
        self.flush()

    def state(self) -> dict[str, Any]:
        """What a resumed training needs to go on with the same history and window (policies.resume)."""
        return {"history": self.history, "window": self._window, "env_window": self._env_window, "last_flush": int(self._last_flush)}

    def restore(self, state: dict[str, Any]) -> None:
        self.history, self._window, self._last_flush = list(state["history"]), dict(state["window"]), int(state["last_flush"])
        self._env_window = dict(state.get("env_window") or {})
        if "env_window" not in state:  # a checkpoint from before the two windows: its figures were "_native", "_step_success"
            for ours in ENV_FIGURES:
                if f"_{ours}" in self._window:
                    self._env_window[ours] = self._window.pop(f"_{ours}")

    def flush(self) -> None:
        if not self._window and not self._env_window:
            return
        entry: dict[str, Any] = {"steps": int(self.num_timesteps), "components": {}}
        for key, values in self._window.items():
            array = np.asarray(values)
            stats = {"mean": float(array.mean()), "min": float(array.min()), "max": float(array.max())}
            entry["components"][key] = stats
            self.logger.record(f"reward/{key}", stats["mean"])
        for ours in ENV_FIGURES:
            if self._env_window.get(ours):
                entry[ours] = float(np.mean(self._env_window[ours]))
        self.history.append(entry)
        self._window, self._env_window = {}, {}
        self._last_flush = self.num_timesteps


ENV_FIGURES = ("native", "step_success")
"""What a history entry holds from the environment itself, beside the reward's components."""


def progress_fields(result: EvalResult) -> dict[str, float]:
    """`{mean_progress, progress_se}` of an evaluation (policies.score), `{}` when its env did not measure progress."""
    if result.mean_progress is None:
        return {}
    return {"mean_progress": result.mean_progress, "progress_se": float(result.progress_se or 0.0)}


STOP_CHECK_EVERY = 32
"""Env steps between looks for a stop file (a stat, ~1 us): a stopped candidate frees its worker within
a few seconds of the request, not at its next evaluation."""


class SuccessEvalCallback(BaseCallback):
    """Every `eval_freq` env steps, evaluate with the task's success test; optionally stop early."""

    def __init__(
        self,
        eval_env: gym.Env,
        eval_freq: int,
        episodes: int,
        seed: int,
        stop_at_success: float | None = None,
        on_eval: Callable[[dict[str, Any]], None] | None = None,
        stop_file: str | Path | None = None,
        peak_model_path: str | Path | None = None,
    ):
        super().__init__()
        self.peak_model_path = Path(peak_model_path) if peak_model_path else None
        """Where the policy of the best evaluation so far is saved (the first to reach it), for analysing a peak
        that training later lost; `peak` says which evaluation it was."""
        self.peak: dict[str, Any] | None = None
        self.eval_env, self.eval_freq, self.episodes, self.seed = eval_env, eval_freq, episodes, seed
        self.stop_at_success = stop_at_success
        self.on_eval = on_eval
        self.stop_file = Path(stop_file) if stop_file else None
        self.stopped: dict[str, Any] | None = None
        """Why training stopped before its budget: {"steps", "reason", ...}; None when it ran to the end."""
        self.curve: list[dict[str, Any]] = []
        self.last_result: EvalResult | None = None
        self._next = eval_freq
        self._start = time.perf_counter()
        self._elapsed_before = 0.0
        """Training seconds of the attempts before this one (a resumed training), so wall times go on from there."""

    def _on_training_start(self) -> None:
        self._start = time.perf_counter() - self._elapsed_before

    def state(self) -> dict[str, Any]:
        """What a resumed training needs to go on with the same curve, peak, stop and next evaluation (policies.resume)."""
        return {"curve": self.curve, "peak": self.peak, "stopped": self.stopped, "next": int(self._next)}

    def restore(self, state: dict[str, Any], elapsed: float) -> None:
        """Take up a checkpoint's state; `elapsed`: the training seconds before it."""
        self.curve, self.peak, self.stopped = list(state["curve"]), state["peak"], state["stopped"]
        self._next, self._elapsed_before = int(state["next"]), float(elapsed)

    def _on_step(self) -> bool:
        if self.num_timesteps < self._next:
            if self.stop_file is not None and self.num_timesteps % STOP_CHECK_EVERY == 0 and self.stop_file.is_file():
                return self._stop_requested(int(self.num_timesteps))  # asked between evaluations: stop now
            return True
        self._next += self.eval_freq
        return self.run_eval()

    def _stop_requested(self, steps: int) -> bool:
        """Record the supervisor's stop request (its JSON says why) and end training."""
        assert self.stop_file is not None
        try:
            request = json.loads(self.stop_file.read_text())
        except (OSError, ValueError):
            request = {}
        self.stopped = {**(request if isinstance(request, dict) else {}), "steps": steps, "kind": "behind"}
        self.stopped.setdefault("reason", "stopped by the run's early stopping")
        return False

    def run_eval(self) -> bool:
        result = evaluate(self.eval_env, model_actor(self.model), self.episodes, seed=self.seed)
        self.last_result = result
        point = {
            "steps": int(self.num_timesteps),
            "wall_seconds": round(time.perf_counter() - self._start, 2),
            "success_rate": result.success_rate,
            "mean_return": result.mean_return,
            "std_return": result.std_return,
            "mean_native_return": result.mean_native_return,
            "mean_length": result.mean_length,
            "episodes": len(result.episodes),
            **progress_fields(result),
        }
        self.curve.append(point)
        if self.peak_model_path is not None and (self.peak is None or point["success_rate"] > self.peak["success_rate"]):
            with atomic_file(self.peak_model_path) as handle:  # a kill mid-save keeps the previous peak whole
                self.model.save(handle)
            self.peak = {"steps": point["steps"], "success_rate": point["success_rate"], "episodes": point["episodes"],
                         "model_path": str(self.peak_model_path)}
        for key in ("success_rate", "mean_return", "mean_native_return", "mean_length"):
            self.logger.record(f"eval/{key}", point[key])
        self.logger.dump(self.num_timesteps)
        if self.on_eval is not None:
            self.on_eval(point)
        if self.stop_at_success is not None and result.success_rate >= self.stop_at_success:
            self.stopped = {"steps": point["steps"], "reason": f"success {result.success_rate:.2f} reached the threshold {self.stop_at_success:g}",
                            "kind": "success"}
            return False
        if self.stop_file is not None and self.stop_file.is_file():  # written by the run's early stopping, not by model code
            return self._stop_requested(int(point["steps"]))
        return True
