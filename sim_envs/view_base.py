"""Typed, documented state views and the renderer that turns them into prompt text.

Why: the model is told about the environment by text rendered *from these classes* (field types
and their `doc` metadata), so what the prompt promises and what reward code can read as `self`
cannot drift apart. Views are plain dataclasses of read-only numpy copies: they pickle to a
sandbox process, and reward code can never move the simulator.
"""

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any

import numpy as np


def attr(doc: str) -> Any:
    """Declare a view field with the sentence the prompt will show for it."""
    return field(metadata={"doc": doc})


_FLOAT64 = np.dtype(np.float64)


def dotted_attribute(view: Any, dotted: str) -> Any:
    """`view.robot.ee_position` for "robot.ee_position"; None where any part is missing (views differ by family)."""
    for part in dotted.split("."):
        view = getattr(view, part, None)
        if view is None:
            return None
    return view


def frozen(array: Any) -> np.ndarray:
    """A read-only float64 copy: reward code may read it, never write through it."""
    if type(array) is np.ndarray and array.dtype is _FLOAT64:
        out = array.copy(order="K")  # the usual case (a row of MuJoCo data): same result as np.array, faster
    else:
        out = np.array(array, dtype=np.float64)
    out.setflags(write=False)
    return out


@dataclass(slots=True)
class StateView:
    """Base class of every view; `dt`, `episode_step` and `task_success` are common to all families."""

    dt: float = attr("seconds of simulated time per environment step (one action)")
    episode_step: int = attr("number of actions taken since the episode started (0 right after reset)")
    task_success: bool = field(default=False, kw_only=True, metadata={"doc": (
        "True exactly when the task's success test (stated above) holds on this state: the test evaluation uses. "
        "Pay a success bonus with it")})
    """Set by the training wrapper from the task's test after each step; a family's reader leaves it False."""


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, (types.UnionType,)) or typing.get_origin(annotation) is typing.Union:
        return " | ".join(_type_name(a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return "None"
    if annotation is np.ndarray:
        return "np.ndarray"
    name = getattr(annotation, "__name__", None)
    if name is None:
        name = re.sub(r"\b[\w.]+\.", "", str(annotation))
    return name


def field_types(cls: type) -> dict[str, Any]:
    """Each field's type, resolved where it was written as text (a module with `from __future__ import annotations`)."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve: the raw ones
        hints = {}
    return {f.name: hints.get(f.name, f.type) for f in dataclasses.fields(cls)}


def _nested_view_classes(cls: type) -> list[type]:
    """Dataclasses referenced by `cls`'s fields, depth first, each once."""
    found: list[type] = []
    for annotation in field_types(cls).values():
        candidates = typing.get_args(annotation) or (annotation,)
        for candidate in candidates:
            if isinstance(candidate, type) and dataclasses.is_dataclass(candidate) and candidate not in found:
                for inner in _nested_view_classes(candidate):
                    if inner not in found:
                        found.append(inner)
                found.append(candidate)
    return found


def _render_class(cls: type) -> str:
    doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
    lines = [f"class {cls.__name__}:", f'    """{doc}"""']
    types_ = field_types(cls)
    for f in dataclasses.fields(cls):
        note = f.metadata.get("doc", "")
        lines.append(f"    {f.name}: {_type_name(types_[f.name])}  # {note}")
    return "\n".join(lines)


def render_view_class_doc(view_class: type) -> str:
    """Python-like stubs of a view class and every class it contains, innermost first."""
    blocks = [_render_class(c) for c in _nested_view_classes(view_class)]
    blocks.append(_render_class(view_class))
    return "\n\n".join(blocks)


def view_field_paths(view_class: type, prefix: str = "self") -> list[str]:
    """Every readable attribute path (`self.robot.ee_position`, ...): used to check reward code."""
    paths: list[str] = []
    for name, annotation in field_types(view_class).items():
        path = f"{prefix}.{name}"
        paths.append(path)
        for candidate in typing.get_args(annotation) or (annotation,):
            if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
                paths.extend(view_field_paths(candidate, path))
    return paths
