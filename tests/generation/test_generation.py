"""Prompting and reply extraction: templates, few-shot retrieval, code extraction, error trimming."""

from __future__ import annotations

import dataclasses
import traceback
from pathlib import Path

import jinja2
import numpy as np
import pytest

from policies.reward_program import compile_reward, normalise_output
from sim_envs import get_task, list_tasks, render_view_doc
from sim_envs.errors import ConfigError
from sim_envs.fetch_tasks import FetchReachView, FetchRobot
from sim_envs.locomotion_tasks import PlanarWalkerView
from sim_envs.view_base import frozen, view_field_paths
from text2reward.generation.extraction import extract_code
from text2reward.generation.prompting import (
    build_error_messages,
    build_feedback_messages,
    build_human_feedback_messages,
    build_initial_messages,
    build_preference_messages,
    fenced,
    format_messages_for_display,
    render_template,
    retrieve_examples,
    trim_error_text,
)
from text2reward.generation.retrieval import compatible, load_examples, rank_examples, reads_only_view_fields

TASK_IDS = ["metaworld/pick-place-v3", "fetch/push", "hopper/front_flip"]
CONTRACT_MARKERS = ["compute_dense_reward(self, action)", "(total, components)", "`numpy`", "`math`", "success bonus"]


def _user(messages: list[dict]) -> str:
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "reward design" in messages[0]["content"]
    return messages[1]["content"]


def _write_example(directory: Path, task_id: str, description: str | None, marker: str) -> None:
    doc = f'"""Expert reward for {task_id}: {description}\n\nProvenance notes for people.\n"""\n\n' if description else ""
    code = f"import numpy as np\n\n\ndef compute_dense_reward(self, action):\n    {marker} = 1.0\n    return {marker}, {{'{marker}': {marker}}}\n"
    (directory / (task_id.replace("/", "__") + ".py")).write_text(doc + code)


@pytest.fixture
def examples_dir(tmp_path: Path) -> Path:
    _write_example(tmp_path, "metaworld/drawer-open-v3", "Pull the drawer open by its handle.", "marker_drawer_open")
    _write_example(tmp_path, "metaworld/drawer-close-v3", "Push the drawer closed.", "marker_drawer_close")
    _write_example(tmp_path, "metaworld/pick-place-v3", "Pick up the puck and move it to the goal.", "marker_pick_place")
    _write_example(tmp_path, "metaworld/reach-v3", "Move the gripper to the goal position.", "marker_reach")
    _write_example(tmp_path, "hopper/forward", "Make the hopper hop forward.", "marker_hopper")
    return tmp_path


# --- templates -----------------------------------------------------------------------------------


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_zero_shot_prompt_has_task_view_doc_and_contract(task_id: str) -> None:
    task = get_task(task_id)
    user = _user(build_initial_messages(task))
    assert task.description in user
    assert render_view_doc(task) in user  # the environment section is the rendered state view, verbatim
    for marker in CONTRACT_MARKERS:
        assert marker in user
    assert "{{" not in user and "{%" not in user


def test_templates_are_strict_about_missing_variables() -> None:
    with pytest.raises(jinja2.UndefinedError):
        render_template("zero_shot.j2", task=get_task("fetch/push"))  # no view_doc


def test_fenced_outlasts_backticks_inside() -> None:
    block = fenced("s = '```'\nx = 1", "python")
    assert block.startswith("````python\n") and block.endswith("\n````")


# --- few-shot retrieval --------------------------------------------------------------------------


def test_retrieval_ranks_related_example_first_and_never_the_task_itself(examples_dir: Path) -> None:
    task = get_task("metaworld/drawer-close-v3")
    found = retrieve_examples(task, 10, examples_dir)
    ids = [e.task_id for e in found]
    assert task.id not in ids
    assert ids[0] == "metaworld/drawer-open-v3"
    assert len(ids) == 3 and "hopper/forward" not in ids  # a locomotion example never reaches a MetaWorld task
    assert found[0].description == "Pull the drawer open by its handle."
    assert "Provenance notes" not in found[0].code and "marker_drawer_open" in found[0].code


def test_retrieval_prefers_same_robot_for_locomotion(examples_dir: Path) -> None:
    ids = [e.task_id for e in retrieve_examples(get_task("hopper/front_flip"), 2, examples_dir)]
    assert ids[0] == "hopper/forward"


