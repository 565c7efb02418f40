"""The "your own robot" example (examples/own_robot): a new task family from its own MJCF, env, view, success rule,
scale points and hyper-parameters, registered by a task file and driven through `t2r` as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sim_envs import get_task, load_task_file
from text2reward.runs.records import PromptContext

EXAMPLE = Path(__file__).parents[2] / "examples" / "own_robot"
TASK_FILE = EXAMPLE / "planar_arm_task.py"
REWARD = EXAMPLE / "push_reward.py"
TASK_ID = "planar_arm/push_puck"


def t2r(*args: object, env: dict[str, str] | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "text2reward.cli", *map(str, args), "--task-file", str(TASK_FILE)],
                            capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result


@pytest.fixture(scope="module")
def task():
    load_task_file(TASK_FILE)
    return get_task(TASK_ID)


def run_episode(task, policy, seed: int) -> list:
    """The views of one episode (reset state first) under `policy(observation) -> action`."""
    env = task.make_env(seed=seed)
    try:
        observation, _ = env.reset(seed=seed)
        views, done = [task.view(env)], False
        while not done:
            observation, _, terminated, truncated, _ = env.step(policy(observation))
            views.append(task.view(env, views[-1]))
            done = terminated or truncated
        return views
    finally:
        env.close()


def test_the_arm_moves_the_puck_only_by_pushing_it(task):
    """Real contact physics: left alone the puck stays put; the scripted pusher's finger moves it to the goal, and it
    does not move before the finger first touches it."""
    still = run_episode(task, lambda observation: np.zeros(2), seed=0)
    assert len(still) == task.max_episode_steps + 1
    assert np.array_equal(still[-1].obj.position, still[0].obj.position) and not any(v.obj.touched for v in still)
    pusher = task.scripted_policy()
    delivered = 0
    for seed in range(8):
        views = run_episode(task, pusher, seed)
        first_touch = next(i for i, view in enumerate(views) if view.obj.touched)
        assert first_touch > 0
        assert all(np.array_equal(view.obj.position, views[0].obj.position) for view in views[:first_touch])
        assert np.linalg.norm(views[-1].obj.position - views[0].obj.position) > 0.05
        delivered += task.is_success(views[-1], {})
        moved = np.array([(after.robot.ee_position - before.robot.ee_position) / before.dt for before, after in zip(views, views[1:])])
        stated = np.array([view.robot.ee_velocity for view in views[1:]])
        moving = np.linalg.norm(moved, axis=1) > 0.02  # m/s: the steps on which the finger moved
        assert moving.sum() >= 10 and np.median(np.linalg.norm(stated - moved, axis=1)[moving]) < 0.01  # ee_velocity is its speed
    assert delivered >= 7, f"the scripted pusher delivered {delivered} of 8 pucks"


def test_the_view_reads_mujoco_and_states_true_facts(task):
    """Every position is MuJoCo's own; the numbers the view's and task's sentences state match the model."""
    env = task.make_env(seed=3)
    try:
        env.reset(seed=3)
        sim = env.unwrapped
        model, data = sim.model, sim.data
        view = task.view(env)
        assert np.array_equal(view.robot.ee_position, data.site_xpos[model.site("tip").id])
        assert np.array_equal(view.obj.position, data.xpos[model.body("puck").id])
        assert np.array_equal(view.goal_position, data.site_xpos[model.site("goal").id])
        assert np.array_equal(view.robot.joint_angles, data.qpos[:2]) and view.robot.ee_position.flags.writeable is False
        import planar_arm_env as arm  # beside the task file, which put its folder on the import path

        finger, puck = model.geom("finger"), model.geom("puck")
        assert (finger.size[0], puck.size[0]) == (arm.FINGER_RADIUS, arm.PUCK_RADIUS)
        assert finger.size[0] + puck.size[0] == pytest.approx(0.045)  # "touches the puck when about 0.045 m from its centre"
        assert model.body("forearm").pos[0] == model.site("tip").pos[0] == arm.LINK_LENGTH
        elbow_limit = model.joint("elbow").range[1]
        reach = (2 * arm.LINK_LENGTH * np.cos(elbow_limit / 2), 2 * arm.LINK_LENGTH)
        assert np.round(reach, 2).tolist() == [0.09, 0.4]  # "the arm reaches 0.09-0.40 m from the base"
        assert view.robot.ee_position[2] == pytest.approx(0.02) and view.obj.position[2] == pytest.approx(0.02)
        assert view.goal_position[2] == pytest.approx(0.02)
        links = [model.geom(name) for name in ("upper_arm", "forearm")]
        assert all(link.contype == 0 and link.conaffinity == 0 for link in links)  # "the links pass above the puck"
        assert all(data.geom_xpos[link.id][2] - link.size[0] > 2 * puck.size[1] for link in links)
    finally:
        env.close()


