"""A module imported when first used: the standard library's `importlib.util.LazyLoader`, for libraries whose import is
slow and which many processes never use (the OpenAI SDK, ~1 s, in every `t2r` command that never asks a model)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """`name`, loaded on its first attribute access (an already imported module is returned as it is)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module named {name!r}")
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
