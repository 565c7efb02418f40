"""A person adds a task from a small Python file, with no change to the package."""

import json
import subprocess
import sys
import textwrap

import pytest

from sim_envs import get_task, load_task_file
from sim_envs.errors import TaskFileError

TASK_FILE = textwrap.dedent(
    '''
    from sim_envs import derive_task

    HOP_HIGH = derive_task(
        "hopper/forward",
        id="custom/hopper_jump",
        description="Make the hopper jump as high as it can.",
        is_success=lambda view, info: view.torso.position[2] > 1.6,
        success_doc="the torso rises above 1.6 m at any step",
        max_episode_steps=200,
        env_kwargs={"terminate_when_unhealthy": False},
        view_notes="the episode does not end when the hopper falls.",
    )
    '''
)


def test_task_file_registers_a_working_task(tmp_path):
    path = tmp_path / "my_task.py"
    path.write_text(TASK_FILE)
    (task,) = load_task_file(path)
    assert get_task("custom/hopper_jump") is task
    assert task.source == "user" and not task.has_expert_reward and task.family == "locomotion"
    env = task.make_env(seed=0)
    env.reset(seed=0)
    assert env.spec.max_episode_steps == 200
    view = task.view(env)
    assert not task.is_success(view, {})
    assert task.view_notes == "the episode does not end when the hopper falls."
    steps = 0
    done = False
    while not done:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        done, steps = terminated or truncated, steps + 1
    assert steps == 200  # no early termination: the env kwargs reached the env


def test_cli_lists_the_user_task(tmp_path):
    path = tmp_path / "my_task.py"
    path.write_text(TASK_FILE)
    out = subprocess.run(
        [sys.executable, "-m", "text2reward.cli", "tasks", "--json", "--task-file", str(path)],
        capture_output=True, text=True, check=True,
    )
    ids = {t["id"]: t for t in json.loads(out.stdout)}
    assert ids["custom/hopper_jump"]["source"] == "user"


@pytest.mark.parametrize(
    "content, message",
    [("x = 1\n", "defines no Task"), ("raise RuntimeError('boom')\n", "failed to run: RuntimeError: boom")],
)
def test_bad_task_files_say_what_to_fix(tmp_path, content, message):
    path = tmp_path / "bad.py"
    path.write_text(content)
    with pytest.raises(TaskFileError, match=message):
        load_task_file(path)
    with pytest.raises(TaskFileError, match="does not exist"):
        load_task_file(tmp_path / "missing.py")


def steps_until_done(env, action=None) -> tuple[int, bool]:
    """Steps until the episode ends, and whether it ended by truncation (the time limit)."""
    env.reset(seed=0)
    steps, done, truncated = 0, False, False
    while not done:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample() if action is None else action)
        done, steps = terminated or truncated, steps + 1
    return steps, truncated


@pytest.mark.parametrize(
    "base, steps, env_kwargs",
    [
        ("metaworld/reach-v3", 37, None),
        ("metaworld/reach-v3", 620, None),  # past MetaWorld's own cap of 500
        ("fetch/reach", 37, None),
        ("fetch/push", 73, None),  # past the registered 50
        ("halfcheetah/forward", 37, None),
        ("hopper/forward", 37, {"terminate_when_unhealthy": False}),
    ],
)
def test_derived_episode_length_is_honoured_by_every_family(base, steps, env_kwargs):
    from sim_envs import derive_task

    task = derive_task(base, id=f"custom/{base.replace('/', '_')}_{steps}", description="Same env, new length.",
                       is_success=lambda view, info: False, success_doc="never", max_episode_steps=steps, env_kwargs=env_kwargs)
    assert task.max_episode_steps == steps
    env = task.make_env(seed=0)
    try:
        assert steps_until_done(env) == (steps, True)
        assert steps_until_done(env) == (steps, True)  # and again after a reset
    finally:
        env.close()
    assert get_task(base).max_episode_steps != steps  # the base task keeps its own length


def test_an_episode_length_that_cannot_be_honoured_is_refused(monkeypatch):
    import dataclasses

    from sim_envs import derive_task, registry
    from sim_envs.errors import ConfigError

    base = get_task("fetch/reach")
    fixed = dataclasses.replace(base, id="custom/fixed_length_env", env_factory=lambda render_mode=None, seed=None: base.make_env())
    monkeypatch.setitem(registry._TASKS, fixed.id, fixed)  # registered for this test only
    with pytest.raises(ConfigError, match="takes no max_episode_steps, so its episode length cannot change"):
        derive_task("custom/fixed_length_env", id="custom/fixed_37", description="d", is_success=lambda v, i: False,
                    success_doc="never", max_episode_steps=37)
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ConfigError, match="positive whole number"):
            derive_task("fetch/reach", id="custom/bad_length", description="d", is_success=lambda v, i: False,
                        success_doc="never", max_episode_steps=bad)
    with pytest.raises(ConfigError, match="not in env_kwargs"):
        derive_task("fetch/reach", id="custom/bad_length", description="d", is_success=lambda v, i: False,
                    success_doc="never", max_episode_steps=37, env_kwargs={"max_episode_steps": 10})


def test_the_readmes_task_file_loads_and_states_its_rule(tmp_path):
    """The README's `my_task.py` is the first task file a user copies: it must load and state its rule."""
    import re
    from pathlib import Path

    from sim_envs import get_task, load_task_file

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    snippet = re.search(r"### Your own task\n```python\n(.*?)```", readme, re.S)
    assert snippet, "the README's task-file example is gone"
    path = tmp_path / "my_task.py"
    path.write_text(snippet.group(1))
    loaded = load_task_file(path)
    task = get_task(loaded[0].id)
    assert task.success_doc == "`torso.position[2]` above 1.6 m, at any step of the episode"
    assert task.success_rule is not None and task.success_rule.constants == {"HEIGHT": 1.6}
