"""Trajectory analysis: what the robot did in rollouts of the trained policy, in numbers and in words.

Why plain text from plain data: the next prompt needs words and numbers, a rule-based backend needs
the same facts as a dict (`episode_facts`), and both come from real rollouts. Views are read by
attribute presence, so every family and every user-derived task is covered.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from sim_envs.scene_features import CONTAINERS, SceneFeature
from sim_envs.task import Task
from sim_envs.view_base import dotted_attribute

MOVED_M = 0.02
LIFTED_M = 0.015
NEAR_M = 0.04
FELL_M = 0.05
PROGRESS_M = 0.005
"""A change in distance to the goal smaller than this is neither nearer nor farther (the simulator's jitter)."""
ANT_LEGS = ("front_left", "back_left", "back_right", "front_right")


# --------------------------------------------------------------------------- trajectory analysis


def _views_and_success(episode: Any) -> tuple[list[Any], bool | None]:
    """An `EpisodeStats` (views + success) or a bare list of views (success unknown)."""
    if hasattr(episode, "views"):
        return list(episode.views), bool(episode.success)
    return list(episode), None


def episode_scene(episode: Any) -> tuple[SceneFeature, ...]:
    """The fixed features an `EpisodeStats` recorded at its reset (none for a bare list of views)."""
    return tuple(getattr(episode, "scene", ()) or ())


def _has(view: Any, dotted: str) -> bool:
    return dotted_attribute(view, dotted) is not None


def _series(views: list[Any], dotted: str) -> np.ndarray:
    return np.array([np.asarray(dotted_attribute(v, dotted), dtype=float) for v in views])


def _distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.linalg.norm(a - b, axis=-1)


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2 * math.pi) - math.pi


def _gripper_closed(views: list[Any]) -> np.ndarray | None:
    """Per step: fingers clearly closer together than at the start (either gripper convention)."""
    for field in ("robot.gripper_openness", "robot.gripper_width"):
        if _has(views[0], field):
            values = _series(views, field)
            return values < 0.8 * values[0] if values[0] > 0 else np.zeros(len(values), dtype=bool)
    return None


def _displacement_facts(key: str, track: np.ndarray, floor: float | None) -> dict[str, float | bool]:
    """How far a tracked point went from its own start, `track[0]` (the first observed state), never from a
    view's `init_position` or the env's placement: those may be other points of the object (MetaWorld's dial
    centre lies 5 cm from the tracked rim point), and a fact about a point must be measured on that point.
    `floor`: the table's height where the view has one, else the start height."""
    shift = _distance(track, track[0])
    rise = track[:, 2] - track[0, 2]
    lowest_allowed = (float(track[0, 2]) if floor is None else floor) - FELL_M
    return {
        f"{key}_max_displacement": shift.max(),
        f"{key}_final_displacement": shift[-1],
        f"{key}_moved": bool(shift.max() > MOVED_M),
        f"{key}_max_rise": rise.max(),
        f"{key}_lifted": bool(rise.max() > LIFTED_M),
        f"{key}_fell": bool(track[:, 2].min() < lowest_allowed),
    }


