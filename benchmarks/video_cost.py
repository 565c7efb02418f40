"""Seconds per rendered frame and per episode of a rollout video, before issue 11 vs now, side by side.

"Before" is `policies.video.record_video` as committed at 8996011, kept below as `record_video_before`
(verbatim but for reaching `make_task_env` through `policies.video`, so that both paths are timed by
the same instrument); "after" is the current `policies.video.record_video` with its defaults, i.e.
what `t2r video` and the loop's rollout video run. Each round records one video with each path, in
alternating order, and the tables show medians over rounds plus the median of the per-round ratios,
so a shared machine's drift hits both sides alike.

Where the time goes: the env is wrapped (one `gym.Wrapper`, a few µs a call) to time its construction,
the first render (GL context and MuJoCo's render context), every later render, reset and step; the
policy is timed around each call; "rest" is the wall time left over (frame flips, handing frames to
the encoder and waiting for it, keyframe PNGs, closing).

Two probes follow: the encoder, imageio.mimwrite after the rollout (before) vs frames streamed to
ffmpeg (after; the same x264 settings), on the raw frames of the first "before" video, with PSNR
against them; and the renderer alone, interleaved on identical states: `env.render()` vs
MuJoCo render contexts with the model's own settings and with smaller shadow maps or none (not
adopted: they change pixels; shown as what the renderer's own cost is made of).

    python benchmarks/video_cost.py                                        # MetaWorld reach + Fetch reach, 320 px, ~5 min
    python benchmarks/video_cost.py --tasks fetch/reach --rounds 1         # quick
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import policies.video as video
from policies.evaluate import Actor, model_actor
from policies.reward_program import RewardFunction, SparseReward
from policies.task_env import make_task_env
from sim_envs.registry import get_task
from sim_envs.task import Task

DEFAULT_TASKS = ("metaworld/reach-v3", "fetch/reach")


def record_video_before(
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
    """`record_video` before issue 11: every step rendered, all frames held, encoded at the end by imageio."""
    import imageio.v2 as imageio

    env = video.make_task_env(task, reward_fn or SparseReward(), seed=seed, render_mode="rgb_array", render_size=size)
    frames: list[np.ndarray] = []
    successes = []
    try:
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed + episode)
            frames.append(video._frame(env.render(), task))
            done = False
            info: dict[str, Any] = {}
            while not done:
                obs, _, terminated, truncated, info = env.step(act(obs))
                frames.append(video._frame(env.render(), task))
                done = terminated or truncated
            successes.append(bool(info.get("is_success", False)))
        dt = env.get_wrapper_attr("view").dt
    finally:
        env.close()
    fps = int(np.clip(round(1.0 / dt), 10, max_fps))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    imageio.mimwrite(path, frames, fps=fps, macro_block_size=1)  # type: ignore[arg-type]
    saved = []
    for i, index in enumerate(np.linspace(0, len(frames) - 1, keyframes).round().astype(int) if keyframes else []):
        key_path = path.with_name(f"{path.stem}_key{i}.png")
        imageio.imwrite(key_path, frames[index])
        saved.append(str(key_path))
    return {"path": str(path), "frames": len(frames), "fps": fps, "episodes": episodes, "successes": successes, "keyframes": saved}


@dataclass
class Parts:
    """Seconds spent in each part of one video."""

    wall: float = 0.0
    construct: float = 0.0
    first_render: float = 0.0
    render: float = 0.0  # every render after the first
    renders: int = 0  # all renders, the first included
    reset: float = 0.0
    step: float = 0.0
    steps: int = 0
    policy: float = 0.0
    frames: int = 0  # frames in the video
    kept: list[np.ndarray] | None = None  # the raw renders, when asked for (the encoder probe's input)

    @property
    def rest(self) -> float:
        return self.wall - (self.construct + self.first_render + self.render + self.reset + self.step + self.policy)


class TimedEnv(gym.Wrapper):
    def __init__(self, env: gym.Env, parts: Parts):
        super().__init__(env)
        self.parts = parts

    def reset(self, **kwargs: Any) -> Any:
        start = time.perf_counter()
        out = self.env.reset(**kwargs)
        self.parts.reset += time.perf_counter() - start
        return out

    def step(self, action: Any) -> Any:
        start = time.perf_counter()
        out = self.env.step(action)
        self.parts.step += time.perf_counter() - start
        self.parts.steps += 1
        return out

    def render(self) -> Any:
        start = time.perf_counter()
        image = self.env.render()
        elapsed = time.perf_counter() - start
        if self.parts.renders == 0:
            self.parts.first_render = elapsed
        else:
            self.parts.render += elapsed
        self.parts.renders += 1
        if self.parts.kept is not None:
            self.parts.kept.append(image)
        return image


@contextmanager
def instrumented(parts: Parts) -> Iterator[None]:
    """Route both paths' `make_task_env` through a factory that times construction and wraps the env."""

    def factory(*args: Any, **kwargs: Any) -> gym.Env:
        start = time.perf_counter()
        env = make_task_env(*args, **kwargs)
        parts.construct += time.perf_counter() - start
        return TimedEnv(env, parts)

    video.make_task_env = factory  # type: ignore[assignment]
    try:
        yield
    finally:
        video.make_task_env = make_task_env


