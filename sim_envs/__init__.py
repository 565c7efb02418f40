"""MuJoCo robot tasks with typed state views, success tests and expert references.

Knows nothing of language models or training: `policies` and `text2reward` build on it.

The registry, tasks, views and success rules load on first use (PEP 562): `sim_envs.errors`, which every layer above
imports for the exception hierarchy, then costs no numpy, and `t2r --help` starts without it.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

os.environ.setdefault("MUJOCO_GL", "egl")  # offscreen rendering with no display (Mesa llvmpipe works)

from sim_envs.errors import Text2RewardError  # noqa: E402

if TYPE_CHECKING:  # the names below, typed for a type checker; at run time they load on first use
    from sim_envs.registry import derive_task, get_task, list_tasks, load_task_file, register_task
    from sim_envs.success_rule import SuccessRule, rule
    from sim_envs.task import Task, render_view_doc
    from sim_envs.view_base import StateView

_LAZY = {"derive_task": "registry", "get_task": "registry", "list_tasks": "registry", "load_task_file": "registry",
         "register_task": "registry", "SuccessRule": "success_rule", "rule": "success_rule", "Task": "task",
         "render_view_doc": "task", "StateView": "view_base"}
"""Each public name -> the module of this package that defines it."""

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


def __dir__() -> list[str]:
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sim_envs' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"sim_envs.{module}"), name)
    globals()[name] = value  # looked up once
    return value
