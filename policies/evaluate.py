"""Roll out a policy and judge it with the task's own success test.

Why separate from the reward: success is what users care about and it must not depend on the
(possibly wrong) reward being evaluated; returns are reported beside it, not instead of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from policies.score import mean_and_se
from sim_envs.codec import transient
from sim_envs.scene_features import SceneFeature, episode_features

Actor = Callable[[Any], np.ndarray]


@dataclass
class EpisodeStats:
    success: bool
    length: int
    episode_return: float
    native_return: float
    component_sums: dict[str, float]
    views: list[Any] = field(default_factory=list, repr=False, metadata=transient())
    """The state view after reset and after every step, when recorded (for trajectory analysis)."""
    progress: float | None = None
    """How close the episode came to the task's success rule (`info["rule_progress"]`: its best step for "any" tasks, its
    last for "final" ones), in [0, 1], 1 exactly when it succeeded; None from an env that does not say."""
    scene: tuple[SceneFeature, ...] = field(default=(), repr=False, metadata=transient())
    """The scene's fixed features as this episode's reset placed them, when views are recorded (the analysis says
    where the object ended relative to them); () for a task that describes none."""


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
    mean_progress: float | None = None
    """The episodes' mean progress toward the success rule (policies.score); None when an episode did not say."""
    progress_se: float | None = None
    """The standard error of `mean_progress` over the episodes."""


def model_actor(model: Any, deterministic: bool = True) -> Actor:
    def act(obs: Any) -> np.ndarray:
        action, _ = model.predict(obs, deterministic=deterministic)
        return action

    return act


def run_episode(env: gym.Env, act: Actor, seed: int | None = None, record_views: bool = False) -> EpisodeStats:
    """One episode on a `make_task_env` env (it must carry TaskRewardWrapper's info keys)."""
    obs, info = env.reset(seed=seed)
    views = [env.get_wrapper_attr("view")] if record_views else []
    scene = episode_features(env.get_wrapper_attr("task"), env) if record_views else ()
    total = native = 0.0
    sums: dict[str, float] = {}
    success, length, done = False, 0, False
    progress: float | None = None
    while not done:
        obs, reward, terminated, truncated, info = env.step(act(obs))
        total += float(reward)
        native += info["native_reward"]
        for key, value in info["reward_components"].items():
            sums[key] = sums.get(key, 0.0) + value
        success = bool(info["is_success"])
        progress = float(info["rule_progress"]) if "rule_progress" in info else None
        length += 1
        done = terminated or truncated
        if record_views:
            views.append(env.get_wrapper_attr("view"))
    return EpisodeStats(success, length, total, native, sums, views, progress, scene)


def evaluate(
    env: gym.Env, act: Actor, episodes: int, seed: int = 0, record_views: bool = False, on_episode: EpisodeCallback | None = None
) -> EvalResult:
    stats = []
    for i in range(episodes):
        stats.append(run_episode(env, act, seed=seed + i, record_views=record_views))
        if on_episode is not None:
            on_episode(i, stats[-1])
    returns = np.array([s.episode_return for s in stats])
    progress = [s.progress for s in stats]
    mean_progress, progress_se = mean_and_se([p for p in progress if p is not None]) if None not in progress else (None, None)
    return EvalResult(
        success_rate=float(np.mean([s.success for s in stats])),
        mean_return=float(returns.mean()),
        std_return=float(returns.std()),
        mean_native_return=float(np.mean([s.native_return for s in stats])),
        mean_length=float(np.mean([s.length for s in stats])),
        episodes=stats,
        mean_progress=mean_progress,
        progress_se=progress_se,
    )