def make_actor(task: Task, policy: str, seed: int) -> Actor:
    """`sac`: the family's SAC network, untrained (a forward pass costs what a trained one's does)."""
    env = make_task_env(task, SparseReward(), seed=seed)
    space = env.action_space
    if policy == "zero":
        env.close()
        return lambda obs: np.zeros(space.shape, dtype=space.dtype)
    if policy == "random":
        env.close()
        return lambda obs: space.sample()
    from stable_baselines3 import SAC

    from policies.hyperparams import load_hyperparams

    params = load_hyperparams(task.family, "sac")
    model = SAC(params.policy, env, policy_kwargs=params.policy_kwargs, buffer_size=1, device="cpu", seed=seed)
    env.close()
    return model_actor(model)


def record_once(path_kind: str, task: Task, act: Actor, out: Path, args: argparse.Namespace, keep: bool = False) -> Parts:
    parts = Parts(kept=[] if keep else None)

    def timed(obs: Any) -> np.ndarray:
        start = time.perf_counter()
        action = act(obs)
        parts.policy += time.perf_counter() - start
        return action

    record: Callable[..., dict[str, object]] = record_video_before if path_kind == "before" else video.record_video
    with instrumented(parts):
        start = time.perf_counter()
        info = record(task, timed, out / f"{path_kind}.mp4", episodes=args.episodes, seed=args.seed, size=args.size,
                      keyframes=args.keyframes)
        parts.wall = time.perf_counter() - start
    parts.frames = int(info["frames"])  # type: ignore[call-overload]
    return parts


def median(values: list[float]) -> float:
    return statistics.median(values)


