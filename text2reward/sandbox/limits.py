"""Resource limits for sandboxed reward code, in one place so the CLI and config can override them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
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
    for hours, so they rely on `call_seconds` instead."""
    wall_seconds: float = 60.0
    """Whole validation run, or a training worker's start-up, before the parent kills it."""
    call_seconds: float = 0.5
    """Wall clock of one reward call in training (pipe round trip included) before the parent kills
    the worker: a reward that sleeps, blocks or hangs. Generous: a numpy reward takes ~10-100 us."""
    call_cpu_seconds: float = 0.05
    """CPU time of one reward call in training, read from the kernel, so a loaded machine does not
    count: about 50x the slowest reward validation accepts (`max_call_us`)."""
    slow_call_seconds: float = 0.02
    """Median wall clock per call over each window of `slow_window` training calls: a reward that
    turns slow after validation (a few ms of sleep per call) fails instead of stretching training."""
    slow_window: int = 256
    open_files: int = 16
    """RLIMIT_NOFILE once untrusted code runs (the jail lets it open no file anyway)."""
    max_call_us: float = 2000.0
    """Validation fails when the median reward call takes longer: at ~1,000-2,000 env steps/s
    (measured: see benchmarks/RESULTS.md), a 2 ms reward would halve training throughput. Typical numpy rewards take ~8 us."""
    isolation: str = "auto"
    """"auto": the first jail whose self-test passes here (bubblewrap, then Landlock + seccomp);
    "bubblewrap" or "landlock": that one or refuse. No setting runs model code without a jail."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
