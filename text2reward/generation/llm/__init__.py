"""Model backends behind one contract (`base.Backend`), chosen by name.

    backend = make_backend("openai", model="gpt-4o-mini", base_url="http://127.0.0.1:8000/v1")
    backend = CachedBackend(backend, ReplyCache(run_dir / "cache"))   # optional: reruns are free
    replies = backend.generate(GenerationRequest(messages, n=4, task_id="metaworld/reach-v3"))

Backends import lazily: the heuristic one pulls in task machinery the others do not need.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from text2reward.errors import ConfigError
from text2reward.generation.llm.base import Backend, ChatMessage, GenerationRequest, Reply
from text2reward.generation.llm.cache import CachedBackend, ReplyCache, default_cache_dir
from text2reward.generation.llm.errors import BackendError

BACKENDS = {
    "openai": ("text2reward.generation.llm.openai_backend", "OpenAIBackend"),
    "file": ("text2reward.generation.llm.file_backend", "FileBackend"),
    "heuristic": ("text2reward.generation.llm.heuristic", "HeuristicBackend"),
}


def backend_class(name: str) -> type:
    if name not in BACKENDS:
        raise ConfigError(f"unknown backend {name!r}: choose one of {', '.join(BACKENDS)}")
    module_name, class_name = BACKENDS[name]
    return getattr(importlib.import_module(module_name), class_name)


def make_backend(name: str, **options: Any) -> Backend:
    """Build a backend by name. Options set to None are dropped, so a CLI can pass every flag it has."""
    cls = backend_class(name)
    options = {key: value for key, value in options.items() if value is not None}
    parameters = inspect.signature(cls).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        unknown = sorted(set(options) - set(parameters))
        if unknown:
            accepted = ", ".join(p for p in parameters if parameters[p].kind is not inspect.Parameter.VAR_POSITIONAL)
            raise ConfigError(
                f"the {name} backend takes no option {', '.join(unknown)}: drop it (it accepts: {accepted})"
            )
    return cls(**options)


__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "CachedBackend",
    "ChatMessage",
    "GenerationRequest",
    "Reply",
    "ReplyCache",
    "backend_class",
    "default_cache_dir",
    "make_backend",
]
