"""The scene's fixed features (walls, the table's edges, a net, bins, a shelf...), read from MuJoCo geoms.

Why: a reward designer told only "push the puck around the wall" has to guess where the wall stands and how big it
is, and the analysis could not say where the puck stopped against it (issue 40). Each task names its fixed features
as data (`FeatureSpec`: a name, a kind, the MuJoCo body or geom that makes it); their boxes are read from the model's
collision geoms on the state the policy sees (`read_features`), never typed in. The prompt states them
(`describe_scene`, from `scene_features.json`, measured over seeded resets: fixed, moving with the goal, or placed
anew each episode), and the trajectory analysis relates the object's final position to each one
(text2reward.feedback.trajectory). `Task.scene_features` None: not described for this task; (): it has none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

import numpy as np

from sim_envs.view_base import dotted_attribute

SCENE_FILE = Path(__file__).with_name("scene_features.json")
FeatureKind = Literal["table", "rim", "wall", "net", "bin", "box", "shelf", "cabinet", "hoop", "hole", "peg", "fixture"]
CONTAINERS: frozenset[str] = frozenset({"net", "bin", "box", "shelf", "cabinet", "hoop", "hole"})
"""Kinds an object can end inside (its tracked point within their box)."""
WALLED: frozenset[str] = frozenset({"net", "bin", "box", "shelf", "cabinet"})
"""Kinds whose walls leave some sides open (where an object goes in): each side's share covered by geoms is measured."""
OPEN_BELOW = 0.5
"""A side of a walled feature's box is open when geoms lying on it cover less than this share of it."""
TOUCH_M = 0.005
KIND_WORDS: dict[str, str] = {
    "table": "the table top", "rim": "walls along the table's edges", "wall": "a wall", "net": "a goal net",
    "bin": "a bin", "box": "an open box", "shelf": "a shelf", "cabinet": "a cabinet the plate slides into",
    "hoop": "a basketball hoop", "hole": "a hole in the table top", "peg": "a peg", "fixture": "a fixed fixture",
}
ANCHORS = ("goal_position", "obj.init_position")
"""View paths a feature that moves between episodes may move with (its offset from them then stays the same)."""
SAME_M = 5e-4
"""Centres within this of each other (or of the same offset from an anchor) are the same place (MuJoCo's noise)."""
DECIMALS = 3


@dataclass(frozen=True)
class FeatureSpec:
    """Which part of a MuJoCo model makes a feature: the collision geoms of `body` and the bodies welded below it
    (bodies on a joint move: they are the task's objects, not fixed features), or the one geom `geom`. `body` ""
    is the scene's one unnamed body fixed to the world (MetaWorld's pick-out-of-hole leaves its plate unnamed). A
    "hole" is the gap those geoms' top plates leave in the top (`hole_extent`), not their box."""

    name: str
    kind: FeatureKind
    body: str | None = None
    geom: str | None = None

    @property
    def source(self) -> str:
        if self.geom is not None:
            return f"MuJoCo geom `{self.geom}`"
        return f"MuJoCo body `{self.body}`" if self.body else "the unnamed MuJoCo body fixed to the world"


@dataclass(frozen=True)
class SceneFeature:
    """A feature's world-aligned box in one state: centre and half-sizes (m)."""

    name: str
    kind: FeatureKind
    centre: tuple[float, float, float]
    half_size: tuple[float, float, float]
    source: str
    open_sides: tuple[str, ...] = ()
    """For a walled kind (net, bin, box, shelf, cabinet): the sides ("-y", "+z", ...) its geoms leave open."""

    @property
    def low(self) -> np.ndarray:
        return np.asarray(self.centre) - np.asarray(self.half_size)

    @property
    def high(self) -> np.ndarray:
        return np.asarray(self.centre) + np.asarray(self.half_size)

    def gap(self, point: Any) -> float:
        """Distance from `point` to the box (0 inside it)."""
        p = np.asarray(point, dtype=float)
        outside = np.maximum(self.low - p, 0.0) + np.maximum(p - self.high, 0.0)
        return float(np.linalg.norm(outside))

    def contains(self, point: Any) -> bool:
        p = np.asarray(point, dtype=float)
        return bool(np.all(p >= self.low) and np.all(p <= self.high))

    @property
    def thin_axis(self) -> int:
        """The axis a wall is thin along (its two faces are across it)."""
        return int(np.argmin(self.half_size))


