"""The constructor arguments of each training algorithm, read once per installed library version and kept on disk.

Why: every command that reads a family's settings checks their keys against the library's constructor, and reading a
signature means importing SB3 and torch (and SBX and JAX for an SBX algorithm): ~3 s of a `t2r run` driver's start,
although the driver trains nothing itself (its workers are forked from a server that has imported them). A signature is
fixed by the library's version, so its names are read once per version and machine, and read back from the cache file;
a file that does not read, or an entry of other versions, is read again from the library. The same holds for a policy's
constructor, which `--algo` reads to carry a family's `policy_kwargs` to another implementation of its algorithm.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from policies.algorithms import algorithm_class, get_algorithm
from policies.config import cache_root
from policies.io import write_json_atomic

DISTRIBUTIONS = {"sb3": ("stable-baselines3",), "sbx": ("sbx-rl", "stable-baselines3", "jax")}
"""The installed distributions whose versions fix an algorithm's constructor, by backend."""
CACHE_FILE = "constructor-arguments.json"


def constructor_arguments(algo: str) -> list[str]:
    """The names of `algo`'s constructor arguments, in the library's order (`self` included)."""
    return _cached(algo, "", lambda: list(inspect.signature(algorithm_class(algo).__init__).parameters))


def policy_arguments(algo: str, policy: str) -> list[str]:
    """The names of the constructor arguments of `algo`'s policy `policy` (e.g. "MlpPolicy"), `self` included: what
    `policy_kwargs` may hold when settings move from one implementation of an algorithm to another (sbx-sac -> sac)."""
    return _cached(algo, f" policy={policy}",
                   lambda: list(inspect.signature(algorithm_class(algo).policy_aliases[policy].__init__).parameters))


def _cached(algo: str, what: str, read: Callable[[], list[str]]) -> list[str]:
    """`read()`'s names, kept in the cache file under `algo`'s versions and `what`; read again when the entry is missing
    or not a list of names. `read` raises the one-line error of a missing SBX, or a KeyError for an unknown policy."""
    key = _entry_key(algo)
    key = key + what if key is not None else None
    try:
        path: Path | None = cache_root() / CACHE_FILE
    except RuntimeError:  # no home directory to keep a cache in: read the library every time
        path = None
    entries = _read(path) if path is not None else {}
    cached = entries.get(key) if key is not None else None
    if isinstance(cached, list) and cached and all(isinstance(name, str) for name in cached):
        return list(cached)
    names = read()
    if key is not None and path is not None:
        _write(path, {**entries, key: names})
    return names


def _entry_key(algo: str) -> str | None:
    """`algo` and the versions of what defines it ("sbx-sac sbx-rl=0.28.0 stable-baselines3=2.9.2 jax=0.10.2"); None
    where one is not installed (the library is imported then, and says what is missing)."""
    try:
        versions = [f"{name}={metadata.version(name)}" for name in DISTRIBUTIONS[get_algorithm(algo).backend]]
    except metadata.PackageNotFoundError:
        return None
    return " ".join([algo, *versions])


def _read(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: Path, entries: dict[str, object]) -> None:
    """Whole or not at all (another process may read it meanwhile); a cache that cannot be written is only slower."""
    try:
        write_json_atomic(path, entries)  # makes the folder too
    except OSError:
        pass
