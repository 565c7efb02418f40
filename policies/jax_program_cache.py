"""JAX programs whose lowering is kept on disk between processes, as exported StableHLO (`jax.export`).

Why: JAX's persistent cache keeps compilations, never lowerings, and lowering a traced program to StableHLO is
Python work that every process pays again: ~0.3 s of an SBX SAC model's ~0.9 s construction, in every training job
(benchmarks/RESULTS.md, "SBX's networks from exported programs"). An exported program is that lowering, serialised
once per machine and read back by every later process; calling it lowers only a call of the stored module.

The key is the traced program itself: its jaxpr (every operation, shape and dtype, the random-number algorithm
included), the bytes of the constants it captured, its input and output trees, and the versions and backend that
lower it. Two programs share a file only if they compute the same thing the same way; the arguments (PRNG keys,
inputs) are the program's inputs, never part of it, so other seeds give other values from the same file. Anything
that fails (a program `jax.export` cannot serialise, an unreadable or truncated file, another backend) falls back to
the plain jitted call, which computes the same values.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import jax
import numpy as np

from policies.config import cache_root
from policies.io import atomic_file

FORMAT = "1"
"""Part of every key: a change of what is stored makes every earlier file unreachable instead of misread."""


def cache_folder() -> Path:
    return cache_root() / "jax-programs"


def program_key(traced: Any, args: tuple[Any, ...]) -> str:
    """What identifies a traced program's lowering (see the module's docstring)."""
    digest = hashlib.sha256()
    for part in (FORMAT, jax.__version__, jax.lib.__version__, jax.default_backend(), str(jax.tree_util.tree_structure(args)),
                 str(jax.tree_util.tree_structure(traced.out_info)), str(traced.jaxpr)):
        digest.update(part.encode())
        digest.update(b"\0")
    for const in traced.jaxpr.consts:
        array = np.asarray(const)
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _read(path: Path) -> Any | None:
    try:
        return jax.export.deserialize(bytearray(path.read_bytes()))
    except Exception:  # missing, truncated or from another format: lowered again and rewritten
        return None


def call_kept(program: Any, *args: Any) -> Any:
    """`program(*args)` for a `jax.jit`-wrapped program, its lowering read from this machine's cache where an earlier
    process stored it (and stored here otherwise)."""
    try:
        traced = program.trace(*args)
        path = cache_folder() / f"{program_key(traced, args)}.jaxexport"
    except Exception:
        return program(*args)
    exported = _read(path)
    if exported is None:
        try:
            exported = jax.export.export(program)(*args)
            with atomic_file(path) as handle:
                handle.write(exported.serialize())
        except Exception:
            return program(*args)
    try:
        return jax.jit(exported.call)(*args)
    except Exception:
        return program(*args)
