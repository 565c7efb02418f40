"""Model backends behind one contract (`base.Backend`), each described by a spec (`spec.BackendSpec`) and chosen by
name from the registry.

    spec = backend_spec("openai")
    backend = spec.make(spec.resolve(BackendSettings(model="gpt-4o-mini", base_url="http://127.0.0.1:8000/v1")))
    backend = CachedBackend(backend, ReplyCache(run_dir / "cache"))   # optional: reruns are free
    replies = backend.generate(GenerationRequest(messages, n=4, task_id="metaworld/reach-v3"))

A new backend is a module with a `Backend` class and its `BackendSpec`, plus one `register_backend` line.
"""

from __future__ import annotations

from text2reward.generation.llm import file_backend, heuristic, openai_backend
from text2reward.generation.llm.base import Backend, ChatMessage, GenerationRequest, Reply
from text2reward.generation.llm.cache import CachedBackend, ReplyCache, default_cache_dir
from text2reward.generation.llm.errors import BackendError
from text2reward.generation.llm.spec import (
    BackendSettings,
    BackendSpec,
    backend_spec,
    backend_specs,
    image_backends,
    register_backend,
    unregister_backend,
)

register_backend(openai_backend.SPEC)
register_backend(heuristic.SPEC)
register_backend(file_backend.SPEC)

__all__ = [
    "Backend",
    "BackendError",
    "BackendSettings",
    "BackendSpec",
    "CachedBackend",
    "ChatMessage",
    "GenerationRequest",
    "Reply",
    "ReplyCache",
    "backend_spec",
    "backend_specs",
    "default_cache_dir",
    "image_backends",
    "register_backend",
    "unregister_backend",
]
