"""A library imported when first used, for libraries whose import is slow and which many processes never use (the
OpenAI SDK, ~1 s, in every `t2r` command that never asks a model).

Why a stand-in object and not the standard library's `importlib.util.LazyLoader`: a lazily loaded module sits in
`sys.modules`, and `inspect.getmodule` (which PyTorch calls as it registers its operators at import) asks every module
there `hasattr(module, "__file__")`, which loads it: every process that imported our settings and then torch (`t2r
train`, `t2r evaluate`, the training fork server) paid the SDK's import. The stand-in is not a module in `sys.modules`,
so only an attribute read through it imports the library.
"""

from __future__ import annotations

import importlib
from typing import Any


class LazyLibrary:
    """`name`'s attributes, the library imported on the first one read (by the import system, so once per process)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)

    def __repr__(self) -> str:
        return f"<{self._name}, imported when first used>"
