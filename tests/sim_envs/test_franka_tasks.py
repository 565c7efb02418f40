"""The Franka Panda family (sim_envs.franka_*): real MuJoCo scenes built from Gymnasium-Robotics' Panda.

Each task must build, reproduce a seeded reset exactly, step, pass Gymnasium's env checker, read a view that equals
the simulator, score relabelled goals as the env does (HER), and its scripted policies must really succeed; a short
`t2r train` and a heuristic `t2r run` must finish on it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from typer.testing import CliRunner

from policies.reward_program import ExpertReward, SparseReward
from policies.task_env import make_task_env
from sim_envs import get_task, list_tasks
from sim_envs.franka_env import MAX_MOVE, SUCCESS_DISTANCE
from sim_envs.task import render_view_doc
from text2reward.cli import app
from text2reward.generation.prompting import build_initial_messages

FRANKA = ["franka/reach", "franka/push", "franka/slide", "franka/pick_and_place"]


def test_the_family_is_listed_with_goals_and_budgets():
    assert [t.id for t in list_tasks("franka")] == FRANKA
    for task in list_tasks("franka"):
        assert task.is_multi_goal and task.has_expert_reward and task.max_episode_steps == 50
        assert task.success_mode == "final" and "0.05" in task.success_doc
    assert [t.id for t in list_tasks("franka") if t.has_scripted_policy] == ["franka/reach", "franka/push", "franka/pick_and_place"]
    assert get_task("franka/push").budget_note and not get_task("franka/reach").budget_note


@pytest.mark.parametrize("task_id", FRANKA)
def test_a_seeded_reset_is_reproduced_exactly_and_steps_move_the_hand(task_id):
    task = get_task(task_id)
    first, second = task.make_env(seed=0), task.make_env(seed=0)
    try:
        a, _ = first.reset(seed=7)
        b, _ = second.reset(seed=7)
        c, _ = second.reset(seed=8)
        assert all(np.array_equal(a[key], b[key]) for key in a)
        assert not np.array_equal(a["desired_goal"], c["desired_goal"])
        start = task.view(first).robot.ee_position.copy()
        action = np.zeros(first.action_space.shape)
        action[2] = 1.0  # up, at full speed
        for _ in range(3):
            first.step(action)
        moved = task.view(first).robot.ee_position - start
        assert 0.5 * 3 * MAX_MOVE < moved[2] <= 3 * MAX_MOVE + 1e-3, moved  # the grip point follows its target
        assert abs(moved[0]) < 0.01 and abs(moved[1]) < 0.01
        again, _ = first.reset(seed=7)  # after steps, the same seed gives the same start
        assert all(np.array_equal(a[key], again[key]) for key in a)
    finally:
        first.close()
        second.close()


def test_each_env_gets_its_own_copy_of_a_scene_compiled_once_and_steps_as_a_fresh_compilation():
    """The Panda's scene is compiled once per process (sim_envs.franka_env.compiled_scene): two envs still get models of
    their own, and a seeded episode in an env built from the cached scene equals one in an env whose scene was compiled
    afresh, observation for observation."""
    from sim_envs import franka_env

    task = get_task("franka/pick_and_place")
    cached, other = task.make_env(seed=0), task.make_env(seed=0)
    saved = dict(franka_env._COMPILED_SCENES)
    assert franka_env.scene_xml("block") in saved, "the scene is compiled for every env"
    franka_env._COMPILED_SCENES.clear()
    fresh = task.make_env(seed=0)  # compiles the scene again
    franka_env._COMPILED_SCENES.update(saved)
    try:
        a, b = cached.unwrapped.model, other.unwrapped.model
        assert a is not b and a is not fresh.unwrapped.model
        before = b.body_pos.copy()
        a.body_pos[1] += 1.0
        assert np.array_equal(b.body_pos, before), "the other env's model moved with the first"
        a.body_pos[1] -= 1.0
        rng = np.random.default_rng(0)
        actions = [rng.uniform(-1.0, 1.0, cached.action_space.shape) for _ in range(20)]
        episodes = []
        for env in (cached, fresh):
            observation, _ = env.reset(seed=3)
            steps = [observation]
            steps += [env.step(action)[0] for action in actions]
            episodes.append(steps)
        for mine, theirs in zip(*episodes):
            assert all(np.array_equal(mine[key], theirs[key]) for key in mine)
    finally:
        for env in (cached, other, fresh):
            env.close()


@pytest.mark.parametrize("task_id", FRANKA)
def test_the_env_passes_gymnasiums_checker_raw_and_as_trained(task_id):
    task = get_task(task_id)
    raw = task.make_env(seed=0)
    trained = make_task_env(task, ExpertReward(), seed=0)
    try:
        check_env(raw.unwrapped, skip_render_check=True)
        check_env(trained, skip_render_check=True)
        assert isinstance(trained.observation_space, gym.spaces.Box)  # flattened unless HER keeps the dict
    finally:
        raw.close()
        trained.close()


@pytest.mark.parametrize("task_id", ["franka/push", "franka/pick_and_place"])
def test_the_view_reads_the_simulator(task_id):
    task = get_task(task_id)
    env = task.make_env(seed=0)
    try:
        obs, _ = env.reset(seed=3)
        view = task.view(env)
        sim = env.unwrapped
        np.testing.assert_array_equal(view.robot.ee_position, obs["observation"][:3])
        np.testing.assert_array_equal(view.obj.position, obs["achieved_goal"])
        np.testing.assert_array_equal(view.goal_position, obs["desired_goal"])
        assert view.obj.position[2] == pytest.approx(view.table_height + 0.02)  # resting on the table
        assert view.robot.gripper_width == pytest.approx(0.0 if task_id == "franka/push" else 0.08, abs=2e-3)
        np.testing.assert_array_equal(view.obj.init_position, view.obj.position)
        env.step(env.action_space.sample())
        later = task.view(env, view)
        np.testing.assert_array_equal(later.obj.init_position, view.obj.init_position)
        np.testing.assert_allclose(later.robot.ee_velocity, sim.grip_velocity())
        assert later.episode_step == 1
    finally:
        env.close()


@pytest.mark.parametrize("task_id", ["franka/reach", "franka/push", "franka/pick_and_place"])
def test_goal_success_and_the_env_reward_agree_on_relabelled_goals(task_id):
    """HER scores replayed steps against other goals with `goal_success` (sparse) and the env's compute_reward (dense)."""
    task = get_task(task_id)
    env = task.make_env(seed=0)
    policy = task.scripted_policy()
    try:
        obs, _ = env.reset(seed=1)
        achieved, desired, flags, rewards = [], [], [], []
        for _ in range(50):
            obs, reward, _, _, info = env.step(policy(obs))
            achieved.append(obs["achieved_goal"])
            desired.append(obs["desired_goal"])
            flags.append(bool(info["is_success"]))
            rewards.append(reward)
        achieved_arr, desired_arr = np.array(achieved), np.array(desired)
        assert task.goal_success is not None
        np.testing.assert_array_equal(task.goal_success(achieved_arr, desired_arr), flags)
        np.testing.assert_allclose(env.unwrapped.compute_reward(achieved_arr, desired_arr, None), rewards)
        assert any(flags) and not all(flags)  # both outcomes were exercised
        relabelled = achieved_arr[::-1]  # goals the steps were not aiming at
        distance = np.linalg.norm(achieved_arr - relabelled, axis=-1)
        np.testing.assert_array_equal(task.goal_success(achieved_arr, relabelled), distance < SUCCESS_DISTANCE)
        np.testing.assert_allclose(env.unwrapped.compute_reward(achieved_arr, relabelled, None), -distance)
    finally:
        env.close()


