"""Roll out a policy and judge it with the task's own success test.

Why separate from the reward: success is what users care about and it must not depend on the
(possibly wrong) reward being evaluated; returns are reported beside it, not instead of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

Actor = Callable[[Any], np.ndarray]


@dataclass
class EpisodeStats:
    success: bool
    length: int
    episode_return: float
    native_return: float
    component_sums: dict[str, float]
    views: list[Any] = field(default_factory=list, repr=False)
    """The state view after reset and after every step, when recorded (for trajectory analysis)."""


EpisodeCallback = Callable[[int, EpisodeStats], None]
"""`on_episode(index, stats)`, called after each episode (progress displays; no CLI code in `policies`)."""


@dataclass
class EvalResult:
    success_rate: float
    mean_return: float
    std_return: float
    mean_native_return: float
    mean_length: float
    episodes: list[EpisodeStats]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for episode in out["episodes"]:
            episode.pop("views")
        return out


def model_actor(model: Any, deterministic: bool = True) -> Actor:
    def act(obs: Any) -> np.ndarray:
        action, _ = model.predict(obs, deterministic=deterministic)
        return action

    return act


def run_episode(env: gym.Env, act: Actor, seed: int | None = None, record_views: bool = False) -> EpisodeStats:
    """One episode on a `make_task_env` env (it must carry TaskRewardWrapper's info keys)."""
    obs, info = env.reset(seed=seed)
    views = [env.get_wrapper_attr("view")] if record_views else []
    total = native = 0.0
    sums: dict[str, float] = {}
    success, length, done = False, 0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(act(obs))
        total += float(reward)
        native += info["native_reward"]
        for key, value in info["reward_components"].items():
            sums[key] = sums.get(key, 0.0) + value
        success = bool(info["is_success"])
        length += 1
        done = terminated or truncated
        if record_views:
            views.append(env.get_wrapper_attr("view"))
    return EpisodeStats(success, length, total, native, sums, views)


def evaluate(
    env: gym.Env, act: Actor, episodes: int, seed: int = 0, record_views: bool = False, on_episode: EpisodeCallback | None = None
) -> EvalResult:
    stats = []
    for i in range(episodes):
        stats.append(run_episode(env, act, seed=seed + i, record_views=record_views))
        if on_episode is not None:
            on_episode(i, stats[-1])
    returns = np.array([s.episode_return for s in stats])
    return EvalResult(
        success_rate=float(np.mean([s.success for s in stats])),
        mean_return=float(returns.mean()),
        std_return=float(returns.std()),
        mean_native_return=float(np.mean([s.native_return for s in stats])),
        mean_length=float(np.mean([s.length for s in stats])),
        episodes=stats,
    )
