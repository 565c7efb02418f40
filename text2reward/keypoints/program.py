"""Keypoints -> an ordinary reward program, and a code reward combined with a keypoint reward.

Why a program and not a reward class: a keypoint reward then goes through everything a model's code goes through
(the static check, the jail, validation, screening, training, component statistics, feedback, the report), and a
person reads and edits it like any other reward. Its names start with KP_ / kp_, so it sits beside a model's program without a clash (`combine`). It is staged: the end effector approaches the grasp keypoint;
the grasp keypoint (anchored to the object, so it moves with it) then travels the path of waypoints to the target.
A reaching task has no grasp: the end effector itself travels the path. Progress along the path is measured from
the point's nearest place on it, so the reward needs no memory of earlier steps.
"""

from __future__ import annotations

import ast
import re

import numpy as np

from policies.reward_program import ENTRY_POINT
from sim_envs.task import KeypointSetup
from text2reward.errors import ConfigError
from text2reward.runs.keypoint_record import Keypoint, KeypointSet

REACH_SCALE = 10.0
"""1/m: the grasp approach pays 1 - tanh(REACH_SCALE * distance), as the expert rewards' reach terms do."""
MOVE_WEIGHT = 2.0
"""Path progress outweighs the approach, so moving the object is worth leaving the grasp point's side for a moment."""
AT_TARGET = 0.05
TARGET_BONUS = 1.0
MIN_MOVE_DISTANCE = 0.05
KEYPOINT_FUNCTION = "keypoint_reward"
CODE_FUNCTION = "code_reward"

PATH_LEFT = '''def kp_path_left(point, path):
    """Metres from `point` to the end of `path`: along the path from its place nearest to `point`, plus the way there."""
    lengths = [float(np.linalg.norm(b - a)) for a, b in zip(path[:-1], path[1:])]
    best = float(np.linalg.norm(point - path[0])) + sum(lengths)
    for i in range(len(lengths)):
        a, b = path[i], path[i + 1]
        span = lengths[i] ** 2
        t = 0.0 if span < 1e-12 else min(max(float(np.dot(point - a, b - a)) / span, 0.0), 1.0)
        nearest = a + t * (b - a)
        best = min(best, float(np.linalg.norm(point - nearest)) + (1.0 - t) * lengths[i] + sum(lengths[i + 1:]))
    return best
'''


def keypoint_program(keypoints: KeypointSet, setup: KeypointSetup, function: str = ENTRY_POINT) -> str:
    """The staged reward of `keypoints` as a program against the task's view (`function` names its entry point)."""
    grasp = keypoints.point("grasp")
    path = [p for p in keypoints.points if p.name != "grasp"]
    if not path or path[-1].name != "target":
        raise ConfigError("keypoints need a target (the last point of the path)")
    paths = {name: path_ for name, path_, _ in setup.anchors}
    lines = _module_head(keypoints, grasp)
    lines += [_constant(point, paths) for point in keypoints.points]
    lines += _stage_constants(keypoints, grasp)
    lines += ["", "", PATH_LEFT, "", f"def {function}(self, action):"]
    lines += ["    " + line for line in _reward_body(grasp, path, paths, setup.effector)]
    source = "\n".join(line for i, line in enumerate(lines) if line or (i > 0 and lines[i - 1])) + "\n"
    ast.parse(source)  # a definition error here is a bug, not a model's mistake
    return source


def _module_head(keypoints: KeypointSet, grasp: Keypoint | None) -> list[str]:
    """The program's docstring (where its points come from, its stages) and its import."""
    return [
        f'"""Keypoint reward for {_plain(keypoints.task_id)}: {_plain(keypoints.source)} keypoints on camera {_plain(keypoints.camera.name)} '
        f"(reset seed {keypoints.seed}), built by text2reward.keypoints.",
        "Stages: " + ("the end effector approaches the grasp point; the grasp point, which moves with what it is anchored to, "
                      "then travels through the waypoints to the target." if grasp is not None else
                      "the end effector travels through the waypoints to the target."),
        'Points anchored to a part of the view follow it; the others are fixed world points (metres). Edit freely."""',
        "",
        "import numpy as np",
        "",
    ]


def _stage_constants(keypoints: KeypointSet, grasp: Keypoint | None) -> list[str]:
    """The stages' scales and weights, the move's scale set by the path left in the pictured state."""
    left_now = _first_state_path_left(keypoints, grasp)
    return [
        f"KP_REACH_SCALE = {REACH_SCALE}  # 1/m: the approach pays 1 - tanh(KP_REACH_SCALE * distance)" if grasp is not None else "",
        f"KP_MOVE_DISTANCE = {max(left_now, MIN_MOVE_DISTANCE):.3f}  # m: the path left in the pictured state; progress is "
        "1 - tanh(left / KP_MOVE_DISTANCE)",
        f"KP_MOVE_WEIGHT = {MOVE_WEIGHT}",
        f"KP_AT_TARGET = {AT_TARGET}  # m: within this of the path's end counts as arrived",
        f"KP_TARGET_BONUS = {TARGET_BONUS}",
    ]


