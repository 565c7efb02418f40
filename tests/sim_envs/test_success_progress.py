"""Progress toward each task's success rule (sim_envs.success_progress, `SuccessRule.progress`): read from the
simulator's state, exactly 1 where the rule holds and below 1 elsewhere, and higher for a policy that succeeds than
for random actions, on every MetaWorld task and on each other family (a scripted policy where the family has one,
else a state the rule accepts, set in the simulator, against random actions)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import mujoco
import numpy as np
import pytest

from policies.reward_program import SparseReward
from policies.task_env import make_task_env
from sim_envs import get_task, list_tasks, load_task_file, rule
from sim_envs.metaworld_tasks import METAWORLD_TASKS
from sim_envs.success_progress import BELOW_ONE, companion, mean_of, reaching, within
from tests.sim_envs.test_own_robot import TASK_FILE

STEPS = 200
SEED = 3
"""The seed from which every MetaWorld scripted policy succeeds (tests/sim_envs/test_metaworld_success_rules.py)."""


def test_the_gradings_read_as_documented():
    assert within(0.05, 0.05) == 1.0 and within(0.10, 0.05) == 0.5 and within(math.inf, 0.05) == 0.0
    assert reaching(1.0, 2.0) == 0.5 and reaching(2.0, 2.0) == 1.0 and reaching(-1.0, 2.0) == 0.0
    assert reaching(0.95, 0.95, -1.0) == 1.0 and reaching(0.0, 1.0, -1.0) == 0.5
    assert mean_of([1.0, 0.0]) == 0.5 and mean_of([1.0, 1.0]) == 1.0 and mean_of([float("nan"), 1.0]) == 0.5


def test_a_strict_rule_at_its_threshold_is_not_progress_one():
    """`distance < DISTANCE` fails at the threshold, where the companion's `DISTANCE / distance` reads 1: the rule's
    own verdict decides 1, so progress and success cannot disagree."""

    @dataclasses.dataclass
    class Point:
        x: float

    def below(view: Point, LIMIT: float) -> bool:
        """x below {LIMIT}"""
        return view.x < LIMIT

    strict = rule(below, LIMIT=0.5)
    assert strict.progress(Point(0.49)) == 1.0
    assert strict.progress(Point(0.5)) == 0.0  # no companion: a yes-or-no rule grades 0 or 1
    from sim_envs.success_progress import progress_of

    progress_of(below)(lambda view, LIMIT: within(view.x, LIMIT))
    try:
        assert strict.progress(Point(0.5)) == BELOW_ONE
        assert strict.progress(Point(1.0)) == 0.5
    finally:
        from sim_envs import success_progress

        success_progress._COMPANIONS.pop(below)


def test_every_builtin_rule_has_a_companion():
    missing = [task.id for task in list_tasks() if task.success_rule is not None and companion(task.success_rule.test) is None]
    assert not missing, f"rules without progress: {missing}"


def _graded_whole(task: Any, view: Any) -> bool:
    """Whether the rule's companion by itself (not capped by the predicate's verdict) reads 1: it must exactly where the
    rule holds, or the two read different quantities or thresholds (off a strict threshold's exact equality)."""
    grade = companion(task.success_rule.test)
    assert grade is not None
    return grade(view, **task.success_rule.constants) >= 1.0


def _episode_progress(progress: list[float], mode: str) -> float:
    return max(progress) if mode == "any" else progress[-1]


# --- MetaWorld: the scripted policy against random actions, through the training wrapper ---------------------


def _wrapped_rollout(task: Any, act: Callable[[np.ndarray], np.ndarray]) -> tuple[list[float], list[bool], float]:
    """(each step's progress, each step's judged success, the wrapper's episode progress) over STEPS steps."""
    env = make_task_env(task, SparseReward(), seed=SEED)
    try:
        obs, _ = env.reset(seed=SEED)
        progress, success = [], []
        for _ in range(STEPS):
            obs, _, _, _, info = env.step(act(obs))
            view = env.get_wrapper_attr("view")
            assert info["step_progress"] == (1.0 if info["step_success"] else min(task.success_rule.progress(view), BELOW_ONE))
            assert _graded_whole(task, view) == task.success_rule(view), "the companion reads 1 exactly where its rule holds"
            progress.append(info["step_progress"])
            success.append(info["step_success"])
        return progress, success, info["rule_progress"]
    finally:
        env.close()


@pytest.mark.parametrize("name", list(METAWORLD_TASKS))
def test_metaworld_progress_ranks_the_scripted_policy_above_random(name):
    task = get_task(f"metaworld/{name}-v3")
    scripted, scripted_success, scripted_episode = _wrapped_rollout(task, task.scripted_policy())
    rng = np.random.default_rng(SEED)
    random, random_success, random_episode = _wrapped_rollout(task, lambda obs: rng.uniform(-1.0, 1.0, size=4))
    for progress, success in ((scripted, scripted_success), (random, random_success)):
        assert all(0.0 <= p <= 1.0 for p in progress)
        assert [p == 1.0 for p in progress] == success, "progress is 1 exactly on the steps judged a success"
    assert scripted_episode == _episode_progress(scripted, "any") == 1.0
    assert random_episode == _episode_progress(random, "any") < 1.0


def test_progress_does_not_depend_on_the_reward():
    """The same actions under two rewards that disagree on everything give the same progress: it is the simulator's."""
    task = get_task("metaworld/reach-v3")
    runs = []
    for reward in (SparseReward(), _Constant()):
        env = make_task_env(task, reward, seed=SEED)
        rng = np.random.default_rng(SEED)
        env.reset(seed=SEED)
        runs.append([env.step(rng.uniform(-1, 1, size=4))[4]["rule_progress"] for _ in range(50)])
        env.close()
    assert runs[0] == runs[1] and len(set(runs[0])) > 1


class _Constant:
    name = "constant"

    def __call__(self, view: Any, action: np.ndarray, native_reward: float, step_success: bool) -> tuple[float, dict[str, float]]:
        return 7.0, {"constant": 7.0}


# --- the other families: a state the rule accepts (or a scripted policy) against random actions --------------


def _random_progress(task: Any, steps: int = 100) -> tuple[float, list[tuple[float, bool]]]:
    """The episode progress of random actions, and (progress, rule verdict) on each step."""
    env = task.make_env(seed=SEED)
    env.action_space.seed(SEED)
    try:
        env.reset(seed=SEED)
        view = task.view(env)
        seen = []
        for _ in range(min(steps, task.max_episode_steps)):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            view = task.view(env, view)
            seen.append((task.success_rule.progress(view), task.success_rule(view)))
            assert _graded_whole(task, view) == seen[-1][1], "the companion reads 1 exactly where its rule holds"
            if terminated or truncated:
                break
        return _episode_progress([p for p, _ in seen], task.success_mode), seen
    finally:
        env.close()


def _goal_on_achieved(env: Any) -> None:
    """Goal-based envs (Fetch, Franka, Shadow): the goal set to what is achieved now (the rule's distance is 0)."""
    raw = env.unwrapped
    achieved = raw._achieved() if hasattr(raw, "_achieved") else (
        raw._get_achieved_goal() if hasattr(raw, "_get_achieved_goal") else raw._get_obs()["achieved_goal"])
    raw.goal = np.array(achieved, dtype=np.float64).copy()


def _set_qpos(env: Any, joint: str, value: float) -> None:
    raw = env.unwrapped
    qpos, qvel = raw.data.qpos.copy(), raw.data.qvel.copy()
    qpos[raw.model.jnt_qposadr[raw.model.joint(joint).id]] = value
    raw.set_state(qpos, qvel * 0.0)


def _pen_aligned(env: Any) -> None:
    raw = env.unwrapped
    raw.model.body_quat[raw.model.body("target").id] = raw.data.xquat[raw.model.body("Object").id].copy()
    mujoco.mj_forward(raw.model, raw.data)


def _ball_on_target(env: Any) -> None:
    raw = env.unwrapped
    model, data = raw.model, raw.data
    target = data.site_xpos[model.site("target").id].copy()
    qpos, qvel = data.qpos.copy(), data.qvel.copy()
    for axis, name in enumerate(("OBJTx", "OBJTy", "OBJTz")):
        qpos[model.jnt_qposadr[model.joint(name).id]] = target[axis] - model.body_pos[model.body("Object").id][axis]
    raw.set_state(qpos, qvel * 0.0)


def _torso_forward(distance: float) -> Callable[[Any], None]:
    def move(env: Any) -> None:
        raw = env.unwrapped
        qpos, qvel = raw.data.qpos.copy(), raw.data.qvel.copy()
        qpos[0] += distance
        raw.set_state(qpos, qvel * 0.0)

    return move


def _pitch(angle: float) -> Callable[[Any], None]:
    def turn(env: Any) -> None:
        raw = env.unwrapped
        qpos, qvel = raw.data.qpos.copy(), raw.data.qvel.copy()
        qpos[2] = angle
        raw.set_state(qpos, qvel * 0.0)

    return turn


HOLDING: dict[str, Callable[[Any], None]] = {
    **{f"fetch/{name}": _goal_on_achieved for name in ("reach", "push", "slide", "pick_and_place")},
    "franka/slide": _goal_on_achieved,
    **{f"shadow/{name}": _goal_on_achieved for name in ("reach", "block", "egg", "pen")},
    "adroit/door": lambda env: _set_qpos(env, "door_hinge", 1.40),
    "adroit/hammer": lambda env: _set_qpos(env, "nail_dir", 0.09),
    "adroit/pen": _pen_aligned,
    "adroit/relocate": _ball_on_target,
    "hopper/forward": _torso_forward(2.1),
    "halfcheetah/forward": _torso_forward(20.1),
    "walker2d/forward": _torso_forward(3.1),
    "ant/forward": _torso_forward(3.1),
    "hopper/front_flip": _pitch(2 * math.pi + 0.05),
    "hopper/back_flip": _pitch(-2 * math.pi - 0.05),
}
"""How to put each task's simulator into a state its rule accepts (no scripted policy)."""


@pytest.mark.parametrize("task_id", sorted(HOLDING))
def test_a_state_the_rule_accepts_has_progress_one_and_random_actions_less(task_id):
    task = get_task(task_id)
    env = task.make_env(seed=SEED)
    try:
        env.reset(seed=SEED)
        first = task.view(env)
        before = task.success_rule.progress(first)
        HOLDING[task_id](env)
        view = task.view(env, first)
    finally:
        env.close()
    assert task.success_rule(view), "the state set in the simulator meets the rule"
    assert _graded_whole(task, view) and _graded_whole(task, first) == task.success_rule(first)
    assert task.success_rule.progress(view) == 1.0
    assert (before == 1.0) == task.success_rule(first) and 0.0 <= before <= 1.0
    random, seen = _random_progress(task)
    assert all((p == 1.0) == holds for p, holds in seen), "progress is 1 exactly where the rule holds"
    assert all(0.0 <= p <= 1.0 for p, _ in seen)
    assert random < 1.0


@pytest.mark.parametrize("task_id", ["franka/reach", "franka/push", "franka/pick_and_place"])
def test_franka_scripted_policy_ranks_above_random(task_id):
    task = get_task(task_id)
    env = task.make_env(seed=SEED)
    policy = task.scripted_policy()
    try:
        obs, _ = env.reset(seed=SEED)
        view, progress = task.view(env), []
        for _ in range(task.max_episode_steps):
            obs, _, terminated, truncated, _ = env.step(policy(obs))
            view = task.view(env, view)
            progress.append(task.success_rule.progress(view))
            assert (progress[-1] == 1.0) == task.success_rule(view)
            if terminated or truncated:
                break
    finally:
        env.close()
    scripted = _episode_progress(progress, task.success_mode)
    random, _ = _random_progress(task)
    assert scripted == 1.0 > random


def test_progress_is_graded_by_the_rules_threshold():
    """Fetch push with the block twice the rule's distance from the goal: progress DISTANCE / distance = 0.5."""
    task = get_task("fetch/push")
    env = task.make_env(seed=SEED)
    try:
        env.reset(seed=SEED)
        raw = env.unwrapped
        raw.goal = np.asarray(raw._get_obs()["achieved_goal"], dtype=np.float64) + np.array([0.1, 0.0, 0.0])
        view = task.view(env)
    finally:
        env.close()
    assert task.success_rule.progress(view) == pytest.approx(0.5, abs=1e-9)


def test_ant_rules_grade_each_condition():
    """ant/wave_leg and ant/lie_down (no scripted policy, states built as tests/sim_envs/test_locomotion_success.py
    does): the accepted state reads 1, the same state with one condition broken reads between 0 and 1."""
    wave, lie = get_task("ant/wave_leg"), get_task("ant/lie_down")
    env = wave.make_env(seed=0)
    try:
        env.reset(seed=0)
        view = wave.view(env)
        for _ in range(300):
            env.step(np.zeros(8))
            view = wave.view(env, view)
    finally:
        env.close()
    raised = view.foot_positions.copy()
    raised[0, 2] = 0.35
    velocities = view.joint_velocities.copy()
    velocities[0] = 2.0
    waving = dataclasses.replace(view, foot_positions=raised, joint_velocities=velocities)
    assert wave.success_rule.progress(waving) == 1.0
    still = dataclasses.replace(view, foot_positions=raised)
    assert 0.5 < wave.success_rule.progress(still) < 1.0
    assert lie.success_rule(view) and lie.success_rule.progress(view) == 1.0
    flipped = dataclasses.replace(view, torso=dataclasses.replace(view.torso, up_vector=np.array([0.0, 0.0, -1.0])))
    assert 0.5 < lie.success_rule.progress(flipped) < 1.0
    for task in (wave, lie):  # random actions may wave a leg by chance: here only "1 exactly where the rule holds"
        _, seen = _random_progress(task)
        assert all((p == 1.0) == holds for p, holds in seen) and len({p for p, _ in seen}) > 1


def test_own_robot_scripted_push_ranks_above_random():
    load_task_file(TASK_FILE)
    task = get_task("planar_arm/push_puck")
    env = task.make_env(seed=SEED)
    policy = task.scripted_policy()
    try:
        obs, _ = env.reset(seed=SEED)
        view, progress = task.view(env), []
        done = False
        while not done:
            obs, _, terminated, truncated, _ = env.step(policy(obs))
            view = task.view(env, view)
            progress.append(task.success_rule.progress(view))
            assert (progress[-1] == 1.0) == task.success_rule(view)
            done = terminated or truncated
    finally:
        env.close()
    random, seen = _random_progress(task, steps=task.max_episode_steps)
    assert _episode_progress(progress, task.success_mode) == 1.0 > random
    assert all((p == 1.0) == holds for p, holds in seen)


def test_a_training_env_skips_the_grading_an_evaluation_env_does():
    """Only evaluations read progress, so the training env (`measure_progress=False`) leaves it out of `info`; the same
    steps in an evaluation env are graded."""
    task = get_task("metaworld/reach-v3")
    infos = {}
    for measure in (True, False):
        env = make_task_env(task, SparseReward(), seed=0, measure_progress=measure)
        try:
            env.reset(seed=0)
            infos[measure] = env.step(np.zeros(4))[4]
        finally:
            env.close()
    assert 0.0 <= infos[True]["rule_progress"] <= 1.0 and "step_progress" in infos[True]
    assert "rule_progress" not in infos[False] and "step_progress" not in infos[False]