def scene_relations(key: str, track: np.ndarray, scene: Sequence[SceneFeature], walls_only: bool = False) -> dict[str, float | bool]:
    """Where the tracked point ended relative to each fixed feature, from its recorded positions: off the table
    (beyond its edges, or more than `FELL_M` below its top), blocked by a wall (ended on the side it started on, within
    `NEAR_M` of it) or past it (on the other side), inside a container (net, bin, shelf...), and its distance to each
    feature but the table and its rim (0 inside the feature's box). `walls_only`: the walls alone (the gripper's)."""
    start, final = track[0], track[-1]
    facts: dict[str, float | bool] = {}
    for feature in scene:
        if walls_only and feature.kind != "wall":
            continue
        low, high = feature.low, feature.high
        if feature.kind == "table":
            beyond = bool(np.any(final[:2] < low[:2]) or np.any(final[:2] > high[:2]))
            facts[f"{key}_off_{feature.name}"] = beyond or bool(final[2] < high[2] - FELL_M)
            continue
        if feature.kind == "rim":
            continue
        gap = feature.gap(final)
        facts[f"{key}_{feature.name}_gap"] = gap
        if feature.kind == "wall":
            axis, centre = feature.thin_axis, feature.centre[feature.thin_axis]
            crossed = bool((final[axis] - centre) * (start[axis] - centre) < 0)
            facts[f"{key}_blocked_by_{feature.name}"] = not crossed and gap < NEAR_M
            facts[f"{key}_past_{feature.name}"] = crossed
        elif feature.kind in CONTAINERS:
            facts[f"{key}_in_{feature.name}"] = feature.contains(final)
    return facts


def _manipulation_facts(views: list[Any], scene: Sequence[SceneFeature] = ()) -> dict[str, float | bool]:
    first = views[0]
    facts: dict[str, float | bool] = {}
    ee = _series(views, "robot.ee_position") if _has(first, "robot.ee_position") else None
    goal = _series(views, "goal_position") if _has(first, "goal_position") else None
    if ee is not None and goal is not None:
        d = _distance(ee, goal)
        facts.update(gripper_goal_start=d[0], gripper_goal_min=d.min(), gripper_goal_final=d[-1])
    if ee is not None:
        facts.update(scene_relations("gripper", ee, scene, walls_only=True))  # reach-wall: did the hand get past it?
    for key, field in (("object", "obj"), ("object2", "obj2")):
        if not _has(first, f"{field}.position"):
            continue
        obj = _series(views, f"{field}.position")
        if ee is not None:
            near = _distance(ee, obj)
            facts.update({f"gripper_{key}_min": near.min(), f"gripper_{key}_final": near[-1]})
            closed = _gripper_closed(views)
            if closed is not None:
                facts[f"{key}_grasped"] = bool(np.any(closed & (near < NEAR_M)))
        floor = float(first.table_height) if _has(first, "table_height") else None
        facts.update(_displacement_facts(key, obj, floor))
        facts.update(scene_relations(key, obj, scene))
        if goal is not None:
            d = _distance(obj, goal)
            facts.update({f"{key}_goal_start": d[0], f"{key}_goal_min": d.min(), f"{key}_goal_final": d[-1]})
    return facts


def _locomotion_facts(views: list[Any]) -> dict[str, float | bool]:
    first = views[0]
    pos = _series(views, "torso.position")
    dt = float(getattr(first, "dt", 0.0)) or 1.0
    duration = max(len(views) - 1, 1) * dt
    facts: dict[str, float | bool] = {"forward_distance": pos[-1, 0] - pos[0, 0]}
    if np.ptp(pos[:, 1]) > 1e-9:  # planar robots never leave y = 0
        facts["sideways_distance"] = pos[-1, 1] - pos[0, 1]
    facts.update({
        "mean_forward_speed": (pos[-1, 0] - pos[0, 0]) / duration,
        "height_start": pos[0, 2],
        "height_min": pos[:, 2].min(),
        "height_max": pos[:, 2].max(),
        "height_final": pos[-1, 2],
    })
    if _has(first, "torso.pitch"):
        pitch = _series(views, "torso.pitch")
        rotation = pitch[-1] - pitch[0]
        facts.update(pitch_rotation=rotation, pitch_turns=rotation / (2 * math.pi), pitch_max=pitch.max(), pitch_min=pitch.min())
        facts["fell"] = bool(pos[-1, 2] < 0.5 * pos[0, 2] or abs(_wrap(float(pitch[-1]))) > math.pi / 2)
    if _has(first, "torso.up_vector"):
        up = _series(views, "torso.up_vector")[:, 2]
        facts.update(upright_min=up.min(), upright_final=up[-1])
        facts["fell"] = bool(up.min() < 0.3)
        facts["upside_down_at_end"] = bool(up[-1] < 0.0)
    if _has(first, "foot_positions"):
        feet = _series(views, "foot_positions")
        if feet.ndim == 3 and feet.shape[1] == len(ANT_LEGS):
            for i, leg in enumerate(ANT_LEGS):
                facts[f"foot_{leg}_max_height"] = feet[:, i, 2].max()
                facts[f"foot_{leg}_mean_height"] = feet[:, i, 2].mean()
    return facts


