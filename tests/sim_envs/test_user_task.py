"""A person adds a task from a small Python file, with no change to the package."""

import json
import subprocess
import sys
import textwrap

import pytest

from sim_envs import get_task, list_tasks, load_task_file, registry
from sim_envs.errors import TaskFileError


@pytest.fixture(autouse=True)
def _registry_as_it_was():
    """Each test's task files are registered for that test only: a `jumper/jump` left behind (a hopper in a family of
    its own, so offered hopper examples) broke a later test of this process that lists the package's tasks."""
    list_tasks()  # the built-in tasks, loaded before the snapshot
    tasks, files = dict(registry._TASKS), dict(registry._TASK_FILES)
    yield
    registry._TASKS.clear()
    registry._TASKS.update(tasks)
    registry._TASK_FILES.clear()
    registry._TASK_FILES.update(files)


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
    [("x = 1\n", "defines no Task"), ("raise RuntimeError('boom')\n", "failed to run at line 1: RuntimeError: boom")],
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

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    snippet = re.search(r"### Your own task\n```python\n(.*?)```", readme, re.S)
    assert snippet, "the README's task-file example is gone"
    path = tmp_path / "my_task.py"
    path.write_text(snippet.group(1))
    loaded = load_task_file(path)
    task = get_task(loaded[0].id)
    assert task.success_doc == "`torso.position[2]` above 1.6 m, at any step of the episode"
    assert task.success_rule is not None and task.success_rule.constants == {"HEIGHT": 1.6}


SIBLING_TASK_FILE = textwrap.dedent(
    '''
    from {module} import DESCRIPTION

    from sim_envs import derive_task

    HOP = derive_task("hopper/forward", id="custom/hop_beside", description=DESCRIPTION,
                      is_success=lambda view, info: False, success_doc="never")
    '''
)


def test_a_task_file_imports_the_modules_beside_it(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # the folder the loader adds goes with the test
    module = f"sibling_{tmp_path.name.replace('-', '_')}"  # a name no other test has imported
    (tmp_path / f"{module}.py").write_text("DESCRIPTION = 'Hop, as the module beside the task file says.'\n")
    path = tmp_path / "my_task.py"
    path.write_text(SIBLING_TASK_FILE.format(module=module))
    (task,) = load_task_file(path)
    assert task.description == "Hop, as the module beside the task file says."
    assert sys.path[-1] == str(tmp_path.resolve())  # at the end: an installed package of the same name wins


OWN_FAMILY_TASK_FILE = textwrap.dedent(
    '''
    import dataclasses
    from pathlib import Path

    from sim_envs import get_task

    JUMP = dataclasses.replace(get_task("hopper/forward"), id="{family}/jump", family="{family}", hyperparams_file={file})
    '''
)


def own_family_task(tmp_path, family: str, yaml_text: str | None, file: str = "Path(__file__).with_name('settings.yml')"):
    if yaml_text is not None:
        (tmp_path / "settings.yml").write_text(yaml_text)
    path = tmp_path / f"{family}_task.py"
    path.write_text(OWN_FAMILY_TASK_FILE.format(family=family, file=file))
    return path


def test_a_task_file_names_its_familys_hyper_parameter_file(tmp_path):
    from policies.hyperparams import hyperparams_path, load_hyperparams

    path = own_family_task(tmp_path, "jumper", "algo: ppo\nn_envs: 2\nalgo_kwargs:\n  n_steps: 256\n")
    (task,) = load_task_file(path)
    assert task.source == "user"  # a Task made in a task file is the user's, whatever the dataclass it copied said
    assert hyperparams_path("jumper") == tmp_path / "settings.yml"
    params = load_hyperparams(task.family)
    assert params.algo == "ppo" and params.n_envs == 2 and params.algo_kwargs == {"n_steps": 256}
    assert load_hyperparams(task.family, None, {"n_steps": 128}).algo_kwargs == {"n_steps": 128}  # --hp still wins
    assert load_hyperparams("fetch").algo == "sbx-sac"  # the package's families keep theirs


@pytest.mark.parametrize(
    "family, yaml_text, message",
    [
        ("typo_family", "algo: ppo\nn_env: 2\n", "unknown setting 'n_env'; the settings are algo, policy, n_envs"),
        ("kwarg_family", "algo: ppo\nalgo_kwargs:\n  n_step: 256\n", "algo_kwargs 'n_step' is not a setting of PPO (did you mean n_steps?)"),
        ("no_algo_family", "n_envs: 2\n", "it needs a mapping with at least `algo:`"),
        ("broken_family", "algo: [ppo\n", "cannot read hyper-parameter file"),
    ],
)
def test_a_bad_hyper_parameter_file_says_what_to_fix(tmp_path, family, yaml_text, message):
    from policies.hyperparams import load_hyperparams
    from sim_envs.errors import ConfigError

    load_task_file(own_family_task(tmp_path, family, yaml_text))
    with pytest.raises(ConfigError, match="hyper-parameter file .*settings.yml") as error:
        load_hyperparams(family)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_hyper_parameter_file_is_refused_where_it_cannot_apply(tmp_path):
    from policies.hyperparams import load_hyperparams
    from sim_envs.errors import ConfigError

    with pytest.raises(TaskFileError, match="hyper-parameter file .*missing.yml does not exist"):
        load_task_file(own_family_task(tmp_path, "missing_family", None, "Path(__file__).with_name('missing.yml')"))
    with pytest.raises(TaskFileError, match="'locomotion' is a built-in family, trained with the package's settings; give the task a family of its own"):
        load_task_file(own_family_task(tmp_path, "locomotion", "algo: ppo\n"))
    load_task_file(own_family_task(tmp_path, "shared_family", "algo: ppo\n"))
    (tmp_path / "other.yml").write_text("algo: sac\n")
    other = tmp_path / "other_task.py"
    other.write_text(OWN_FAMILY_TASK_FILE.format(family="shared_family", file="Path(__file__).with_name('other.yml')")
                     .replace("shared_family/jump", "shared_family/leap"))
    with pytest.raises(TaskFileError, match="family 'shared_family' trains with .*settings.yml .task shared_family/jump.; name the same file"):
        load_task_file(other)
    with pytest.raises(ConfigError, match=r"no hyper-parameters for family 'nowhere'; name a YAML file in its task \(Task\(\.\.\., hyperparams_file="):
        load_hyperparams("nowhere")


POSTPONED_VIEW = textwrap.dedent(
    '''
    from __future__ import annotations

    from dataclasses import dataclass

    import numpy as np

    from sim_envs.view_base import StateView, attr


    @dataclass(slots=True)
    class Part:
        """A part of the robot."""

        position: np.ndarray = attr("(3,) where it is")


    @dataclass(slots=True)
    class PostponedView(StateView):
        """A view whose module postpones its annotations."""

        part: Part = attr("the part")
    '''
)


def test_a_view_module_that_postpones_annotations_renders_like_any_other(tmp_path, monkeypatch):
    """`from __future__ import annotations` makes field types text: the prompt still shows the nested class and types."""
    import importlib

    from sim_envs.view_base import render_view_class_doc, view_field_paths

    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "postponed_view_module.py").write_text(POSTPONED_VIEW)
    view_class = importlib.import_module("postponed_view_module").PostponedView
    doc = render_view_class_doc(view_class)
    assert "class Part:" in doc and "position: np.ndarray  # (3,) where it is" in doc and "part: Part  # the part" in doc
    assert "self.part.position" in view_field_paths(view_class)
