"""Any OpenAI-compatible chat endpoint (api.openai.com, vLLM, llama.cpp, Ollama...) as a `Backend`.

Why our own retry loop (the client's is switched off): every retry is logged and counted in
`stats`, the backoff is configurable down to milliseconds for tests, and a request that still
fails comes back as `Reply.error` instead of an exception, so one flaky endpoint never costs the
samples that did finish. Only mistakes retrying cannot fix (bad key, unknown model) raise.

Why defaults depend on where the server is: a model on this machine (or the LAN) serves one
request at a time, takes minutes over a long reply and often ignores `n`, so for a local
`base_url` the backend sends one request at a time (`concurrency=1`), streams (the timeout then
bounds the silence between tokens, not the whole reply) and waits up to 600 s; api.openai.com gets
8 requests in flight, no streaming and 60 s.
"""

from __future__ import annotations

import base64
import copy
import functools
import importlib
import io
import ipaddress
import json
import logging
import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from text2reward.errors import ConfigError
from text2reward.generation.llm.base import ChatMessage, GenerationRequest, Reply
from text2reward.generation.llm.errors import BackendError
from text2reward.generation.llm.lazy import LazyLibrary
from text2reward.generation.llm.spec import BackendSettings, BackendSpec

if TYPE_CHECKING:
    import openai
else:
    openai = LazyLibrary("openai")  # the SDK costs ~1 s to import: only a run (or a check) that talks to an endpoint loads it
log = logging.getLogger(__name__)

LOCAL_PLACEHOLDER_KEY = "not-needed"
"""Sent when a base_url is set but no key: local servers ignore it, the client insists on one."""

OPENAI_HOST = "api.openai.com"
REMOTE_TIMEOUT = 60.0
LOCAL_TIMEOUT = 600.0
"""Any base_url: a local model writing a long reply takes minutes (and a remote proxy may front one)."""
REMOTE_CONCURRENCY = 8

_RETRYABLE_STATUS = {408, 409, 425, 429}
_N_REFUSAL = re.compile(r"choice", re.IGNORECASE)
"""llama.cpp refuses n > 1 with HTTP 500 "Only one completion choice is allowed": not worth retrying."""
_STREAM_REFUSAL = re.compile(r"stream", re.IGNORECASE)
"""A 400 that names stream_options is a server that does not take them, not a bad prompt."""


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
    """The server refused a request with n > 1 as malformed (HTTP 400/422), or said it allows one choice
    (llama.cpp's HTTP 500): perhaps it does not take `n`."""


# ---- where the endpoint is ---------------------------------------------------------------------
def is_local_url(url: str | None) -> bool:
    """True for a server on this machine or the local network (loopback, private, link-local, .local)."""
    host = (urlsplit(url).hostname or "") if url else ""
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        # a dotless name ("gpu-box") only resolves on the local network
        return host == "localhost" or host.endswith((".localhost", ".local", ".lan")) or "." not in host
    return address.is_loopback or address.is_private or address.is_link_local or address.is_unspecified


