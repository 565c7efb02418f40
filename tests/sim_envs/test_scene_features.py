"""The scene's fixed features (issue 40 item 1): read from MuJoCo's geoms, stated in the prompt, related to where the
object ended by the analysis.

Each feature's box is checked against the geoms' own shapes (box corners, mesh vertices, spheres and cylinders from
their sizes: not MuJoCo's precomputed boxes the reader uses), every fixed body of a MetaWorld scene must be described,
moving a feature's body in the model moves the feature (nothing typed in), the shipped file is today's measurement,
and a trajectory built to end against the wall, past it, inside the net or off the table is said to.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mujoco
import numpy as np
import pytest

from policies.evaluate import run_episode
from policies.reward_program import SparseReward
from policies.task_env import make_task_env
from sim_envs import get_task, list_tasks, load_task_file, render_view_doc
from sim_envs.scene_features import (
    describe_feature,
    episode_features,
    feature_body,
    feature_geoms,
    measure_scene,
    read_features,
    scene_facts,
    shipped_scene,
)
from text2reward.feedback.trajectory import episode_facts, trajectory_analysis

DESCRIBED = [t.id for t in list_tasks() if t.scene_features is not None]
ROBOT_ROOTS = {"base", "mocap", "right_hand", "pedestal"}
"""MetaWorld's Sawyer and its stand: the robot, never a scene feature."""
OWN_ROBOT = Path(__file__).resolve().parents[2] / "examples" / "own_robot" / "planar_arm_task.py"