def test_tasks_and_prompt_show_the_task_and_its_view():
    listed = {t["id"]: t for t in json.loads(t2r("tasks", "--json").stdout)}
    assert listed[TASK_ID]["source"] == "user" and listed[TASK_ID]["family"] == "planar_arm"
    assert listed[TASK_ID]["has_scripted_policy"] and listed[TASK_ID]["has_expert_reward"]
    prompt = t2r("prompt", "--task", TASK_ID).stdout
    for stub in ("class PlanarArmPushView:", "class PlanarArm:", "class Puck:", "ee_position: np.ndarray", "touched: bool",
                 "goal_position: np.ndarray"):
        assert stub in prompt, stub
    flat = " ".join(prompt.split())
    assert "`obj.position` within 0.05 m of `goal_position`, at the episode's last step" in flat
    assert "finger to puck" in flat and "puck to goal" in flat  # the scale points, measured on seeded resets


@pytest.mark.parametrize("hide", ["", "bubblewrap"], ids=["bubblewrap", "landlock"])
def test_the_shipped_reward_passes_validation_in_the_jail(hide):
    """The view's classes live beside the task file, outside what the jail shows: the sandbox rebuilds them there."""
    report = json.loads(t2r("validate", "--task", TASK_ID, "--code", REWARD, "--json", env={"T2R_SANDBOX_HIDE": hide}).stdout)
    assert report["ok"], report["errors"]
    assert all(check["ok"] for check in report["checks"].values()), report["checks"]


def test_the_heuristic_backend_writes_a_push_reward_the_jail_accepts(task):
    """`t2r run --llm heuristic` works for this task: the rule-based backend recognises an arm pushing an object from the
    view's field names and the task's text, and its program validates in the jail."""
    from text2reward.generation.llm.heuristic import compose
    from text2reward.sandbox import validate

    program, plan = compose(task, seed=0, round_index=0, index=0, n=1, temperature=1.0, context=PromptContext())
    assert plan.archetype == "push" and "self.obj.velocity" in program  # the settle term: success is judged at the last step
    report = validate(program, task)
    assert report.ok, report.errors


@pytest.mark.slow
def test_train_uses_the_familys_own_hyper_parameters(tmp_path):
    out = tmp_path / "train"
    t2r("train", "--task", TASK_ID, "--reward", REWARD, "--steps", 300, "--eval-freq", 300, "--eval-episodes", 2,
        "--hp", "final_eval_episodes=3", "--out", out)
    result = json.loads((out / "result.json").read_text())
    assert result["task"] == TASK_ID and result["steps"] == 300 and "jail" in result["reward_isolation"]
    params = result["hyperparams"]
    assert params["algo"] == "sbx-sac" and params["algo_kwargs"]["gamma"] == 0.98  # planar_arm.yml, named by the task
    assert set(result["components"][-1]["components"]) == {"reach", "push", "touch", "success", "effort"}  # push_reward.py's
    assert (out / "model.zip").is_file()
