"""Every task resets, steps and reads its view; the view's values equal the simulator's."""

import dataclasses
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from compile_cache import pytest_temp_root

from sim_envs import get_task


def _check_view_types(view, view_class):
    assert isinstance(view, view_class)
    for field in dataclasses.fields(view):
        value = getattr(view, field.name)
        if isinstance(value, np.ndarray):
            assert np.all(np.isfinite(value)), field.name
            assert not value.flags.writeable, f"{field.name} must be read-only"


def test_every_task_resets_steps_and_reads_its_view(all_tasks):
    for task in all_tasks:
        env = task.make_env(seed=0)
        try:
            env.reset(seed=0)
            view = task.view(env)
            _check_view_types(view, task.view_class)
            assert view.episode_step == 0 and view.dt > 0
            for _ in range(3):
                _, _, terminated, truncated, info = env.step(env.action_space.sample())
                view = task.view(env, view)
                assert isinstance(task.is_success(view, info), bool)
            assert view.episode_step == 3
        finally:
            env.close()


@pytest.mark.parametrize("task_id", ["metaworld/drawer-open-v3", "fetch/push", "franka/pick_and_place", "adroit/door", "shadow/block", "hopper/forward", "ant/wave_leg"])
def test_each_family_renders_frames(task_id):
    task = get_task(task_id)
    env = task.make_env(render_mode="rgb_array", seed=0, render_size=64)
    try:
        env.reset(seed=0)
        env.step(env.action_space.sample())
        frame = env.render()
        assert frame.shape == (64, 64, 3) and frame.std() > 0
    finally:
        env.close()


def test_metaworld_view_equals_simulator():
    task = get_task("metaworld/pick-place-v3")
    env = task.make_env(seed=3)
    obs, _ = env.reset(seed=3)
    view = task.view(env)
    policy = task.scripted_policy()
    for _ in range(40):
        obs, *_ = env.step(policy(obs))
        view = task.view(env, view)
        # MetaWorld's own observation is built from the same simulator state
        np.testing.assert_allclose(view.robot.hand_position, obs[0:3], atol=1e-12)
        assert view.robot.gripper_openness == pytest.approx(obs[3], abs=1e-12)
        np.testing.assert_allclose(view.obj.position, obs[4:7], atol=1e-12)
        np.testing.assert_allclose(view.goal_position, obs[36:39], atol=1e-12)
        np.testing.assert_allclose(view.robot.ee_position, env.unwrapped.tcp_center, atol=1e-12)
    assert view.robot.init_ee_position is not None
    with pytest.raises(ValueError):
        view.obj.position[0] = 1.0  # reward code cannot write through the view


def test_metaworld_seeding_is_reproducible():
    task = get_task("metaworld/push-v3")
    a = task.make_env(seed=1).reset(seed=7)[0]
    b = task.make_env(seed=2).reset(seed=7)[0]
    c = task.make_env(seed=2).reset(seed=8)[0]
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_fetch_view_equals_simulator():
    task = get_task("fetch/pick_and_place")
    env = task.make_env(seed=0)
    obs, _ = env.reset(seed=0)
    view = task.view(env)
    for _ in range(5):
        obs, *_ = env.step(env.action_space.sample())
        view = task.view(env, view)
        np.testing.assert_allclose(view.robot.ee_position, obs["observation"][0:3], atol=1e-12)
        np.testing.assert_allclose(view.obj.position, obs["achieved_goal"], atol=1e-12)
        np.testing.assert_allclose(view.goal_position, obs["desired_goal"], atol=1e-12)
        assert view.robot.gripper_width == pytest.approx(obs["observation"][9] + obs["observation"][10])


@pytest.mark.parametrize("task_id", ["hopper/forward", "walker2d/forward", "halfcheetah/forward"])
def test_planar_view_equals_simulator(task_id):
    task = get_task(task_id)
    env = task.make_env(seed=0)
    env.reset(seed=0)
    view = task.view(env)
    data = env.unwrapped.data
    for _ in range(5):
        _, _, terminated, _, info = env.step(env.action_space.sample())
        view = task.view(env, view)
        assert view.torso.x_velocity == pytest.approx(info["x_velocity"], abs=1e-9)
        assert view.torso.pitch == data.qpos[2]
        np.testing.assert_array_equal(view.joint_angles, data.qpos[3:])
        np.testing.assert_array_equal(view.joint_velocities, data.qvel[3:])
        if terminated:
            break
    import mujoco

    mujoco.mj_kinematics(env.unwrapped.model, data)  # fresh body positions for the comparison
    np.testing.assert_allclose(view.torso.position, data.body("torso").xpos, atol=1e-9)


def test_ant_view_equals_simulator():
    task = get_task("ant/forward")
    env = task.make_env(seed=0)
    env.reset(seed=0)
    view = task.view(env)
    data = env.unwrapped.data
    env.step(env.action_space.sample())
    view = task.view(env, view)
    np.testing.assert_array_equal(view.torso.position, data.qpos[:3])
    np.testing.assert_array_equal(view.torso.quaternion, data.qpos[3:7])
    np.testing.assert_array_equal(view.joint_angles, data.qpos[7:15])
    # the up vector is the third column of the torso's rotation matrix
    np.testing.assert_allclose(view.torso.up_vector, data.body("torso").xmat.reshape(3, 3)[:, 2], atol=1e-9)
    assert view.foot_positions.shape == (4, 3)
    for _ in range(100):  # legs start horizontal (outside the ankle range) and spring down
        env.step(np.zeros(8))
        view = task.view(env, view)
    assert np.all(view.foot_positions[:, 2] < 0.15), "standing feet touch the floor"
    assert np.all(view.foot_positions[:, 2] < view.torso.position[2])


