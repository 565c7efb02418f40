"""Rollout videos (mp4 via imageio-ffmpeg) rendered offscreen with MuJoCo's EGL backend.

Why it is built this way (issue 11; figures in benchmarks/RESULTS.md, "Video cost"): with software
OpenGL (EGL on Mesa's llvmpipe, no GPU) rendering is nearly all of a video's cost, 0.1-0.3 s a
MetaWorld frame, while the env step, the policy and the encoding take a few ms. So a video renders
only what it shows: one frame every `render_every` control steps, at most `max_fps` frames a second
of simulated time, played back at real time; the renderer is made once per call and serves every
episode; frames stream to one ffmpeg process, encoded while the next ones render, instead of being
held in memory (0.3 MB each at 320 px) and encoded at the end.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import imageio.v2 as imageio
import imageio_ffmpeg
import numpy as np

from policies.evaluate import Actor, EpisodeCallback, EpisodeStats
from policies.reward_program import RewardFunction, SparseReward
from policies.task_env import make_task_env
from sim_envs.errors import ConfigError
from sim_envs.task import Task

UPSIDE_DOWN_FAMILIES = {"metaworld"}  # MetaWorld's corner cameras render upside down

# libx264 with x264's own defaults (crf 23, preset medium), as imageio.mimwrite encoded the videos before
# issue 11, so the picture is the same: encoding costs 2-4 ms a frame here against 15-300 ms to render
# one, and the faster presets lost 0.7-1.4 dB PSNR or needed a lower crf and 20-30% larger files to keep it.
# faststart puts the index first, so a browser (the dashboard) starts playing before the file has arrived.
ENCODER_QUALITY = None  # imageio-ffmpeg's scale 0-10; None passes no -crf
ENCODER_OUTPUT_PARAMS = ("-movflags", "+faststart")


def record_video(
    task: Task,
    act: Actor,
    path: str | Path,
    episodes: int = 1,
    seed: int = 0,
    reward_fn: RewardFunction | None = None,
    max_fps: float = 30,
    size: int = 320,
    keyframes: int = 0,
    render_every: int | None = None,
    on_episode: EpisodeCallback | None = None,
    flatten: bool = True,
) -> dict[str, object]:
    """Render `episodes` rollouts to one mp4 that plays at real time; returns what was recorded.

    One frame is rendered every `render_every` control steps (default: the fewest that keep the video
    at or under `max_fps`; MetaWorld's 80 Hz control gives every 3rd step at 26.7 fps, Fetch's 25 Hz
    every step), plus each episode's first and last state, so the video starts and ends on real states.

    With `keyframes`, that many evenly spaced frames of the whole rollout are also saved as PNGs beside
    the video (`<stem>_key<i>.png`): what a vision-capable model is shown. They are rendered frames of
    the exact states at those moments when the episodes run their full length (states off the video's
    grid are rendered for them); an episode that terminates early moves the moments, and the nearest
    rendered state (within `render_every // 2` steps) is used.

    `on_episode(index, stats)` is called after each episode (for progress displays). `flatten=False` for a policy
    trained with HER, which reads the dict observation (policies.her.flat_observations of its result.json).
    """
    _check_video_settings(episodes, render_every, max_fps)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.stem}.partial{path.suffix}")  # ffmpeg picks the container by suffix
    # Keyframe moments planned for full-length episodes: those states are rendered even off the grid.
    planned = set(_spread(episodes * (task.max_episode_steps + 1), keyframes).tolist())
    film = _Film(task, partial, max_fps, render_every, keyframes, planned)
    env = make_task_env(task, reward_fn or SparseReward(), seed=seed, render_mode="rgb_array", render_size=size, flatten=flatten)
    successes: list[bool] = []
    try:
        for episode in range(episodes):
            stats = film.episode(env, act, seed + episode)
            successes.append(stats.success)
            if on_episode is not None:
                on_episode(episode, stats)
        frames = film.close()
        partial.replace(path)
    except BaseException:
        film.abort()
        partial.unlink(missing_ok=True)
        raise
    finally:
        env.close()
    saved = _save_keyframes(path, film.kept, film.position, keyframes) if keyframes else []
    return {"path": str(path), "frames": frames, "fps": round(float(film.fps), 3), "render_every": film.every,
            "steps": film.position - episodes, "episodes": episodes, "successes": successes, "keyframes": saved}


def _check_video_settings(episodes: int, render_every: int | None, max_fps: float) -> None:
    if episodes < 1:
        raise ConfigError(f"a video needs at least one episode, not {episodes}")
    if render_every is not None and render_every < 1:
        raise ConfigError(f"render_every must be at least 1, not {render_every}")
    if max_fps <= 0:
        raise ConfigError(f"max_fps must be positive, not {max_fps}")


class _Film:
    """One video's frames across its episodes: the writer (started at the first frame, once the env's step length
    sets the frame rate), the frames kept as keyframe candidates, and `position`, the index of the current state in
    the whole rollout (each reset and each step is one)."""

    def __init__(self, task: Task, path: Path, max_fps: float, render_every: int | None, keyframes: int, planned: set[int]):
        self.task, self.path, self.max_fps, self.render_every = task, path, max_fps, render_every
        self.keyframes, self.planned = keyframes, planned
        self.writer: _Writer | None = None
        self.every, self.fps = 1, Fraction(1)
        self.kept: list[tuple[int, np.ndarray]] = []  # (position in the rollout, frame), only when keyframes are asked for
        self.position = 0

    def episode(self, env: Any, act: Actor, seed: int) -> EpisodeStats:
        """Play one episode, filming its first state, one state every `every` steps and its last."""
        obs, _ = env.reset(seed=seed)
        if self.writer is None:
            self.every, self.fps = _frame_rate(env.get_wrapper_attr("view").dt, self.max_fps, self.render_every)
        frame = _frame(env.render(), self.task)
        self.writer = self.writer or _Writer(self.path, frame.shape, self.fps)
        self.writer.write(frame)
        if self.keyframes:
            self.kept.append((self.position, frame))
        total = native = 0.0
        sums: dict[str, float] = {}
        info: dict[str, Any] = {}
        length, done = 0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(act(obs))
            length += 1
            self.position += 1
            total += float(reward)
            native += info["native_reward"]
            for key, value in info["reward_components"].items():
                sums[key] = sums.get(key, 0.0) + value
            done = terminated or truncated
            shown = done or length % self.every == 0
            if shown or (self.keyframes and self.position in self.planned):
                frame = _frame(env.render(), self.task)
                if shown:
                    self.writer.write(frame)
                if self.keyframes:
                    self.kept.append((self.position, frame))
        self.position += 1
        return EpisodeStats(bool(info.get("is_success", False)), length, total, native, sums)

    def close(self) -> int:
        """The frames written, once ffmpeg has finished the file."""
        assert self.writer is not None  # episodes >= 1
        return self.writer.close()

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()


def _frame_rate(dt: float, max_fps: float, render_every: int | None) -> tuple[int, Fraction]:
    """(steps between frames, frames per second) for a video at real time: dt seconds of simulated time a step."""
    control_rate = 1.0 / dt
    every = render_every or max(1, math.ceil(control_rate / max_fps - 1e-9))
    return every, Fraction(control_rate / every).limit_denominator(1000)


def _spread(count: int, n: int) -> np.ndarray:
    """`n` evenly spaced indices into `count` items, first and last included (the old keyframe choice)."""
    return np.linspace(0, count - 1, n).round().astype(int) if n > 0 else np.zeros(0, dtype=int)


def _save_keyframes(path: Path, kept: list[tuple[int, np.ndarray]], count: int, keyframes: int) -> list[str]:
    """PNGs of the rendered states nearest to `keyframes` evenly spaced moments of the `count` states."""
    positions = np.array([p for p, _ in kept])
    saved = []
    for i, target in enumerate(_spread(count, keyframes)):
        nearest = int(np.abs(positions - target).argmin())  # exact when the episodes ran their full length
        key_path = path.with_name(f"{path.stem}_key{i}.png")
        imageio.imwrite(key_path, kept[nearest][1])
        saved.append(str(key_path))
    return saved


class _Writer:
    """Frames stream to one ffmpeg process, which encodes them while the next ones render."""

    def __init__(self, path: Path, shape: tuple[int, ...], fps: Fraction):
        if shape[0] % 2 or shape[1] % 2:  # H.264 in yuv420p stores colour per 2x2 block
            raise ConfigError(f"frames of {shape[1]}x{shape[0]} pixels: an H.264 video needs an even width and height")
        self.path = path
        self.frames = 0
        self._gen: Any = imageio_ffmpeg.write_frames(
            str(path), (shape[1], shape[0]), fps=fps, codec="libx264", quality=ENCODER_QUALITY, macro_block_size=1,
            output_params=list(ENCODER_OUTPUT_PARAMS),
        )
        self._gen.send(None)  # starts ffmpeg

    def write(self, frame: np.ndarray) -> None:
        self._gen.send(np.ascontiguousarray(frame))  # ffmpeg's pipe takes bytes in row order
        self.frames += 1

    def close(self) -> int:
        self._gen.close()  # waits for ffmpeg to finish the file
        if not self.path.is_file() or self.path.stat().st_size == 0:  # ffmpeg said why on stderr
            raise RuntimeError(f"ffmpeg wrote no video to {self.path}")
        return self.frames

    def abort(self) -> None:
        try:
            self._gen.close()
        except Exception:  # the recording has failed already; that error is the one to report
            pass


def _frame(image: object, task: Task) -> np.ndarray:
    """One `rgb_array` render as a video frame, upright."""
    if not isinstance(image, np.ndarray):
        raise ConfigError(f"task {task.id}'s env rendered {type(image).__name__}, not an RGB array")
    return np.ascontiguousarray(image[::-1]) if task.family in UPSIDE_DOWN_FAMILIES else image

