"""The dexterous-hand families, adroit/* (Gymnasium-Robotics' Adroit v1) and shadow/* (its Shadow Dexterous Hand),
on real MuJoCo: seeded resets, the views against the envs' own observations, the success rules against the envs'
flags (near the thresholds too, not only on the failures random actions give), `goal_success` against
Gymnasium-Robotics' own test on relabelled goals, the prompt, the sandbox, and a tiny training run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np
import pytest
from env_contract import assert_env_contract

from policies.reward_program import ExpertReward
from policies.task_env import make_task_env
from sim_envs import get_task, render_view_doc
from sim_envs.view_base import view_field_paths
from text2reward.generation.prompting import build_initial_messages
from text2reward.sandbox.states import collect_states
from text2reward.sandbox.validation import validate

ADROIT = ["adroit/door", "adroit/hammer", "adroit/pen", "adroit/relocate"]
SHADOW = ["shadow/reach", "shadow/block", "shadow/egg", "shadow/pen"]
EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "prompts" / "examples"


def _flat(value: Any, path: str = "view") -> dict[str, Any]:
    """Every number and array of a (nested) view, by attribute path."""
    if dataclasses.is_dataclass(value):
        out: dict[str, Any] = {}
        for field in dataclasses.fields(value):
            out.update(_flat(getattr(value, field.name), f"{path}.{field.name}"))
        return out
    return {path: value}


def _same(a: Any, b: Any) -> bool:
    fa, fb = _flat(a), _flat(b)
    return fa.keys() == fb.keys() and all(np.array_equal(np.asarray(fa[k]), np.asarray(fb[k])) for k in fa)


# --- build, seeding, stepping, the env contract -----------------------------------------------------


@pytest.mark.parametrize("task_id", ADROIT + SHADOW)
def test_resets_reproducibly_and_steps(task_id: str) -> None:
    task = get_task(task_id)
    first, second, other = (task.make_env(seed=s) for s in (1, 2, 3))
    try:
        first.reset(seed=7)
        second.reset(seed=7)
        other.reset(seed=8)
        a, b, c = task.view(first), task.view(second), task.view(other)
        start = a
        assert _same(a, b), "two envs reset with the same seed must give the same state"
        assert not _same(a, c), "another seed must give another placement"
        assert a.episode_step == 0 and a.dt > 0
        actions = np.random.default_rng(0).uniform(-1, 1, size=(4, *first.action_space.shape)).astype(np.float32)
        for action in actions:
            _, reward_a, _, _, info = first.step(action)
            _, reward_b, *_ = second.step(action)
            a, b = task.view(first, a), task.view(second, b)
            assert reward_a == reward_b and _same(a, b), "the same actions from the same state must give the same states"
            assert isinstance(task.is_success(a, info), bool)
        assert a.episode_step == 4
        for path, value in _flat(a).items():
            if isinstance(value, np.ndarray):
                assert np.all(np.isfinite(value)) and not value.flags.writeable, path
        if task.family == "adroit":  # episode-start values are kept from the reset's view
            assert np.array_equal(a.robot.init_ee_position, start.robot.ee_position)
            assert not np.array_equal(a.robot.ee_position, start.robot.ee_position)
        if task_id != "shadow/reach":
            assert np.array_equal(a.obj.init_position, start.obj.position)
    finally:
        for env in (first, second, other):
            env.close()


@pytest.mark.parametrize("task_id", ADROIT + SHADOW)
def test_the_gym_env_keeps_its_contract(task_id: str, tmp_path: Path) -> None:
    assert_env_contract(task_id, tmp_path)  # spaces, is_success, the reward chosen over the env's, one seed one rollout


@pytest.mark.parametrize("task_id", ["adroit/hammer", "shadow/egg"])
def test_expert_reward_is_the_env_reward(task_id: str) -> None:
    task = get_task(task_id)
    env = make_task_env(task, ExpertReward(), seed=0)
    try:
        env.reset(seed=0)
        for _ in range(3):
            _, reward, _, _, info = env.step(env.action_space.sample())
            assert reward == info["native_reward"] and info["reward_components"] == {"expert": reward}
    finally:
        env.close()


# --- the views against the envs' own observations ----------------------------------------------------


def _check_door(view: Any, obs: np.ndarray) -> None:
    np.testing.assert_array_equal(view.robot.arm_joint_positions[1:], obs[0:3])  # obs skips ARTz
    np.testing.assert_array_equal(view.robot.joint_angles, obs[3:27])
    assert view.door.latch_angle == obs[27] and view.door.hinge_angle == obs[28]
    np.testing.assert_array_equal(view.robot.ee_position, obs[29:32])
    np.testing.assert_array_equal(view.obj.position, obs[32:35])


def _check_hammer(view: Any, obs: np.ndarray) -> None:
    np.testing.assert_array_equal(view.robot.arm_joint_positions, obs[0:2])
    np.testing.assert_array_equal(view.robot.joint_angles, obs[2:26])
    assert view.hammer.nail_depth == obs[26]
    np.testing.assert_array_equal(view.robot.ee_position, obs[33:36])
    np.testing.assert_array_equal(view.obj.position, obs[36:39])
    np.testing.assert_array_equal(view.hammer.nail_position, obs[42:45])
    assert np.clip(view.hammer.nail_impact, -1.0, 1.0) == obs[45]


def _check_pen(view: Any, obs: np.ndarray) -> None:
    assert view.robot.arm_joint_positions.shape == (0,)
    np.testing.assert_array_equal(view.robot.joint_angles, obs[0:24])
    np.testing.assert_array_equal(view.obj.position, obs[24:27])
    np.testing.assert_array_equal(view.pen.orientation, obs[33:36])
    np.testing.assert_array_equal(view.pen.goal_orientation, obs[36:39])
    np.testing.assert_allclose(view.obj.position - view.goal_position, obs[39:42], atol=1e-15)
    assert np.linalg.norm(view.pen.orientation) == pytest.approx(1.0, abs=1e-9)


def _check_relocate(view: Any, obs: np.ndarray) -> None:
    np.testing.assert_array_equal(view.robot.arm_joint_positions, obs[0:6])
    np.testing.assert_array_equal(view.robot.joint_angles, obs[6:30])
    np.testing.assert_array_equal(view.robot.ee_position - view.obj.position, obs[30:33])
    np.testing.assert_array_equal(view.robot.ee_position - view.goal_position, obs[33:36])
    np.testing.assert_array_equal(view.obj.position - view.goal_position, obs[36:39])


def _check_shadow_hand(view: Any, obs: dict[str, np.ndarray]) -> None:
    np.testing.assert_array_equal(view.robot.joint_angles, obs["observation"][0:24])
    np.testing.assert_array_equal(view.robot.joint_velocities, obs["observation"][24:48])


def _check_reach(view: Any, obs: dict[str, np.ndarray]) -> None:
    _check_shadow_hand(view, obs)
    order = ("index", "middle", "ring", "little", "thumb")  # Gymnasium-Robotics' fingertip order
    np.testing.assert_array_equal(np.concatenate([getattr(view.robot.fingertips, f) for f in order]), obs["achieved_goal"])
    np.testing.assert_array_equal(np.concatenate([getattr(view.goal_fingertips, f) for f in order]), obs["desired_goal"])


def _check_manipulate(view: Any, obs: dict[str, np.ndarray]) -> None:
    _check_shadow_hand(view, obs)
    np.testing.assert_array_equal(view.obj.velocity, obs["observation"][48:51])
    np.testing.assert_array_equal(np.concatenate([view.obj.position, view.obj.quaternion]), obs["achieved_goal"])
    np.testing.assert_array_equal(np.concatenate([view.goal_position, view.goal_quaternion]), obs["desired_goal"])
    assert np.linalg.norm(view.obj.quaternion) == pytest.approx(1.0, abs=1e-6)


VIEW_CHECKS = {"adroit/door": _check_door, "adroit/hammer": _check_hammer, "adroit/pen": _check_pen,
               "adroit/relocate": _check_relocate, "shadow/reach": _check_reach, "shadow/block": _check_manipulate,
               "shadow/egg": _check_manipulate, "shadow/pen": _check_manipulate}


@pytest.mark.parametrize("task_id", ADROIT + SHADOW)
def test_view_equals_the_env_observation(task_id: str) -> None:
    task = get_task(task_id)
    env = task.make_env(seed=0)
    try:
        obs, _ = env.reset(seed=0)
        view = task.view(env)
        VIEW_CHECKS[task_id](view, obs)
        for _ in range(3):
            obs, *_ = env.step(env.action_space.sample())
            view = task.view(env, view)
            VIEW_CHECKS[task_id](view, obs)
        parts = {"door": view.door, "hammer": view.hammer, "pen": view.pen} if task.family == "adroit" else {}
        for name, part in parts.items():  # each Adroit task fills its own part only
            assert (part is not None) == (task_id == f"adroit/{name}"), name
    finally:
        env.close()


def test_door_goal_is_where_the_handle_goes_when_the_door_opens() -> None:
    task = get_task("adroit/door")
    env = task.make_env(seed=0)
    try:
        env.reset(seed=4)
        raw = env.unwrapped
        qpos, qvel = raw.data.qpos.copy(), raw.data.qvel.copy()
        qpos[raw.model.jnt_qposadr[raw.model.joint("latch").id]] = 0.6  # the handle turned: the goal turns with it
        raw.set_state(qpos, qvel)
        closed = task.view(env)
        qpos[raw.model.jnt_qposadr[raw.model.joint("door_hinge").id]] = 1.57
        raw.set_state(qpos, qvel)
        opened = task.view(env)
        assert opened.door.hinge_angle == 1.57 and closed.door.hinge_angle == 0.0
        np.testing.assert_allclose(opened.obj.position, closed.goal_position, atol=1e-9)
        np.testing.assert_allclose(opened.goal_position, opened.obj.position, atol=1e-9)
        assert np.linalg.norm(closed.obj.position - closed.goal_position) > 0.3
    finally:
        env.close()


# --- the success rules against the envs' flags ---------------------------------------------------------


def _set_joint(raw: Any, joint: str, value: float) -> None:
    qpos, qvel = raw.data.qpos.copy(), raw.data.qvel.copy()
    qpos[raw.model.jnt_qposadr[raw.model.joint(joint).id]] = value
    raw.set_state(qpos, qvel * 0.0)


def _small_rotation(rng: np.random.Generator, largest: float) -> np.ndarray:
    axis = rng.normal(size=3)
    angle = rng.uniform(0.0, largest)
    return np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis / np.linalg.norm(axis)])


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros(4)
    mujoco.mju_mulQuat(out, a, b)
    return out


def _near_door(raw: Any, rng: np.random.Generator) -> None:
    _set_joint(raw, "door_hinge", rng.uniform(1.30, 1.42))  # success at 1.35


def _near_hammer(raw: Any, rng: np.random.Generator) -> None:
    _set_joint(raw, "nail_dir", rng.uniform(0.075, 0.09))  # the nail head is 0.091 - depth from its goal: success past 0.081


def _near_pen(raw: Any, rng: np.random.Generator) -> None:
    """The goal orientation a small turn (0-0.6 rad) away from the pen's own: alignment on both sides of 0.95."""
    model, data = raw.model, raw.data
    pen = data.xquat[model.body("Object").id].copy()
    model.body_quat[model.body("target").id] = _quat_mul(pen, _small_rotation(rng, 0.6))
    mujoco.mj_forward(model, data)


