"""Any OpenAI-compatible chat endpoint (api.openai.com, vLLM, llama.cpp, Ollama...) as a `Backend`.

Why our own retry loop (the client's is switched off): every retry is logged and counted in
`stats`, the backoff is configurable down to milliseconds for tests, and a request that still
fails comes back as `Reply.error` instead of an exception, so one flaky endpoint never costs the
samples that did finish. Only mistakes retrying cannot fix (bad key, unknown model) raise.
"""

from __future__ import annotations

import base64
import copy
import io
import logging
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai

from text2reward.generation.llm.base import ChatMessage, GenerationRequest, Reply
from text2reward.generation.llm.errors import BackendError

log = logging.getLogger(__name__)

LOCAL_PLACEHOLDER_KEY = "not-needed"
"""Sent when a base_url is set but no key: local servers ignore it, the client insists on one."""

_RETRYABLE_STATUS = {408, 409, 425, 429}


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter: base * 2**attempt * (1 + jitter * U[0, 1)), capped."""

    max_retries: int = 4
    backoff_base: float = 0.5
    backoff_max: float = 20.0
    jitter: float = 0.5

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        wait = self.backoff_base * (2**attempt) * (1.0 + self.jitter * random.random())
        if retry_after is not None:
            wait = max(wait, retry_after)  # the server knows its own rate window
        return min(wait, self.backoff_max)


@dataclass
class _CallResult:
    """One HTTP exchange (after its retries): the choices' texts, or why there are none."""

    texts: list[str | None]
    requested: int = 1
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_seconds: float = 0.0
    error: str | None = None
    rejected_n: bool = False
    """The server refused the request as malformed (HTTP 400/422): perhaps it does not take `n`."""


class OpenAIBackend:
    """K samples per request: one call with `n` when the server honours it, concurrent calls otherwise."""

    name = "openai"
    rule_based = False

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        vision: bool = False,
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        jitter: float = 0.5,
        max_workers: int = 8,
        use_n: bool = True,
        max_tokens_param: str = "max_tokens",
        extra_params: dict[str, Any] | None = None,
    ) -> None:
        model = model or os.environ.get("OPENAI_MODEL")
        if not model:
            raise BackendError("no model named for the openai backend: pass --model (or set OPENAI_MODEL)")
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if api_key is None:
            if base_url is None:
                raise BackendError(
                    "no OpenAI endpoint configured: set OPENAI_API_KEY for api.openai.com, "
                    "or pass --base-url (or OPENAI_BASE_URL) for a local OpenAI-compatible server"
                )
            api_key = LOCAL_PLACEHOLDER_KEY
        self.model = model
        self.base_url = base_url
        self.vision = vision
        self.timeout = timeout
        self.retry = RetryPolicy(max_retries, backoff_base, backoff_max, jitter)
        self.max_workers = max(1, max_workers)
        self.max_tokens_param = max_tokens_param
        self.extra_params = dict(extra_params or {})
        self._n_honoured: bool | None = None if use_n else False
        self._client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)
        self._lock = threading.Lock()
        self.stats = {"requests": 0, "retries": 0, "failed_calls": 0}
        """Counts of HTTP requests sent, retries after transient failures, calls that gave up."""

    # ---- what the cache keys on --------------------------------------------------------------
    @property
    def cache_context_keys(self) -> tuple[str, ...]:
        """Only images (and only for a vision model) reach the endpoint from `request.context`."""
        return ("images",) if self.vision else ()

    def cache_params(self) -> dict[str, Any]:
        return {"vision": self.vision, "max_tokens_param": self.max_tokens_param, **self.extra_params}

    # ---- the Backend protocol --------------------------------------------------------------
    def generate(self, request: GenerationRequest) -> list[Reply]:
        if request.n <= 0:
            return []
        messages = request.messages
        images = request.context.get("images") if self.vision else None
        if images:
            messages = attach_images(messages, list(images))
        results: list[_CallResult] = []
        remaining = request.n
        if request.n > 1 and self._n_honoured is not False:
            first = self._call(messages, request.n, request)
            if first.error is not None and not first.rejected_n:
                return self._replies([first], request.n)  # the endpoint is failing: don't fan out
            if first.error is None:
                results.append(first)
                remaining -= len(first.texts)
            if remaining > 0:
                log.info("%s returned %d of %d choices: filling with single requests",
                         self._where(), request.n - remaining, request.n)
                self._n_honoured = False
            elif self._n_honoured is None:
                self._n_honoured = True
        if remaining > 0:
            workers = min(self.max_workers, remaining)
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openai-sample") as pool:
                futures = [pool.submit(self._call, messages, 1, request) for _ in range(remaining)]
                results.extend(f.result() for f in futures)
        return self._replies(results, request.n)

    # ---- one call, with retries ------------------------------------------------------------
    def _call(self, messages: list[ChatMessage], n: int, request: GenerationRequest) -> _CallResult:
        params: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": request.temperature}
        if n > 1:
            params["n"] = n
        extra_body = dict(self.extra_params)
        if request.max_tokens is not None:
            if self.max_tokens_param == "max_tokens":
                params["max_tokens"] = request.max_tokens
            else:
                extra_body[self.max_tokens_param] = request.max_tokens
        if extra_body:
            params["extra_body"] = extra_body
        started = time.perf_counter()
        last_error = "no attempt made"
        for attempt in range(self.retry.max_retries + 1):
            self._count("requests")
            try:
                completion = self._client.chat.completions.create(**params)
            except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
                raise BackendError(
                    f"{self._where()} rejected the API key (HTTP {exc.status_code}: {_one_line(exc)}): "
                    "check OPENAI_API_KEY (and --base-url)"
                ) from None
            except openai.NotFoundError as exc:
                raise BackendError(
                    f"{self._where()} has no model {self.model!r} (HTTP 404: {_one_line(exc)}): "
                    "check --model and --base-url"
                ) from None
            except openai.APIStatusError as exc:
                if exc.status_code < 500 and exc.status_code not in _RETRYABLE_STATUS:
                    return _CallResult(
                        [], n, latency_seconds=time.perf_counter() - started,
                        error=f"HTTP {exc.status_code}: {_one_line(exc)}",
                        rejected_n=n > 1 and exc.status_code in (400, 422),
                    )
                last_error = f"HTTP {exc.status_code}: {_one_line(exc)}"
                retry_after = _retry_after(exc)
            except (openai.APIError, ValueError) as exc:  # timeouts, refused connections, garbled JSON
                last_error = f"{type(exc).__name__}: {_one_line(exc)}"
                retry_after = None
            else:
                return _result_of(completion, n, time.perf_counter() - started)
            if attempt < self.retry.max_retries:
                wait = self.retry.delay(attempt, retry_after)
                self._count("retries")
                log.warning("%s: %s; retry %d/%d in %.2fs", self._where(), last_error, attempt + 1,
                            self.retry.max_retries, wait)
                time.sleep(wait)
        self._count("failed_calls")
        attempts = self.retry.max_retries + 1
        return _CallResult([], n, latency_seconds=time.perf_counter() - started,
                           error=f"gave up after {attempts} attempts: {last_error}")

    def _replies(self, results: list[_CallResult], n: int) -> list[Reply]:
        """Spread each call's usage over its choices (sums stay exact), then pad/trim to n."""
        replies: list[Reply] = []
        for result in results:
            count = max(1, len(result.texts))
            prompt = _split(result.prompt_tokens, count)
            completion = _split(result.completion_tokens, count)
            if result.error is not None:
                replies.extend(self._reply(None, error=result.error, latency=result.latency_seconds)
                               for _ in range(result.requested))
                continue
            for i, text in enumerate(result.texts):
                error = None if text else "the model returned no text"
                replies.append(self._reply(text or None, prompt[i], completion[i], result.latency_seconds, error))
        while len(replies) < n:
            replies.append(self._reply(None, error="the endpoint returned too few choices"))
        return replies[:n]

    def _reply(self, text: str | None, prompt: int = 0, completion: int = 0, latency: float = 0.0,
               error: str | None = None) -> Reply:
        return Reply(text=text, backend=self.name, model=self.model, prompt_tokens=prompt,
                     completion_tokens=completion, latency_seconds=latency, error=error)

    def _count(self, what: str) -> None:
        with self._lock:
            self.stats[what] += 1

    def _where(self) -> str:
        return f"the endpoint {self.base_url or 'api.openai.com'}"


