"""Waiting in tests for something another process does (a run folder, a worker's pid file), and reading which
processes are alive from /proc."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from policies.proc_stat import stat_fields

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float, what: str) -> T:
    """Poll `predicate` every 0.05 s until it returns something truthy, and return that; fail after `timeout` s.
    Often, because what a test waits for is often a moment in a short job (a worker started and not yet done)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def alive(pid: int) -> bool:
    """Whether `pid` runs (an ended process not yet reaped, a zombie, does not)."""
    try:
        state = stat_fields(pid)[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, their children...), from /proc's parent links."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(stat_fields(entry.name)[1])
            except OSError:  # ended while read
                continue
    found, frontier = [], [pid]
    while frontier:
        below = [child for child, parent in parents.items() if parent in frontier]
        found += below
        frontier = below
    return found
