"""The registry holds every promised task with complete metadata."""

import pytest

from sim_envs import get_task, list_tasks, render_view_doc
from sim_envs.errors import UnknownTaskError
from sim_envs.view_base import view_field_paths

LOCOMOTION = {
    "hopper/forward", "hopper/front_flip", "hopper/back_flip", "ant/forward", "ant/wave_leg",
    "ant/lie_down", "halfcheetah/forward", "walker2d/forward",
}


def test_families_are_complete(all_tasks):
    ids = [t.id for t in all_tasks]
    assert len(ids) == len(set(ids))
    assert len([i for i in ids if i.startswith("metaworld/")]) == 50
    assert {"fetch/reach", "fetch/push", "fetch/slide", "fetch/pick_and_place"} <= set(ids)
    assert LOCOMOTION <= set(ids)


def test_every_task_has_the_contract(all_tasks):
    for task in all_tasks:
        assert task.id.count("/") == 1 and task.description.endswith(".")
        assert task.success_doc and task.success_mode in ("any", "final")
        assert task.max_episode_steps > 0 and task.default_steps > 0
        summary = task.summary()
        assert {"id", "family", "description", "has_expert_reward", "has_scripted_policy"} <= set(summary)
    assert all(t.has_scripted_policy and t.has_expert_reward for t in list_tasks("metaworld"))
    assert not get_task("ant/wave_leg").has_expert_reward
    assert get_task("halfcheetah/forward").has_expert_reward


def test_view_doc_lists_every_attribute(all_tasks):
    for task in all_tasks:
        doc = render_view_doc(task)
        for path in view_field_paths(task.view_class):
            assert path.rsplit(".", 1)[1] + ":" in doc, (task.id, path)
        assert task.action_doc.split(":")[0] in doc


def test_unknown_task_suggests_close_ids():
    with pytest.raises(UnknownTaskError, match="did you mean metaworld/reach-v3"):
        get_task("metaworld/reach-v2")
