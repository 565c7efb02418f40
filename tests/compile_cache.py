"""Which model files the test processes compile every time: only those under pytest's own temporary root.

Why not the whole temporary folder: a checkout (and its virtual environment, with MetaWorld's and Gymnasium's scenes)
may itself live there, as a fresh clone in /tmp does, and then every shipped scene was compiled again for every env."""

from __future__ import annotations

import getpass
import os
import tempfile


def pytest_temp_root() -> str:
    """The folder pytest makes every test's `tmp_path` under (`<tmp>/pytest-of-<user>`, as pytest names it), resolved:
    tests' own robots are written there and rewritten between compilations within one clock tick."""
    try:
        user = getpass.getuser()
    except (ImportError, KeyError, OSError):  # no name for this uid: pytest says "unknown" too
        user = "unknown"
    root = os.environ.get("PYTEST_DEBUG_TEMPROOT") or tempfile.gettempdir()
    return os.path.realpath(os.path.join(root, f"pytest-of-{user}"))