def welded_bodies(model: Any, root: int) -> set[int]:
    """`root` and the bodies attached below it without a joint on the way (they move only if the root is moved)."""
    bodies = {root}
    for body in range(root + 1, model.nbody):  # MuJoCo numbers a parent before its children
        if int(model.body_parentid[body]) in bodies and int(model.body_jntnum[body]) == 0:
            bodies.add(body)
    return bodies


def feature_body(model: Any, spec: FeatureSpec) -> int:
    """The id of the body a spec names (the named geom's body for a geom spec)."""
    if spec.geom is not None:
        return int(model.geom_bodyid[model.geom(spec.geom).id])
    return _body_id(model, spec.body or "")


def _body_id(model: Any, name: str) -> int:
    if name:
        return int(model.body(name).id)
    unnamed = [b for b in range(1, model.nbody) if not model.body(b).name and int(model.body_parentid[b]) == 0
               and not int(model.body_jntnum[b])]
    if len(unnamed) != 1:
        raise ValueError(f"a feature spec names the unnamed body, but the model has {len(unnamed)} unnamed fixed bodies")
    return unnamed[0]


def feature_geoms(model: Any, spec: FeatureSpec) -> list[int]:
    """The geoms whose box is the feature: the named geom, or the welded bodies' collision geoms (every geom where
    they have none)."""
    if spec.geom is not None:
        return [int(model.geom(spec.geom).id)]
    bodies = welded_bodies(model, _body_id(model, spec.body or ""))
    geoms = [g for g in range(model.ngeom) if int(model.geom_bodyid[g]) in bodies]
    solid = [g for g in geoms if model.geom_contype[g] or model.geom_conaffinity[g]]
    return solid or geoms


MESH = 7
"""mujoco.mjtGeom.mjGEOM_MESH (not imported: reading a model needs no more of MuJoCo's module)."""


def geoms_extent(model: Any, data: Any, geoms: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) corners of the world-aligned box around `geoms`: a mesh's own vertices (its precomputed box, turned
    with a rotated mesh, can overshoot by centimetres: the handle's base reached 11 cm below the table), any other
    geom's box (`geom_aabb`) turned by its frame."""
    low, high = np.full(3, np.inf), np.full(3, -np.inf)
    for g in geoms:
        rotation = data.geom_xmat[g].reshape(3, 3)
        if int(model.geom_type[g]) == MESH:
            mesh = int(model.geom_dataid[g])
            start, count = int(model.mesh_vertadr[mesh]), int(model.mesh_vertnum[mesh])
            points = data.geom_xpos[g] + model.mesh_vert[start : start + count] @ rotation.T
            low, high = np.minimum(low, points.min(axis=0)), np.maximum(high, points.max(axis=0))
            continue
        centre = data.geom_xpos[g] + rotation @ model.geom_aabb[g, :3]
        half = np.abs(rotation) @ model.geom_aabb[g, 3:]
        low, high = np.minimum(low, centre - half), np.maximum(high, centre + half)
    return low, high