def _near_relocate(raw: Any, rng: np.random.Generator) -> None:
    """The ball 6-14 cm from the target (success within 10 cm), placed through its slide joints."""
    model, data = raw.model, raw.data
    direction = rng.normal(size=3)
    target = data.site_xpos[model.site("target").id] + rng.uniform(0.06, 0.14) * direction / np.linalg.norm(direction)
    qpos, qvel = data.qpos.copy(), data.qvel.copy()
    for axis, name in enumerate(("OBJTx", "OBJTy", "OBJTz")):
        qpos[model.jnt_qposadr[model.joint(name).id]] = target[axis] - model.body_pos[model.body("Object").id][axis]
    raw.set_state(qpos, qvel * 0.0)


NEAR_SUCCESS = {"adroit/door": _near_door, "adroit/hammer": _near_hammer, "adroit/pen": _near_pen,
                "adroit/relocate": _near_relocate}


def _compare(task: Any, env: gym.Env, view: Any, action: np.ndarray, verdicts: list[bool]) -> Any:
    _, _, _, _, info = env.step(action)
    view = task.view(env, view)
    flag = task.is_success(view, info)
    assert task.success_rule(view) == flag, f"the stated rule and the env's flag disagree on step {view.episode_step}"
    verdicts.append(flag)
    return view