def direction_facts(facts: dict[str, float | bool]) -> dict[str, bool]:
    """Whether each object ended nearer the goal than it started, or farther (by more than `PROGRESS_M` either way),
    from an episode's stated start and final distances: the per-episode signs the contrast counts."""
    signs: dict[str, bool] = {}
    for key in ("object", "object2"):
        if f"{key}_goal_start" in facts and f"{key}_goal_final" in facts:
            change = float(facts[f"{key}_goal_final"]) - float(facts[f"{key}_goal_start"])
            signs[f"{key}_goal_closer"] = change < -PROGRESS_M
            signs[f"{key}_goal_farther"] = change > PROGRESS_M
    return signs


def episode_facts(views: Sequence[Any], scene: Sequence[SceneFeature] = ()) -> dict[str, float | bool]:
    """Named numbers (metres, m/s, rad) and yes/no facts about one rollout, by what its views hold; with the
    episode's fixed features (`scene`), where its objects ended relative to them."""
    views = list(views)
    if not views:
        return {}
    facts: dict[str, float | bool] = {"steps": float(len(views) - 1)}
    if _has(views[0], "torso.position"):
        facts.update(_locomotion_facts(views))
    elif _has(views[0], "robot"):
        facts.update(_manipulation_facts(views, scene))
    return {k: (v if isinstance(v, bool) else float(v)) for k, v in facts.items()}


LABELS: dict[str, str] = {
    "steps": "episode length (steps)",
    "ended_early": "episode ended before the time limit (the environment terminated it)",
    "gripper_goal_start": "gripper-to-goal distance at the start (m)",
    "gripper_goal_min": "closest gripper-to-goal distance (m)",
    "gripper_goal_final": "gripper-to-goal distance at the end (m)",
    "gripper_object_min": "closest gripper-to-object distance (m)",
    "gripper_object_final": "gripper-to-object distance at the end (m)",
    "object_max_displacement": "largest object displacement from its start (m)",
    "object_final_displacement": "object displacement at the end (m)",
    "object_max_rise": "largest object height gain (m)",
    "object_goal_start": "object-to-goal distance at the start (m)",
    "object_goal_min": "closest object-to-goal distance (m)",
    "object_goal_final": "object-to-goal distance at the end (m)",
    "object_moved": f"object moved (> {MOVED_M * 100:.0f} cm)",
    "object_lifted": f"object lifted (> {LIFTED_M * 100:.1f} cm above its start)",
    "object_grasped": "gripper closed within 4 cm of the object (a grasp only where it was also lifted)",
    "object_goal_closer": "object ended nearer the goal than it started",
    "object_goal_farther": "object ended farther from the goal than it started",
    "object_fell": "object fell (more than 5 cm below the table or its start)",
    "forward_distance": "distance travelled forward, +x (m)",
    "sideways_distance": "distance travelled sideways, +y (m)",
    "mean_forward_speed": "mean forward speed (m/s)",
    "height_start": "torso height at the start (m)",
    "height_min": "lowest torso height (m)",
    "height_max": "highest torso height (m)",
    "height_final": "torso height at the end (m)",
    "pitch_rotation": "total pitch rotation, + forward (rad)",
    "pitch_turns": "total pitch rotation (turns)",
    "pitch_max": "largest pitch (rad)",
    "pitch_min": "smallest pitch (rad)",
    "upright_min": "lowest uprightness (up-vector z; 1 upright, -1 upside down)",
    "upright_final": "uprightness at the end",
    "fell": "fell or tipped over",
    "upside_down_at_end": "upside down at the end",
}


