"""Every number a prompt states about a task is true: checked against MuJoCo, not against the view's own code.

Why: the feedback loop learns from what the prompt says. A scale hint measured on a stale reset state, an
`init_position` that is another point of the object, or a displacement measured from it, tell the model that
a dial turned 14 cm when it never moved. Here, per family, every fact of the trajectory analysis on short
rollouts (the task's scripted policy where it has one, and random actions) and every scale hint is compared
with a recomputation from the raw simulator state (sim_envs.ground_truth): fresh kinematics from qpos, points
read off named MuJoCo elements.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from policies.reward_program import SparseReward
from policies.task_env import make_task_env
from sim_envs import get_task, list_tasks
from sim_envs.ground_truth import Recomputer, Rollout, record, tolerance, true_facts, true_points
from sim_envs.object_facts import measure_object_facts, shipped_object_facts, tracked_points
from sim_envs.scale_hints import RESETS, scale_hints
from sim_envs.task import Task
from text2reward.feedback.trajectory import (
    FELL_M,
    LIFTED_M,
    MOVED_M,
    NEAR_M,
    PROGRESS_M,
    describe_behaviour,
    direction_facts,
    episode_facts,
    trajectory_analysis,
)
from text2reward.generation.prompting import build_initial_messages

THRESHOLDS = {"MOVED_M": MOVED_M, "LIFTED_M": LIFTED_M, "NEAR_M": NEAR_M, "FELL_M": FELL_M, "PROGRESS_M": PROGRESS_M}
SCRIPTED_STEPS = 80
RANDOM_STEPS = 25
UNCHECKED = re.compile(r"^foot_")
"""Facts no recomputation covers: Ant's foot heights (the view's own capsule-tip geometry)."""
FAMILIES = sorted({task.family for task in list_tasks()})


def _mismatches(task: Task, stated: dict[str, float | bool], true: dict[str, float | bool]) -> list[str]:
    """Each stated fact that its recomputation contradicts, or that has none."""
    tol, wrong = tolerance(task), []
    for key, value in stated.items():
        if UNCHECKED.match(key):
            continue
        if key not in true:
            wrong.append(f"{key}: stated, not recomputed")
        elif isinstance(value, bool):
            if value != true[key]:
                wrong.append(f"{key}: stated {value}, true {true[key]}")
        elif abs(value - float(true[key])) > tol:
            wrong.append(f"{key}: stated {value:.6f}, true {float(true[key]):.6f}")
    return wrong


def _rollouts(task: Task) -> list[Rollout]:
    """A scripted rollout where the task has a policy, and a random one, on the env training uses."""
    env = make_task_env(task, SparseReward(), seed=0, flatten=False) if task.is_multi_goal else make_task_env(task, SparseReward(), seed=0)
    env.action_space.seed(0)
    try:
        rollouts = [record(env, lambda obs: env.action_space.sample(), seed=11, steps=RANDOM_STEPS)]
        if task.has_scripted_policy:
            policy = task.scripted_policy()
            rollouts.append(record(env, policy, seed=12, steps=SCRIPTED_STEPS))
        return rollouts
    finally:
        env.close()


def _first_states(task: Task) -> list[Rollout]:
    """The first state of the seeded episodes the hints are measured on, as training sees it."""
    env = make_task_env(task, SparseReward(), seed=0)
    try:
        return [record(env, lambda obs: None, seed=seed, steps=0) for seed in range(RESETS)]
    finally:
        env.close()


def _path(view: object, dotted: str) -> object:
    for part in dotted.split("."):
        view = getattr(view, part)
    return view


def _hint_mismatches(task: Task) -> list[str]:
    """Each stated [min, max] that the recomputed first-state distances contradict (to the file's 1 mm rounding)."""
    hints, wrong = scale_hints(task), []
    if not hints:
        return wrong
    firsts = _first_states(task)
    recomputer = Recomputer(firsts[0].model)
    for label, a, b in task.scale_points:
        distances = []
        for rollout in firsts:
            points, view = true_points(task, recomputer, rollout.states[0]), rollout.views[0]
            first = points.get(a, _path(view, a))
            second = points.get(b, _path(view, b))
            distances.append(float(np.linalg.norm(np.asarray(first) - np.asarray(second))))
        low, high = hints[label]
        slack = 0.0006 + tolerance(task)
        if abs(min(distances) - low) > slack or abs(max(distances) - high) > slack:
            wrong.append(f"{label}: stated {low}-{high}, true {min(distances):.4f}-{max(distances):.4f}")
    return wrong


def _start_mismatches(task: Task, rollout: Rollout) -> list[str]:
    """The first view's tracked points and each `init_position` against the recomputed first state."""
    recomputer, wrong = Recomputer(rollout.model), []
    first = true_points(task, recomputer, rollout.states[0])
    for path, true in first.items():
        if path.startswith("torso.") or path == "goal_position":
            continue
        seen = np.asarray(_path(rollout.views[0], path))
        if np.linalg.norm(seen - true) > tolerance(task):
            wrong.append(f"{path} in the first view is {np.linalg.norm(seen - true):.4f} m from the simulator's")
    for field in tracked_points(task.id):
        for view in rollout.views:
            init = np.asarray(_path(view, f"{field}.init_position"))
            if np.linalg.norm(init - first[f"{field}.position"]) > tolerance(task):
                wrong.append(f"{field}.init_position is not the tracked point's start")
                break
    return wrong


@pytest.mark.parametrize("family", FAMILIES)
def test_every_stated_fact_matches_the_simulator(family: str):
    """Per family, every task: analysis facts on scripted and random rollouts, first-state points, every
    `init_position`, and every scale hint agree with the recomputation from raw MuJoCo state."""
    wrong: dict[str, list[str]] = {}
    checked = 0
    for task in (t for t in list_tasks() if t.family == family):
        problems = _hint_mismatches(task)
        for rollout in _rollouts(task):
            stated = episode_facts(rollout.views, rollout.scene)
            stated |= direction_facts(stated)  # the signs the contrast counts per episode
            problems += _mismatches(task, stated, true_facts(task, rollout, THRESHOLDS))
            problems += _start_mismatches(task, rollout)
            checked += len(stated)
        if problems:
            wrong[task.id] = problems
    assert checked > 0
    assert not wrong, wrong


def test_shipped_object_facts_match_a_fresh_measurement():
    """object_facts.json (what prompts state about object sizes) is what the models give today, for every task
    with a tracked object, and covers them all."""
    shipped = shipped_object_facts()
    tasks = [t for t in list_tasks() if tracked_points(t.id)]
    assert {t.id for t in tasks} == set(shipped), "regenerate with `python -m sim_envs.shipped_facts`"
    for task in tasks:
        assert measure_object_facts(task) == shipped[task.id], task.id


def test_every_object_task_prompt_states_its_object_size():
    for task_id in ("metaworld/dial-turn-v3", "metaworld/coffee-push-v3", "fetch/push", "adroit/relocate"):
        prompt = build_initial_messages(get_task(task_id))[1]["content"]
        assert "# Object sizes, measured in MuJoCo: `obj`" in prompt, task_id
    prompt = build_initial_messages(get_task("metaworld/dial-turn-v3"))[1]["content"]
    assert "spans 10.0 x 10.0 x 6.6 cm" in prompt  # the dial: 10 cm across; its tracked point 5 cm off its axis


@pytest.fixture(scope="module")
def dial() -> tuple[Task, Rollout, Rollout]:
    """dial-turn with the hand held still (the dial is not touched), and with the scripted policy."""
    task = get_task("metaworld/dial-turn-v3")
    env = make_task_env(task, SparseReward(), seed=0)
    try:
        still = record(env, lambda obs: np.zeros(4), seed=4, steps=60)
        turned = record(env, task.scripted_policy(), seed=4, steps=120)
    finally:
        env.close()
    return task, still, turned


def _knob_angle(rollout: Rollout, index: int) -> float:
    model = rollout.model
    return float(rollout.states[index].qpos[model.jnt_qposadr[model.joint("knob_Joint_1").id]])


def test_dial_turn_analysis_says_the_dial_did_not_turn_when_it_did_not(dial):
    task, still, _ = dial
    assert abs(_knob_angle(still, -1) - _knob_angle(still, 0)) < 1e-3  # the simulator: the knob never turned
    facts = episode_facts(still.views)
    assert facts["object_moved"] is False and facts["object_max_displacement"] < 0.002
    assert facts["object_goal_start"] == pytest.approx(facts["object_goal_final"], abs=0.002)
    assert facts["object_goal_start"] == pytest.approx(0.0854, abs=0.001)  # outside the 0.07 m success radius
    text = trajectory_analysis(task, [still.views], successes=[False])
    assert "object moved (> 2 cm): 0 of 1 episodes" in text
    assert "The object moved in 0 of 1 (by up to 0.0 cm)" in describe_behaviour(task, [still.views], [False])


def test_dial_turn_analysis_says_the_dial_turned_when_it_did(dial):
    task, _, turned = dial
    angle = abs(_knob_angle(turned, -1) - _knob_angle(turned, 0))
    assert angle > 0.5  # the scripted policy turned the knob (rad)
    facts = episode_facts(turned.views)
    chord = 2 * 0.05 * np.sin(min(angle, np.pi) / 2)  # how far a point 5 cm off the axis moves for that turn
    assert facts["object_moved"] is True
    assert facts["object_final_displacement"] == pytest.approx(chord, abs=0.002)


def test_start_is_the_tracked_point_where_metaworld_placement_is_another_point():
    """dial-turn (the dial's centre), plate-slide (the plate's base, z 0), stick-push (the thermos): each
    `init_position` is its own tracked point in the first state, the one the policy's first observation shows."""
    for task_id in ("metaworld/dial-turn-v3", "metaworld/plate-slide-v3", "metaworld/stick-push-v3", "metaworld/window-open-v3"):
        task = get_task(task_id)
        env = make_task_env(task, SparseReward(), seed=0)
        try:
            obs, _ = env.reset(seed=5)
            view = env.get_wrapper_attr("view")
            np.testing.assert_array_equal(view.obj.init_position, view.obj.position)
            np.testing.assert_allclose(obs[4:7], view.obj.position)  # the observation shows the same point
            env.step(np.zeros(4))
            after = env.get_wrapper_attr("view")
            assert np.linalg.norm(after.obj.position - view.obj.position) < 0.002, task_id  # reset was not stale
        finally:
            env.close()
