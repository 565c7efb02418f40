"""Replies cached on disk, so a rerun of the same request is reproducible and costs no tokens.

The key is a SHA-256 over everything that shapes a sample: backend name, model, messages,
temperature, max_tokens, the request's seed (the run's `--seed`: a new seed means new samples), the
sample's index within the request, task id and round, the parts of
`request.context` the backend reads (all of it unless the backend says otherwise through
`cache_context_keys`; image files are keyed by their content) and `backend.cache_params()`.
Sample i of a request is cached separately, so asking for K+2 samples later reuses the first K.

Default location: `$T2R_CACHE_DIR`, else `$XDG_CACHE_HOME/text2reward/replies`, else
`~/.cache/text2reward/replies`, shared by every run so that a rerun of any run is free. Pass a
directory (e.g. `runs/<run-id>/cache`) to keep a run's replies with it.

Errors are never cached: a request that failed is asked again next time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from policies.io import write_json_atomic
from sim_envs.codec import RecordError, read, write
from text2reward.generation.llm.base import Backend, GenerationRequest, Reply

KEY_VERSION = 2
"""Bump when the key's recipe changes, so old entries are never served under a new meaning."""


def default_cache_dir() -> Path:
    if os.environ.get("T2R_CACHE_DIR"):
        return Path(os.environ["T2R_CACHE_DIR"]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return base / "text2reward" / "replies"


class ReplyCache:
    """One JSON file per (request, sample index): `<dir>/<key[:2]>/<key>.json`."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()

    def key(self, backend: Backend, request: GenerationRequest, sample_index: int) -> str:
        keys = getattr(backend, "cache_context_keys", None)
        everything = write(request.context)
        context = everything if keys is None else {k: everything[k] for k in keys if k in everything}
        params = backend.cache_params() if hasattr(backend, "cache_params") else {}
        payload = {
            "version": KEY_VERSION,
            "backend": backend.name,
            "model": backend.model,
            "messages": request.messages,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "seed": request.seed,
            "sample_index": request.first_sample + sample_index,
            "task_id": request.task_id,
            "round": request.round,
            "context": {str(k): _canonical(v, files_by_content=k == "images") for k, v in context.items()},
            "params": _canonical(params),
        }
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> Reply | None:
        """The cached reply, marked `cached` and free; None on a miss or an unreadable entry."""
        try:
            record = json.loads(self.path(key).read_text())
            reply = read(Reply, record["reply"], str(self.path(key)))  # keys this text2reward does not know are left out
        except (OSError, ValueError, KeyError, TypeError, RecordError):
            return None
        if reply.error is not None or reply.text is None:
            return None
        return dataclasses.replace(reply, cached=True, prompt_tokens=0, completion_tokens=0, latency_seconds=0.0)

    def put(self, key: str, reply: Reply, request: GenerationRequest | None = None, sample_index: int = 0) -> bool:
        """Store a successful reply (atomic write); returns False, storing nothing, for a failed one."""
        if reply.error is not None or reply.text is None:
            return False
        record: dict[str, Any] = {"key": key, "reply": write(reply)}
        if request is not None:
            record["request"] = {"task_id": request.task_id, "round": request.round, "sample_index": sample_index}
        write_json_atomic(self.path(key), record)
        return True


class CachedBackend:
    """Wraps a backend: samples found on disk are served from there, only the rest are generated."""

    def __init__(self, backend: Backend, cache: ReplyCache | None = None) -> None:
        self.backend = backend
        self.cache = cache if cache is not None else ReplyCache()
        self.name = backend.name
        self.model = backend.model
        self.rule_based = backend.rule_based
        self.hits = 0
        self.misses = 0

    def generate(self, request: GenerationRequest) -> list[Reply]:
        if not getattr(self.backend, "cacheable", True):
            return self.backend.generate(request)  # e.g. the file backend: its replies already live on disk
        keys = [self.cache.key(self.backend, request, i) for i in range(request.n)]
        replies: list[Reply | None] = [self.cache.get(key) for key in keys]
        missing = [i for i, reply in enumerate(replies) if reply is None]
        self.hits += request.n - len(missing)
        self.misses += len(missing)
        for gap in _contiguous(missing):  # usually one: all K, or the samples after the cached ones
            fresh = self.backend.generate(dataclasses.replace(request, n=len(gap), first_sample=request.first_sample + gap[0]))
            for position, index in enumerate(gap):
                if position < len(fresh):
                    reply = fresh[position]
                    self.cache.put(keys[index], reply, request, index)
                else:
                    reply = Reply(None, self.name, self.model, error=f"{self.name} returned too few replies")
                replies[index] = reply
        return [reply for reply in replies if reply is not None]


def _contiguous(indices: list[int]) -> list[list[int]]:
    """[0, 1, 3] -> [[0, 1], [3]]: each gap is asked for with its own first_sample, so seeds never repeat."""
    runs: list[list[int]] = []
    for index in indices:
        if runs and runs[-1][-1] == index - 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return runs


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _canonical(value: Any, files_by_content: bool = False) -> Any:
    """JSON-able, stable form of request data; bytes, arrays and (for images) files by content hash."""
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v, files_by_content) for v in value]
    if isinstance(value, (str, Path)) and files_by_content:
        try:
            return {"file_sha256": hashlib.sha256(Path(value).read_bytes()).hexdigest()}
        except OSError:
            pass  # not a readable file: key on the name
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"sha256": hashlib.sha256(bytes(value)).hexdigest()}
    if hasattr(value, "tobytes") and hasattr(value, "shape"):
        return {"array_sha256": hashlib.sha256(value.tobytes()).hexdigest(), "shape": list(value.shape)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _canonical(dataclasses.asdict(value))
    return _ADDRESS.sub("", repr(value))