def test_flatten_applies_only_to_dict_observations():
    from policies.reward_program import SparseReward
    from policies.task_env import make_task_env

    fetch = make_task_env(get_task("fetch/reach"), SparseReward(), seed=0)
    assert isinstance(fetch.observation_space, gym.spaces.Box)
    fetch.close()


def test_metaworld_quaternion_follows_set_state():
    """The reader may reuse MetaWorld's per-step quaternion copy only while it is current."""
    task = get_task("metaworld/pick-place-v3")
    env = task.make_env(seed=0)
    obs, _ = env.reset(seed=0)
    raw = env.unwrapped
    policy = task.scripted_policy()
    for _ in range(5):
        obs, *_ = env.step(policy(obs))
    qpos, qvel = raw.data.qpos.copy(), raw.data.qvel.copy()
    qpos[9:12] += [0.05, -0.03, 0.0]  # move the puck: MetaWorld's stored copy is now stale
    raw.set_state(qpos, qvel)
    view = task.view(env, task.view(env))
    np.testing.assert_array_equal(view.obj.quaternion, np.asarray(raw._get_quat_objects())[:4])
    np.testing.assert_array_equal(view.obj.position, np.asarray(raw._get_pos_objects())[:3])


def test_each_env_gets_its_own_copy_of_a_model_compiled_once_equal_to_a_fresh_compilation():
    """Training jobs, `t2r train` and the test processes compile each model file once (sim_envs.model_cache): every env
    must still get a model of its own (an env that moves a body moves it in its copy only), and the compiled model each
    copy comes from must stay what compiling the file afresh gives."""
    import mujoco

    compile_afresh = getattr(mujoco.MjModel.from_xml_path, "__wrapped__", None)
    if compile_afresh is None:
        pytest.skip("T2R_TEST_COMPILE_CACHE=0: every model is compiled afresh")
    task = get_task("metaworld/pick-place-v3")
    first, second = task.make_env(seed=0), task.make_env(seed=0)
    try:
        a, b = first.unwrapped.model, second.unwrapped.model
        assert a is not b
        before = b.body_pos.copy()
        a.body_pos[1] += 1.0  # one env edits its model (as MetaWorld's resets place goals in site_pos)
        assert np.array_equal(b.body_pos, before), "the other env's model did not move"
        path = first.unwrapped.fullpath
        cached, fresh = mujoco.MjModel.from_xml_path(path), compile_afresh(path)  # after both envs edited their copies
        for field in ("body_pos", "body_quat", "body_mass", "geom_size", "geom_pos", "geom_friction", "jnt_range", "dof_damping",
                      "actuator_gear", "actuator_ctrlrange", "site_pos"):
            assert np.array_equal(getattr(cached, field), getattr(fresh, field)), field
        assert cached.opt.timestep == fresh.opt.timestep
        assert (cached.nq, cached.nv, cached.nbody, cached.ngeom) == (fresh.nq, fresh.nv, fresh.nbody, fresh.ngeom)
    finally:
        first.close()
        second.close()


def test_the_test_processes_compile_every_time_only_what_tests_write(tmp_path):
    """The test processes compile afresh only under pytest's temporary root, where tests write their own robots; the
    installed libraries' scenes are compiled once wherever the checkout and its environment live. The root was once the
    whole temporary folder, so a fresh clone in /tmp compiled every shipped scene again for every env."""
    import mujoco

    from sim_envs import model_cache

    if getattr(mujoco.MjModel.from_xml_path, "__wrapped__", None) is None:
        pytest.skip("T2R_TEST_COMPILE_CACHE=0: every model is compiled afresh")
    root = pytest_temp_root() + os.sep
    assert os.path.realpath(tmp_path).startswith(root)
    env = get_task("fetch/reach").make_env(seed=0)
    env.close()
    scene = os.path.realpath(env.unwrapped.fullpath)
    assert not scene.startswith(root) and not os.path.realpath(__file__).startswith(root)
    assert any(key[0] == scene for key in model_cache._compiled), f"{scene} was compiled afresh, not from the cache"


MODEL_CACHE_PROBE = """
import sys
from pathlib import Path
import mujoco
from sim_envs.model_cache import compile_each_file_once

compiled = []
real = mujoco.MjModel.from_xml_path
mujoco.MjModel.from_xml_path = staticmethod(lambda *args: compiled.append(args[0]) or real(*args))
compile_each_file_once()
compile_each_file_once()  # a second call changes nothing
scene = Path(sys.argv[1])
one, two = mujoco.MjModel.from_xml_path(str(scene)), mujoco.MjModel.from_xml_path(str(scene))
scene.write_text(scene.read_text().replace("<!--more-->", '<body pos="0 0 1"><geom size="0.1"/></body>'))
edited = mujoco.MjModel.from_xml_path(str(scene))
print(len(compiled), one is not two, one.nbody, two.nbody, edited.nbody)
"""


def test_a_model_file_is_compiled_once_per_process_and_again_once_edited(tmp_path):
    """In a process of its own (the test processes' cache compiles their temporary files every time): the same file twice
    is one compilation and two models; the file rewritten is compiled again."""
    scene = tmp_path / "scene.xml"
    scene.write_text('<mujoco><worldbody><body><geom size="0.1"/></body><!--more--></worldbody></mujoco>')
    done = subprocess.run([sys.executable, "-c", MODEL_CACHE_PROBE, str(scene)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "True", "2", "2", "3"]