def test_own_example_is_excluded_by_file_name_without_docstring(tmp_path: Path) -> None:
    _write_example(tmp_path, "fetch/push", None, "marker_own")
    _write_example(tmp_path, "fetch/reach", "Move the gripper to the goal point.", "marker_reach")
    examples = load_examples(tmp_path)
    assert {e.task_id for e in examples} == {"fetch/push", "fetch/reach"}
    assert next(e for e in examples if e.task_id == "fetch/push").description == get_task("fetch/push").description
    assert [e.task_id for e in retrieve_examples(get_task("fetch/push"), 5, tmp_path)] == ["fetch/reach"]
    assert retrieve_examples(get_task("fetch/push"), 0, tmp_path) == []


def _compatible_views(a, b) -> bool:
    return a.view_class is b.view_class or set(view_field_paths(a.view_class)) == set(view_field_paths(b.view_class))


@pytest.mark.parametrize("k", [2, 3])
def test_retrieved_examples_fit_every_registered_task(k: int) -> None:
    """The real examples: for every task, k examples, each from its family or its view, never its own."""
    examples = load_examples()
    for task in list_tasks():
        found = retrieve_examples(task, k, None)
        assert task.id not in [e.task_id for e in found]
        for example in found:
            source = get_task(example.task_id)
            assert source.family == task.family or _compatible_views(source, task), f"{task.id} was offered {example.task_id}"
        assert len(found) == min(k, sum(compatible(e, task) for e in examples))  # as many as fit, no padding
        if task.source == "builtin" and k == 2:
            assert len(found) == 2, f"{task.id}: only {[e.task_id for e in found]}"
        readable = [e for e in examples if compatible(e, task) and reads_only_view_fields(e, task)]
        assert all(reads_only_view_fields(e, task) for e in found[: len(readable)]), f"{task.id}: readable examples come first"


def test_back_flip_is_never_offered_a_manipulation_example() -> None:
    task = get_task("hopper/back_flip")
    for k in (1, 2, 5, 100):
        ids = [e.task_id for e in retrieve_examples(task, k, None)]
        assert ids and not any(i.startswith(("metaworld/", "fetch/")) for i in ids), ids
        assert "hopper/back_flip" not in ids
    assert retrieve_examples(task, 1, None)[0].task_id == "hopper/front_flip"


def test_manipulation_tasks_are_never_offered_a_locomotion_example() -> None:
    locomotion = {t.id for t in list_tasks("locomotion")}
    for task in list_tasks():
        if task.family != "locomotion":
            assert not {e.task_id for e in retrieve_examples(task, 100, None)} & locomotion, task.id