def check_url(base_url: str) -> None:
    """One-line error for a base URL the client would only fail on later, obscurely."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BackendError(
            f"--base-url {base_url!r} is not an http:// or https:// URL: "
            "give the server's API root, e.g. http://127.0.0.1:8000/v1"
        )


def resolve_endpoint(base_url: str | None, api_key: str | None) -> tuple[str | None, str]:
    """(base_url, api_key) after OPENAI_BASE_URL / OPENAI_API_KEY; local servers get a placeholder key."""
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
    if base_url is not None:
        check_url(base_url)
    if api_key is None:
        if base_url is None:
            raise BackendError(
                "no OpenAI endpoint configured: set OPENAI_API_KEY for api.openai.com, "
                "or pass --base-url (or OPENAI_BASE_URL) for a local OpenAI-compatible server"
            )
        api_key = LOCAL_PLACEHOLDER_KEY
    return base_url, api_key


def default_timeout(base_url: str | None) -> float:
    host = urlsplit(base_url).hostname if base_url else OPENAI_HOST
    return REMOTE_TIMEOUT if host == OPENAI_HOST else LOCAL_TIMEOUT


def check_endpoint(base_url: str | None, api_key: str | None, model: str, timeout: float = 5.0) -> None:
    """Fail fast, in one line, before a run: the server is down, the key is wrong or the model is absent.

    One GET {base_url}/models, no retries. A server without /models (404) or with an empty list is
    accepted: the first chat request will tell. A listed model must match exactly (llama.cpp lists
    the one it has loaded: pass that name).
    """
    base_url, api_key = resolve_endpoint(base_url, api_key)
    client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)
    where = str(client.base_url).rstrip("/")
    try:
        served = _served_models(client)
    except openai.APIConnectionError as exc:  # refused, unknown host, timeout
        reason = f"no answer within {timeout:g} s" if isinstance(exc, openai.APITimeoutError) else _cause(exc)
        raise BackendError(f"cannot reach {where}; is the server running? ({reason})") from None
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        raise BackendError(
            f"{where} rejected the API key (HTTP {exc.status_code}: {_one_line(exc)}): check OPENAI_API_KEY"
        ) from None
    except openai.NotFoundError:
        return
    except openai.APIStatusError as exc:
        log.warning("%s answered GET /models with HTTP %d (%s): not checking the model name",
                    where, exc.status_code, _one_line(exc))
        return
    except (openai.APIError, ValueError):
        served = None
    if served is None:
        raise BackendError(
            f"{where} did not answer GET /models like an OpenAI-compatible server: "
            "check --base-url (it usually ends in /v1)"
        )
    if served and model not in served:
        raise BackendError(
            f"the server at {where} has no model {model!r}; it serves: {', '.join(served)} (pass one as --model)"
        )


def _served_models(client: openai.OpenAI) -> list[str] | None:
    """Model ids from GET /models, read by hand: a web page there must not surface as a client crash.

    None when the answer is not an OpenAI-style model list."""
    text = client.models.with_raw_response.list().http_response.text
    try:
        entries = json.loads(text)["data"]
        return [str(entry["id"]) for entry in entries]
    except (ValueError, KeyError, TypeError):
        return None


class OpenAIBackend:
    """K samples per request: one call with `n` when the server honours it, single calls otherwise.

    Every HTTP request of this backend, from any thread, holds one of `concurrency` slots, so a
    local server is never sent a burst it would only queue (or time out on).
    """

    name = "openai"
    rule_based = False

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        vision: bool = False,
        timeout: float | None = None,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        jitter: float = 0.5,
        concurrency: int | None = None,
        stream: bool | None = None,
        use_n: bool = True,
        max_tokens_param: str = "max_tokens",
        extra_params: dict[str, Any] | None = None,
        max_workers: int | None = None,
    ) -> None:
        """`timeout`: 60 s for api.openai.com, 600 s for any other base_url; with streaming it bounds the
        wait between bytes. `concurrency` (old name `max_workers`): 1 for a local base_url, else 8.
        `stream`: on for a local base_url. All None means "the default for this endpoint"."""
        model = model or os.environ.get("OPENAI_MODEL")
        if not model:
            raise BackendError("no model named for the openai backend: pass --model (or set OPENAI_MODEL)")
        base_url, api_key = resolve_endpoint(base_url, api_key)
        local = is_local_url(base_url)
        self.model = model
        self.base_url = base_url
        self.vision = vision
        self.timeout = float(timeout) if timeout is not None else default_timeout(base_url)
        self.concurrency = _first_set(concurrency, max_workers, 1 if local else REMOTE_CONCURRENCY)
        self.stream = local if stream is None else bool(stream)
        self.retry = RetryPolicy(max_retries, backoff_base, backoff_max, jitter)
        self.max_tokens_param = max_tokens_param
        self.extra_params = dict(extra_params or {})
        self._n_honoured: bool | None = None if use_n else False
        self._stream_usage: bool | None = None
        """Whether the server takes `stream_options` (None: not yet known)."""
        self._client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=self.timeout, max_retries=0)
        self._slots = threading.BoundedSemaphore(self.concurrency)
        self._lock = threading.Lock()
        self.stats = {"requests": 0, "retries": 0, "failed_calls": 0}
        """Counts of HTTP requests sent, retries after transient failures, calls that gave up."""

    @property
    def max_workers(self) -> int:
        """The old name of `concurrency`."""
        return self.concurrency

    # ---- what the cache keys on --------------------------------------------------------------
    @property
    def cache_context_keys(self) -> tuple[str, ...]:
        """Only images (and only for a vision model) reach the endpoint from `request.context`."""
        return ("images",) if self.vision else ()

    def cache_params(self) -> dict[str, Any]:
        """What shapes a reply besides the request; transport settings (stream, timeout...) do not."""
        return {"vision": self.vision, "max_tokens_param": self.max_tokens_param, **self.extra_params}

    # ---- the Backend protocol --------------------------------------------------------------
    def generate(self, request: GenerationRequest) -> list[Reply]:
        if request.n <= 0:
            return []
        messages = request.messages
        images = request.context.images if self.vision else None
        if images:
            messages = attach_images(messages, list(images))
        results: list[_CallResult] = []
        remaining = request.n
        if request.n > 1 and self._n_honoured is not False:
            first = self._call(messages, request.n, request, _sample_seed(request, 0))
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
            results.extend(self._fan_out(messages, request, first_sample=request.n - remaining))
        return self._replies(results, request.n)

    def _fan_out(self, messages: list[ChatMessage], request: GenerationRequest, first_sample: int) -> list[_CallResult]:
        """Single requests for samples first_sample..n-1; sample i gets seed + i so replies differ."""
        seeds = [_sample_seed(request, i) for i in range(first_sample, request.n)]
        if len(seeds) == 1 or self.concurrency == 1:
            return [self._call(messages, 1, request, seed) for seed in seeds]
        workers = min(self.concurrency, len(seeds))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openai-sample") as pool:
            futures = [pool.submit(self._call, messages, 1, request, seed) for seed in seeds]
            return [f.result() for f in futures]

    # ---- one call, with retries ------------------------------------------------------------
    def _params(self, messages: list[ChatMessage], n: int, request: GenerationRequest,
                seed: int | None) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": request.temperature}
        if n > 1:
            params["n"] = n
        extra_body = dict(self.extra_params)
        if seed is not None:
            extra_body.pop("seed", None)  # the request's seed (+ i when fanned out) wins
            params["seed"] = seed
        if request.max_tokens is not None:
            if self.max_tokens_param == "max_tokens":
                params["max_tokens"] = request.max_tokens
            else:
                extra_body[self.max_tokens_param] = request.max_tokens
        if extra_body:
            params["extra_body"] = extra_body
        if self.stream:
            params["stream"] = True
        return params

    def _call(self, messages: list[ChatMessage], n: int, request: GenerationRequest,
              seed: int | None = None) -> _CallResult:
        params = self._params(messages, n, request, seed)
        started = time.perf_counter()
        last_error = "no attempt made"
        for attempt in range(self.retry.max_retries + 1):
            self._count("requests")
            try:
                with self._slots:
                    result = self._exchange(params, n)
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
                refused_n = n > 1 and (exc.status_code in (400, 422) or _N_REFUSAL.search(_one_line(exc)) is not None)
                if refused_n or (exc.status_code < 500 and exc.status_code not in _RETRYABLE_STATUS):
                    return _CallResult([], n, latency_seconds=time.perf_counter() - started,
                                       error=f"HTTP {exc.status_code}: {_one_line(exc)}", rejected_n=refused_n)
                last_error = f"HTTP {exc.status_code}: {_one_line(exc)}"
                retry_after = _retry_after(exc)
            except retried_errors() as exc:  # timeouts, refused, garbled JSON
                last_error = f"{type(exc).__name__}: {_one_line(exc)}"
                retry_after = None
            else:
                result.latency_seconds = time.perf_counter() - started
                return result
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

    def _exchange(self, params: dict[str, Any], n: int) -> _CallResult:
        """One HTTP request (plus, once, a retry without stream_options where a server refuses them)."""
        if not params.get("stream"):
            return _result_of(self._client.chat.completions.create(**params), n)
        if self._stream_usage is False:
            return self._read_stream(params, n)
        try:
            return self._read_stream({**params, "stream_options": {"include_usage": True}}, n)
        except openai.APIStatusError as exc:
            if exc.status_code not in (400, 422) or not _STREAM_REFUSAL.search(_one_line(exc)):
                raise
            log.info("%s refused stream_options (HTTP %d: %s): asking again without them",
                     self._where(), exc.status_code, _one_line(exc))
        self._count("requests")
        result = self._read_stream(params, n)
        self._stream_usage = False  # only now: the 400 was about stream_options, not something else
        return result

    def _read_stream(self, params: dict[str, Any], n: int) -> _CallResult:
        """Assemble each choice's text from SSE chunks (by choice index); usage from the chunk that has it."""
        parts: dict[int, list[str]] = {}
        usage = None
        with self._client.chat.completions.create(**params) as stream:
            for chunk in stream:
                usage = getattr(chunk, "usage", None) or usage
                for choice in chunk.choices or []:
                    delta = choice.delta.content if choice.delta is not None else None
                    parts.setdefault(choice.index or 0, []).append(delta or "")
        texts: list[str | None] = ["".join(parts[i]) for i in sorted(parts)[:n]]
        prompt, generated = _token_counts(usage)
        return _CallResult(texts, n, prompt_tokens=prompt, completion_tokens=generated,
                           error=None if texts else "the endpoint streamed no choices")

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


