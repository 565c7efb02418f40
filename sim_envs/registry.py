"""The task registry: built-in families plus tasks loaded from user files.

Why lazy: listing tasks must not import MetaWorld, Gymnasium-Robotics and MuJoCo renderers; each
family module only imports its simulator inside its env factory.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import inspect
import numbers
import sys
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from sim_envs.errors import ConfigError, TaskFileError, UnknownTaskError
from sim_envs.success_rule import SUCCESS_WHEN, SuccessRule
from sim_envs.task import Task

_TASKS: dict[str, Task] = {}
_TASK_FILES: dict[Path, tuple[tuple[int, int], list[Task]]] = {}
"""Task files already run in this process: the file -> (its modification time and size then, the tasks it defined)."""
_BUILTINS_LOADED = False


def _load_builtins() -> None:
    global _BUILTINS_LOADED
    if _BUILTINS_LOADED:
        return
    from sim_envs.adroit_tasks import adroit_tasks
    from sim_envs.fetch_tasks import fetch_tasks
    from sim_envs.franka_tasks import franka_tasks
    from sim_envs.locomotion_tasks import locomotion_tasks
    from sim_envs.metaworld_tasks import metaworld_tasks
    from sim_envs.shadow_tasks import shadow_tasks

    for task in [*metaworld_tasks(), *fetch_tasks(), *franka_tasks(), *locomotion_tasks(), *adroit_tasks(), *shadow_tasks()]:
        _TASKS.setdefault(task.id, task)
    _BUILTINS_LOADED = True


def register_task(task: Task, *, replace: bool = False) -> Task:
    """Add a task; ids are `<family>/<name>` and unique unless `replace`."""
    _load_builtins()
    if "/" not in task.id:
        raise TaskFileError(f"task id {task.id!r} must look like '<family>/<name>', e.g. 'custom/hopper_jump'")
    if task.id in _TASKS and not replace and _TASKS[task.id] is not task:
        raise TaskFileError(f"task id {task.id!r} is already registered; pick another id")
    _check_hyperparams_file(task)
    _TASKS[task.id] = task
    return task


def _check_hyperparams_file(task: Task) -> None:
    """A task's hyper-parameter file exists and is its family's only one: settings are per family, and a built-in
    family keeps the package's. A task naming none trains with its family's."""
    own = task.hyperparams_file
    if own is None:
        return
    if not Path(own).is_file():
        raise TaskFileError(f"task {task.id}: hyper-parameter file {own} does not exist; pass the path of a YAML file "
                            "(e.g. Path(__file__).with_name('my_family.yml'))")
    for other in _TASKS.values():
        if other.family != task.family or other.id == task.id:
            continue
        if other.source == "builtin":
            raise TaskFileError(f"task {task.id} names hyper-parameter file {own}, but {task.family!r} is a built-in family, "
                                f"trained with the package's settings; give the task a family of its own, e.g. family='my_{task.family}'")
        if other.hyperparams_file is not None and not _same_file(other.hyperparams_file, own):
            raise TaskFileError(f"task {task.id} names hyper-parameter file {own}, but family {task.family!r} trains with "
                                f"{other.hyperparams_file} (task {other.id}); name the same file, or give the task a family of its own")


def _same_file(first: Path, second: Path) -> bool:
    return Path(first).resolve() == Path(second).resolve()


def family_hyperparams_file(family: str) -> Path | None:
    """The hyper-parameter file the family's registered tasks name (a family from a task file), or None."""
    return next((Path(t.hyperparams_file) for t in _TASKS.values() if t.family == family and t.hyperparams_file is not None), None)


def list_tasks(family: str | None = None) -> list[Task]:
    _load_builtins()
    return [t for t in _TASKS.values() if family is None or t.family == family or t.id.startswith(family + "/")]


