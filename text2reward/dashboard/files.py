"""Safe lookup of files inside a run directory.

Why a separate guard: paths arrive from URLs and from run artefacts (candidate.json names its code and
video files); either could say `../../etc/passwd`, an absolute path, or follow a symlink out of the run.
Every read and every served file goes through `inside`, which resolves the path and checks it stays
under the resolved root.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
MAX_TEXT_BYTES = 2_000_000


def inside(root: Path, relative: str | None) -> Path | None:
    """The file `relative` names under `root`, or None if it escapes, is hidden, or is not a file."""
    if not relative or "\x00" in relative or "\\" in relative:
        return None
    parts = PurePosixPath(relative).parts
    if PurePosixPath(relative).is_absolute() or any(p in ("..", ".") or p.startswith(".") for p in parts):
        return None
    base = root.resolve()
    try:
        path = (base / relative).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    return path if path.is_relative_to(base) and path.is_file() else None


def run_root(runs_dir: Path, run_id: str) -> Path | None:
    """The directory of run `run_id`, or None when the id is malformed, unknown or escapes runs_dir."""
    if not RUN_ID.match(run_id) or ".." in run_id:
        return None
    base = runs_dir.resolve()
    root = (base / run_id).resolve()
    if root.parent != base or not (root / "config.json").is_file():
        return None
    return root


def read_text(root: Path, relative: str | None) -> str | None:
    """A run file's text (None when missing or unsafe); huge files are cut so a page stays usable."""
    path = inside(root, relative)
    if path is None:
        return None
    with path.open("rb") as handle:
        data = handle.read(MAX_TEXT_BYTES + 1)
    text = data[:MAX_TEXT_BYTES].decode("utf-8", errors="replace")
    return text + "\n[... cut: the file is larger than 2 MB]" if len(data) > MAX_TEXT_BYTES else text