def hole_extent(model: Any, data: Any, geoms: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of the hole the geoms' top plates (those whose top is the highest) leave in the top: in x and y the
    box around the parts of the plates' outline no plate covers, from the top down to the highest other geom below
    it (the hole's floor), else to the plates' bottom."""
    boxes = [geoms_extent(model, data, [g]) for g in geoms]
    top = max(high[2] for _, high in boxes)
    plates = [(low, high) for low, high in boxes if high[2] >= top - 1e-6]
    # edges to the micrometre: two plates that meet must not leave a sliver of float noise between them
    xs = sorted({round(float(v), 6) for low, high in plates for v in (low[0], high[0])})
    ys = sorted({round(float(v), 6) for low, high in plates for v in (low[1], high[1])})
    open_cells = []
    for x0, x1 in zip(xs, xs[1:]):
        for y0, y1 in zip(ys, ys[1:]):
            middle = np.array([(x0 + x1) / 2, (y0 + y1) / 2])
            if not any(np.all(low[:2] - 1e-6 <= middle) and np.all(middle <= high[:2] + 1e-6) for low, high in plates):
                open_cells.append((x0, x1, y0, y1))
    if not open_cells:
        raise ValueError("a hole feature's geoms leave no gap in their top")
    x_low, x_high = min(c[0] for c in open_cells), max(c[1] for c in open_cells)
    y_low, y_high = min(c[2] for c in open_cells), max(c[3] for c in open_cells)
    bottom = min(low[2] for low, _ in plates)
    below = [high[2] for low, high in boxes if high[2] < top - 1e-6 and low[0] < x_high and high[0] > x_low
             and low[1] < y_high and high[1] > y_low]
    floor = max(below) if below else bottom
    return np.array([x_low, y_low, floor]), np.array([x_high, y_high, top])


def read_features(model: Any, data: Any, specs: tuple[FeatureSpec, ...]) -> tuple[SceneFeature, ...]:
    """Each spec's box in the state `data` holds (its kinematics computed)."""
    features = []
    for spec in specs:
        geoms = feature_geoms(model, spec)
        low, high = hole_extent(model, data, geoms) if spec.kind == "hole" else geoms_extent(model, data, geoms)
        sides = open_sides(model, data, geoms, low, high) if spec.kind in WALLED else ()
        features.append(SceneFeature(spec.name, spec.kind, _triple((low + high) / 2), _triple((high - low) / 2), spec.source, sides))
    return tuple(features)


def open_sides(model: Any, data: Any, geoms: list[int], low: np.ndarray, high: np.ndarray) -> tuple[str, ...]:
    """The sides of the box (low, high) that the geoms leave open: those whose area the geoms lying on that side
    (within `TOUCH_M` of it) cover less than `OPEN_BELOW` of (soccer's net: its front, -y; a bin: its top, +z)."""
    boxes = [geoms_extent(model, data, [g]) for g in geoms]
    sides = []
    for axis in range(3):
        others = [i for i in range(3) if i != axis]
        area = float(np.prod(high[others] - low[others]))
        for sign, plane in (("-", low[axis]), ("+", high[axis])):
            covered = 0.0
            for geom_low, geom_high in boxes:
                if abs((geom_low if sign == "-" else geom_high)[axis] - plane) < TOUCH_M:
                    overlap = np.minimum(geom_high[others], high[others]) - np.maximum(geom_low[others], low[others])
                    covered += float(np.prod(np.clip(overlap, 0.0, None)))
            if area > 0 and covered / area < OPEN_BELOW:
                sides.append(sign + "xyz"[axis])
    return tuple(sides)


def episode_features(task: Any, env: Any) -> tuple[SceneFeature, ...]:
    """The task's features in the env's current state (read after a reset: the episode's placement); () for a task
    that describes none."""
    specs = getattr(task, "scene_features", None)
    if not specs:
        return ()
    unwrapped = env.unwrapped
    return read_features(unwrapped.model, unwrapped.data, specs)


def _triple(values: Any) -> tuple[float, float, float]:
    a, b, c = (float(v) for v in values)
    return (a, b, c)


# --------------------------------------------------------------------------- measured over resets, for the prompt


def measure_scene(task: Any, resets: int = 8) -> list[dict[str, Any]]:
    """Each feature over `resets` seeded resets (the first state the policy sees): its half-sizes and where it is,
    as `placement`: {"fixed": centre}, {"anchor": view path, "offset": centre minus it}, or {"low", "high"}: the
    range of its centre."""
    specs = task.scene_features or ()
    if not specs:
        return []
    seen: list[list[SceneFeature]] = []
    anchors: dict[str, list[np.ndarray]] = {path: [] for path in ANCHORS}
    env = task.make_env(seed=0)
    try:
        for seed in range(resets):
            env.reset(seed=seed)
            view = task.view(env)
            seen.append(list(episode_features(task, env)))
            for path in ANCHORS:
                value = dotted_attribute(view, path)
                if value is not None:
                    anchors[path].append(np.asarray(value, dtype=float))
    finally:
        env.close()
    out = []
    for i, spec in enumerate(specs):
        centres = np.array([features[i].centre for features in seen])
        halves = np.array([features[i].half_size for features in seen])
        fact = {"name": spec.name, "kind": spec.kind, "source": spec.source,
                "half_size": _rounded(halves.max(axis=0)), "placement": _placement(centres, anchors)}
        if spec.kind in WALLED:
            fact["open"] = sorted({side for features in seen for side in features[i].open_sides})
        out.append(fact)
    return out


def _placement(centres: np.ndarray, anchors: dict[str, list[np.ndarray]]) -> dict[str, Any]:
    if np.ptp(centres, axis=0).max() <= SAME_M:
        return {"fixed": _rounded(centres.mean(axis=0))}
    for path, values in anchors.items():
        if len(values) == len(centres):
            offsets = centres - np.array(values)
            if np.ptp(offsets, axis=0).max() <= SAME_M:
                return {"anchor": path, "offset": _rounded(offsets.mean(axis=0))}
    return {"low": _rounded(centres.min(axis=0)), "high": _rounded(centres.max(axis=0))}


def _rounded(values: np.ndarray) -> list[float]:
    return [round(float(v), DECIMALS) + 0.0 for v in values]  # + 0.0: no "-0.0"


def _vector(values: list[float]) -> str:
    return "(" + ", ".join(f"{v:.3f}" for v in values) + ")"


def describe_feature(fact: dict[str, Any]) -> str:
    """One line: name, kind, where (fixed, with an anchor, or its range) and how big."""
    half, placement = fact["half_size"], fact["placement"]
    head = f"{fact['name']} ({KIND_WORDS.get(fact['kind'], fact['kind'])}; {fact['source']}):"
    if "fixed" in placement:
        centre = placement["fixed"]
        where = f"centre {_vector(centre)}, the same every episode"
    elif "anchor" in placement:
        centre = None
        where = f"centre at `{placement['anchor']}` + {_vector(placement['offset'])} every episode"
    else:
        centre = None
        where = ("centre placed anew each episode within x {:.3f}..{:.3f}, y {:.3f}..{:.3f}, z {:.3f}..{:.3f}"
                 .format(*(v for pair in zip(placement["low"], placement["high"]) for v in pair)))
    line = f"{head} {where}; half-sizes {_vector(half)}"
    if fact.get("open"):
        sides = fact["open"]
        line += f"; open on its {' and '.join(sides)} side{'s' if len(sides) > 1 else ''}"
    if fact["kind"] == "table" and centre is not None:
        line += (f"; top at z {centre[2] + half[2]:.3f}, edges at x {centre[0] - half[0]:.3f} and {centre[0] + half[0]:.3f}, "
                 f"y {centre[1] - half[1]:.3f} and {centre[1] + half[1]:.3f}")
    elif fact["kind"] == "rim" and centre is not None:
        line += f"; its walls stand along the four sides of that box, top at z {centre[2] + half[2]:.3f}"
    elif fact["kind"] == "wall":
        axis = int(np.argmin(half))
        line += f"; thin along {'xyz'[axis]}"
        if centre is not None:
            line += f": faces at {'xyz'[axis]} {centre[axis] - half[axis]:.3f} and {centre[axis] + half[axis]:.3f}"
    return line


def describe_scene(facts: list[dict[str, Any]]) -> str:
    """The prompt's lines, one per feature, or that the task has none."""
    if not facts:
        return "none (nothing fixed in the scene that an object could hit, fall from or end inside)"
    return "\n".join(f"# - {describe_feature(fact)}" for fact in facts)


@cache
def shipped_scene() -> dict[str, list[dict[str, Any]]]:
    if not SCENE_FILE.is_file():
        return {}
    return json.loads(SCENE_FILE.read_text())


_LIVE: dict[tuple[str, str], list[dict[str, Any]]] = {}
"""A task file's own tasks, measured once per process (by id and source)."""


def _measured_live(task: Any) -> list[dict[str, Any]]:
    key = (task.id, task.source)
    if key not in _LIVE:
        _LIVE[key] = measure_scene(task)
    return _LIVE[key]


def scene_facts(task: Any) -> list[dict[str, Any]] | None:
    """The task's measured features: shipped for a built-in task, measured once per process for a task file's
    own; None where the task does not describe its scene."""
    if task.scene_features is None:
        return None
    if not task.scene_features:
        return []
    shipped = shipped_scene()
    if task.source == "builtin" and task.id in shipped:
        return shipped[task.id]
    return _measured_live(task)


def scene_text(task: Any) -> str:
    """The prompt's section ('' where the task does not describe its scene)."""
    facts = scene_facts(task)
    if facts is None:
        return ""
    head = ("# Fixed scene features, read from MuJoCo's collision geoms in the first state of seeded episodes "
            "(m, world frame; each the box around its geoms):")
    body = describe_scene(facts)
    return f"{head}\n{body}" if facts else f"{head} {body}"


# --------------------------------------------------------------------------- the tasks' features, as data

def _mw(*extra: tuple[str, FeatureKind, str], rim: bool = True) -> tuple[FeatureSpec, ...]:
    """The table, the walls along its edges (`rim`: the table with a hole has none) and the task's own features."""
    table: tuple[FeatureSpec, ...] = (FeatureSpec("table", "table", body="tablelink"),)
    table += (FeatureSpec("table_rim", "rim", body="RetainingWall"),) if rim else ()
    return table + tuple(FeatureSpec(name, kind, body=body) for name, kind, body in extra)


WALL: tuple[str, FeatureKind, str] = ("wall", "wall", "wall")
METAWORLD_FEATURES: dict[str, tuple[FeatureSpec, ...]] = {
    "assembly": _mw(("peg", "peg", "peg")), "disassemble": _mw(("peg", "peg", "peg")),
    "basketball": _mw(("hoop", "hoop", "basket_goal")),
    "bin-picking": _mw(("start_bin", "bin", "bin_start"), ("goal_bin", "bin", "bin_goal")),
    "box-close": _mw(("box", "box", "boxbody")),
    "button-press-topdown": _mw(("button_box", "fixture", "box")),
    "button-press-topdown-wall": _mw(("button_box", "fixture", "box"), WALL),
    "button-press": _mw(("button_box", "fixture", "box")),
    "button-press-wall": _mw(("button_box", "fixture", "box"), WALL),
    "coffee-button": _mw(("coffee_machine", "fixture", "coffee_machine")),
    "coffee-pull": _mw(("coffee_machine", "fixture", "coffee_machine")),
    "coffee-push": _mw(("coffee_machine", "fixture", "coffee_machine")),
    "dial-turn": _mw(),  # the whole dial turns on its joint: nothing of it is fixed
    "door-close": _mw(("door_frame", "fixture", "door")), "door-open": _mw(("door_frame", "fixture", "door")),
    "door-lock": _mw(("door_frame", "fixture", "door")), "door-unlock": _mw(("door_frame", "fixture", "door")),
    "drawer-close": _mw(("drawer_casing", "fixture", "drawer")), "drawer-open": _mw(("drawer_casing", "fixture", "drawer")),
    "faucet-open": _mw(("faucet_base", "fixture", "faucetBase")), "faucet-close": _mw(("faucet_base", "fixture", "faucetBase")),
    "hammer": _mw(("nail_box", "fixture", "box")),
    "handle-press-side": _mw(("handle_base", "fixture", "box")), "handle-press": _mw(("handle_base", "fixture", "box")),
    "handle-pull-side": _mw(("handle_base", "fixture", "box")), "handle-pull": _mw(("handle_base", "fixture", "box")),
    "lever-pull": _mw(("lever_base", "fixture", "lever")),
    "pick-place-wall": _mw(WALL), "push-wall": _mw(WALL), "reach-wall": _mw(WALL),
    "pick-out-of-hole": _mw(("hole_plate", "table", ""), ("hole", "hole", "")),
    "hand-insert": _mw(("hole", "hole", "tablelink"), rim=False), "sweep-into": _mw(("hole", "hole", "tablelink"), rim=False),
    "pick-place": _mw(), "push": _mw(), "push-back": _mw(), "reach": _mw(), "sweep": _mw(),
    "plate-slide": _mw(("cabinet", "cabinet", "puck_goal")), "plate-slide-side": _mw(("cabinet", "cabinet", "puck_goal")),
    "plate-slide-back": _mw(("cabinet", "cabinet", "puck_goal")), "plate-slide-back-side": _mw(("cabinet", "cabinet", "puck_goal")),
    "peg-insert-side": _mw(("hole_box", "fixture", "box")), "peg-unplug-side": _mw(("plug_box", "fixture", "box")),
    "soccer": _mw(("net", "net", "goal_whole")),
    "stick-push": _mw(), "stick-pull": _mw(),
    "shelf-place": _mw(("shelf", "shelf", "shelf")),
    "window-open": _mw(("window_frame", "fixture", "window")), "window-close": _mw(("window_frame", "fixture", "window")),
}
"""MetaWorld task -> its fixed features: every task's table and the walls along its edges, plus the fixed bodies of
its own scene (a body on a joint below them, the drawer, the door, the button, moves: it is the task's object)."""
FETCH_FEATURES: tuple[FeatureSpec, ...] = (FeatureSpec("table", "table", body="table0"),)
FRANKA_FEATURES: tuple[FeatureSpec, ...] = (FeatureSpec("table", "table", geom="table"),)
