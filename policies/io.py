"""Atomic file writes: a crash mid-write never leaves a half-written result behind.

A write goes to a temporary file beside the target, then `os.replace` puts it in place. The
temporary file comes from `tempfile.mkstemp`, which creates it 0600 whatever the umask; the final
file is given the mode a plain `open(path, "w")` would have created (0666 minus the umask), so a
run's files all carry the same permissions as their neighbours.

JSON is written strict (RFC 8259: no `Infinity`, no `NaN`), so any JSON reader opens every record. A reward may
return finite numbers whose sums overflow (1e308 twice is inf); such a float is stored as the largest finite float of
its sign (1.7976931348623157e+308: still a number, still ordered, plainly an overflow when shown), and NaN as null.
Records written before, with `Infinity` in them, still read: Python's reader accepts it.
"""

from __future__ import annotations

import io
import json
import math
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's umask, read without changing it where the kernel shows it.

    Linux (4.7+) lists it in /proc/self/status. Elsewhere the only way is to set it and set it back;
    the umask is process-wide, so that is done under a lock (a file another thread creates in between
    would still get the temporary 0o077 mask: the fallback narrows that race, it cannot close it).
    """
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8) & 0o777
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


@contextmanager
def atomic_file(path: str | Path) -> Iterator[io.BufferedWriter]:
    """A binary file that appears at `path` whole or not at all: written beside it, flushed to disk, then renamed
    over it when the block ends without an error (a large file, e.g. a training checkpoint, written piece by piece)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fchmod(handle.fileno(), 0o666 & ~current_umask())  # what open(path, "w") would have made
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> Path:
    with atomic_file(path) as handle:
        handle.write(text.encode())
    return Path(path)


def write_json_atomic(path: str | Path, data: Any) -> Path:
    return write_text_atomic(path, strict_json_dumps(data, indent=2) + "\n")


def strict_json_dumps(data: Any, indent: int | None = None, default: Callable[[Any], Any] | None = None) -> str:
    """`data` as strict JSON: numpy values and paths as plain ones, non-finite floats as `finite` makes them."""
    return json.dumps(finite(data, default), indent=indent, allow_nan=False)


def finite(value: Any, default: Callable[[Any], Any] | None = None) -> Any:
    """`value` with every float finite (inf as the largest float of its sign, NaN as None), numpy scalars and arrays as
    Python numbers and lists, paths as text, containers copied; anything else JSON cannot hold goes through `default`
    (TypeError without one)."""
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return value if math.isfinite(value) else math.copysign(sys.float_info.max, value)
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, dict):
        return {key: finite(item, default) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item, default) for item in value]
    numpy = sys.modules.get("numpy")  # a numpy value exists only where numpy is loaded: this module never loads it itself
    if numpy is not None and isinstance(value, (numpy.generic, numpy.ndarray)):
        return finite(value.tolist(), default)
    if isinstance(value, Path):
        return str(value)
    if default is not None:
        return finite(default(value))
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