SCENE_FLAG = re.compile(r"^(object2?|gripper)_(blocked_by|past|in|off)_\w+$")
"""The yes/no facts of `scene_relations` (a feature's name is part of the key)."""


def is_scene_flag(key: str) -> bool:
    return SCENE_FLAG.match(key) is not None


SCENE_LABELS: tuple[tuple[str, str], ...] = (
    (r"^(object|gripper)_blocked_by_(\w+)$",
     f"{{}} blocked by the {{}} (ended on the side it started on, within {NEAR_M * 100:.0f} cm of it)"),
    (r"^(object|gripper)_past_(\w+)$", "{} ended past the {} (on its other side from where it started)"),
    (r"^(object)_in_(\w+)$", "{} ended inside the {} (its tracked point within that box)"),
    (r"^(object)_off_(\w+)$", f"{{}} fell off the {{}} (ended beyond its edges or more than {FELL_M * 100:.0f} cm below its top)"),
    (r"^(object|gripper)_(\w+)_gap$", "{}'s distance to the {} at the end (m; 0 inside its box)"),
)
"""Labels of `scene_relations`' facts, by pattern (a feature's name is part of the key)."""


def _label(key: str) -> str:
    if key in LABELS:
        return LABELS[key]
    for pattern, words in SCENE_LABELS:
        match = re.match(pattern, key)
        if match:
            return words.format(match.group(1), match.group(2).replace("_", " "))
    if key.startswith("object2_") or key.startswith("gripper_object2_"):
        return _label(key.replace("object2", "object")).replace("object", "second object")
    if key.startswith("foot_"):  # foot_<leg>_<max|mean>_height
        leg, kind, _ = key[len("foot_"):].rsplit("_", 2)
        return f"{leg.replace('_', '-')} foot {kind} height (m)"
    return key.replace("_", " ")


def _collect(task: Task, episodes: Sequence[Any], successes: Sequence[bool] | None) -> tuple[list[dict[str, Any]], list[bool | None]]:
    facts, flags = [], []
    for i, episode in enumerate(episodes):
        views, success = _views_and_success(episode)
        if successes is not None and i < len(successes):
            success = bool(successes[i])
        episode = episode_facts(views, episode_scene(episode))
        if episode:
            episode["ended_early"] = episode["steps"] < task.max_episode_steps
        facts.append(episode)
        flags.append(success)
    return facts, flags


def _aggregate(facts: list[dict[str, Any]], key: str) -> tuple[list[float], list[bool]]:
    values = [f[key] for f in facts if key in f]
    return [v for v in values if not isinstance(v, bool)], [v for v in values if isinstance(v, bool)]


def goal_progress(starts: Sequence[float], finals: Sequence[float], noun: str = "the object") -> str:
    """Signed progress: how far `noun` went toward or away from its goal, start and end distance (averaged), and
    how many episodes ended nearer, farther or level (within `PROGRESS_M`)."""
    changes = [f - s for s, f in zip(starts, finals)]
    return progress_words(float(np.mean(starts)), float(np.mean(finals)), sum(c < -PROGRESS_M for c in changes),
                          sum(c > PROGRESS_M for c in changes), len(changes), noun)


def progress_words(start: float, final: float, closer: int, farther: int, n: int, noun: str = "the object") -> str:
    """"moved the object 0.030 m away from the goal: 0.260 -> 0.290 m (3 of 3 episodes farther)"."""
    counts = [f"{closer} of {n} episode{'s' if n != 1 else ''} nearer"] if closer else []
    counts += [f"{farther} of {n} episode{'s' if n != 1 else ''} farther"] if farther else []
    level = n - closer - farther
    counts += [f"{level} of {n} within {PROGRESS_M * 1000:.0f} mm of their start distance"] if level else []
    change = final - start
    if change < -PROGRESS_M:
        moved = f"moved {noun} {abs(change):.3f} m toward the goal"
    elif change > PROGRESS_M:
        moved = f"moved {noun} {change:.3f} m away from the goal"
    else:
        moved = f"left {noun} as far from the goal as it started (change {change:+.3f} m)"
    average = " on average" if n > 1 else ""
    return f"{moved}: {start:.3f} -> {final:.3f} m{average} ({', '.join(counts)})"