def report_task(task: Task, runs: dict[str, list[Parts]], args: argparse.Namespace) -> None:
    print(f"\n### {task.id}: {args.episodes} episode(s) of {task.max_episode_steps} steps at {args.size} px, "
          f"policy {args.policy}, keyframes {args.keyframes}, {args.rounds} round(s), medians\n")
    print("| path | s / episode | video frames | renders | s / rendered frame | render ms / frame | setup s (env + first render) "
          "| step ms | policy ms | rest s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for kind, parts in runs.items():
        renders = parts[0].renders
        print(f"| {kind} | {median([p.wall for p in parts]) / args.episodes:.2f} | {parts[0].frames} | {renders} "
              f"| {median([p.wall / p.renders for p in parts]):.3f} "
              f"| {median([p.render / max(p.renders - 1, 1) for p in parts]) * 1e3:.0f} "
              f"| {median([p.construct + p.first_render for p in parts]):.2f} "
              f"| {median([p.step / max(p.steps, 1) for p in parts]) * 1e3:.2f} "
              f"| {median([p.policy / max(p.steps, 1) for p in parts]) * 1e3:.2f} "
              f"| {median([p.rest for p in parts]):.2f} |")
    before, after = runs["before"], runs["after"]
    episode_ratios = [b.wall / a.wall for b, a in zip(before, after)]
    print(f"\nbefore/after, seconds per episode: {median(episode_ratios):.2f}x (rounds: {', '.join(f'{r:.2f}' for r in episode_ratios)})")
    for kind, parts in runs.items():
        p = min(parts, key=lambda x: abs(x.wall - median([q.wall for q in parts])))
        shares = {"setup": p.construct + p.first_render, "render": p.render, "step": p.step, "policy": p.policy,
                  "reset": p.reset, "rest (encode, copies, close)": p.rest}
        print(f"{kind}: where the {p.wall:.1f} s went: " + ", ".join(f"{k} {v:.2f} s ({v / p.wall:.0%})" for k, v in shares.items()))


def probe_renderer(task: Task, args: argparse.Namespace) -> None:
    """What the renderer's own cost is made of: the same states rendered, interleaved, by `env.render()` and by
    MuJoCo render contexts made beside the env's in its GL context, with the model's settings and with smaller
    shadow maps or none (not adopted: they change pixels; shown as what is left to trade)."""
    import mujoco

    env = make_task_env(task, SparseReward(), seed=args.seed, render_mode="rgb_array", render_size=args.size)
    env.reset(seed=args.seed)
    env.render()  # makes the GL context, the env's render context, and sets the camera
    viewer = env.unwrapped.mujoco_renderer._get_viewer("rgb_array")  # type: ignore[attr-defined]
    model, data = viewer.model, viewer.data
    quality = model.vis.quality
    own_shadow = int(quality.shadowsize)
    contexts = {}
    for name, shadow in ((f"model's settings (shadow map {own_shadow}²)", own_shadow), ("shadow map 2048²", 2048),
                         ("shadow map 1024²", 1024), ("no shadows", own_shadow)):
        quality.shadowsize = shadow
        contexts[name] = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150)
    quality.shadowsize = own_shadow
    width, height = viewer.viewport.width, viewer.viewport.height
    rgb = np.empty((height, width, 3), dtype=np.uint8)

    def render_with(name: str, con: Any) -> np.ndarray:
        mujoco.mjv_updateScene(model, data, viewer.vopt, viewer.pert, viewer.cam, mujoco.mjtCatBit.mjCAT_ALL, viewer.scn)
        shadows = viewer.scn.flags[mujoco.mjtRndFlag.mjRND_SHADOW]
        if name == "no shadows":
            viewer.scn.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, con)
        mujoco.mjr_render(viewer.viewport, viewer.scn, con)
        mujoco.mjr_readPixels(rgb, None, viewer.viewport, con)
        viewer.scn.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = shadows
        return rgb.copy()

    rng = np.random.default_rng(args.seed)
    space = env.action_space
    rows = ["env.render() (gymnasium: colour + depth read)", *contexts]
    times: dict[str, list[float]] = {name: [] for name in rows}
    diffs: dict[str, list[float]] = {name: [] for name in rows}
    try:
        for _ in range(args.probe_renders):
            env.step(rng.uniform(space.low, space.high).astype(space.dtype))  # type: ignore[attr-defined]
            images = {}
            for name in rows:
                start = time.perf_counter()
                if name in contexts:
                    viewer.make_context_current()
                    images[name] = render_with(name, contexts[name])
                else:  # the env's render context takes the offscreen buffer back (MuJoCo binds it per context)
                    mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, viewer.con)
                    images[name] = np.asarray(env.render())[::-1]  # back to OpenGL's row order
                times[name].append(time.perf_counter() - start)
            reference = images[rows[1]]
            for name, image in images.items():
                diffs[name].append(float(np.abs(image.astype(int) - reference).mean()))
    finally:
        for con in contexts.values():
            con.free()
        env.close()
    base = median(times[rows[0]])
    print(f"\nrenderer alone, {args.probe_renders} states, {width}x{height} px, medians:\n")
    print("| renderer | ms / frame | vs env.render() | mean pixel difference (0-255) |")
    print("| --- | ---: | ---: | ---: |")
    for name in rows:
        print(f"| {name} | {median(times[name]) * 1e3:.0f} | {median(times[name]) / base:.2f}x | {max(diffs[name]):.3f} |")


