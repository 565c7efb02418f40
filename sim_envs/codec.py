"""One codec for every record that crosses a file: a dataclass's JSON derived from its fields, and read back by them.

Why in the lowest layer: records live on every floor (a camera's pose in `sim_envs`, a training plan in `policies`,
a run's records in `text2reward.runs`), and each is read and written by this one module, which imports nothing but
the stdlib and the project's errors.

Why derived, not written per class: a record's fields, their types and their defaults are the schema; a hand-written
`from_dict`/`to_dict` pair beside them is a second copy of it that drifts. Here `write(record)` and
`read(cls, data, what)` walk the fields (`typing.get_type_hints`), so adding a field is one line in the class.

The rules every record shares:
- **Written**: every field but a `transient` one, nested records as objects, enums as their value, paths as text; a
  field whose default is nothing (None, an empty list or object, False) and that holds it is left out: the file holds
  what happened. A field without a default is always written (`null` included). A field named `extra` holds the keys a newer text2reward wrote that this one
  does not know: read into it and written back untouched.
- **Read**: each field by its type (int, float, str, bool, a path, an enum, a record, a list, a tuple (`tuple[X, ...]`
  or of fixed length), an object or mapping, `X | None`, a union); a field of a type JSON has no shape for (a numpy
  array) declares the JSON type it is stored as and how it is built from it (`stored_as`), and is written by its
  `tolist()`;
  keys the store stamps around a record (`schema`) are no field's;
  an absent or null field takes its default, or what its metadata declares (`legacy`: the names older records used,
  with how to turn the old value into the new; `fallback`: another field whose value stands in; `reader`: a lenient
  reader for a field hostile or older records may hold malformed). A wrong value is one line naming the file, the
  field's path (`training.curve[0].success_rate`) and what it should be (`RecordError`), never a traceback.

Why by hand rather than pydantic (installed, via openai): the records need the unknown keys kept, fields at nothing
left out, legacy fallbacks that depend on other fields, lenient readers for hostile fields and one-line errors naming
the file; pydantic would do the type checks only and need a wrapper for each of those, and its import and per-class
schema build cost start-up time on every `t2r` command that reads a run (this module imports nothing but the stdlib).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import PurePath
from typing import Any, TypeVar, Union

from sim_envs.errors import ConfigError

Json = dict[str, Any]
R = TypeVar("R")

EXTRA = "extra"
"""The field that keeps the keys this text2reward does not know."""
RESERVED = frozenset({"schema"})
"""Keys the store handles around every record (its layout version), never a field's and never `extra`."""


class RecordError(ConfigError):
    """A record file that cannot be read as its schema: one line naming the file, the field and what to do."""


@dataclasses.dataclass(frozen=True)
class FieldRule:
    """How one field reads beyond its type: the names older records used (each with how its value becomes this
    field's), another field standing in when it is absent, or a lenient reader of the raw JSON."""

    legacy: tuple[tuple[str, Callable[[Any], Any] | None], ...] = ()
    fallback: str | None = None
    reader: Callable[[Any], Any] | None = None
    stored: Any = None
    """The JSON type the field is stored as, when its own type has no JSON shape (`stored_as`)."""
    build: Callable[[Any], Any] | None = None
    transient: bool = False
    """Never written, read as its default: what only the process that made the record holds (`transient`)."""


def legacy(*names: str, upgrade: Callable[[Any], Any] | None = None) -> dict[str, FieldRule]:
    """Field metadata: read the field from `names` (older records' names for it) when its own is absent; `upgrade`
    turns such an old value into the new field's JSON."""
    return {"codec": FieldRule(legacy=tuple((name, upgrade) for name in names))}


def fallback(name: str) -> dict[str, FieldRule]:
    """Field metadata: an absent field takes the value of the (earlier) field `name`."""
    return {"codec": FieldRule(fallback=name)}


def reader(read_raw: Callable[[Any], Any]) -> dict[str, FieldRule]:
    """Field metadata: the field's raw JSON goes through `read_raw`, which keeps what is well formed and never raises
    (a reward's component names and figures are data a hostile reward chose)."""
    return {"codec": FieldRule(reader=read_raw)}