def _reward_body(grasp: Keypoint | None, path: list[Keypoint], paths: dict[str, str], effector: str) -> list[str]:
    """The entry point's lines: approach the grasp point (when there is one), then the path's progress and the arrival."""
    body = []
    if grasp is not None:
        body.append(f"grasp = {_expression(grasp, paths)}")
    body.append("path = [" + ", ".join(_expression(p, paths) for p in path) + "]")
    if grasp is not None:
        body += [
            f"reach_distance = float(np.linalg.norm(self.{effector} - grasp))",
            "reach = 1.0 - np.tanh(KP_REACH_SCALE * reach_distance)",
            "left = kp_path_left(grasp, path)",
        ]
    else:
        body.append(f"left = kp_path_left(self.{effector}, path)")
    body += [
        "progress = 1.0 - np.tanh(left / KP_MOVE_DISTANCE)",
        "at_target = 1.0 if left < KP_AT_TARGET else 0.0",
    ]
    if grasp is not None:
        body += ["total = reach + KP_MOVE_WEIGHT * progress + KP_TARGET_BONUS * at_target",
                 'return total, {"reach_grasp": reach, "path_progress": progress, "at_target": at_target}']
    else:
        body += ["total = KP_MOVE_WEIGHT * progress + KP_TARGET_BONUS * at_target",
                 'return total, {"path_progress": progress, "at_target": at_target}']
    return body


def combine(code: str, keypoint_code: str) -> str:
    """One program whose reward is a model's code reward plus the keypoint reward, each component kept under a
    prefix (`code_`, `kp_`). The two programs' names are kept apart by renaming the entry points; a name both
    define at the top level is refused (a ConfigError naming it) rather than silently shadowed."""
    code_tree, keypoint_tree = ast.parse(code), ast.parse(keypoint_code)
    clash = (_top_level_names(code_tree) & _top_level_names(keypoint_tree)) - {ENTRY_POINT, "np", "math"}
    if clash:
        raise ConfigError(f"the code reward and the keypoint reward both define {', '.join(sorted(clash))}: rename it in the code reward")
    parts = [
        "# A code reward plus a keypoint reward (text2reward.keypoints.combine); each keeps its components, prefixed.",
        _rename_entry(code, CODE_FUNCTION).rstrip(),
        "",
        "",
        "# --- keypoint reward " + "-" * 60,
        _rename_entry(keypoint_code, KEYPOINT_FUNCTION).rstrip(),
        "",
        "",
        f"def {ENTRY_POINT}(self, action):",
        f"    code_total, code_parts = {CODE_FUNCTION}(self, action)",
        f"    keypoint_total, keypoint_parts = {KEYPOINT_FUNCTION}(self, action)",
        "    components = {'code_' + name: value for name, value in code_parts.items()}",
        "    components.update({'kp_' + name: value for name, value in keypoint_parts.items()})",
        "    return float(code_total) + float(keypoint_total), components",
        "",
    ]
    source = "\n".join(parts)
    ast.parse(source)
    return source


def _constant(point: Keypoint, paths: dict[str, str]) -> str:
    name = "KP_" + point.name.upper()
    if point.anchor is not None and point.offset is not None:
        return (f"{name}_OFFSET = np.array({_numbers(point.offset)})  # relative to self.{paths[point.anchor]} "
                f"(pixel {point.pixel[0]:.0f}, {point.pixel[1]:.0f})")
    return f"{name} = np.array({_numbers(point.world)})  # a fixed world point (pixel {point.pixel[0]:.0f}, {point.pixel[1]:.0f})"


def _expression(point: Keypoint, paths: dict[str, str]) -> str:
    name = "KP_" + point.name.upper()
    return f"self.{paths[point.anchor]} + {name}_OFFSET" if point.anchor is not None else name


def _first_state_path_left(keypoints: KeypointSet, grasp: Keypoint | None) -> float:
    """The path still ahead in the pictured state: from the grasp point, or from the end effector in a reach."""
    path = [np.array(p.world) for p in keypoints.points if p.name != "grasp"]
    start = np.array(grasp.world if grasp is not None else keypoints.effector)
    total = float(np.linalg.norm(path[0] - start))
    for a, b in zip(path[:-1], path[1:]):
        total += float(np.linalg.norm(b - a))
    return total


def _plain(text: str) -> str:
    """A name (task, model, camera) safe inside the program's docstring: a quote or backslash in a model's name must
    not end the string and turn the rest into code, and a double underscore would fail the static check."""
    return re.sub(r"_{2,}", "_", re.sub(r"[^\w.:/+@ -]", "-", text))


def _numbers(values: tuple[float, ...]) -> str:
    return "[" + ", ".join(f"{v:.4f}" for v in values) + "]"


def _top_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _rename_entry(code: str, new_name: str) -> str:
    """`code` with its top-level entry point renamed on its `def` line only (comments and layout kept)."""
    lines = code.splitlines()
    for node in ast.parse(code).body:
        if isinstance(node, ast.FunctionDef) and node.name == ENTRY_POINT:
            line = lines[node.lineno - 1]
            lines[node.lineno - 1] = line.replace(f"def {ENTRY_POINT}", f"def {new_name}", 1)
    return "\n".join(lines)