def probe_encoder(task: Task, raw: list[np.ndarray], tmp: Path) -> None:
    """imageio.mimwrite (before) vs `_Writer` (after), both x264's defaults, on the raw frames of a "before" video."""
    import imageio.v2 as imageio
    import imageio.v3 as iio

    frames = [np.ascontiguousarray(video._frame(image, task)) for image in raw]
    env = task.make_env()
    fps = video._frame_rate(env.unwrapped.dt, 1e9, 1)[1]  # type: ignore[attr-defined]  # every step, real time
    env.close()
    rows = []
    for name in ("before: imageio default", "after: _Writer"):
        path = tmp / f"probe_{name[:5].strip(':')}.mp4"
        start = time.perf_counter()
        if name.startswith("before"):
            imageio.mimwrite(path, frames, fps=float(fps), macro_block_size=1)  # type: ignore[arg-type]
        else:
            writer = video._Writer(path, frames[0].shape, fps)
            for frame in frames:
                writer.write(frame)
            writer.close()
        elapsed = time.perf_counter() - start
        decoded = iio.imread(path).astype(float)
        mse = float(((decoded - np.stack(frames)) ** 2).mean())
        rows.append((name, elapsed / len(frames) * 1e3, 10 * np.log10(255**2 / mse), path.stat().st_size / 1024))
    print(f"\nencoder alone, {len(frames)} frames:\n")
    print("| encoder | ms / frame | PSNR vs raw frames dB | KiB |")
    print("| --- | ---: | ---: | ---: |")
    for name, ms, psnr, kib in rows:
        print(f"| {name} | {ms:.1f} | {psnr:.2f} | {kib:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS))
    parser.add_argument("--size", type=int, default=320)
    parser.add_argument("--episodes", type=int, default=1)
    parser.add_argument("--keyframes", type=int, default=0, help="4 with --size 256 is the loop's rollout video")
    parser.add_argument("--policy", choices=("sac", "random", "zero"), default="sac")
    parser.add_argument("--rounds", type=int, default=3, help="videos per path and task (0: the renderer probe alone)")
    parser.add_argument("--probe-renders", type=int, default=12, help="states in the renderer probe (0: no probe)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"MUJOCO_GL={os.environ.get('MUJOCO_GL')}, {os.cpu_count()} CPUs, load average at start {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for task_id in args.tasks:
            task = get_task(task_id)
            act = make_actor(task, args.policy, args.seed)
            runs: dict[str, list[Parts]] = {"before": [], "after": []}
            for round_index in range(args.rounds):
                order = ("before", "after") if round_index % 2 == 0 else ("after", "before")
                for kind in order:
                    runs[kind].append(record_once(kind, task, act, tmp, args, keep=kind == "before" and round_index == 0))
                print(f"{task_id} round {round_index + 1}: " + ", ".join(f"{k} {runs[k][-1].wall:.1f} s" for k in ("before", "after")),
                      flush=True)
            if args.rounds > 0:
                report_task(task, runs, args)
                probe_encoder(task, runs["before"][0].kept or [], tmp)
                runs["before"][0].kept = None
            if args.probe_renders > 0:
                probe_renderer(task, args)
    print(f"\nload average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