def _progress_line(facts: list[dict[str, Any]], key: str) -> str | None:
    """The signed progress of `key` (object, object2), or that the task gives it no goal to progress to."""
    noun = "the second object" if key == "object2" else "the object"
    with_goal = [f for f in facts if f"{key}_goal_start" in f]
    if with_goal:
        return "progress toward the goal: " + goal_progress([f[f"{key}_goal_start"] for f in with_goal],
                                                             [f[f"{key}_goal_final"] for f in with_goal], noun)
    if any(f"{key}_max_displacement" in f for f in facts):
        return (f"progress toward the goal: this task gives {noun} no goal position, so its displacement has no direction "
                "toward or away from one")
    return None


def trajectory_analysis(task: Task, episodes: Sequence[Any], successes: Sequence[bool] | None = None,
                        title: str | None = None) -> str:
    """What the rollouts did, in numbers: one line per quantity, averaged over episodes.

    `episodes`: `EpisodeStats` from `run_episode(..., record_views=True)` (their success is used),
    or lists of views with `successes` given beside them. `title` replaces the first line (which episodes these are).
    """
    facts, flags = _collect(task, episodes, successes)
    if not facts or not any(facts):
        return f"Trajectory analysis: no recorded rollouts of {task.id}."
    n = len(facts)
    lines = [title or f"Trajectory analysis of {n} evaluation rollout{'s' if n != 1 else ''} of {task.id}:"]
    if all(f is not None for f in flags):
        lines.append(
            f"task success: {sum(bool(f) for f in flags)} of {n} episodes ("
            + ", ".join("yes" if f else "no" for f in flags) + f"); success test: {task.success_doc}"
        )
    else:
        lines.append("task success: not recorded for these rollouts")
    keys: list[str] = []
    for f in facts:
        keys.extend(k for k in f if k not in keys)
    for key in keys:
        if key.endswith("_final_displacement"):
            progress = _progress_line(facts, key[: -len("_final_displacement")])
        else:
            progress = None
        numbers, booleans = _aggregate(facts, key)
        if key == "ended_early" and not any(booleans):
            continue  # every episode ran to the time limit: nothing to say
        if booleans:
            lines.append(f"{_label(key)}: {sum(booleans)} of {len(booleans)} episodes")
        elif numbers:
            digits = 0 if all(float(v).is_integer() for v in numbers) else 3
            text = f"{_label(key)}: {np.mean(numbers):.{digits}f}"
            if len(numbers) > 1:
                text += f" on average (min {min(numbers):.{digits}f}, max {max(numbers):.{digits}f})"
            lines.append(text)
        if progress is not None:
            lines.append(progress)
    return "\n".join(lines)


def _mean(facts: list[dict[str, Any]], key: str) -> float | None:
    numbers, _ = _aggregate(facts, key)
    return float(np.mean(numbers)) if numbers else None


def _count(facts: list[dict[str, Any]], key: str) -> int:
    return sum(_aggregate(facts, key)[1])


def _cm(value: float | None) -> str:
    assert value is not None  # the mean of a fact the first episode records
    return f"{value * 100:.1f} cm"