@pytest.mark.parametrize("task_id", ADROIT)
def test_adroit_success_rule_agrees_with_the_env_flag(task_id: str) -> None:
    task = get_task(task_id)
    env = task.make_env(seed=0)
    rng = np.random.default_rng(1)
    verdicts: list[bool] = []
    try:
        env.reset(seed=0)
        view = task.view(env)
        for _ in range(10):  # random actions: the states training visits first
            view = _compare(task, env, view, env.action_space.sample(), verdicts)
        for episode in range(20):  # states on both sides of the success threshold, from fresh resets
            env.reset(seed=episode)
            NEAR_SUCCESS[task_id](env.unwrapped, rng)
            view = _compare(task, env, task.view(env), np.zeros(env.action_space.shape, dtype=np.float32), verdicts)
    finally:
        env.close()
    assert any(verdicts) and not all(verdicts), f"the states must include successes and failures: {sum(verdicts)}/{len(verdicts)}"


def _achieved(raw: Any) -> np.ndarray:
    return np.asarray(raw._get_achieved_goal(), dtype=np.float64).copy()


def _shadow_goal_near(task_id: str, achieved: np.ndarray, rng: np.random.Generator, i: int) -> np.ndarray:
    """A goal near the achieved one: within the thresholds for some `i`, outside for others, and for the manipulate
    tasks sometimes the same orientation written as -q (which Gymnasium-Robotics' angle does not count as reached)."""
    scale = (i % 5) / 4  # 0, 0.25, ..., 1
    if task_id == "shadow/reach":
        return achieved + rng.normal(0.0, 0.005 * scale, size=achieved.shape)
    spec_distance = 0.05 if task_id == "shadow/pen" else 0.01
    direction = rng.normal(size=3)
    position = achieved[:3] + 2.0 * spec_distance * scale * rng.uniform() * direction / np.linalg.norm(direction)
    quaternion = _quat_mul(achieved[3:], _small_rotation(rng, 0.2 * scale))
    if i % 7 == 6:
        quaternion = -quaternion
    return np.concatenate([position, quaternion])


