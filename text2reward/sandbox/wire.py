"""The training worker's compact wire format: views as packed numbers under a schema sent once.

Why: pickling a view (a tree of slots dataclasses holding a dozen small arrays) cost ~100 us in the
parent and ~60 us in the worker, where the audit hook inspects every class pickle looks up: most of
a sandboxed reward call. A view's *structure* (classes, field names, array shapes, scalar types) is
fixed for a task, so the parent describes it once per worker in a schema, and each step sends only
the numbers: one frame of header, packed scalars, the arrays' bytes and the action's bytes, joined
in a single call. The worker rebuilds the dataclasses from classes it imported before lock-down,
with the same effect as unpickling (the fields set, nothing else run). The schema names classes by
module and qualified name, and the worker accepts only dataclasses from the view modules it was
started with whose fields are exactly the schema's. Views this format cannot express (other dtypes,
lists, non-contiguous arrays) still go as pickles, which the worker's audit hook vets as before.

Parent -> worker payloads after the pickled hello start with a tag byte:
  b"S" + JSON schema (no reply) | b"V" + schema id byte + scalars + float64 arrays + action | b"P" + pickle.
Worker -> parent replies are JSON until the component names settle, then b"R" + packed doubles
(total, then one value per name, in the order of the last JSON reply). The parent checks each
reply's size and re-uses the names it validated; it never unpickles or trusts the worker's bytes.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import pickle
import struct
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from text2reward.sandbox.channel import HEADER, frame

SCHEMA, VIEW, PICKLE, REPLY = b"S", b"V", b"P", b"R"
MAX_SCHEMAS = 32
"""Distinct view structures per worker (e.g. a float that is sometimes a numpy float64); later ones pickle."""
MAX_DEPTH = 16
MAX_SLOTS = 4096
MAX_FLOATS = 1 << 20

SCALAR_KINDS: dict[str, tuple[type, str]] = {
    "float": (float, "d"),
    "int": (int, "q"),
    "bool": (bool, "?"),
    "float64": (np.float64, "d"),
    "float32": (np.float32, "f"),
    "int64": (np.int64, "q"),
    "int32": (np.int32, "i"),
    "bool_": (np.bool_, "?"),
}
"""Scalar field types the format carries, by name: (type, struct code). The worker rebuilds the exact type."""
_KIND_OF_TYPE = {scalar_type: name for name, (scalar_type, _) in SCALAR_KINDS.items()}
ACTION_DTYPES = frozenset({"<f4", "<f8", "<i4", "<i8"})
_FLOAT64 = np.dtype("<f8")
_EMPTY = np.empty(0)
_EMPTY.setflags(write=False)
_SHAPE = operator.attrgetter("shape")
_DTYPE = operator.attrgetter("dtype")


class Unsupported(Exception):
    """The value has a structure the compact format does not carry; it goes as a pickle."""


class SchemaError(Exception):
    """A schema the worker refuses (it names a class it may not build, or does not add up)."""


def _scalar_layout(kinds: list[str]) -> tuple[struct.Struct, int]:
    """The packed scalars after the 2-byte tag, padded so the float64 arrays start 8-byte aligned."""
    codes = "".join(SCALAR_KINDS[kind][1] for kind in kinds)
    size = struct.calcsize("<" + codes)
    pad = -(2 + size) % 8
    return struct.Struct("<" + codes + "x" * pad), 2 + size + pad


# --- parent side ---


class ViewEncoder:
    """Turns (view, action) into ready-to-write frames for one worker; one per worker process."""

    def __init__(self, modules: list[str]):
        self._modules = frozenset(modules)
        self._packers: list[_Packer] = []
        self._last: _Packer | None = None
        self._unsupported: set[type] = set()

    def encode(self, view: Any, action: np.ndarray) -> bytes:
        """One V frame (preceded by an S frame the first time a structure is seen), else a P frame."""
        last = self._last
        if last is not None:
            data = last.pack(view, action)
            if data is not None:
                return data
        for packer in self._packers:
            data = packer.pack(view, action) if packer is not last else None
            if data is not None:
                self._last = packer
                return data
        if len(self._packers) < MAX_SCHEMAS and type(view) not in self._unsupported and _action_supported(action):
            fresh: _Packer | None
            try:
                fresh = _Packer(view, action, len(self._packers), self._modules)
            except Unsupported:
                fresh = None
            data = fresh.pack(view, action) if fresh is not None else None
            if fresh is not None and data is not None:
                self._packers.append(fresh)
                self._last = fresh
                return fresh.schema_frame + data
            self._unsupported.add(type(view))  # a structure the format cannot carry: this view class goes as pickles from now on
        return frame(PICKLE + pickle.dumps((view, action), protocol=pickle.HIGHEST_PROTOCOL))


def _action_supported(action: Any) -> bool:
    return type(action) is np.ndarray and action.dtype.str in ACTION_DTYPES and action.flags.c_contiguous and action.size <= MAX_FLOATS


class _Packer:
    """One view structure: its schema, and a check-and-pack of a view against it."""

    def __init__(self, view: Any, action: np.ndarray, schema_id: int, modules: frozenset[str]):
        self.root = type(view)
        tree = _walk_view(view, modules)
        arrays, scalars, consts, nodes = tree.arrays, tree.scalars, tree.consts, tree.nodes
        n_floats = sum(int(np.prod(shape)) for _, _, shape in arrays)
        if n_floats > MAX_FLOATS:
            raise Unsupported
        paths = [p for p, *_ in arrays] + [p for p, *_ in scalars] + [p for p, *_ in consts] + [p for p, _ in nodes]
        if not paths:
            raise Unsupported
        getter = operator.attrgetter(*paths)
        self._get = getter if len(paths) > 1 else (lambda view: (getter(view),))
        values = self._get(view)
        self._types = tuple(map(type, values))
        self._n_arrays = len(arrays)
        self._scalar_end = len(arrays) + len(scalars)
        self._const_end = self._scalar_end + len(consts)
        self._shapes = tuple(shape for _, _, shape in arrays)
        self._dtypes = (_FLOAT64,) * len(arrays)
        self._consts = tuple(value for _, _, value in consts)
        self._action = (action.dtype, action.shape)
        self._scalars, offset = _scalar_layout([kind for _, _, kind in scalars])
        size = offset + 8 * n_floats + action.nbytes
        self._prefix = HEADER.pack(size) + VIEW + bytes([schema_id])
        self.schema_frame = frame(SCHEMA + json.dumps(tree.schema(schema_id, action)).encode())

    def pack(self, view: Any, action: np.ndarray) -> bytes | None:
        """The V frame, or None when this view or action does not have this structure."""
        if type(view) is not self.root:
            return None
        try:
            values = self._get(view)
        except AttributeError:
            return None
        if tuple(map(type, values)) != self._types:
            return None
        arrays = values[: self._n_arrays]
        if tuple(map(_SHAPE, arrays)) != self._shapes or tuple(map(_DTYPE, arrays)) != self._dtypes:
            return None
        if values[self._scalar_end : self._const_end] != self._consts:
            return None
        if type(action) is not np.ndarray or (action.dtype, action.shape) != self._action:
            return None
        try:  # numpy's stubs give ndarray its buffer protocol (__buffer__) only for Python 3.12 and later
            return b"".join((self._prefix, self._scalars.pack(*values[self._n_arrays : self._scalar_end]), *arrays, action))  # type: ignore[arg-type]
        except (struct.error, TypeError, ValueError, BufferError):  # an int out of range, a non-contiguous array
            return None


@dataclasses.dataclass
class _ViewTree:
    """A view's structure, every value in a slot of its own: the leaves by kind, (path, slot, shape | scalar kind |
    value); the dataclasses below the root, (path, class); every dataclass's spec in build order (children first)."""

    root_slot: int = 0
    arrays: list = dataclasses.field(default_factory=list)
    scalars: list = dataclasses.field(default_factory=list)
    consts: list = dataclasses.field(default_factory=list)
    nodes: list = dataclasses.field(default_factory=list)
    node_specs: list = dataclasses.field(default_factory=list)

    def schema(self, schema_id: int, action: np.ndarray) -> dict[str, Any]:
        """The schema the worker builds this structure from (sent once, as an S frame)."""
        return {
            "id": schema_id,
            "root": self.root_slot,
            "nodes": self.node_specs,
            "scalars": [[slot, kind] for _, slot, kind in self.scalars],
            "arrays": [[slot, list(shape)] for _, slot, shape in self.arrays],
            "consts": [[slot, list(value) if type(value) is tuple else value] for _, slot, value in self.consts],
            "action": [action.dtype.str, list(action.shape)],
        }


