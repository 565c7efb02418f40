"""Rollout videos after issue 11: frame skipping, real keyframes, streamed encoding, and progress in the CLI.

Real MuJoCo rendering (EGL, as conftest sets), tiny frames and Fetch's 50-step episodes; no timings
(those are benchmarks/video_cost.py's job).
"""

import io
import json
import re
import subprocess

import imageio.v3 as iio
import numpy as np
import pytest
from rich.console import Console
from short_training import SHORT_ALGO

from policies.evaluate import EpisodeStats
from policies.reward_program import SparseReward
from policies.task_env import make_task_env
from policies.video import _frame, _save_keyframes, record_video
from sim_envs import get_task

SIZE = 64


def zero_actor(task):
    env = task.make_env()
    shape, dtype = env.action_space.shape, env.action_space.dtype
    env.close()
    return lambda obs: np.zeros(shape, dtype=dtype)


def test_frame_skip_renders_every_nth_step_plus_first_and_last_into_a_readable_mp4(tmp_path):
    task = get_task("fetch/reach")
    episodes: list[tuple[int, EpisodeStats]] = []
    info = record_video(task, zero_actor(task), tmp_path / "v.mp4", episodes=1, seed=3, size=SIZE, render_every=3,
                        on_episode=lambda i, stats: episodes.append((i, stats)))
    steps = task.max_episode_steps  # 50, no early termination in Fetch
    shown = [0] + [s for s in range(1, steps + 1) if s % 3 == 0 or s == steps]
    assert info["frames"] == len(shown) == 18 and info["render_every"] == 3 and info["steps"] == steps
    assert info["fps"] == pytest.approx(25 / 3, abs=1e-3)  # Fetch steps at 25 Hz: real time
    frames = iio.imread(tmp_path / "v.mp4")
    assert frames.shape == (len(shown), SIZE, SIZE, 3)
    assert iio.immeta(tmp_path / "v.mp4")["fps"] == pytest.approx(25 / 3, abs=0.01)
    assert not (tmp_path / "v.partial.mp4").exists()
    assert [i for i, _ in episodes] == [0] and episodes[0][1].length == steps
    assert info["successes"] == [episodes[0][1].success]


def test_default_frame_rate_is_real_time_at_most_max_fps(tmp_path):
    task = get_task("fetch/reach")
    info = record_video(task, zero_actor(task), tmp_path / "v.mp4", size=SIZE, max_fps=10)
    assert info["render_every"] == 3 and info["fps"] == pytest.approx(25 / 3, abs=1e-3)  # 25 Hz / 3 <= 10 fps
    assert iio.imread(tmp_path / "v.mp4").shape[0] == info["frames"] == 18


def test_keyframes_are_the_rendered_states_at_evenly_spaced_moments(tmp_path):
    """The loop's call (`episodes=1, seed=..., size=..., keyframes=4`), with a grid that misses the moments:
    each keyframe must equal a fresh render of the state at its moment, pixel for pixel."""
    task = get_task("fetch/reach")
    act = zero_actor(task)
    info = record_video(task, act, tmp_path / "rollout.mp4", episodes=1, seed=7, size=SIZE, keyframes=4, render_every=7)
    keys = info["keyframes"]
    assert [p.rsplit("/", 1)[-1] for p in keys] == [f"rollout_key{i}.png" for i in range(4)]
    moments = np.linspace(0, task.max_episode_steps, 4).round().astype(int).tolist()  # [0, 17, 33, 50]
    assert any(m % 7 for m in moments)  # off the video's grid: rendered for the keyframes alone
    env = make_task_env(task, SparseReward(), seed=7, render_mode="rgb_array", render_size=SIZE)
    try:
        obs, _ = env.reset(seed=7)
        expected = {0: _frame(env.render(), task)}
        for step in range(1, task.max_episode_steps + 1):
            obs, *_ = env.step(act(obs))
            if step in moments:
                expected[step] = _frame(env.render(), task)
    finally:
        env.close()
    for key, moment in zip(keys, moments):
        assert np.array_equal(iio.imread(key), expected[moment]), moment


def test_a_failed_recording_leaves_no_video(tmp_path):
    task = get_task("fetch/reach")
    act = zero_actor(task)
    calls = []

    def failing(obs):
        calls.append(1)
        if len(calls) == 5:
            raise RuntimeError("policy broke")
        return act(obs)

    with pytest.raises(RuntimeError, match="policy broke"):
        record_video(task, failing, tmp_path / "v.mp4", size=SIZE)
    assert list(tmp_path.iterdir()) == []  # neither the video nor its partial file