def _result_of(completion: Any, n: int) -> _CallResult:
    choices = sorted(completion.choices or [], key=lambda c: c.index or 0)[:n]
    prompt, generated = _token_counts(completion.usage)
    return _CallResult(
        texts=[c.message.content if c.message is not None else None for c in choices],
        requested=n,
        prompt_tokens=prompt,
        completion_tokens=generated,
        error=None if choices else "the endpoint returned no choices",
    )


def _token_counts(usage: Any) -> tuple[int, int]:
    """(prompt, completion) tokens; (0, 0) when the server sent no usage."""
    return int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0)


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Network failures in mid-stream: newer clients wrap them in openai errors, older ones let httpx's escape."""
    errors: list[type[BaseException]] = []
    for name in ("httpx", "httpx2"):
        try:
            errors.append(importlib.import_module(name).TransportError)
        except (ImportError, AttributeError):
            continue
    return tuple(errors)


@functools.cache
def retried_errors() -> tuple[type[BaseException], ...]:
    """Failures of one attempt that a retry may cure (HTTP status errors are decided by their status)."""
    return (openai.APIError, ValueError, *_transport_errors())


def _first_set(*values: int | None) -> int:
    """The first value given, at least 1."""
    return max(1, int(next(v for v in values if v is not None)))


def _sample_seed(request: GenerationRequest, index: int) -> int | None:
    """The seed of sample `index` of this request: the run's seed plus the sample's place in the round, so a
    request that fills gaps a cache left (`first_sample` > 0) never repeats the seeds of the samples it has."""
    return None if request.seed is None else request.seed + request.first_sample + index


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