def test_fewer_examples_rather_than_another_family(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _write_example(tmp_path, "halfcheetah/forward", "Run forward.", "marker_own")
    _write_example(tmp_path, "hopper/forward", "Hop forward.", "marker_hop")
    _write_example(tmp_path, "metaworld/reach-v3", "Move the gripper to the goal position.", "marker_reach")
    _write_example(tmp_path, "fetch/push", "Push the block.", "marker_push")
    with caplog.at_level("WARNING", logger="text2reward.generation.retrieval"):
        found = retrieve_examples(get_task("halfcheetah/forward"), 3, tmp_path)
    assert [e.task_id for e in found] == ["hopper/forward"]
    assert "1 of the 3 examples" in caplog.text and "another family" in caplog.text
    (tmp_path / "hopper__forward.py").unlink()
    assert retrieve_examples(get_task("halfcheetah/forward"), 2, tmp_path) == []
    with pytest.raises(ConfigError, match="--few-shot 0"):  # the prompt refuses rather than cross families
        build_initial_messages(get_task("halfcheetah/forward"), few_shot=2, examples_dir=tmp_path)
    caplog.clear()
    assert [e.task_id for e in retrieve_examples(get_task("metaworld/push-v3"), 1, tmp_path)] == ["metaworld/reach-v3"]
    assert not caplog.text  # enough examples: nothing to say


def test_examples_of_the_same_view_cross_a_family_name(tmp_path: Path) -> None:
    """A user task in its own family but on a built-in view (or a view with the same fields) gets that view's examples."""
    _write_example(tmp_path, "hopper/forward", "Hop forward.", "marker_hop")
    _write_example(tmp_path, "ant/forward", "Walk forward.", "marker_ant")
    _write_example(tmp_path, "metaworld/reach-v3", "Move the gripper to the goal position.", "marker_reach")
    _write_example(tmp_path, "custom/elsewhere", "An unregistered task.", "marker_unknown")
    examples = load_examples(tmp_path)
    hop = dataclasses.replace(get_task("hopper/forward"), id="custom/hop_high", family="custom", description="Hop as high as it can.")
    assert {s.example.task_id for s in rank_examples(hop, examples)} == {"custom/elsewhere", "hopper/forward"}

    @dataclasses.dataclass(slots=True)
    class MyPlanarView(PlanarWalkerView):
        """The same fields as PlanarWalkerView under another name."""

    lookalike = dataclasses.replace(hop, family="mine", view_class=MyPlanarView)
    assert [s.example.task_id for s in rank_examples(lookalike, examples)] == ["hopper/forward"]
    reach_view = dataclasses.replace(hop, family="mine", view_class=FetchReachView)
    assert rank_examples(reach_view, examples) == []


def test_examples_reading_missing_attributes_come_last() -> None:
    """An Ant task may see a Hopper flip (same family), but only after every example its view can read."""
    ranked = rank_examples(get_task("ant/wave_leg"), load_examples())
    flags = [s.readable for s in ranked]
    assert flags == sorted(flags, reverse=True) and flags[0]
    flip = next(s for s in ranked if s.example.task_id == "hopper/front_flip")
    assert not flip.readable  # it reads torso.pitch, which the AntView has not


def test_few_shot_prompt_shows_examples_but_not_own_code(examples_dir: Path) -> None:
    task = get_task("metaworld/drawer-close-v3")
    user = _user(build_initial_messages(task, few_shot=2, examples_dir=examples_dir))
    assert "marker_drawer_open" in user and "Pull the drawer open by its handle." in user
    assert "marker_drawer_close" not in user
    assert render_view_doc(task) in user
    for marker in CONTRACT_MARKERS:
        assert marker in user


def test_few_shot_without_usable_examples_names_the_fix(tmp_path: Path) -> None:
    _write_example(tmp_path, "fetch/push", "Push the block.", "marker_own")
    with pytest.raises(ConfigError, match="--few-shot 0"):
        build_initial_messages(get_task("fetch/push"), few_shot=1, examples_dir=tmp_path)
    with pytest.raises(ConfigError, match="does not exist"):
        build_initial_messages(get_task("fetch/push"), few_shot=1, examples_dir=tmp_path / "missing")
    with pytest.raises(ConfigError):
        build_initial_messages(get_task("fetch/push"), few_shot=-1)


def test_real_examples_directory() -> None:
    examples = load_examples()
    assert len(examples) >= 1
    for example in examples:
        assert example.description and "compute_dense_reward" in example.code
        extracted = extract_code(f"The expert's reward:\n```python\n{example.code}```\n")
        assert extracted.ok, (example.task_id, extracted.error)
        assert extracted.code.strip() == example.code.strip()
    task = get_task(examples[0].task_id)
    others = [e for e in examples if e.task_id != task.id and get_task(e.task_id).family == task.family]
    found = retrieve_examples(task, len(examples), None)
    assert task.id not in [e.task_id for e in found]
    assert {e.task_id for e in found} == {e.task_id for e in others}
    if others:
        user = _user(build_initial_messages(task, few_shot=1))
        assert found[0].code.strip() in user


# --- extraction ----------------------------------------------------------------------------------

REACH_BODY = (
    "def compute_dense_reward(self, action):\n"
    "    d = np.linalg.norm(self.robot.ee_position - self.goal_position)\n"
    "    r = tolerance(d)\n"
    "    return r, {'reach': r}\n"
)


def _reach_view(distance: float) -> FetchReachView:
    robot = FetchRobot(ee_position=frozen([1.0, 0.5, 0.5]), ee_velocity=frozen(np.zeros(3)), gripper_width=0.05, init_ee_position=frozen([1.0, 0.5, 0.5]))
    return FetchReachView(dt=0.04, episode_step=0, robot=robot, goal_position=frozen([1.0 + distance, 0.5, 0.5]), table_height=0.4)


def test_fenced_block_with_prose_around() -> None:
    reply = "Here is my reward.\n\n```python\nimport numpy as np\n\ndef compute_dense_reward(self, action):\n    return 1.0, {'a': 1.0}\n```\n\nIt rewards everything."
    result = extract_code(reply)
    assert result.ok and result.function_found
    assert result.code.startswith("import numpy as np") and "Here is" not in result.code and "rewards everything" not in result.code


def test_several_blocks_keep_needed_helpers_only() -> None:
    reply = (
        "Helpers first:\n```python\nimport numpy as np\nSCALE = 5.0\n\ndef tolerance(d):\n    return float(1 - np.tanh(SCALE * d))\n\n"
        "def unused_helper():\n    return 0\n```\nNow the reward:\n```python\n" + REACH_BODY + "```\n"
        "Try it:\n```python\nprint(compute_dense_reward(view, np.zeros(4)))\n```\n"
        "```bash\npip install numpy\n```\n"
    )
    result = extract_code(reply)
    assert result.ok, result.error
    assert "def tolerance" in result.code and "SCALE = 5.0" in result.code and "import numpy as np" in result.code
    assert "unused_helper" not in result.code and "print(" not in result.code and "pip install" not in result.code
    reward = compile_reward(result.code, "extracted")
    near, far = (normalise_output(reward(_reach_view(d), np.zeros(4)))[0] for d in (0.01, 0.3))
    assert near > far


def test_last_complete_version_wins() -> None:
    reply = (
        "```python\ndef compute_dense_reward(self, action):\n    return 1.0\n```\nOn second thought:\n"
        "```\ndef compute_dense_reward(self, action):\n    return 2.0, {'v': 2.0}\n```"
    )
    result = extract_code(reply)
    assert result.ok and "2.0" in result.code and "return 1.0" not in result.code
    broken_revision = reply.replace("return 2.0, {'v': 2.0}", "return (2.0")
    result = extract_code(broken_revision)  # the model's final answer is broken: say so, do not fall back
    assert not result.ok and "line 2" in result.error and "return (2.0" in result.code


def test_bare_code_and_bare_code_inside_prose() -> None:
    bare = "import numpy as np\n\ndef compute_dense_reward(self, action):\n    return 1.0, {'a': 1.0}\n"
    assert extract_code(bare).code == bare
    reply = "Sure! Here is the reward function.\n\n" + bare + "\nThis reward is constant, which is silly.\n"
    result = extract_code(reply)
    assert result.ok and result.code.strip() == bare.strip()


def test_prose_only_and_none_and_empty() -> None:
    for reply in ["I am sorry, I cannot help with that.", "", "   ", None]:
        result = extract_code(reply)
        assert result.code is None and not result.function_found and result.error
    assert "no Python code" in extract_code("I am sorry, I cannot help with that.").error
    assert "no reply" in extract_code(None).error


def test_code_without_the_function_names_what_it_found() -> None:
    result = extract_code("```python\ndef reward(state):\n    return 1.0\n```")
    assert not result.function_found and result.code is None
    assert "compute_dense_reward" in result.error and "reward" in result.error


def test_wrong_signature_is_reported_with_the_code() -> None:
    result = extract_code("```python\ndef compute_dense_reward(self):\n    return 1.0\n```")
    assert result.function_found and not result.ok
    assert "1 parameters" in result.error and "compute_dense_reward(self, action)" in result.error
    assert result.code.startswith("def compute_dense_reward(self)")


def test_method_inside_a_class_is_reported() -> None:
    result = extract_code("```python\nclass Env:\n    def compute_dense_reward(self, action):\n        return 1.0\n```")
    assert result.function_found and not result.ok and "class Env" in result.error and "module level" in result.error


def test_syntax_error_reports_line_number_and_keeps_code() -> None:
    code = "import numpy as np\n\ndef compute_dense_reward(self, action):\n    d = np.linalg.norm(self.robot.ee_position\n    return -d, {'reach': -d}\n"
    result = extract_code(f"Here:\n```python\n{code}```")
    assert result.function_found and not result.ok
    assert "line 4" in result.error and "syntax error" in result.error
    assert result.code == code  # shown back to the model in the error prompt


def test_thinking_sections_are_ignored() -> None:
    reply = "<think>```python\ndef compute_dense_reward(self, a, b, c):\n    pass\n```</think>\n```python\ndef compute_dense_reward(self, action):\n    return 3.0\n```"
    result = extract_code(reply)
    assert result.ok and "return 3.0" in result.code


# --- errors and feedback -------------------------------------------------------------------------


def _deep_traceback(depth: int) -> str:
    def recurse(n: int) -> None:
        if n == 0:
            raise ValueError("shapes (3,) and (4,) not aligned " + "x" * 5000)
        recurse(n - 1)

    try:
        recurse(depth)
    except ValueError:
        return traceback.format_exc()
    raise AssertionError("unreachable")


def test_trim_error_text_keeps_last_frames_and_exception() -> None:
    raw = "smoke run failed on state 3:\n" + _deep_traceback(60)
    trimmed = trim_error_text(raw, max_frames=3)
    assert len(trimmed) < 2600 < len(raw)
    assert trimmed.startswith("smoke run failed on state 3:")
    assert "earlier frames omitted" in trimmed
    assert "ValueError: shapes (3,) and (4,) not aligned" in trimmed
    assert "characters cut" in trimmed


def test_trim_error_text_adds_the_program_line_for_compiled_code() -> None:
    code = "def compute_dense_reward(self, action):\n    d = self.robot.no_such_field\n    return d\n"
    reward = compile_reward(code, "candidate")
    try:
        reward(_reach_view(0.1), np.zeros(4))
    except AttributeError:
        raw = traceback.format_exc()
    trimmed = trim_error_text(raw, source=code)
    assert "d = self.robot.no_such_field" in trimmed and "AttributeError" in trimmed


def test_error_messages_contain_code_and_trimmed_error() -> None:
    task = get_task("metaworld/reach-v3")
    code = "def compute_dense_reward(self, action):\n    return self.robot.velocity\n"
    user = _user(build_error_messages(task, code, _deep_traceback(40)))
    assert code.strip() in user
    assert "ValueError: shapes (3,) and (4,) not aligned" in user and "earlier frames omitted" in user
    assert render_view_doc(task) in user and "compute_dense_reward(self, action)" in user
    validation = "component 'reach' is constant across 64 states; make it depend on the state"
    assert validation in _user(build_error_messages(task, code, validation))


def test_feedback_messages_contain_best_code_and_feedback() -> None:
    task = get_task("fetch/push")
    best = "def compute_dense_reward(self, action):\n    return 0.5, {'push': 0.5}\n"
    feedback = "success rate 0.10; component push: min 0.5 mean 0.5 max 0.5 (constant)"
    user = _user(build_feedback_messages(task, best, feedback))
    assert best.strip() in user and feedback in user and render_view_doc(task) in user


def test_human_feedback_and_preference_messages() -> None:
    task = get_task("hopper/front_flip")
    code = "def compute_dense_reward(self, action):\n    return 1.0\n"
    user = _user(build_human_feedback_messages(task, code, "the hopper fell on its back", "it should rotate forward, not fall"))
    assert code.strip() in user and "the hopper fell on its back" in user and "it should rotate forward, not fall" in user

    best = "def compute_dense_reward(self, action):\n    return 2.0  # best\n"
    worst = "def compute_dense_reward(self, action):\n    return 0.0  # worst\n"
    user = _user(build_preference_messages(task, best, worst, "flipped halfway", "stood still", critique="needs more height"))
    preferred, rejected = user.index("Preferred reward"), user.index("Rejected reward")
    assert preferred < user.index("# best") < rejected < user.index("# worst")
    assert "flipped halfway" in user and "stood still" in user and "needs more height" in user
    without = _user(build_preference_messages(task, best, worst, "flipped halfway", "stood still"))
    assert "comment" not in without and "# worst" in without


def test_display_shows_every_message_in_full() -> None:
    messages = build_initial_messages(get_task("fetch/push"))
    shown = format_messages_for_display(messages)
    assert "message 1/2 · system" in shown and "message 2/2 · user" in shown
    for message in messages:
        assert message["content"].strip() in shown
    with_image = [{"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 500}}]}]
    shown = format_messages_for_display(with_image)
    assert "look" in shown and "[image: data:image/png" in shown and "A" * 100 not in shown