@pytest.mark.parametrize(("task_id", "at_least"), [("franka/reach", 10), ("franka/push", 8), ("franka/pick_and_place", 8)])
def test_the_scripted_policy_succeeds(task_id, at_least):
    """Screening needs successes: measured on seeds 0-29, each scripted policy succeeded on all 30."""
    task = get_task(task_id)
    env = make_task_env(task, SparseReward(), seed=0)
    successes = 0
    try:
        for seed in range(10):
            policy = task.scripted_policy()
            obs, _ = env.reset(seed=seed)
            for _ in range(task.max_episode_steps):
                obs, _, terminated, truncated, info = env.step(policy(obs))
                if terminated or truncated:
                    break
            successes += bool(info["is_success"])
    finally:
        env.close()
    assert successes >= at_least, f"{task_id}: the scripted policy succeeded on {successes} of 10 seeds"


def test_the_prompt_describes_the_robot_control_frame_and_success():
    task = get_task("franka/pick_and_place")
    doc = render_view_doc(task)
    for words in ("class FrankaRobot", "class FrankaObject", "gripper_width", "5 cm per 50 ms step", "action[3]", "z up",
                  "(0, 0, 0.4)"):
        assert words in doc, words
    text = "\n".join(m["content"] if isinstance(m["content"], str) else json.dumps(m["content"]) for m in build_initial_messages(task))
    assert "0.05" in text and "FrankaObjectView" in text and "pick" in text.lower()


def test_t2r_train_on_franka_reach_writes_a_result(tmp_path):
    out = tmp_path / "reach"
    # in this process: the command's own process is tested by tests/cli/test_cli_foundation.py's round trip
    done = CliRunner().invoke(app, ["train", "--task", "franka/reach", "--steps", "300", "--eval-freq", "300", "--eval-episodes", "2",
                                    "--hp", "learning_starts=100", "--out", str(out)])
    assert done.exit_code == 0, done.output
    result = json.loads((out / "result.json").read_text())
    assert result["task"] == "franka/reach" and result["steps"] == 300 and 0.0 <= result["success_rate"] <= 1.0


def test_a_heuristic_run_on_franka_push_finishes_a_round(tmp_path):
    runs = tmp_path / "runs"
    done = subprocess.run([sys.executable, "-m", "text2reward.cli", "run", "--task", "franka/push", "--rounds", "1", "--samples", "1",
                           "--steps", "200", "--eval-freq", "200", "--eval-episodes", "1", "--final-seeds", "0",
                           "--no-compare-expert", "--workers", "1", "--no-video", "--hp", "learning_starts=50",
                           "--runs-dir", str(runs)], capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr + done.stdout
    [candidate] = list(runs.glob("*/rounds/r0/s0/candidate.json"))
    record = json.loads(candidate.read_text())
    assert record["status"] == "trained", record