def describe_behaviour(task: Task, episodes: Sequence[Any], successes: Sequence[bool] | None = None) -> str:
    """A short plain-English paragraph of what the robot did (for people, and the human-feedback prompt)."""
    facts, flags = _collect(task, episodes, successes)
    if not facts or not any(facts):
        return "No rollouts were recorded, so there is nothing to describe."
    n = len(facts)
    episodes_word = f"{n} episode{'s' if n != 1 else ''}"
    parts: list[str] = []
    if all(f is not None for f in flags):
        wins = sum(bool(f) for f in flags)
        parts.append(f"Over {episodes_word} the robot completed the task in {wins} of them.")
    else:
        parts.append(f"Over {episodes_word} (success not recorded):")
    early = _count(facts, "ended_early")
    if early:
        parts.append(f"The environment ended {early} of them early, after {_mean(facts, 'steps'):.0f} steps on average.")
    parts += _locomotion_sentences(facts) if "forward_distance" in facts[0] else _manipulation_sentences(facts)
    return " ".join(parts)


def _locomotion_sentences(facts: list[dict[str, Any]]) -> list[str]:
    """How far and fast it went, its torso's height and rotation, falls, and (an ant) its highest foot."""
    n = len(facts)
    parts = []
    forward, speed = _mean(facts, "forward_distance"), _mean(facts, "mean_forward_speed")
    sentence = f"It travelled {forward:.2f} m forward on average ({speed:.2f} m/s)"
    side = _mean(facts, "sideways_distance")
    if side is not None and abs(side) > 0.05:
        sentence += f" and {side:.2f} m sideways"
    parts.append(sentence + ".")
    low, high = min(f["height_min"] for f in facts), max(f["height_max"] for f in facts)
    parts.append(f"Its torso stayed between {low:.2f} and {high:.2f} m high.")
    turns = _mean(facts, "pitch_turns")
    if turns is not None and abs(turns) >= 0.1:
        direction = "forward" if turns > 0 else "backward"
        parts.append(f"The torso rotated {abs(turns):.2f} turns {direction} on average.")
    fell = _count(facts, "fell")
    parts.append(f"It fell or tipped over in {fell} of {n}." if fell else "It never fell or tipped over.")
    if "foot_front_left_max_height" in facts[0]:
        highest = max(ANT_LEGS, key=lambda leg: _mean(facts, f"foot_{leg}_max_height") or 0.0)
        parts.append(
            f"The highest foot was the {highest.replace('_', '-')} one, up to "
            f"{_mean(facts, f'foot_{highest}_max_height'):.2f} m on average."
        )
    return parts


def _manipulation_sentences(facts: list[dict[str, Any]]) -> list[str]:
    """How near the gripper came to the object, what happened to the object, and how near each came to the goal."""
    n = len(facts)
    parts = []
    if "gripper_object_min" in facts[0]:
        parts.append(
            f"The gripper came within {_cm(_mean(facts, 'gripper_object_min'))} of the object on average "
            f"and ended {_cm(_mean(facts, 'gripper_object_final'))} from it."
        )
        moved, lifted = _count(facts, "object_moved"), _count(facts, "object_lifted")
        grasped, fell = _count(facts, "object_grasped"), _count(facts, "object_fell")
        parts.append(
            f"The object moved in {moved} of {n} (by up to {_cm(max(f['object_max_displacement'] for f in facts))}), "
            f"the gripper closed within {NEAR_M * 100:.0f} cm of it in {grasped}, it was lifted in {lifted} and fell in {fell}."
        )
        progress = _progress_line(facts, "object")
        if progress is not None:
            parts.append("Progress toward the goal: " + progress[len("progress toward the goal: "):] + ".")
        for key in facts[0]:
            if key.startswith("object_") and is_scene_flag(key) and _count(facts, key):
                parts.append(f"{_label(key)[0].upper()}{_label(key)[1:]}: {_count(facts, key)} of {n}.")
    if "gripper_goal_start" in facts[0]:
        parts.append(
            f"The gripper started {_cm(_mean(facts, 'gripper_goal_start'))} from the goal, came within "
            f"{_cm(_mean(facts, 'gripper_goal_min'))} and ended {_cm(_mean(facts, 'gripper_goal_final'))} away."
        )
    return parts