def _result_of(completion: Any, n: int, latency: float) -> _CallResult:
    choices = sorted(completion.choices or [], key=lambda c: c.index or 0)[:n]
    usage = completion.usage
    return _CallResult(
        texts=[c.message.content if c.message is not None else None for c in choices],
        requested=n,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        latency_seconds=latency,
        error=None if choices else "the endpoint returned no choices",
    )


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _retry_after(exc: openai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def _one_line(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())[:300]


# ---- images for vision models ------------------------------------------------------------------
def attach_images(messages: list[ChatMessage], images: list[Any]) -> list[ChatMessage]:
    """A copy of `messages` whose last user message carries the images as `image_url` parts."""
    messages = copy.deepcopy(messages)
    index = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), None)
    if index is None:
        messages.append({"role": "user", "content": []})
        index = len(messages) - 1
    content = messages[index].get("content")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    parts.extend({"type": "image_url", "image_url": {"url": image_data_url(image)}} for image in images)
    messages[index]["content"] = parts
    return messages


def image_data_url(image: Any) -> str:
    """PNG/JPEG bytes, a path to one, or an HxWx3 uint8 array -> a `data:` URL."""
    if isinstance(image, (str, Path)):
        path = Path(image)
        if not path.is_file():
            raise BackendError(f"image {path} not found: render keyframes before asking a vision model")
        data = path.read_bytes()
    elif isinstance(image, (bytes, bytearray, memoryview)):
        data = bytes(image)
    elif hasattr(image, "shape"):
        import imageio.v3 as iio

        buffer = io.BytesIO()
        iio.imwrite(buffer, image, extension=".png")
        data = buffer.getvalue()
    else:
        raise BackendError(f"cannot send a {type(image).__name__} as an image: give PNG bytes or a file path")
    return f"data:{_mime(data)};base64,{base64.b64encode(data).decode()}"


def _mime(data: bytes) -> str:
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return "image/png"


__all__ = ["OpenAIBackend", "RetryPolicy", "attach_images", "image_data_url"]
