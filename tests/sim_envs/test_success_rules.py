"""Success rules: stated in every prompt with their numbers, in agreement with the simulator's own flag
(Fetch here; MetaWorld in test_metaworld_success_rules.py), seen by rewards as `self.task_success`
exactly as evaluation judges it, and scale hints that match a fresh measurement."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from policies.task_env import make_task_env
from sim_envs import derive_task, get_task, list_tasks, rule
from sim_envs.errors import ConfigError
from sim_envs.scale_hints import describe_scale_hints, measure_scale_hints, scale_hints
from sim_envs.success_rule import format_number
from text2reward.generation.prompting import build_initial_messages

ALL_TASKS = [task.id for task in list_tasks()]


@pytest.mark.parametrize("task_id", ALL_TASKS)
def test_every_prompt_states_a_numeric_success_rule_and_task_success(task_id):
    task = get_task(task_id)
    assert task.success_rule is not None, f"{task_id} has no success rule"
    prompt = build_initial_messages(task)[1]["content"]
    line = next(line for line in prompt.splitlines() if line.startswith("Success"))
    assert task.success_rule.statement in line
    assert re.search(r"\d", line), line
    assert "{" not in line and "}" not in line, line
    assert "`self.task_success`" in prompt
    if task.scale_points:
        assert "Typical distances at the start of an episode" in prompt
        assert describe_scale_hints(scale_hints(task)) in prompt


def test_numbers_read_as_people_write_them():
    assert format_number(0.03) == "0.03"
    assert format_number(math.pi / 24) == "0.1309 (pi/24)"
    assert format_number(2 * math.pi) == "6.2832 (2*pi)"
    assert format_number(20.0) == "20"
    assert format_number(0.024) == "0.024"


def _fetch_rollout_views(task, seed: int):
    """(view, step_success) on every step of a controller that drives the block or gripper onto the goal,
    then of a random episode, plus steps after placing the block across the 5 cm threshold."""
    import mujoco

    from policies.reward_program import SparseReward

    env = make_task_env(task, SparseReward(), seed=seed, flatten=False)
    rng = np.random.default_rng(seed)
    seen = []
    try:
        # gripper (reach) or block (others, teleported beside the goal at several distances), then random actions
        for episode in range(3):
            env.reset(seed=seed + episode)
            unwrapped = env.unwrapped
            if episode == 1 and task.id != "fetch/reach":
                ids = unwrapped.model.joint("object0:joint")
                address = int(unwrapped.model.jnt_qposadr[ids.id])
                for offset in (0.07, 0.051, 0.049, 0.03, 0.0):
                    unwrapped.data.qpos[address : address + 3] = unwrapped.goal + np.array([offset, 0.0, 0.0])
                    unwrapped.data.qvel[:] = 0.0
                    mujoco.mj_forward(unwrapped.model, unwrapped.data)
                    for _ in range(2):
                        _, _, _, _, info = env.step(np.zeros(4))
                        seen.append((env.view, info["step_success"]))
                continue
            for _ in range(task.max_episode_steps):
                view = env.view
                if episode == 0:
                    point = view.robot.ee_position
                    action = np.append(np.clip((view.goal_position - point) * 20.0, -1, 1), 0.0)
                else:
                    action = rng.uniform(-1, 1, 4)
                _, _, terminated, truncated, info = env.step(action)
                seen.append((env.view, info["step_success"]))
                if terminated or truncated:
                    break
    finally:
        env.close()
    return seen


@pytest.mark.parametrize("task_id", ["fetch/reach", "fetch/push", "fetch/slide", "fetch/pick_and_place"])
def test_fetch_rules_agree_with_gymnasium_robotics_is_success(task_id):
    task = get_task(task_id)
    seen = _fetch_rollout_views(task, seed=3)
    disagreements = [(step, judged) for step, (view, judged) in enumerate(seen) if task.success_rule(view) != judged]
    assert not disagreements, f"{task_id}: rule and is_success disagree at steps {disagreements[:5]}"
    assert any(judged for _, judged in seen) and not all(judged for _, judged in seen), "both verdicts must be exercised"


REPORTS_TASK_SUCCESS = """
def compute_dense_reward(self, action):
    flag = 1.0 if self.task_success else 0.0
    return flag, {"task_success": flag}
"""


@pytest.mark.parametrize("task_id", ["metaworld/reach-v3", "fetch/reach", "hopper/forward"])
def test_a_jailed_reward_sees_task_success_exactly_as_evaluation_judges(task_id):
    """Through the real sandbox (the compact wire format carries the flag), on scripted or steered rollouts."""
    from text2reward.sandbox import SandboxedReward

    task = get_task(task_id)
    reward = SandboxedReward(REPORTS_TASK_SUCCESS, name="reports_task_success")
    env = make_task_env(task, reward, seed=0, flatten=False)
    pairs = []
    try:
        env.reset(seed=0)
        policy = task.scripted_policy() if task.has_scripted_policy else None
        obs = None
        for step in range(min(task.max_episode_steps, 120)):
            view = env.view
            if policy is not None:
                action = policy(obs if obs is not None else env.unwrapped._get_obs())
            elif task.family == "fetch":
                action = np.append(np.clip((view.goal_position - view.robot.ee_position) * 20.0, -1, 1), 0.0)
            else:
                action = np.zeros(env.action_space.shape)
            if task_id == "hopper/forward":  # move the torso 2.1 m forward once: success without a trained policy
                if step == 5:
                    env.unwrapped.data.qpos[0] += 2.1
            obs, total, terminated, truncated, info = env.step(action)
            pairs.append((total, info["reward_components"]["task_success"], info["step_success"]))
            if terminated or truncated:
                break
    finally:
        env.close()
        reward.close()
    assert all(total == component == float(judged) for total, component, judged in pairs)
    assert any(judged for *_, judged in pairs), f"{task_id}: the rollout never succeeded, so the test proves nothing"


def test_shipped_scale_hints_match_a_fresh_measurement():
    """Every built-in task with scale points: the figures in scale_hints.json are what seeded resets give today."""
    from sim_envs.scale_hints import _shipped

    shipped = _shipped()
    measured = {task.id: measure_scale_hints(task) for task in list_tasks() if task.scale_points and task.source == "builtin"}
    assert set(measured) == set(shipped), "regenerate with `python -m sim_envs.shipped_facts`"
    for task_id, hints in measured.items():
        assert hints.keys() == shipped[task_id].keys(), task_id
        for label, (low, high) in hints.items():
            assert shipped[task_id][label] == pytest.approx([low, high], abs=1e-3), f"{task_id} {label}"
            assert 0 <= low <= high


def test_a_derived_task_states_its_own_rule_and_drops_the_parents():
    def torso_above(view, HEIGHT):
        """`torso.position[2]` above {HEIGHT} m"""
        return view.torso.position[2] > HEIGHT

    task = derive_task("hopper/forward", id="test/hop_high", description="Jump high.", success_rule=rule(torso_above, HEIGHT=1.6))
    assert task.success_doc == "`torso.position[2]` above 1.6 m, at any step of the episode"
    assert task.success_rule is not None and task.success_rule.constants == {"HEIGHT": 1.6}
    env = task.make_env(seed=0)
    env.reset(seed=0)
    view = task.view(env)
    env.close()
    assert task.is_success(view, {}) is False and view.task_success is False
    plain = derive_task("hopper/forward", id="test/hop_plain", description="Jump.", is_success=lambda v, i: False, success_doc="never")
    assert plain.success_rule is None
    with pytest.raises(ConfigError, match="success_rule"):
        derive_task("hopper/forward", id="test/none", description="Jump.")
