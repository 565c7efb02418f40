"""Where each view's tracked point sits on its object, and how big the object is, measured from MuJoCo.

Why: a reward designer told only "obj is the mug" cannot know that `obj.position` is the mug's base centre
and that the mug is 8 cm wide, so the gripper never gets closer than ~4 cm to that point; rewards then ask
for the impossible and learn it only from feedback. Here every task names the MuJoCo element its view tracks
(`TRACKED`, written from each environment's own accessor and checked against the view by tests), the object
is that element's body and everything attached below it, and its size is the world-frame bounding box of
those bodies' collision geoms in the first state (seed 0). The figures are measured once and shipped in
`object_facts.json` (regenerate with `python -m sim_envs.shipped_facts`); `render_view_doc` states them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

import numpy as np

FACTS_FILE = Path(__file__).with_name("object_facts.json")
DIAL_RADIUS = 0.05
"""MetaWorld's dial-turn tracks a point this far from the dial's centre, on the side the knob's angle points to."""


Kind = Literal["body", "site", "geom", "joint", "dial"]


@dataclass(frozen=True)
class Tracked:
    """A view's tracked point: a MuJoCo element's world position plus a fixed world-frame offset.

    `kind` "body" is a body frame's origin (what Gymnasium's `get_body_com` returns), "joint" the position part of
    a free joint's qpos, "dial" the rim point of MetaWorld's dial (`DIAL_RADIUS`)."""

    kind: Kind
    name: str
    offset: tuple[float, float, float] = (0.0, 0.0, 0.0)


def _mw(kind: Kind, name: str, *offset: float) -> Tracked:
    return Tracked(kind, name, tuple(offset) if offset else (0.0, 0.0, 0.0))  # type: ignore[arg-type]


METAWORLD_OBJ: dict[str, Tracked] = {
    "assembly": _mw("site", "RoundNut-8"), "disassemble": _mw("site", "RoundNut-8"),
    "basketball": _mw("body", "bsktball"), "soccer": _mw("body", "soccer_ball"),
    "box-close": _mw("body", "top_link"),
    "button-press-topdown": _mw("body", "button", 0.0, 0.0, 0.193), "button-press-topdown-wall": _mw("body", "button", 0.0, 0.0, 0.193),
    "button-press": _mw("body", "button", 0.0, -0.193, 0.0), "button-press-wall": _mw("body", "button", 0.0, -0.193, 0.0),
    "coffee-button": _mw("site", "buttonStart"),
    "dial-turn": _mw("dial", "dial"),
    "door-close": _mw("geom", "handle"), "door-open": _mw("geom", "handle"),
    "door-lock": _mw("site", "lockStartLock"), "door-unlock": _mw("site", "lockStartUnlock"),
    "drawer-close": _mw("body", "drawer_link", 0.0, -0.16, 0.05), "drawer-open": _mw("body", "drawer_link", 0.0, -0.16, 0.0),
    "faucet-open": _mw("site", "handleStartOpen", 0.0, 0.0, -0.01), "faucet-close": _mw("site", "handleStartClose", 0.0, 0.0, -0.01),
    "hammer": _mw("body", "hammer"),
    "handle-press-side": _mw("site", "handleStart"), "handle-press": _mw("site", "handleStart"),
    "handle-pull-side": _mw("site", "handleCenter"), "handle-pull": _mw("site", "handleRight"),
    "lever-pull": _mw("site", "leverStart"),
    "peg-insert-side": _mw("site", "pegGrasp"), "peg-unplug-side": _mw("site", "pegEnd"),
    "pick-place-wall": _mw("geom", "objGeom"), "push-back": _mw("geom", "objGeom"), "push-wall": _mw("geom", "objGeom"),
    "plate-slide": _mw("geom", "puck"), "plate-slide-side": _mw("geom", "puck"),
    "plate-slide-back": _mw("geom", "puck"), "plate-slide-back-side": _mw("geom", "puck"),
    "stick-push": _mw("body", "stick"), "stick-pull": _mw("body", "stick"),
    "window-open": _mw("site", "handleOpenStart"), "window-close": _mw("site", "handleCloseStart"),
    "sweep": _mw("body", "obj"),
    **{name: _mw("body", "obj") for name in (
        "bin-picking", "coffee-pull", "coffee-push", "hand-insert", "pick-out-of-hole", "pick-place", "push", "reach",
        "reach-wall", "shelf-place", "sweep-into")},
}
"""MetaWorld task -> what `obj.position` is (each env's `_get_pos_objects`, first three numbers)."""
METAWORLD_OBJ2: dict[str, Tracked] = {
    "hammer": _mw("body", "nail_link"),
    "stick-push": _mw("site", "insertion", 0.0, 0.09, 0.0),
    "stick-pull": _mw("site", "insertion"),
}
"""MetaWorld task -> what `obj2.position` is, where the view has a second object."""
OTHER_OBJ: dict[str, Tracked] = {
    **{f"fetch/{name}": Tracked("site", "object0") for name in ("push", "slide", "pick_and_place")},
    **{f"franka/{name}": Tracked("joint", "object:joint") for name in ("push", "slide", "pick_and_place")},
    "adroit/door": Tracked("site", "S_handle"),
    **{f"adroit/{name}": Tracked("body", "Object") for name in ("hammer", "pen", "relocate")},
    **{f"shadow/{name}": Tracked("joint", "object:joint") for name in ("block", "egg", "pen")},
}
"""Other families' `obj.position`, by task id."""


