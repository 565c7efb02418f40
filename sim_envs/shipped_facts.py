"""Measure every built-in task and write the JSON files the package ships: the objects' sizes
(`object_facts.json`, sim_envs.object_facts), the scene's scales (`scale_hints.json`, sim_envs.scale_hints) and its
fixed features (`scene_features.json`, sim_envs.scene_features).

Why a module of its own: writing them needs every task (the registry), while the tasks need the shipped files;
here, above both, the imports go one way. Regenerate with `python -m sim_envs.shipped_facts`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from sim_envs.object_facts import FACTS_FILE, measure_object_facts, tracked_points
from sim_envs.registry import list_tasks
from sim_envs.scale_hints import HINTS_FILE, measure_scale_hints
from sim_envs.scene_features import SCENE_FILE, measure_scene


def write_json_lines(path: Path, by_task: dict[str, Any]) -> None:
    """One line per task, in task order: a regenerated file's diff reads well."""
    lines = [f"  {json.dumps(task_id)}: {json.dumps(by_task[task_id])}" for task_id in sorted(by_task)]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n")


def write_facts_file(path: Path = FACTS_FILE) -> dict[str, dict[str, dict[str, Any]]]:
    """Measure every built-in task with a tracked object and write the JSON the package ships."""
    facts = {task.id: measure_object_facts(task) for task in list_tasks() if task.source == "builtin" and tracked_points(task.id)}
    write_json_lines(path, facts)
    return facts


def write_hints_file(path: Path = HINTS_FILE) -> dict[str, dict[str, list[float]]]:
    """Measure every built-in task with scale points and write the JSON the package ships."""
    hints = {task.id: measure_scale_hints(task) for task in list_tasks() if task.scale_points and task.source == "builtin"}
    write_json_lines(path, hints)
    return hints


def write_scene_file(path: Path = SCENE_FILE) -> dict[str, list[dict[str, Any]]]:
    """Measure every built-in task that describes its scene and write the JSON the package ships."""
    scenes = {task.id: measure_scene(task) for task in list_tasks() if task.source == "builtin" and task.scene_features is not None}
    write_json_lines(path, scenes)
    return scenes


if __name__ == "__main__":  # python -m sim_envs.shipped_facts
    print(f"wrote {FACTS_FILE} ({len(write_facts_file())} tasks)", file=sys.stderr)
    print(f"wrote {HINTS_FILE} ({len(write_hints_file())} tasks)", file=sys.stderr)
    print(f"wrote {SCENE_FILE} ({len(write_scene_file())} tasks)", file=sys.stderr)
