"""The resume checkpoint of a training run: one file, `resume.ckpt`, replaced whole or not at all.

Why one file: a kill can land at any instant, and a checkpoint of several files could be half old, half new.
The file is a zip written beside its final name and renamed over it once complete (policies.io.atomic_file), so
the previous checkpoint stays until the new one is whole; a torn file (a full disk, a copy cut short) fails zip's
own checks (its directory is at the end, every member has a CRC) and is ignored with one line.

Members: `meta.json` (format, steps, the settings it was written with), `model.zip` (SB3's `save`: networks and
optimiser states), `buffer/` (the replay buffer's filled rows, policies.replay_rows), `state.pkl` (curve, peak,
component statistics, early-stopping state, RNG states, wall time) and `peak_model.zip` (the policy of the best
evaluation as of this checkpoint, so a peak saved after it cannot mismatch the restored record).
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policies.io import atomic_file
from policies.replay_rows import new_archive, restore_rows, save_rows

CHECKPOINT_FILE = "resume.ckpt"
FORMAT = 1
"""Bumped when the members change: a checkpoint of another format is not resumed."""
BUFFER_PREFIX = "buffer/"
REQUIRED = frozenset({"meta.json", "model.zip", "state.pkl"})


def checkpoint_path(out_dir: str | Path) -> Path:
    return Path(out_dir) / CHECKPOINT_FILE


def fingerprint(settings: dict[str, Any]) -> str:
    """A digest of the settings a training was started with (canonical JSON)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]


def settings_difference(saved: dict[str, Any], current: dict[str, Any]) -> str:
    """The settings that differ, in a few words: "seed 0 -> 1, steps 600 -> 800"."""
    parts = []
    for key in sorted(set(saved) | set(current)):
        before, after = saved.get(key), current.get(key)
        if json.dumps(before, sort_keys=True, default=str) != json.dumps(after, sort_keys=True, default=str):
            shown = (f"{before} -> {after}" if len(f"{before}{after}") <= 60 else "changed")
            parts.append(f"{key} {shown}")
    return ", ".join(parts[:4]) + (f" and {len(parts) - 4} more" if len(parts) > 4 else "")


class CheckpointUnusable(Exception):
    """A checkpoint that must not be resumed; the message is the one line that says why."""


@dataclass
class Checkpoint:
    """A checkpoint read back: its meta, state and the model's bytes; the buffer rows stay in the file until asked for."""

    path: Path
    meta: dict[str, Any]
    state: dict[str, Any]
    model: bytes
    peak_model: bytes | None

    @property
    def steps(self) -> int:
        return int(self.meta["steps"])

    def restore_buffer(self, buffer: Any) -> None:
        """Put the saved rows into `buffer` (built with the same settings); nothing to do for an on-policy run."""
        if self.state.get("buffer") is None:
            return
        with zipfile.ZipFile(self.path) as archive:
            restore_rows(buffer, archive, BUFFER_PREFIX, self.state["buffer"])


def write_checkpoint(path: Path, settings: dict[str, Any], steps: int, model: Any, state: dict[str, Any],
                     buffer: Any = None, peak_model: Path | None = None) -> int:
    """Write the checkpoint atomically; returns its size in bytes. `model` is saved with SB3's `save`, `buffer`'s
    filled rows with policies.replay_rows, `state` with pickle (it holds RNG states, which JSON cannot)."""
    saved_model = io.BytesIO()
    model.save(saved_model)
    meta = {"format": FORMAT, "steps": int(steps), "fingerprint": fingerprint(settings), "settings": settings}
    with atomic_file(path) as handle, new_archive(handle) as archive:
        archive.writestr(_stored("meta.json"), json.dumps(meta, indent=2, default=str))
        archive.writestr(_stored("model.zip"), saved_model.getvalue())  # deflating it would halve SBX's, at ~0.1 s a copy
        state = {**state, "buffer": save_rows(buffer, archive, BUFFER_PREFIX) if buffer is not None else None}
        archive.writestr(_stored("state.pkl"), pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
        if peak_model is not None and peak_model.is_file():
            archive.write(peak_model, "peak_model.zip", compress_type=zipfile.ZIP_STORED)
    return path.stat().st_size


def _stored(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_STORED
    return info


def read_checkpoint(path: Path, settings: dict[str, Any]) -> Checkpoint:
    """The checkpoint at `path` if it was written whole, in this format, with these settings; otherwise
    `CheckpointUnusable` with the reason. Every member's CRC is checked before anything is used."""
    try:
        with zipfile.ZipFile(path) as archive:
            # a cut-short file may still look like a zip: zip finds the last directory in it, the embedded model.zip's
            missing = sorted(REQUIRED - set(archive.namelist()))
            if missing:
                raise CheckpointUnusable(f"the checkpoint {path} is torn or damaged (no {', '.join(missing)}); starting over")
            broken = archive.testzip()
            if broken is not None:
                raise CheckpointUnusable(f"the checkpoint {path} is torn or damaged ({broken} fails its CRC); starting over")
            meta = json.loads(archive.read("meta.json"))
            if meta.get("format") != FORMAT:
                raise CheckpointUnusable(f"the checkpoint {path} is of format {meta.get('format')}, this version reads {FORMAT}; "
                                         "starting over")
            if meta.get("fingerprint") != fingerprint(settings):
                raise CheckpointUnusable(f"the checkpoint {path} (step {meta.get('steps')}) was written with other settings "
                                         f"({settings_difference(meta.get('settings') or {}, settings)}); starting over")
            state = pickle.loads(archive.read("state.pkl"))
            model = archive.read("model.zip")
            peak = archive.read("peak_model.zip") if "peak_model.zip" in archive.namelist() else None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, KeyError, ValueError, OSError, pickle.UnpicklingError) as exc:
        raise CheckpointUnusable(f"the checkpoint {path} is torn or damaged ({type(exc).__name__}: {exc}); starting over") from exc
    return Checkpoint(path=path, meta=meta, state=state, model=model, peak_model=peak)


def remove_checkpoint(out_dir: str | Path) -> None:
    """Drop a training's checkpoint (its job is done, or will never be retried), with any temporary file a kill
    left beside it."""
    path = checkpoint_path(out_dir)
    path.unlink(missing_ok=True)
    for leftover in path.parent.glob(f".{path.name}.*.tmp"):
        leftover.unlink(missing_ok=True)
