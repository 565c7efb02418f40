"""Typical initial distances between the points a reward uses, so a model picks tolerances of the right size.

Why: "gripper to object 0.05-0.21 m, object to goal 0.10-0.30 m" tells a reward designer whether a
`tanh(10 * d)` saturates at the start or never moves. Each task names its point pairs
(`Task.scale_points`); the figures are read through the task's view in the first state of seeded episodes,
the state the policy's first observation shows and `TaskRewardWrapper.reset` reads (MetaWorld's reset computes
its kinematics there: `metaworld_tasks.MetaWorldSeeding`), are measured once and shipped in `scale_hints.json`
(regenerate with `python -m sim_envs.shipped_facts`), and tests re-measure them and check them against MuJoCo
data directly (tests/sim_envs/test_stated_facts.py).
Tasks the file does not know (user tasks) are measured on first use and kept for the process.
"""

from __future__ import annotations

import json
import operator
from functools import cache
from pathlib import Path

from sim_envs.success_rule import distance
from sim_envs.task import Task

ARM_SCALE_POINTS = (
    ("gripper to object", "robot.ee_position", "obj.position"),
    ("object to goal", "obj.position", "goal_position"),
)
"""An arm, an object and a goal (MetaWorld's and Fetch's views name them alike)."""
REACH_SCALE_POINTS = (("gripper to goal", "robot.ee_position", "goal_position"),)
"""An arm and a goal only."""
HINTS_FILE = Path(__file__).with_name("scale_hints.json")
RESETS = 8
"""Seeded resets per task (seeds 0..RESETS-1): enough to show the spread of placements."""
DECIMALS = 3


def measure_scale_hints(task: Task, resets: int = RESETS) -> dict[str, list[float]]:
    """{label: [min, max]} of each `scale_points` distance in the first state of `resets` seeded episodes, in metres."""
    if not task.scale_points:
        return {}
    readers = [(label, operator.attrgetter(a), operator.attrgetter(b)) for label, a, b in task.scale_points]
    seen: dict[str, list[float]] = {label: [] for label, _, _ in task.scale_points}
    env = task.make_env(seed=0)
    try:
        for seed in range(resets):
            env.reset(seed=seed)
            view = task.view(env)
            for label, first, second in readers:
                seen[label].append(distance(first(view), second(view)))
    finally:
        env.close()
    return {label: [round(min(values), DECIMALS), round(max(values), DECIMALS)] for label, values in seen.items()}


@cache
def _shipped() -> dict[str, dict[str, list[float]]]:
    if not HINTS_FILE.is_file():
        return {}
    return json.loads(HINTS_FILE.read_text())


_MEASURED: dict[tuple[str, tuple[tuple[str, str, str], ...]], dict[str, list[float]]] = {}


def scale_hints(task: Task) -> dict[str, list[float]]:
    """The task's figures: shipped for built-in tasks whose point labels match, else measured once per process."""
    if not task.scale_points:
        return {}
    shipped = _shipped().get(task.id)
    if task.source == "builtin" and shipped is not None and set(shipped) == {label for label, _, _ in task.scale_points}:
        return shipped
    key = (task.id, task.scale_points)
    if key not in _MEASURED:
        _MEASURED[key] = measure_scale_hints(task)
    return _MEASURED[key]


def describe_scale_hints(hints: dict[str, list[float]]) -> str:
    """"gripper to object 0.05-0.21 m; object to goal 0.10-0.30 m" ('' when there are none)."""

    def metres(value: float) -> str:
        return f"{value:.2f}" if value >= 0.1 or value == 0 else f"{value:.3f}"

    parts = []
    for label, (low, high) in hints.items():
        span = metres(low) if metres(low) == metres(high) else f"{metres(low)}-{metres(high)}"
        parts.append(f"{label} {span} m")
    return "; ".join(parts)