def _walk_view(view: Any, modules: frozenset[str]) -> _ViewTree:
    """`view`'s structure, depth first; Unsupported for anything the format does not carry (a class from outside the
    view modules, another dtype, a list, too deep or too many values, an unset slot, a view that holds itself)."""
    if not dataclasses.is_dataclass(view) or isinstance(view, type):
        raise Unsupported
    tree = _ViewTree()
    counter = iter(range(MAX_SLOTS + 1))

    def visit(value: Any, path: str, depth: int) -> int:
        slot = next(counter)
        if slot >= MAX_SLOTS or depth > MAX_DEPTH:
            raise Unsupported
        kind = type(value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            if kind.__module__ not in modules or "<" in kind.__qualname__:
                raise Unsupported
            children = [[f.name, visit(getattr(value, f.name), f"{path}.{f.name}" if path else f.name, depth + 1)] for f in dataclasses.fields(value)]
            tree.node_specs.append([slot, kind.__module__, kind.__qualname__, children])
            if path:
                tree.nodes.append((path, kind))
        elif kind is np.ndarray:
            if value.dtype != _FLOAT64 or not value.flags.c_contiguous or value.size > MAX_FLOATS:
                raise Unsupported
            tree.arrays.append((path, slot, value.shape))
        elif kind in _KIND_OF_TYPE:
            tree.scalars.append((path, slot, _KIND_OF_TYPE[kind]))
        elif value is None or kind is str or (kind is tuple and all(type(item) is str for item in value)):
            tree.consts.append((path, slot, value))
        else:
            raise Unsupported
        return slot

    try:
        tree.root_slot = visit(view, "", 0)
    except (AttributeError, RecursionError):  # an unset slot, a self-referencing view
        raise Unsupported from None
    return tree


# --- worker side ---


class ViewDecoder:
    """Rebuilds (view, action) from the parent's frames; schemas are validated, never trusted."""

    def __init__(self, modules: list[str]):
        self._modules = frozenset(modules)
        self._layouts: dict[int, _Layout] = {}

    def feed(self, payload: bytes) -> tuple[Any, np.ndarray] | None:
        """(view, action) for a V or P frame; None after a schema frame, which gets no reply."""
        tag = payload[:1]
        if tag == VIEW:
            layout = self._layouts.get(payload[1]) if len(payload) > 1 else None
            if layout is None:
                raise SchemaError("a view frame names a schema the worker was not sent")
            return layout.build(payload)
        if tag == SCHEMA:
            layout = _Layout(json.loads(payload[1:]), self._modules)
            self._layouts[layout.id] = layout
            return None
        if tag == PICKLE:
            view, action = pickle.loads(payload[1:])
            return view, action
        raise SchemaError(f"unknown frame tag {tag!r}")


class _Layout:
    """One validated schema: where each value sits in a V frame and how the view tree is rebuilt."""

    def __init__(self, schema: Any, modules: frozenset[str]):
        if not isinstance(schema, dict):
            raise SchemaError("the schema is not an object")
        self.id = _index(schema.get("id"), MAX_SCHEMAS)
        assigned: set[int] = set()

        def claim(value: Any) -> int:
            slot = _index(value, MAX_SLOTS)
            if slot in assigned:
                raise SchemaError(f"slot {slot} is assigned twice")
            assigned.add(slot)
            return slot

        scalars = [(claim(slot), _scalar_kind(kind)) for slot, kind in _pairs(schema.get("scalars"))]
        arrays = [(claim(slot), _shape(shape)) for slot, shape in _pairs(schema.get("arrays"))]
        consts = [(claim(slot), _const(value)) for slot, value in _pairs(schema.get("consts"))]
        self._nodes = _checked_nodes(schema.get("nodes"), modules, claim, built=set(assigned))
        self._root = _index(schema.get("root"), MAX_SLOTS)
        if not self._nodes or self._nodes[-1][0] != self._root:
            raise SchemaError("the root must be the last node built")
        if assigned != set(range(len(assigned))):
            raise SchemaError("the slots are not numbered 0..n-1")
        action = _list(schema.get("action"))
        if len(action) != 2 or action[0] not in ACTION_DTYPES:
            raise SchemaError("the action must be [dtype, shape] with a numeric dtype")
        self._action_dtype, self._action_shape = np.dtype(action[0]), _shape(action[1])
        self._lay_out(scalars, arrays, consts, len(assigned))

    def _lay_out(self, scalars: list[tuple[int, str]], arrays: list[tuple[int, tuple[int, ...]]], consts: list[tuple[int, Any]],
                 slots: int) -> None:
        """Where each value sits in a V frame: the constants in a template of the slots, the packed scalars, the float64
        arrays one after another, then the action."""
        self._template: list[Any] = [None] * slots
        for slot, value in consts:
            self._template[slot] = value
        self._scalar_struct, offset = _scalar_layout([kind for _, kind in scalars])
        self._scalar_slots = [slot for slot, _ in scalars]
        self._scalar_casts = [(i, SCALAR_KINDS[kind][0]) for i, (_, kind) in enumerate(scalars) if kind not in {"float", "int", "bool"}]
        self._arrays: list[tuple[int, int, int, tuple[int, ...] | None]] = []
        start = 0
        for slot, shape in arrays:
            stop = start + int(np.prod(shape))
            self._arrays.append((slot, start, stop, shape if len(shape) != 1 else None))
            start = stop
        if start > MAX_FLOATS:
            raise SchemaError("the view has too many numbers")
        self._n_floats, self._float_offset = start, offset
        self._action_offset = offset + 8 * start
        self._action_count = int(np.prod(self._action_shape))
        self._size = self._action_offset + self._action_count * self._action_dtype.itemsize

    def build(self, payload: bytes) -> tuple[Any, np.ndarray]:
        if len(payload) != self._size:
            raise SchemaError(f"a view frame of {len(payload)} bytes does not match its schema ({self._size})")
        values = self._template.copy()
        scalars: tuple[Any, ...] | list[Any] = self._scalar_struct.unpack_from(payload, 2)
        if self._scalar_casts:
            scalars = list(scalars)
            for index, cast in self._scalar_casts:
                scalars[index] = cast(scalars[index])
        for slot, value in zip(self._scalar_slots, scalars):
            values[slot] = value
        # Views into the received bytes: read-only, and their WRITEABLE flag cannot be set.
        flat = np.frombuffer(payload, _FLOAT64, self._n_floats, self._float_offset) if self._n_floats else _EMPTY
        for slot, start, stop, shape in self._arrays:
            values[slot] = flat[start:stop] if shape is None else flat[start:stop].reshape(shape)
        for slot, cls, plain, children, fields in self._nodes:
            if plain:  # the dataclass's own generated __init__ just sets the fields, faster than we can
                values[slot] = cls(*[values[child] for child in children])
                continue
            obj = cls.__new__(cls)  # as pickle rebuilds an object: no __init__, fields set directly
            for name, child in fields:
                object.__setattr__(obj, name, values[child])
            values[slot] = obj
        action = np.frombuffer(payload, self._action_dtype, self._action_count, self._action_offset).reshape(self._action_shape).copy()
        return values[self._root], action


_Node = tuple[int, type[object], bool, tuple[int, ...], tuple[tuple[str, int], ...]]
"""(slot, class, whether its own __init__ may build it, its children's slots, (field name, child slot) pairs)."""


def _checked_nodes(specs: Any, modules: frozenset[str], claim: Callable[[Any], int], built: set[int]) -> list[_Node]:
    """The schema's dataclass nodes, each a class from the view modules whose fields are exactly the schema's, built
    only from slots built before it; `claim` takes each node's own slot."""
    nodes: list[_Node] = []
    for spec in _list(specs):
        if not (isinstance(spec, list) and len(spec) == 4):
            raise SchemaError("a node is not [slot, module, qualname, fields]")
        slot, module, qualname, children = spec
        cls = _view_class(module, qualname, modules)
        pairs = _pairs(children)
        names = [f.name for f in dataclasses.fields(cls)]
        if [name for name, _ in pairs] != names:
            raise SchemaError(f"the schema's fields of {qualname} are not the class's fields {names}")
        child_slots = [_index(child, MAX_SLOTS) for _, child in pairs]
        if any(child not in built for child in child_slots):
            raise SchemaError("a node uses a slot that is not built before it")
        nodes.append((claim(slot), cls, _plain_init(cls), tuple(child_slots), tuple(zip(names, child_slots))))
        built.add(nodes[-1][0])
    return nodes


def _plain_init(cls: type) -> bool:
    """True when `cls(*fields)` does exactly what pickle's rebuild does: sets the fields, nothing else.

    That holds for the `__init__` that dataclasses generates (made inside its `__create_fn__`
    helper) when every field is a positional init field and there is no `__post_init__`; anything
    else is rebuilt field by field."""
    params = getattr(cls, "__dataclass_params__", None)
    init = cls.__dict__.get("__init__")
    code = getattr(init, "__code__", None)
    return (
        params is not None
        and params.init
        and not hasattr(cls, "__post_init__")
        and all(f.init and not f.kw_only for f in dataclasses.fields(cls))
        and getattr(code, "co_qualname", "").startswith("__create_fn__.")
    )


def _index(value: Any, limit: int) -> int:
    if type(value) is not int or not 0 <= value < limit:
        raise SchemaError(f"{value!r} is not an index below {limit}")
    return value


def _list(value: Any) -> list:
    if not isinstance(value, list):
        raise SchemaError("the schema is missing a list")
    return value


def _pairs(value: Any) -> list[tuple[Any, Any]]:
    items = _list(value)
    if not all(isinstance(item, list) and len(item) == 2 for item in items):
        raise SchemaError("a schema entry is not a pair")
    return [(a, b) for a, b in items]


def _scalar_kind(kind: Any) -> str:
    if not isinstance(kind, str) or kind not in SCALAR_KINDS:
        raise SchemaError(f"unknown scalar kind {kind!r}")
    return kind


def _shape(value: Any) -> tuple[int, ...]:
    shape = tuple(_list(value))
    if len(shape) > 8 or any(type(d) is not int or d < 0 for d in shape) or int(np.prod(shape)) > MAX_FLOATS:
        raise SchemaError(f"bad array shape {value!r}")
    return shape


def _const(value: Any) -> Any:
    if value is None or type(value) is str:
        return value
    if type(value) is list and all(type(item) is str for item in value):
        return tuple(value)
    raise SchemaError("a constant must be None, a string or a list of strings")


def _view_class(module: Any, qualname: Any, modules: frozenset[str]) -> type:
    """A dataclass defined in one of the worker's view modules, looked up among loaded modules only."""
    if not (isinstance(module, str) and module in modules and isinstance(qualname, str)):
        raise SchemaError(f"class module {module!r} is not one of the view modules")
    parts = qualname.split(".")
    if not all(part.isidentifier() and not part.startswith("__") for part in parts):
        raise SchemaError(f"bad class name {qualname!r}")
    obj: Any = sys.modules.get(module)
    for part in parts:
        obj = getattr(obj, part, None)
    if not (isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == module and obj.__qualname__ == qualname):
        raise SchemaError(f"{module}.{qualname} is not a view dataclass")
    return obj


class ReplyEncoder:
    """The worker's replies: JSON whenever the component names change, packed doubles otherwise.

    `check(components)` runs on each new set of names (count and lengths); raising there turns the
    call into an error reply."""

    def __init__(self, check: Callable[[dict[str, float]], None]) -> None:
        self._check = check
        self._names: tuple[str, ...] | None = None
        self._struct = reply_struct(0)  # replaced, with the names, by the first (JSON) reply
        self._prefix = b""

    def encode(self, total: float, components: dict[str, float]) -> bytes:
        names = tuple(components)
        if names == self._names:
            return self._prefix + self._struct.pack(total, *components.values())
        self._check(components)
        data = frame(json.dumps([total, components]).encode())
        self._names, self._struct = names, reply_struct(len(names))
        self._prefix = HEADER.pack(1 + self._struct.size) + REPLY
        return data


def reply_struct(n_components: int) -> struct.Struct:
    """A packed reply after its tag: the total, then one double per component."""
    return struct.Struct(f"<{n_components + 1}d")