def _cause(exc: BaseException) -> str:
    """The underlying reason ("[Errno 111] Connection refused"), not the client's generic wrapper text."""
    return _one_line(exc.__cause__) if exc.__cause__ is not None else _one_line(exc)


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
        import imageio.v3 as iio  # ~20 ms: this module loads with every `t2r` command; only an array sent as an image needs it

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


__all__ = ["OpenAIBackend", "RetryPolicy", "attach_images", "check_endpoint", "image_data_url", "is_local_url"]


# --- the backend's spec (generation.llm.spec) ---


def _build(settings: BackendSettings) -> OpenAIBackend:
    options: dict[str, Any] = {"model": settings.model, "base_url": settings.base_url, "vision": settings.vision,
                               "timeout": settings.timeout, "concurrency": settings.concurrency}
    if settings.max_retries is not None:
        options["max_retries"] = settings.max_retries
    return OpenAIBackend(**options)


def _resolve(settings: BackendSettings) -> BackendSettings:
    """The model and endpoint from OPENAI_MODEL / OPENAI_BASE_URL, so config.json records what the run used (never
    the API key)."""
    return replace(settings, model=settings.model or os.environ.get("OPENAI_MODEL") or None,
                   base_url=settings.base_url or os.environ.get("OPENAI_BASE_URL") or None)


def _check(settings: BackendSettings, task: Any) -> None:
    """A model is named, and the endpoint answers with it (one cheap request)."""
    if not settings.model:
        raise ConfigError("the openai backend needs --model (or OPENAI_MODEL): e.g. --model gpt-4o or your server's model name")
    backend = _build(settings)  # the key and URL are present and well formed
    check_endpoint(backend.base_url, os.environ.get("OPENAI_API_KEY") or None, backend.model)


SPEC = BackendSpec(
    name="openai", summary="(any OpenAI-compatible endpoint)", build=_build, check=_check, resolve=_resolve,
    accepts_images=True, answers_between_rounds=True,
)