def stored_as(kind: Any, build: Callable[[Any], Any]) -> dict[str, FieldRule]:
    """Field metadata for a type JSON has no shape for (a numpy array): read as `kind` (checked like any field, e.g.
    `list[list[float]]`), then `build` makes the field's value of it; written by the value's `tolist()`."""
    return {"codec": FieldRule(stored=kind, build=build)}


def transient() -> dict[str, FieldRule]:
    """Field metadata: the field is never written (and reads as its default): what only the process that made the
    record holds, e.g. an episode's recorded state views, which the analysis reads in memory."""
    return {"codec": FieldRule(transient=True)}


# --- writing ------------------------------------------------------------------------------------------------------


def write(record: Any) -> Json:
    """A record (a dataclass instance) as its JSON object."""
    out: Json = {}
    for spec in dataclasses.fields(record):
        value = getattr(record, spec.name)
        if spec.name == EXTRA:
            out = {**value, **out}
            continue
        if _rule(spec).transient:
            continue
        if _holds_nothing(value) and _has_default(spec) and value == _default(spec):
            continue
        out[spec.name] = _encode(value)
    return out


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return write(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    if hasattr(value, "tolist") and not isinstance(value, (bool, int, float, str)):  # numpy arrays and scalars
        return value.tolist()
    return value


def _rule(spec: dataclasses.Field[Any]) -> FieldRule:
    return spec.metadata.get("codec", FieldRule())


def _holds_nothing(value: Any) -> bool:
    return value is None or value is False or (isinstance(value, (list, dict)) and not value)


def _default(spec: dataclasses.Field[Any]) -> Any:
    return spec.default_factory() if spec.default_factory is not dataclasses.MISSING else spec.default


def _has_default(spec: dataclasses.Field[Any]) -> bool:
    return spec.default is not dataclasses.MISSING or spec.default_factory is not dataclasses.MISSING


# --- reading ------------------------------------------------------------------------------------------------------


def read(kind: type[R], data: Any, what: str = "a record") -> R:
    """`data` (parsed JSON) as a `kind` record; a RecordError naming `what` (the file) and the field otherwise."""
    return typing.cast(R, _record(kind, data, what, ""))


def _record(kind: Any, data: Any, what: str, path: str) -> Any:
    """A record at `path` (dotted field names, list indices) of the file `what`."""
    if not isinstance(data, Mapping):
        raise _bad(what, path, "a JSON object", data)
    hints = _hints(kind)
    values: dict[str, Any] = {}
    known = set(RESERVED)
    for spec in dataclasses.fields(kind):
        known.add(spec.name)
        if spec.name == EXTRA or not spec.init:
            continue
        rule = _rule(spec)
        if rule.transient:
            continue
        known.update(name for name, _ in rule.legacy)
        raw = data.get(spec.name)
        for name, upgrade in rule.legacy:
            if raw is None and data.get(name) is not None:
                raw = upgrade(data[name]) if upgrade is not None else data[name]
        place = f"{path}.{spec.name}" if path else spec.name
        if rule.reader is not None:
            values[spec.name] = rule.reader(raw)
        elif raw is not None and rule.build is not None:
            values[spec.name] = rule.build(decode(rule.stored, raw, what, place))
        elif raw is not None:
            values[spec.name] = decode(hints[spec.name], raw, what, place)
        elif rule.fallback is not None and values.get(rule.fallback) is not None:
            values[spec.name] = values[rule.fallback]
        elif not _has_default(spec):
            if not _optional(hints[spec.name]):
                raise RecordError(f"{what}: field {place!r} is missing; restore the file from a copy")
            values[spec.name] = None
    if any(spec.name == EXTRA for spec in dataclasses.fields(kind)):
        values[EXTRA] = {k: v for k, v in data.items() if k not in known}
    return kind(**values)


def decode(kind: Any, raw: Any, what: str, path: str) -> Any:
    """One JSON value (at `path` in the file `what`, which an error names) as the type `kind`."""
    origin = typing.get_origin(kind)
    if kind is Any:
        return raw
    if origin in (Union, types.UnionType):
        members = typing.get_args(kind)
        if raw is None and type(None) in members:
            return None
        kinds = [m for m in members if m is not type(None)]
        if len(kinds) == 1:  # `X | None`: X's own error names what is wrong inside it
            return decode(kinds[0], raw, what, path)
        for member in kinds:
            try:
                return decode(member, raw, what, path)
            except RecordError:
                continue
        raise _bad(what, path, " or ".join(_name(m) for m in kinds), raw)
    if origin is list:
        if not isinstance(raw, list):
            raise _bad(what, path, "a list", raw)
        (item,) = typing.get_args(kind) or (Any,)
        return [decode(item, value, what, f"{path}[{index}]") for index, value in enumerate(raw)]
    if origin is tuple:
        return _tuple(kind, raw, what, path)
    if origin in (dict, Mapping) or kind is dict:
        if not isinstance(raw, dict):
            raise _bad(what, path, "a JSON object", raw)
        _, item = typing.get_args(kind) or (str, Any)
        return {str(k): decode(item, v, what, f"{path}[{str(k)!r}]") for k, v in raw.items()}
    if dataclasses.is_dataclass(kind):
        return _record(kind, raw, what, path)
    if isinstance(kind, type) and issubclass(kind, PurePath):
        return kind(_scalar(str, raw, what, path))
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        try:
            return kind(raw)
        except ValueError:
            raise _bad(what, path, "one of " + ", ".join(str(m.value) for m in kind), raw) from None
    return _scalar(kind, raw, what, path)


def _tuple(kind: Any, raw: Any, what: str, path: str) -> tuple[Any, ...]:
    """`tuple[X, ...]` (any length) or `tuple[X, Y, Z]` (exactly that many), stored as a JSON list."""
    items = typing.get_args(kind)
    variadic = len(items) == 2 and items[1] is Ellipsis
    if not isinstance(raw, list) or (not variadic and len(raw) != len(items)):
        raise _bad(what, path, "a list" if variadic else f"a list of {len(items)}", raw)
    kinds = [items[0]] * len(raw) if variadic else list(items)
    return tuple(decode(item, value, what, f"{path}[{index}]") for index, (item, value) in enumerate(zip(kinds, raw)))


SCALARS: dict[Any, tuple[Callable[[Any], bool], str]] = {
    bool: (lambda raw: isinstance(raw, bool), "true or false"),
    int: (lambda raw: isinstance(raw, int) and not isinstance(raw, bool), "a whole number"),
    float: (lambda raw: isinstance(raw, (int, float)) and not isinstance(raw, bool), "a number"),
    str: (lambda raw: isinstance(raw, str), "text"),
}
"""The JSON scalars a field may be: what a value must be to read as each, and what an error calls it."""


def _scalar(kind: Any, raw: Any, what: str, path: str) -> Any:
    if kind not in SCALARS:
        raise TypeError(f"the record codec cannot read {kind!r} ({what}: {path})")  # a record class's own mistake, not a file's
    accepts, called = SCALARS[kind]
    if not accepts(raw):
        raise _bad(what, path, called, raw)
    return float(raw) if kind is float else raw


def _bad(what: str, path: str, kind: str, raw: Any) -> RecordError:
    where = f"{what}: field {path!r}" if path else what
    return RecordError(f"{where} should be {kind}, got {_shown(raw)}; restore the file from a copy")


def _shown(raw: Any) -> str:
    return repr(raw)[:60] if isinstance(raw, (str, int, float, bool)) or raw is None else type(raw).__name__


def _name(kind: Any) -> str:
    return getattr(kind, "__name__", str(kind))


def _optional(kind: Any) -> bool:
    return typing.get_origin(kind) in (Union, types.UnionType) and type(None) in typing.get_args(kind)


@cache
def _hints(kind: type) -> dict[str, Any]:
    """A record class's field types, resolved once (the modules write `from __future__ import annotations`)."""
    return typing.get_type_hints(kind)
