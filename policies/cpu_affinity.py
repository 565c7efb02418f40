"""A training that holds a CPU core no other training of this user on the machine holds, with every thread it has.

Why: SBX's update runs on XLA's CPU executor, which hands the compiled update's kernels to a pool of threads sized to
the machine's cores even when each kernel is single-threaded; spread over the cores they wait on each other and on
the Python thread that steps the env. The whole process on one core took ~1.8 ms an update against ~2.5 ms free, and
two trainings side by side on 2 cores, one core each, ran 1.24-1.40x the steps/s of the same two free (two runs;
benchmarks/RESULTS.md, "One core per training job"). Its jailed reward starts on the same core (the calls are synchronous); env processes
started before (`vec_env: subproc`) keep every core.

Which core: the first one whose lock file (`T2R_CORE_LOCKS`, else `$XDG_CACHE_HOME/text2reward/cores`) this process
can lock. The lock is the kernel's (`flock`), held for the process's life and let go when it ends however it ends, so
runs, test processes and benchmarks started side by side never stack their jobs on one core, and a killed job's core
is free again at once. When every core is held, the training holds none and the OS places it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from policies.config import cache_root, switched_on

HOLD_VARIABLE = "T2R_HOLD_CORE"
"""Set to 1 in a training's environment by the launcher that wants it on a core of its own (training/pool.py)."""
LOCKS_VARIABLE = "T2R_CORE_LOCKS"
"""The folder of the cores' lock files (default: this user's cache, shared by every run of the user)."""

_HELD: list[int] = []
"""The lock file descriptor this process holds (kept open for its life: closing it would let the core go)."""


def lock_folder() -> Path:
    chosen = os.environ.get(LOCKS_VARIABLE)
    return Path(chosen) if chosen else cache_root() / "cores"


def wanted() -> bool:
    return switched_on(HOLD_VARIABLE, default=False)


def claim_core() -> int | None:
    """Lock the first free core this process may run on; the core, or None (every core held, one core only, or no
    `sched_setaffinity` here). A process claims at most one."""
    if _HELD or not hasattr(os, "sched_setaffinity"):
        return None
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        return None
    try:
        folder = lock_folder()
        folder.mkdir(parents=True, exist_ok=True)
    except (OSError, RuntimeError):  # no home, a read-only cache: the OS places this training, as before
        return None
    for cpu in usable:
        try:
            fd = os.open(folder / f"cpu{cpu}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        _HELD.append(fd)
        return cpu
    return None


def hold_to_a_free_core() -> int | None:
    """Where the launcher wants it (`T2R_HOLD_CORE=1`): claim a free core and hold every thread of this process (and so
    what they start) to it; the core, or None. Called before the training builds its model, so the thread pools XLA
    and torch start later are born on it."""
    if not wanted():
        return None
    cpu = claim_core()
    if cpu is None:
        return None
    for thread in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(thread), {cpu})
        except OSError:
            pass  # a thread that ended meanwhile
    return cpu