def get_task(task_id: str) -> Task:
    _load_builtins()
    try:
        return _TASKS[task_id]
    except KeyError:
        close = difflib.get_close_matches(task_id, list(_TASKS), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; run `t2r tasks` to list them"
        raise UnknownTaskError(f"unknown task {task_id!r}{hint}") from None


def as_verdict(test: Callable[[Any, dict[str, Any]], Any]) -> Callable[[Any, dict[str, Any]], bool]:
    """A user's success test as a true/false verdict: `view.torso.position[2] > 1.6` is numpy's bool, which the
    success rate, the records and the JSON they are written to must not meet."""

    def verdict(view: Any, info: dict[str, Any]) -> bool:
        return bool(test(view, info))

    return verdict


def derive_task(
    base: str,
    *,
    id: str,
    description: str,
    is_success: Callable[[Any, dict[str, Any]], bool] | None = None,
    success_doc: str | None = None,
    success_mode: str | None = None,
    success_rule: SuccessRule | None = None,
    max_episode_steps: int | None = None,
    default_steps: int | None = None,
    keep_expert_reward: bool = False,
    view_notes: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> Task:
    """A new task on an existing task's environment and view: what a user task file calls.

    The base's expert reward is dropped unless `keep_expert_reward`: a new behaviour rarely wants
    the old objective as its reference. `view_notes` defaults to the base's: pass new notes when
    `env_kwargs` change what they say (e.g. whether a fall ends the episode), since they reach prompts.

    Success comes either as a `success_rule` (a predicate over the view with named constants: the prompt's
    sentence, `is_success` and `success_doc` all follow from it) or as `is_success` plus `success_doc`.
    """
    parent = get_task(base)
    mode = success_mode or parent.success_mode
    if success_rule is not None:
        if mode not in SUCCESS_WHEN:
            raise ConfigError(f"success_mode must be one of {', '.join(SUCCESS_WHEN)}, got {mode!r}")
        is_success = is_success or success_rule.judge
        success_doc = success_doc or success_rule.describe(mode)
    if is_success is None or not success_doc:
        raise ConfigError(f"task {id}: give derive_task a success_rule=rule(test, NAME=value), or is_success and success_doc")
    changes: dict[str, Any] = dict(
        id=id,
        description=description,
        is_success=as_verdict(is_success),
        success_doc=success_doc,
        success_rule=success_rule,  # the parent's rule no longer describes this task's success
        source="user",
        expert_reward_doc=parent.expert_reward_doc if keep_expert_reward else None,
        env_kwargs={**parent.env_kwargs, **(env_kwargs or {})},
    )
    if success_mode is not None:
        changes["success_mode"] = success_mode
    if default_steps is not None:
        changes["default_steps"] = default_steps
    if view_notes is not None:
        changes["view_notes"] = view_notes
    if max_episode_steps is not None:
        if "max_episode_steps" in changes["env_kwargs"]:
            raise ConfigError("pass the episode length once, as derive_task(max_episode_steps=...), not in env_kwargs")
        changes["env_factory"] = _with_episode_steps(parent, max_episode_steps)
        changes["max_episode_steps"] = int(max_episode_steps)
    return dataclasses.replace(parent, **changes)


def _with_episode_steps(parent: Task, steps: int) -> Callable[..., Any]:
    """The parent's env factory with episodes truncated at `steps` (the number the prompt states).

    Every built-in family's factory takes `max_episode_steps` (a Gymnasium TimeLimit; MetaWorld's own
    cap follows it); a factory that does not cannot honour the length, so the task is refused."""
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps <= 0:
        raise ConfigError(f"max_episode_steps must be a positive whole number of steps, got {steps!r}")
    try:
        parameters = inspect.signature(parent.env_factory).parameters
    except (TypeError, ValueError):
        parameters = {}
    if "max_episode_steps" not in parameters:
        raise ConfigError(
            f"task {parent.id}'s environment factory takes no max_episode_steps, so its episode length cannot "
            f"change; derive without max_episode_steps (episodes last {parent.max_episode_steps} steps)"
        )
    return partial(parent.env_factory, max_episode_steps=int(steps))


def _line_in(path: Path, exc: BaseException) -> int | None:
    """The line of the user's file where `exc` arose: a syntax error's own line, else the file's deepest frame in the
    traceback (an error raised in a module it imports is still reported at the file's line that led there)."""
    if isinstance(exc, SyntaxError) and exc.lineno is not None and Path(str(exc.filename)).resolve() == path.resolve():
        return exc.lineno
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if Path(frame.filename).resolve() == path.resolve()]
    return frames[-1].lineno if frames else None


def load_task_file(path: str | Path) -> list[Task]:
    """Run a user's Python file and register every `Task` it defines at module level (as `source="user"`).

    A file runs once per process: the front door, the checks, the loop, tuning and a resume each ask for the run's
    task, and the user's file (which may be slow, or print, or count) must not run again for each; asked again, its
    tasks are registered again as they were. A file changed on disk since (its time or size) runs again.

    Modules next to the file import by their names (`from my_robot_env import MyEnv`), as beside a script: its
    folder joins the end of `sys.path` (the end, so an installed package of the same name is never shadowed: give
    your modules distinctive names). It stays there, since env factories may import them later."""
    path = Path(path)
    if not path.is_file():
        raise TaskFileError(f"task file {path} does not exist; pass the path of a .py file that defines a Task")
    status = path.resolve().stat()
    stamp = (status.st_mtime_ns, status.st_size)
    loaded = _TASK_FILES.get(path.resolve())
    if loaded is not None and loaded[0] == stamp:
        return [register_task(task, replace=True) for task in loaded[1]]
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.append(folder)
    module_name = f"t2r_user_task_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise TaskFileError(f"task file {path} is not a Python file; give it a .py name")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's file: report, do not crash with their traceback
        where = _line_in(path, exc)
        at = f" at line {where}" if where else ""
        raise TaskFileError(f"task file {path} failed to run{at}: {type(exc).__name__}: {exc}; fix "
                            f"{'line ' + str(where) + ' of ' if where else ''}the file and run again") from None
    tasks = [value for value in vars(module).values() if isinstance(value, Task)]
    if not tasks:
        raise TaskFileError(f"task file {path} defines no Task; assign derive_task(...) to a module-level name")
    # a Task built in the file (not derived) is the user's too, whatever its `source` says
    registered = [register_task(t if t.source != "builtin" else dataclasses.replace(t, source="user"), replace=True) for t in tasks]
    _TASK_FILES[path.resolve()] = (stamp, registered)
    return registered
