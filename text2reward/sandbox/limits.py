"""Resource limits for sandboxed reward code, in one place so the CLI and config can override them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Limits:
    """What one reward process may use.

    The defaults fit a 2-core laptop under load: importing numpy, scipy and the view classes takes
    about 100 MB of address space and up to a few seconds of wall time when the machine is busy.
    """

    memory_mb: int = 1024
    """RLIMIT_AS of the worker: address space, so a huge allocation fails with MemoryError."""
    cpu_seconds: int = 30
    """RLIMIT_CPU of a validation worker (soft == hard: the kernel kills it). Training workers run
    for hours: they have `training_cpu_seconds`, and the per-call limits judge each call."""
    training_cpu_seconds: int = 7200
    """RLIMIT_CPU of a training worker, for its whole life: a backstop, so that no reward process burns CPU without
    end where its parent can no longer judge its calls (the per-call limits and budgets do that while it can).
    Generous: a worker with a typical numpy reward uses ~35-45 us of CPU per call (measured, reward included), so
    two CPU-hours cover ~160M such calls, or ~3.5M of a reward at validation's 2 ms maximum (`max_call_us`)."""
    wall_seconds: float = 60.0
    """Whole validation run, or a training worker's start-up, before the parent kills it."""
    call_cpu_seconds: float = 0.05
    """CPU time of one reward call in training, read from the kernel: about 50x the slowest reward validation
    accepts (`max_call_us`). A busy loop is stopped within one poll (20 ms) past it."""
    call_blocked_seconds: float = 0.5
    """Blocked time of one reward call in training: wall clock less the worker's CPU time, its wait for a CPU
    and any time it was stopped, all from the kernel. A reward that sleeps, waits or hangs is stopped here; a
    numpy reward blocks for ~0 (a page fault at most), whatever the load."""
    call_wall_seconds: float = 60.0
    """Backstop only: the wall clock of one call before the parent gives up on a worker that neither computes
    nor blocks (kept stopped, or starved far beyond any load measured: benchmarks/under_load.py). Stopping
    there is the machine's doing, not the reward's: training may be retried."""
    idle_cpu_seconds: float = 0.005
    idle_cpu_share: float = 0.01
    """CPU time the worker may use between calls, while it should wait for the next state (a timer or signal
    handler computing off the clock): in all, `idle_cpu_seconds` plus this share of a core over the worker's
    life. Measured: a worker's own bookkeeping there is 0 on most gaps and ~0.15 ms per 256 calls at most
    (under 0.02% of a core)."""
    slow_call_seconds: float = 0.02
    """Median of the reward's own time per call (CPU + blocked) over each window of `slow_window` training
    calls: a reward that turns slow after validation (a few ms of sleep per call) fails instead of
    stretching training."""
    slow_window: int = 256
    total_cpu_seconds: float = 60.0
    total_cpu_per_call: float = 0.005
    """A candidate's budget of CPU time over its whole training: `total_cpu_seconds` plus `total_cpu_per_call` for each
    call so far, counting the reward process's CPU per call and this process's own time parsing its replies. Why
    both: the per-call limit and the windowed median each see one call or one window, so a reward slow on a minority
    of calls passes both. Why these: validation accepts a mean of 2 ms per call (`max_call_us`) and a numpy reward
    takes ~8 us; 5 ms a call is 2.5x the first and ~600x the second, so a reward validation passed stays far inside
    on a busy machine (its waits for a CPU do not count), while one averaging more would at least halve training;
    the 60 s grant lets rare costly states through."""
    total_blocked_seconds: float = 30.0
    total_blocked_per_call: float = 0.002
    """A candidate's budget of blocked time (sleeping, waiting) over its whole training: `total_blocked_seconds` plus
    `total_blocked_per_call` for each call so far. Why: a reward sleeping 0.45 s on 45% of calls stays under the
    per-call limit and the median and trains at 5 steps/s instead of ~200; the budget stops it after ~150 calls. A
    numpy reward blocks ~0 (a page fault at most), and this process's measurement errs by at most 0.1 ms a call
    (calls.PARENT_WAIT_MATTERS): 2 ms a call is 20x that, and the 30 s grant covers a machine short of memory."""
    open_files: int = 16
    """RLIMIT_NOFILE once untrusted code runs (the jail lets it open no file anyway)."""
    max_call_us: float = 2000.0
    """Validation fails when the reward's own time per call is longer (its CPU on average over a pass plus its median
    blocked time: validation.smoke_checks): at ~1,000-2,000 env steps/s (measured: see benchmarks/RESULTS.md), a 2 ms
    reward would halve training throughput. Typical numpy rewards take ~8 us of compute; validation measures ~40-70 us
    a call, the view's decoding and the reply's transfer included."""
    isolation: str = "auto"
    """"auto": the first jail whose self-test passes here (bubblewrap, then Landlock + seccomp);
    "bubblewrap" or "landlock": that one or refuse. No setting runs model code without a jail."""


def limit_config(limits: Limits, cpu: bool) -> dict[str, Any]:
    """The limits as the worker applies them (see worker._apply_limits and _lock_down)."""
    return {
        "memory_bytes": int(limits.memory_mb) * 1024 * 1024,
        "cpu_seconds": int(limits.cpu_seconds) if cpu else None,
        "open_files": int(limits.open_files),
    }
