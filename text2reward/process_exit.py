"""A quick end for processes that imported the training libraries.

Why: as the interpreter shuts down it tears its modules down and runs the cyclic garbage collector several times over
every object they made; with PyTorch, JAX and SBX loaded that is ~1.2 s of CPU at the end of each `t2r train`,
`t2r evaluate` or fresh training job (0.15 s with the objects frozen; benchmarks/RESULTS.md, "test suite time").
Collecting once at exit keeps what a normal exit does (finalizers of cyclic garbage run, files left open are flushed);
freezing what is left then spares the shut-down's own collections a walk over objects that live until the end anyway.
"""

from __future__ import annotations

import atexit
import gc


def collect_once_at_exit() -> None:
    """Called as the command starts: exit handlers run last-registered first, so this runs after those of every library
    imported later (torch, JAX, SBX) and before logging's; what it freezes stays usable by the handlers after it."""
    atexit.register(_collect_then_freeze)


def _collect_then_freeze() -> None:
    gc.collect()
    gc.freeze()