def _true_box(model, data, geoms: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of the geoms' world points: box corners, mesh vertices, spheres, capsules and cylinders."""
    points = []
    for g in geoms:
        rotation, centre, size = data.geom_xmat[g].reshape(3, 3), data.geom_xpos[g], model.geom_size[g]
        kind = model.geom_type[g]
        if kind == mujoco.mjtGeom.mjGEOM_BOX:
            local = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * size
        elif kind == mujoco.mjtGeom.mjGEOM_MESH:
            mesh = model.geom_dataid[g]
            start, count = model.mesh_vertadr[mesh], model.mesh_vertnum[mesh]
            local = model.mesh_vert[start : start + count]
        elif kind == mujoco.mjtGeom.mjGEOM_SPHERE:
            points += [centre - size[0], centre + size[0]]
            continue
        elif kind in (mujoco.mjtGeom.mjGEOM_CYLINDER, mujoco.mjtGeom.mjGEOM_CAPSULE):
            radius, half = size[0], size[1] + (size[0] if kind == mujoco.mjtGeom.mjGEOM_CAPSULE else 0.0)
            axis = rotation[:, 2]
            reach = np.sqrt(np.clip(1 - axis**2, 0, 1)) * radius + np.abs(axis) * half
            points += [centre - reach, centre + reach]
            continue
        else:
            raise AssertionError(f"geom type {kind} not covered by this test")
        points += list(centre + local @ rotation.T)
    array = np.array(points)
    return array.min(axis=0), array.max(axis=0)


def _assert_is_a_hole(model, data, geoms: list[int], hole) -> None:
    """No geom reaches into the hole's box (its floor is some geom's top or the plates' bottom), its top is the
    plates' top, and each of its four sides lies on a plate's edge."""
    boxes = [_true_box(model, data, [g]) for g in geoms]
    inner_low, inner_high = hole.low + 1e-4, hole.high - 1e-4
    for low, high in boxes:
        assert not (np.all(low < inner_high) and np.all(high > inner_low)), "a geom fills part of the hole"
    assert hole.high[2] == pytest.approx(max(high[2] for _, high in boxes), abs=1e-6)
    for axis in (0, 1):
        for side, edges in ((hole.low[axis], [high[axis] for _, high in boxes]), (hole.high[axis], [low[axis] for low, _ in boxes])):
            assert min(abs(side - e) for e in edges) < 1e-6, f"a side of the hole ({'xy'[axis]} {side:.3f}) is on no plate's edge"


def _reset(task_id: str):
    task = get_task(task_id)
    env = task.make_env(seed=0)
    env.reset(seed=0)
    return task, env


@pytest.mark.parametrize("task_id", DESCRIBED)
def test_each_feature_is_the_box_of_its_geoms_and_moves_with_its_body(task_id: str):
    """The read box equals the geoms' true extent; moving the feature's body (or geom) in the model moves it by
    exactly that much: the numbers come from the simulator, not from anything typed in."""
    task, env = _reset(task_id)
    try:
        model, data = env.unwrapped.model, env.unwrapped.data
        mujoco.mj_forward(model, data)
        features = episode_features(task, env)
        assert [f.name for f in features] == [s.name for s in task.scene_features]
        for spec, feature in zip(task.scene_features, features):
            if spec.kind == "hole":
                _assert_is_a_hole(model, data, feature_geoms(model, spec), feature)
                continue
            low, high = _true_box(model, data, feature_geoms(model, spec))
            assert np.allclose(feature.low, low, atol=1e-6) and np.allclose(feature.high, high, atol=1e-6), spec.name
        shift = np.array([0.03, -0.02, 0.01])
        for spec, before in zip(task.scene_features, features):
            body = feature_body(model, spec)
            assert body != 0, f"{spec.name}: a geom of the world body cannot be moved here"
            rotation = data.xmat[int(model.body_parentid[body])].reshape(3, 3)
            model.body_pos[body] += rotation.T @ shift  # in the parent's frame: the world moves by `shift`
            mujoco.mj_forward(model, data)
            (after,) = read_features(model, data, (spec,))
            assert np.allclose(np.subtract(after.centre, before.centre), shift, atol=1e-6), spec.name
            assert np.allclose(after.half_size, before.half_size, atol=1e-6), spec.name
            model.body_pos[body] -= rotation.T @ shift
            mujoco.mj_forward(model, data)
    finally:
        env.close()


@pytest.mark.parametrize("task_id", [t.id for t in list_tasks() if t.family == "metaworld"])
def test_every_fixed_body_of_a_metaworld_scene_is_described(task_id: str):
    """Each body fixed to the world with collision geoms (not the robot, not on a joint) is some feature's: a wall or
    a net cannot be left out of the prompt silently."""
    task, env = _reset(task_id)
    try:
        model = env.unwrapped.model
        covered = {g for spec in task.scene_features for g in feature_geoms(model, spec)}
        missing = []
        for body in range(1, model.nbody):
            if int(model.body_parentid[body]) != 0 or model.body(body).name in ROBOT_ROOTS or model.body_jntnum[body]:
                continue
            solid = [g for g in range(model.ngeom) if int(model.geom_bodyid[g]) == body
                     and (model.geom_contype[g] or model.geom_conaffinity[g])]
            if solid and not set(solid) <= covered:
                missing.append(model.body(body).name or f"body {body} (unnamed)")
        assert not missing, f"{task_id}: fixed bodies with collision geoms no feature describes: {missing}"
    finally:
        env.close()


def test_a_walled_feature_states_its_open_side_and_turning_it_turns_the_side():
    """Soccer's net opens toward the robot (-y), a bin and the box upward (+z); the net turned half a turn about z in
    the model opens on +y: the side is measured from the geoms."""
    task, env = _reset("metaworld/soccer-v3")
    try:
        model, data = env.unwrapped.model, env.unwrapped.data
        net = next(f for f in episode_features(task, env) if f.name == "net")
        assert net.open_sides == ("-y",)
        body = model.body("goal_whole").id
        model.body_quat[body] = [0.0, 0.0, 0.0, 1.0]  # half a turn about z
        mujoco.mj_forward(model, data)
        turned = next(f for f in episode_features(task, env) if f.name == "net")
        assert turned.open_sides == ("+y",)
    finally:
        env.close()
    for task_id, name in (("metaworld/bin-picking-v3", "goal_bin"), ("metaworld/box-close-v3", "box")):
        task, env = _reset(task_id)
        try:
            assert next(f for f in episode_features(task, env) if f.name == name).open_sides == ("+z",)
        finally:
            env.close()
    assert "net (a goal net; MuJoCo body `goal_whole`)" in render_view_doc(get_task("metaworld/soccer-v3"))
    assert "open on its -y side" in render_view_doc(get_task("metaworld/soccer-v3"))


def test_shipped_scene_features_match_a_fresh_measurement():
    """scene_features.json (what prompts state) is what the models give today, for every built-in described task."""
    shipped = shipped_scene()
    built_in = [t for t in list_tasks() if t.scene_features is not None and t.source == "builtin"]
    assert {t.id for t in built_in} == set(shipped), "regenerate with `python -m sim_envs.shipped_facts`"
    for task in built_in:
        assert measure_scene(task) == shipped[task.id], task.id


def test_the_prompt_states_each_feature_and_a_task_without_any_says_none():
    push_wall = get_task("metaworld/push-wall-v3")
    doc = render_view_doc(push_wall)
    for fact in scene_facts(push_wall) or []:
        assert describe_feature(fact) in doc
    wall = next(f for f in measure_scene(push_wall) if f["name"] == "wall")
    assert "fixed" in wall["placement"] and f"# - {describe_feature(wall)}" in doc
    soccer = render_view_doc(get_task("metaworld/soccer-v3"))
    assert "net (a goal net; MuJoCo body `goal_whole`): centre at `goal_position` + (" in soccer  # it moves with the goal
    sweep = render_view_doc(get_task("metaworld/sweep-v3"))
    assert "top at z 0.000, edges at x -0.700 and 0.700" in sweep and "need not fall" in sweep
    bare = dataclasses.replace(get_task("metaworld/push-v3"), scene_features=())
    assert "Fixed scene features" in render_view_doc(bare) and ": none (" in render_view_doc(bare)
    assert "Fixed scene features" not in render_view_doc(get_task("adroit/door"))  # not described: no line at all


def test_the_own_robot_example_states_its_table_measured_from_its_model():
    load_task_file(OWN_ROBOT)
    task = get_task("planar_arm/push_puck")
    doc = render_view_doc(task)
    env = task.make_env(seed=0)
    try:
        env.reset(seed=0)
        model = env.unwrapped.model
        table = model.geom("table").id
        low = model.geom_pos[table] - model.geom_size[table]
        high = model.geom_pos[table] + model.geom_size[table]
    finally:
        env.close()
    assert f"top at z {high[2]:.3f}, edges at x {low[0]:.3f} and {high[0]:.3f}, y {low[1]:.3f} and {high[1]:.3f}" in doc


# --------------------------------------------------------------------------- the analysis


def _episode(task_id: str, seed: int = 0):
    """A real reset's views and features, the hand held still for 3 steps."""
    task = get_task(task_id)
    env = make_task_env(task, SparseReward(), seed=seed)
    try:
        episode = run_episode(env, lambda obs: np.zeros(env.action_space.shape), seed=seed, record_views=True)
    finally:
        env.close()
    return task, episode


def _moved(episode, path: list[np.ndarray]):
    """The episode with its object's positions replaced by `path` (one per view, the rest held at the last)."""
    views = []
    for i, view in enumerate(episode.views):
        position = np.asarray(path[min(i, len(path) - 1)], dtype=float)
        views.append(dataclasses.replace(view, obj=dataclasses.replace(view.obj, position=position)))
    return dataclasses.replace(episode, views=views)


def test_an_object_that_ends_against_the_wall_is_said_to_be_blocked_by_it():
    task, episode = _episode("metaworld/push-wall-v3")
    wall = next(f for f in episode.scene if f.name == "wall")
    start = np.asarray(episode.views[0].obj.position)
    assert start[1] < wall.low[1]  # the puck starts in front of the wall (the robot's side)
    stop = np.array([wall.centre[0], wall.low[1] - 0.02, start[2]])  # the puck's centre 2 cm before the wall's face
    blocked = _moved(episode, [start, (start + stop) / 2, stop])
    facts = episode_facts(blocked.views, blocked.scene)
    assert facts["object_blocked_by_wall"] is True and facts["object_past_wall"] is False
    assert facts["object_wall_gap"] == pytest.approx(0.02, abs=1e-9)
    text = trajectory_analysis(task, [blocked])
    assert "object blocked by the wall (ended on the side it started on, within 4 cm of it): 1 of 1 episodes" in text
    assert "object's distance to the wall at the end (m; 0 inside its box): 0.020" in text
    beyond = np.array([wall.centre[0], wall.high[1] + 0.05, start[2]])
    crossed = episode_facts(_moved(episode, [start, beyond]).views, episode.scene)
    assert crossed["object_past_wall"] is True and crossed["object_blocked_by_wall"] is False
    assert "object ended past the wall" in trajectory_analysis(task, [_moved(episode, [start, beyond])])
    hand = np.asarray(episode.views[0].robot.ee_position)
    over = [dataclasses.replace(v, robot=dataclasses.replace(v.robot, ee_position=beyond + [0, 0, 0.2])) for v in episode.views[1:]]
    reached = episode_facts([episode.views[0], *over], episode.scene)
    assert hand[1] < wall.low[1] and reached["gripper_past_wall"] is True and reached["gripper_blocked_by_wall"] is False
    assert "gripper ended past the wall (on its other side from where it started): 1 of 1 episodes" in trajectory_analysis(
        task, [dataclasses.replace(episode, views=[episode.views[0], *over])])


def test_a_ball_inside_the_net_and_a_puck_off_the_table_are_said_so():
    task, episode = _episode("metaworld/soccer-v3")
    net = next(f for f in episode.scene if f.name == "net")
    start = np.asarray(episode.views[0].obj.position)
    inside = np.array([net.centre[0], net.centre[1], start[2]])
    assert episode_facts(_moved(episode, [start, inside]).views, episode.scene)["object_in_net"] is True
    assert episode_facts(episode.views, episode.scene)["object_in_net"] is False  # the ball did not move
    assert "object ended inside the net (its tracked point within that box): 1 of 1 episodes" in trajectory_analysis(
        task, [_moved(episode, [start, inside])])
    task, episode = _episode("metaworld/hand-insert-v3")
    hole = next(f for f in episode.scene if f.name == "hole")
    start = np.asarray(episode.views[0].obj.position)
    dropped = _moved(episode, [start, np.array([hole.centre[0], hole.centre[1], hole.low[2] + 0.02])])
    assert episode_facts(dropped.views, episode.scene)["object_in_hole"] is True
    assert episode_facts(episode.views, episode.scene)["object_in_hole"] is False
    task, episode = _episode("metaworld/sweep-v3")
    table = next(f for f in episode.scene if f.name == "table")
    start = np.asarray(episode.views[0].obj.position)
    off = np.array([table.high[0] + 0.05, start[1], start[2] - 0.3])
    assert episode_facts(_moved(episode, [start, off]).views, episode.scene)["object_off_table"] is True
    assert episode_facts(episode.views, episode.scene)["object_off_table"] is False


def test_the_contrast_states_a_relation_as_a_share_of_episodes():
    """A candidate's relation facts are averaged into shares; the round's contrast words them as such, never "0.700"."""
    from text2reward.feedback.compose import separating_facts

    lines = separating_facts({"object_blocked_by_wall": 0.7, "object_wall_gap": 0.02}, {"object_blocked_by_wall": 0.0, "object_wall_gap": 0.2})
    assert ("object blocked by the wall (ended on the side it started on, within 4 cm of it): 0% of episodes here, "
            "70% of episodes for the best") in lines
