"""The filled rows of an SB3 replay buffer, saved into a zip archive and restored bit for bit.

Why not SB3's `save_replay_buffer`: it pickles the whole buffer, and a buffer preallocates `buffer_size` rows
(1,000,000 by default: ~630 MB of float64 MetaWorld observations) however few are filled, so a checkpoint early in
training would cost hundreds of MB. Here only the rows written so far are saved, and two things make them small:
- `next_observations[i]` is `observations[i + 1]` except where an episode ended (99.5% of rows on reach-v3), so it
  is saved only where it differs, with a mask saying where;
- observations compress to about a quarter with zlib at level 1 (constant goal and padding columns), at ~100 MB/s;
  actions and rewards barely compress (~0.9), so they are stored as they are.

Which attributes are rows is read off the buffer (arrays, or dicts of arrays, whose first axis is `buffer_size`),
so `ReplayBuffer`, `DictReplayBuffer` and `HerReplayBuffer` (its `infos`, `ep_start` and `ep_length` too) are
covered alike; the other arrays (HER's `_current_ep_start`), `pos` and `full` are saved as they are.
"""

from __future__ import annotations

import zipfile
from typing import Any

import numpy as np

COMPRESSED = ("observations", "next_observations")
"""Attributes worth deflating (measured: ~0.28 of their size; actions ~0.92, rewards ~0.87)."""
LEVEL = 1
"""zlib level: 6 saves under 1% more than 1 on these arrays and takes 2-3x as long."""
DEDUPLICATED = ("next_observations", "observations")
"""The attribute kept only where it differs from the next row of the other."""


def filled_rows(buffer: Any) -> int:
    """Rows holding data: all of them once the buffer has wrapped, else up to `pos`, plus the row at `pos`, which
    holds the last next observation when `optimize_memory_usage` keeps next observations in `observations`."""
    return int(buffer.buffer_size) if buffer.full else min(int(buffer.pos) + 1, int(buffer.buffer_size))


def _row_arrays(buffer: Any) -> dict[str, np.ndarray]:
    """Every per-row array of the buffer by member name: `observations` or `observations/<key>` for a dict."""
    rows: dict[str, np.ndarray] = {}
    for name, value in vars(buffer).items():
        if isinstance(value, dict):
            if value and all(isinstance(v, np.ndarray) and v.ndim and v.shape[0] == buffer.buffer_size for v in value.values()):
                rows.update({f"{name}/{key}": array for key, array in value.items()})
        elif isinstance(value, np.ndarray) and value.ndim and value.shape[0] == buffer.buffer_size:
            rows[name] = value
    return rows


def _small_arrays(buffer: Any) -> dict[str, np.ndarray]:
    """Arrays that are not rows (HER's `_current_ep_start`): saved whole."""
    return {name: value for name, value in vars(buffer).items()
            if isinstance(value, np.ndarray) and not (value.ndim and value.shape[0] == buffer.buffer_size)}


def new_archive(handle: Any) -> zipfile.ZipFile:
    """An archive to save rows into: deflate at `LEVEL` is its default, which the members worth compressing use."""
    return zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=LEVEL)


def _write(archive: zipfile.ZipFile, name: str, array: np.ndarray, compress: bool) -> None:
    """One .npy member; deflated with the archive's default (`new_archive`) or stored as it is."""
    member: str | zipfile.ZipInfo = name
    if not compress:
        member = zipfile.ZipInfo(name)
        member.compress_type = zipfile.ZIP_STORED
    with archive.open(member, "w", force_zip64=True) as handle:
        np.lib.format.write_array(handle, np.ascontiguousarray(array), allow_pickle=array.dtype == object)


def _read(archive: zipfile.ZipFile, name: str) -> np.ndarray:
    with archive.open(name) as handle:
        return np.lib.format.read_array(handle, allow_pickle=True)


def _same_as_next(following: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Per (row, env): whether `following[i]` equals `observed[i + 1]` bit for bit (-0.0 is not 0.0, NaN is NaN).
    The last row is never taken from a successor (none is saved after it)."""
    n, envs = following.shape[:2]
    after = np.roll(observed, -1, axis=0)
    if following.dtype == object:
        return np.zeros((n, envs), dtype=bool)
    a = np.ascontiguousarray(following).view(np.uint8).reshape(n, envs, -1)
    b = np.ascontiguousarray(after).view(np.uint8).reshape(n, envs, -1)
    same = (a == b).all(axis=2)
    same[-1] = False
    return same


def save_rows(buffer: Any, archive: zipfile.ZipFile, prefix: str) -> dict[str, Any]:
    """Write the buffer's filled rows into `archive` (made by `new_archive`) under `prefix`; returns what `restore_rows` needs besides them."""
    n = filled_rows(buffer)
    rows = _row_arrays(buffer)
    deduplicated: list[str] = []
    for name, array in rows.items():
        base, _, key = name.partition("/")
        compress = base in COMPRESSED
        if base == DEDUPLICATED[0]:
            partner = rows.get(DEDUPLICATED[1] + (f"/{key}" if key else ""))
            if partner is not None and partner.shape == array.shape and partner.dtype == array.dtype:
                same = _same_as_next(array[:n], partner[:n])
                _write(archive, f"{prefix}{name}.same.npy", same, compress=True)
                _write(archive, f"{prefix}{name}.npy", array[:n][~same], compress)
                deduplicated.append(name)
                continue
        _write(archive, f"{prefix}{name}.npy", array[:n], compress)
    for name, array in _small_arrays(buffer).items():
        _write(archive, f"{prefix}{name}.npy", array, compress=False)
    return {"rows": n, "buffer_size": int(buffer.buffer_size), "n_envs": int(buffer.n_envs), "pos": int(buffer.pos),
            "full": bool(buffer.full), "row_arrays": sorted(rows), "deduplicated": deduplicated,
            "small_arrays": sorted(_small_arrays(buffer)), "class": type(buffer).__name__}


def restore_rows(buffer: Any, archive: zipfile.ZipFile, prefix: str, meta: dict[str, Any]) -> None:
    """Put saved rows back into a fresh buffer built with the same settings (the rows past them stay as built)."""
    if (meta["class"], meta["buffer_size"], meta["n_envs"]) != (type(buffer).__name__, buffer.buffer_size, buffer.n_envs):
        raise ValueError(f"the saved replay buffer is a {meta['class']} of {meta['buffer_size']} x {meta['n_envs']} rows, "
                         f"this one a {type(buffer).__name__} of {buffer.buffer_size} x {buffer.n_envs}")
    n = int(meta["rows"])
    rows = _row_arrays(buffer)
    if sorted(rows) != meta["row_arrays"]:
        raise ValueError(f"the saved replay buffer holds {meta['row_arrays']}, this one {sorted(rows)}")
    for name in meta["row_arrays"]:
        if name not in meta["deduplicated"]:
            rows[name][:n] = _read(archive, f"{prefix}{name}.npy")
    for name in meta["deduplicated"]:  # after the rows they are taken from
        base, _, key = name.partition("/")
        partner = rows[DEDUPLICATED[1] + (f"/{key}" if key else "")]
        same = _read(archive, f"{prefix}{name}.same.npy")
        restored = np.roll(partner[:n], -1, axis=0)
        restored[~same] = _read(archive, f"{prefix}{name}.npy")
        rows[name][:n] = restored
    for name in meta["small_arrays"]:
        setattr(buffer, name, _read(archive, f"{prefix}{name}.npy"))
    buffer.pos, buffer.full = int(meta["pos"]), bool(meta["full"])
