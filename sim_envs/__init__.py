"""MuJoCo robot tasks with typed state views, success tests and expert references.

Knows nothing of language models or training: `policies` and `text2reward` build on it.
"""

import os

os.environ.setdefault("MUJOCO_GL", "egl")  # offscreen rendering with no display (Mesa llvmpipe works)

from sim_envs.errors import Text2RewardError  # noqa: E402
from sim_envs.registry import derive_task, get_task, list_tasks, load_task_file, register_task  # noqa: E402
from sim_envs.success_rule import SuccessRule, rule  # noqa: E402
from sim_envs.task import Task, render_view_doc  # noqa: E402
from sim_envs.view_base import StateView  # noqa: E402

__all__ = [
    "StateView",
    "SuccessRule",
    "Task",
    "Text2RewardError",
    "derive_task",
    "get_task",
    "list_tasks",
    "load_task_file",
    "register_task",
    "render_view_doc",
    "rule",
]
