"""Waiting in tests for something another process does (a run folder, a worker's pid file)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

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
