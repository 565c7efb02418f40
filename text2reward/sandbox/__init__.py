"""The sandbox for model-written reward code (DESIGN stage 4).

The boundary is the operating system: model-written code runs only in a worker process jailed by
bubblewrap namespaces or by Landlock + seccomp (+ namespaces where allowed), each verified by a
self-test before first use; where none passes, nothing runs (`SandboxUnavailable`). See
isolation.py for the threat model and jail.py for the layers. The static AST allow-list
(`static_check`), the audit hook and restricted builtins are lint: early, friendly errors for
ordinary mistakes, not defences. The parent enforces time (per call in training: wall clock and
kernel-measured CPU), parses every reply strictly and cleans every text the child sends
(`run_reward`, `validate`, `SandboxedReward`).

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
    "reward_from_file": "text2reward.sandbox.reward",
    "Isolation": "text2reward.sandbox.isolation",
    "SandboxUnavailable": "text2reward.sandbox.isolation",
    "active_isolation": "text2reward.sandbox.isolation",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'text2reward.sandbox' has no attribute {name!r}")
