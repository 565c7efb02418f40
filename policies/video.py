"""Rollout videos (mp4 via imageio-ffmpeg) rendered offscreen with MuJoCo's EGL backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from policies.evaluate import Actor
from policies.reward_program import RewardFunction, SparseReward
from policies.task_env import make_task_env
from sim_envs.errors import ConfigError
from sim_envs.task import Task

UPSIDE_DOWN_FAMILIES = {"metaworld"}  # MetaWorld's corner cameras render upside down


def record_video(
    task: Task,
    act: Actor,
    path: str | Path,
    episodes: int = 1,
    seed: int = 0,
    reward_fn: RewardFunction | None = None,
    max_fps: int = 50,
    size: int = 320,
    keyframes: int = 0,
) -> dict[str, object]:
    """Render `episodes` rollouts to one mp4 at real-time speed; returns what was recorded.

    With `keyframes`, that many evenly spaced frames are also saved as PNGs beside the video
    (`<stem>_key<i>.png`): what a vision-capable model is shown of the rollout.
    """
    import imageio.v2 as imageio

    env = make_task_env(task, reward_fn or SparseReward(), seed=seed, render_mode="rgb_array", render_size=size)
    frames: list[np.ndarray] = []
    successes = []
    try:
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed + episode)
            frames.append(_frame(env.render(), task))
            done = False
            info: dict[str, Any] = {}
            while not done:
                obs, _, terminated, truncated, info = env.step(act(obs))
                frames.append(_frame(env.render(), task))
                done = terminated or truncated
            successes.append(bool(info.get("is_success", False)))
        dt = env.get_wrapper_attr("view").dt
    finally:
        env.close()
    fps = int(np.clip(round(1.0 / dt), 10, max_fps))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # imageio's stub asks for a List[ArrayLike], which (lists being invariant) a list of arrays is not
    imageio.mimwrite(path, frames, fps=fps, macro_block_size=1)  # type: ignore[arg-type]
    saved = []
    for i, index in enumerate(np.linspace(0, len(frames) - 1, keyframes).round().astype(int) if keyframes else []):
        key_path = path.with_name(f"{path.stem}_key{i}.png")
        imageio.imwrite(key_path, frames[index])
        saved.append(str(key_path))
    return {"path": str(path), "frames": len(frames), "fps": fps, "episodes": episodes, "successes": successes, "keyframes": saved}


def _frame(image: object, task: Task) -> np.ndarray:
    """One `rgb_array` render as a video frame, upright."""
    if not isinstance(image, np.ndarray):
        raise ConfigError(f"task {task.id}'s env rendered {type(image).__name__}, not an RGB array")
    return np.ascontiguousarray(image[::-1]) if task.family in UPSIDE_DOWN_FAMILIES else image