@pytest.mark.parametrize("task_id", SHADOW)
def test_shadow_success_rule_agrees_with_the_env_flag(task_id: str) -> None:
    """The hand settles under a constant action, then before each step the goal is set near where the fingertips or
    the object are, so the env's own `is_success` after the step falls on both sides of its thresholds."""
    task = get_task(task_id)
    env = task.make_env(seed=0)
    rng = np.random.default_rng(2)
    verdicts: list[bool] = []
    try:
        env.reset(seed=0)
        view = task.view(env)
        action = np.zeros(env.action_space.shape, dtype=np.float32)
        for _ in range(8):
            env.step(action)
        view = task.view(env)
        raw = env.unwrapped
        for i in range(25):
            raw.goal = _shadow_goal_near(task_id, _achieved(raw), rng, i)
            view = _compare(task, env, view, action, verdicts)
    finally:
        env.close()
    assert any(verdicts) and not all(verdicts), f"the states must include successes and failures: {sum(verdicts)}/{len(verdicts)}"


# --- goal_success (what HER relabels with) against Gymnasium-Robotics' own test ---------------------------


@pytest.fixture(scope="module")
def shadow_goal_batches() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Real achieved goals from random rollouts, each paired with its own goal, another step's achieved goal
    (relabelled, as HER's "future" and "episode" strategies do), a goal near it, and itself."""
    batches = {}
    rng = np.random.default_rng(3)
    for task_id in SHADOW:
        task = get_task(task_id)
        env = task.make_env(seed=0)
        achieved, desired = [], []
        try:
            obs, _ = env.reset(seed=0)
            for _ in range(40):
                obs, *_ = env.step(env.action_space.sample())
                achieved.append(obs["achieved_goal"])
                desired.append(obs["desired_goal"])
        finally:
            env.close()
        a, d = np.array(achieved), np.array(desired)
        near = np.array([_shadow_goal_near(task_id, x, rng, i) for i, x in enumerate(a)])
        batches[task_id] = (np.concatenate([a, a, a, a]), np.concatenate([d, a[rng.permutation(len(a))], near, a]))
    return batches


@pytest.mark.parametrize("task_id", SHADOW)
def test_goal_success_equals_gymnasium_robotics_on_relabelled_goals(task_id: str, shadow_goal_batches) -> None:
    task = get_task(task_id)
    assert task.is_multi_goal and task.goal_success is not None
    achieved, desired = shadow_goal_batches[task_id]
    ours = task.goal_success(achieved, desired)
    assert ours.dtype == bool and ours.shape == (len(achieved),)
    assert ours.any() and not ours.all(), f"relabelled pairs must include successes and failures: {ours.sum()}/{len(ours)}"
    # the same verdicts on any batch shape, and for a single pair
    np.testing.assert_array_equal(task.goal_success(achieved.reshape(4, -1, achieved.shape[-1]), desired.reshape(4, -1, desired.shape[-1])).ravel(), ours)
    assert bool(task.goal_success(achieved[-1], desired[-1])) is True

    # the sparse variant (compute_reward = success - 1), built as the task builds its env (the pen's batch fixed)
    sparse = task.env_factory.func(task.env_factory.args[0].replace("Dense", ""), **task.env_factory.keywords)
    dense = task.make_env()
    try:
        raw = sparse.unwrapped
        assert raw.reward_type == "sparse"
        single = np.array([raw._is_success(a, d) for a, d in zip(achieved, desired)]).astype(bool)
        rewards = np.array([raw.compute_reward(a, d, {}) for a, d in zip(achieved, desired)])
        np.testing.assert_array_equal(ours, single)
        np.testing.assert_array_equal(ours.astype(np.float32) - 1.0, rewards)
        np.testing.assert_array_equal(ours.astype(np.float32) - 1.0, raw.compute_reward(achieved, desired, {}))
        # the dense reward HER relabels the expert reward with: the batch scored as each goal is, one by one
        per_goal = np.array([dense.unwrapped.compute_reward(a, d, {}) for a, d in zip(achieved, desired)])
        relabelled = ExpertReward().relabel(achieved, desired, [{}] * len(achieved), task, dense)
        np.testing.assert_allclose(relabelled, per_goal, rtol=0, atol=1e-12)
    finally:
        sparse.close()
        dense.close()
    if task_id == "shadow/pen":  # Gymnasium-Robotics' own batch replaces only the third goal's z angle: wrong
        upstream = gym.make("HandManipulatePen-v1")
        try:
            assert not np.array_equal(ours.astype(np.float32) - 1.0, upstream.unwrapped.compute_reward(achieved, desired, {}))
        finally:
            upstream.close()


def test_goal_success_thresholds_are_the_envs() -> None:
    for task_id in SHADOW:
        task = get_task(task_id)
        env = task.make_env()
        raw = env.unwrapped
        stated = task.success_rule.constants
        assert stated["DISTANCE"] == raw.distance_threshold
        if task_id != "shadow/reach":
            assert stated["ANGLE"] == raw.rotation_threshold
            assert (task_id == "shadow/pen") == raw.ignore_z_target_rotation
            assert (raw.target_position, raw.target_rotation) == ("random", "xyz")
        env.close()
    assert not get_task("adroit/door").is_multi_goal


# --- the prompt, the sandbox and the CLI ----------------------------------------------------------------


@pytest.mark.parametrize("task_id", ADROIT + SHADOW)
def test_view_renders_into_the_prompt(task_id: str) -> None:
    task = get_task(task_id)
    messages = build_initial_messages(task)
    user = messages[-1]["content"]
    doc = render_view_doc(task)
    assert doc in user and task.success_doc in user and task.description in user
    for path in view_field_paths(task.view_class):
        assert path.rsplit(".", 1)[1] + ":" in doc, path
    assert "Fingertips" in doc and "thumb:" in doc and "little:" in doc
    assert task.action_doc in doc and task.view_notes in doc
    env = task.make_env()
    assert f"np.ndarray ({env.action_space.shape[0]},)" in task.action_doc
    env.close()


@pytest.mark.parametrize("task_id", ADROIT + SHADOW)
def test_expert_example_validates_in_the_sandbox(task_id: str) -> None:
    task = get_task(task_id)
    code = (EXAMPLES_DIR / f"{task_id.replace('/', '__')}.py").read_text()
    report = validate(code, task, collect_states(task, n_random=24, n_scripted=0))
    assert report.ok, f"{task_id}: {report.errors}"


def test_tasks_show_prints_the_budget_note() -> None:
    from typer.testing import CliRunner

    from text2reward.cli import app

    for task_id in ("adroit/door", "shadow/block"):
        outcome = CliRunner().invoke(app, ["tasks", "--show", task_id])
        assert outcome.exit_code == 0, outcome.output
        task = get_task(task_id)
        assert task.default_steps >= 1_000_000 and task.budget_note
        assert " ".join(f"budget: {task.budget_note}".split()) in " ".join(outcome.output.split())  # Rich wraps lines
    outcome = CliRunner().invoke(app, ["tasks", "--show", "fetch/push"])
    assert outcome.exit_code == 0 and "budget:" not in outcome.output


def test_train_a_tiny_budget_writes_result(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from policies.train import RESULT_FILE
    from text2reward.cli import app

    out = tmp_path / "door"
    args = ["train", "--task", "adroit/door", "--steps", "200", "--eval-freq", "200", "--eval-episodes", "1", "--device", "cpu",
            "--out", str(out), "--hp", "learning_starts=50", "--hp", "batch_size=16"]
    outcome = CliRunner().invoke(app, args)
    assert outcome.exit_code == 0, outcome.output
    data = json.loads((out / RESULT_FILE).read_text())
    assert data["task"] == "adroit/door" and data["steps"] == 200 and data["algo"] == "sbx-sac"
    assert 0.0 <= data["success_rate"] <= 1.0 and np.isfinite(data["mean_native_return"])
    assert data["hyperparams"]["policy_kwargs"]["net_arch"] == [256, 256]