def test_keyframes_fall_back_to_the_nearest_rendered_state(tmp_path):
    """An episode that ended early moves the moments off what was rendered: the nearest frame stands in."""
    kept = [(p, np.full((2, 2, 3), p, dtype=np.uint8)) for p in (0, 3, 6, 9, 10)]
    saved = _save_keyframes(tmp_path / "v.mp4", kept, count=11, keyframes=3)  # moments 0, 5, 10
    assert [int(iio.imread(p)[0, 0, 0]) for p in saved] == [0, 6, 10]


def test_episode_progress_is_plain_lines_off_a_terminal_and_a_bar_on_one():
    from text2reward.cli.policy_commands import _EpisodeProgress

    stats = EpisodeStats(success=True, length=50, episode_return=3.0, native_return=-4.3, component_sums={})
    plain = io.StringIO()
    with _EpisodeProgress(Console(file=plain, width=20), "evaluating fetch/reach", 2) as progress:
        progress(0, stats)
        progress(1, stats)
    lines = plain.getvalue().splitlines()
    assert lines == [f"episode {i}/2: success, return 3.00 (native -4.3), 50 steps" for i in (1, 2)]  # never wrapped
    terminal = io.StringIO()
    with _EpisodeProgress(Console(file=terminal, force_terminal=True, width=100), "evaluating fetch/reach", 2) as progress:
        progress(0, stats)
    assert "episode 1/2: success" in terminal.getvalue() and "evaluating fetch/reach" in terminal.getvalue()


def t2r(*args):
    """The `t2r` command line through Typer's runner, in this process (stdout and stderr apart, as a subprocess gives
    them): a subprocess per call paid its own interpreter and torch/SB3 imports (~3 s of CPU) for nothing these tests
    check. The real subprocess round trip of train, evaluate and video is
    tests/cli/test_cli_foundation.py::test_train_evaluate_video_round_trip."""
    from typer.testing import CliRunner

    from text2reward.cli.shared import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 0, result.stderr
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny") / "model"
    t2r("train", "--task", "fetch/reach", "--steps", "150", "--eval-freq", "150", "--eval-episodes", "1", "--algo", SHORT_ALGO, "--out", str(out))
    return out


@pytest.mark.slow
def test_video_command_prints_a_line_per_episode(tiny_model, tmp_path):
    result = t2r("video", "--model", str(tiny_model), "--out", str(tmp_path / "v.mp4"), "--episodes", "2", "--size", str(SIZE))
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == ["episode 1/2", "episode 2/2"], result.stdout
    assert all(" steps" in line and "return " in line for line in lines[:2])
    assert lines[2].startswith(f"wrote {tmp_path / 'v.mp4'} (")
    assert iio.imread(tmp_path / "v.mp4").shape[1:] == (SIZE, SIZE, 3)


@pytest.mark.slow
def test_evaluate_command_prints_progress_and_keeps_json_clean(tiny_model):
    text = t2r("evaluate", "--model", str(tiny_model), "--episodes", "2").stdout
    assert "episode 1/2: " in text and "episode 2/2: " in text and "success rate" in text
    result = t2r("evaluate", "--model", str(tiny_model), "--episodes", "2", "--json")
    assert json.loads(result.stdout)["episodes"] == 2  # stdout is the JSON alone
    assert "episode 2/2: " in result.stderr


@pytest.mark.slow
def test_video_render_every_renders_fewer_frames_of_the_same_episode(tiny_model, tmp_path):
    """`t2r video --render-every N` films every Nth step (plus the first and last) of the same episode: fewer frames."""
    every_step = t2r("video", "--model", str(tiny_model), "--episodes", "1", "--render-every", "1", "--size", str(SIZE), "--out", str(tmp_path / "a.mp4"))
    every_fifth = t2r("video", "--model", str(tiny_model), "--episodes", "1", "--render-every", "5", "--size", str(SIZE), "--out", str(tmp_path / "b.mp4"))
    frames = [int(re.search(r"\((\d+) frames", done.stdout)[1]) for done in (every_step, every_fifth)]  # type: ignore[index]
    assert frames[1] < frames[0] and frames[1] >= 2, frames
    assert (tmp_path / "a.mp4").stat().st_size > 0 and (tmp_path / "b.mp4").stat().st_size > 0