def tracked_points(task_id: str) -> dict[str, Tracked]:
    """{"obj": ..., "obj2": ...} of what the task's view tracks (empty for tasks without an object)."""
    if task_id.startswith("metaworld/"):
        name = task_id.removeprefix("metaworld/").removesuffix("-v3")
        points = {"obj": METAWORLD_OBJ[name]} if name in METAWORLD_OBJ else {}
        if name in METAWORLD_OBJ2:
            points["obj2"] = METAWORLD_OBJ2[name]
        return points
    return {"obj": OTHER_OBJ[task_id]} if task_id in OTHER_OBJ else {}


def tracked_position(model: Any, data: Any, point: Tracked) -> np.ndarray:
    """The tracked point's world position, read from MuJoCo data (not through any view or env accessor)."""
    if point.kind == "site":
        base = np.array(data.site_xpos[model.site(point.name).id])
    elif point.kind == "geom":
        base = np.array(data.geom_xpos[model.geom(point.name).id])
    elif point.kind == "joint":
        address = int(model.jnt_qposadr[model.joint(point.name).id])
        base = np.array(data.qpos[address : address + 3])
    else:
        base = np.array(data.xpos[model.body(point.name).id])
    if point.kind == "dial":
        angle = float(data.qpos[model.jnt_qposadr[model.joint("knob_Joint_1").id]])
        base = base + DIAL_RADIUS * np.array([np.sin(angle), -np.cos(angle), 0.0])
    return base + np.asarray(point.offset)


def tracked_body(model: Any, point: Tracked) -> int:
    """The body the tracked element belongs to: the object is it and the bodies attached below it."""
    if point.kind == "site":
        return int(model.site_bodyid[model.site(point.name).id])
    if point.kind == "geom":
        return int(model.geom_bodyid[model.geom(point.name).id])
    if point.kind == "joint":
        return int(model.jnt_bodyid[model.joint(point.name).id])
    return int(model.body(point.name).id)


def _subtree(model: Any, root: int) -> set[int]:
    bodies = {root}
    for body in range(root + 1, model.nbody):  # MuJoCo numbers a parent before its children
        if int(model.body_parentid[body]) in bodies:
            bodies.add(body)
    return bodies


def object_box(model: Any, data: Any, root: int) -> tuple[np.ndarray, np.ndarray]:
    """(centre, full size) of the world-aligned box around the collision geoms of `root`'s subtree
    (every geom where it has none)."""
    bodies = _subtree(model, root)
    geoms = [g for g in range(model.ngeom) if int(model.geom_bodyid[g]) in bodies]
    solid = [g for g in geoms if model.geom_contype[g] or model.geom_conaffinity[g]]
    return geoms_box(model, data, solid or geoms)


def geoms_box(model: Any, data: Any, geoms: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(centre, full size) of the world-aligned box around `geoms`, from MuJoCo's per-geom boxes (`geom_aabb`)
    turned by each geom's frame."""
    low, high = np.full(3, np.inf), np.full(3, -np.inf)
    for g in geoms:
        rotation = data.geom_xmat[g].reshape(3, 3)
        centre = data.geom_xpos[g] + rotation @ model.geom_aabb[g, :3]
        half = np.abs(rotation) @ model.geom_aabb[g, 3:]
        low, high = np.minimum(low, centre - half), np.maximum(high, centre + half)
    return (low + high) / 2, high - low


def measure_object_facts(task: Any, seed: int = 0) -> dict[str, dict[str, Any]]:
    """{"obj": {"body", "size", "offset"}, ...}: the object's box size (m) and the tracked point's offset from
    the box's centre (m, world axes), in the first state of a seeded reset."""
    points = tracked_points(task.id)
    if not points:
        return {}
    env = task.make_env(seed=seed)
    try:
        env.reset(seed=seed)
        model, data = env.unwrapped.model, env.unwrapped.data
        facts = {}
        for field, point in points.items():
            root = tracked_body(model, point)
            centre, size = object_box(model, data, root)
            offset = tracked_position(model, data, point) - centre
            facts[field] = {"body": model.body(root).name, "size": _round(size), "offset": _round(offset)}
        return facts
    finally:
        env.close()


def _round(values: np.ndarray) -> list[float]:
    return [round(float(v), 3) + 0.0 for v in values]  # + 0.0: no "-0.0" in the file


def describe_object_facts(facts: dict[str, dict[str, Any]]) -> str:
    """One sentence per tracked object: its size and where the tracked point sits in it ('' when none)."""
    sentences = []
    for field, fact in facts.items():
        size = " x ".join(f"{v * 100:.1f}" for v in fact["size"])
        offset = ", ".join(f"{axis} {v * 100:+.1f}" for axis, v in zip("xyz", fact["offset"]))
        body = f" (MuJoCo body `{fact['body']}` and the bodies attached below it)" if fact["body"] else ""
        sentences.append(
            f"`{field}`{body} spans {size} cm along x, y, z at the start; "
            f"`{field}.position` is {np.linalg.norm(fact['offset']) * 100:.1f} cm from the centre of that box ({offset} cm)."
        )
    return " ".join(sentences)


@cache
def shipped_object_facts() -> dict[str, dict[str, dict[str, Any]]]:
    if not FACTS_FILE.is_file():
        return {}
    return json.loads(FACTS_FILE.read_text())


def object_facts_text(task_id: str) -> str:
    """The shipped sentence for a built-in task ('' for tasks the file does not know, e.g. user tasks)."""
    return describe_object_facts(shipped_object_facts().get(task_id, {}))
