"""Each MuJoCo model file compiled once per process, every env given its own copy.

Why: a training job makes four envs of its task (training, evaluation, trajectory analysis, video) and MetaWorld,
Gymnasium-Robotics and Gymnasium all compile the scene's XML again for each, ~0.2-0.3 s a time on these cores
(benchmarks/RESULTS.md, "test suite time"). The copy is MuJoCo's own (`mj_copyModel`, what `copy.copy` of an
`MjModel` does): an env that edits its model edits only its copy, and the physics is that of the same file compiled by
the same compiler. A file is known by its real path, modification time and size, so a file edited during the process
is compiled again. Installed by processes this project owns (a training job, `t2r train`, the test processes), never
by a library call in a user's process.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from typing import Any

import mujoco

_compiled: dict[tuple[str, int, int], Any] = {}


def compile_each_file_once(recompile_under: str | None = None) -> None:
    """Route `mujoco.MjModel.from_xml_path` through this process's cache (once; a second call changes nothing).

    Files under `recompile_under` (the tests' temporary folder, whose robots are rewritten between compilations within
    a clock tick) and compilations given `assets` are compiled every time."""
    if getattr(mujoco.MjModel.from_xml_path, "compiles_once", False):
        return
    compile_file: Callable[..., Any] = mujoco.MjModel.from_xml_path
    fresh_only = os.path.realpath(recompile_under) + os.sep if recompile_under else None

    def from_xml_path(filename: str, assets: dict | None = None) -> Any:
        path = os.path.realpath(filename)
        if assets is not None or (fresh_only is not None and path.startswith(fresh_only)):
            return compile_file(filename, assets) if assets is not None else compile_file(filename)
        stat = os.stat(path)
        key = (path, stat.st_mtime_ns, stat.st_size)
        if key not in _compiled:
            _compiled[key] = compile_file(filename)
        return copy.copy(_compiled[key])

    from_xml_path.__wrapped__ = compile_file  # type: ignore[attr-defined]  # the compiler itself, for comparisons
    from_xml_path.compiles_once = True  # type: ignore[attr-defined]
    mujoco.MjModel.from_xml_path = staticmethod(from_xml_path)
