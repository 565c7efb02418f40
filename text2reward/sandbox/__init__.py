"""The sandbox for model-written reward code (DESIGN stage 4).

Layers, none trusted alone: a static AST allow-list (`static_check`), then a separate process with
rlimits, a deny-by-default audit hook, restricted builtins, dropped privileges or a bubblewrap jail,
and a parent that enforces wall-clock limits (`run_reward`, `validate`, `SandboxedReward`).

Exports load lazily: the worker process imports this package under its memory limit and must
not pull in gymnasium or the environments before it locks down.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "static_check": "text2reward.sandbox.static",
    "Limits": "text2reward.sandbox.limits",
    "RunResult": "text2reward.sandbox.runner",
    "run_reward": "text2reward.sandbox.runner",
    "collect_states": "text2reward.sandbox.states",
    "ValidationReport": "text2reward.sandbox.validation",
    "validate": "text2reward.sandbox.validation",
    "SandboxedReward": "text2reward.sandbox.reward",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'text2reward.sandbox' has no attribute {name!r}")
