"""A real OpenAI-compatible HTTP server on 127.0.0.1, scripted, for tests (no mocked clients).

Why a real server: the backend's retries, timeouts, `n` handling and token accounting only mean
something against real HTTP, parsed by the real `openai` client.

API (import it from any test as `from openai_server import ...`; pytest puts tests/ on sys.path):

    with OpenAITestServer(script=["a reply", 429, Say(["one", "two"]), Delay(2.0)]) as server:
        backend = OpenAIBackend("test-model", base_url=server.base_url)
        ...
        server.chat_requests      # JSON bodies of every POST /v1/chat/completions, in arrival order
        server.requests           # every request: method, path, headers, body

Each chat request consumes the next behaviour of `script`; when the script runs out, `default`
answers (by default an HTTP 500 saying so, so a test that under-scripts fails loudly).
Shorthands: a str is `Say(str)`, an int is `Fail(int)`.

Behaviours:
- `Say(text, prompt_tokens=None, completion_tokens=None, usage=True, seconds_per_token=None)`: a
  completion. `text` is a str, a list (choice i gets item i, cycling) or a callable
  `(body, choice_index) -> str`. Token counts default to whitespace-separated words (prompt: every
  text part of every message; completion: all choices); `usage=False` leaves `usage` out of the
  response. `seconds_per_token` (None: the server's) makes it a slow writer, see below.
- `Fail(status, message=None, retry_after=None)`: an OpenAI-style error body with that HTTP status.
- `Delay(seconds, then=Say("late"))`: waits (longer than a client timeout, typically), then answers.
- `Malformed(body)`: HTTP 200 with a body that is not valid JSON (streamed: one `data:` event of it).

Streaming: a body with `"stream": true` is answered like the real servers do, as `text/event-stream`:
one `data: {chat.completion.chunk}` event per word (per choice, interleaved when several), a last
chunk with `finish_reason`, a usage chunk (`choices: []`) when `stream_options.include_usage` is
true, then `data: [DONE]`. With `seconds_per_token`, the words trickle: a reply can take longer in
total than a client's timeout and still arrive, since that timeout bounds the gap between bytes.
A non-streamed slow reply sends nothing until all its words are "written".

Options: `honour_n` (False: one choice whatever `n` asks), `rejects_n` (an HTTP status: a request
with n > 1 gets it, "Only one completion choice is allowed", without consuming the script, as
llama.cpp does), `models` (GET /v1/models lists them; when given, a chat request for another model
gets a 404 like OpenAI's), `api_key` (when given, a request without `Authorization: Bearer
<api_key>` gets a 401), `latency` (seconds before any answer starts, like prompt processing),
`seconds_per_token` (default for `Say`), `rejects_stream_options` (400 when the body has
`stream_options`, as some older servers do), `lifetime` (seconds after which the server stops
itself, so a forgotten server cannot hang a test run).

Concurrency: `server.in_flight` is the number of chat requests being handled now and
`server.max_in_flight` its peak; a request counts from its arrival until just before its last bytes
are sent, so a client that waits for one reply before sending the next never shows 2.

Presets named after real servers: `OpenAITestServer.like("vllm" | "ollama" | "llamacpp", **options)`
(vLLM honours `n`; Ollama ignores it; llama.cpp refuses n > 1 with HTTP 500). All of them stream.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TextSource = str | list[str] | Callable[[dict, int], str]


@dataclass
class Say:
    text: TextSource = "ok"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usage: bool = True
    seconds_per_token: float | None = None
    """Seconds per word of the reply (None: the server's `seconds_per_token`)."""


@dataclass
class Fail:
    status: int
    message: str | None = None
    retry_after: float | None = None


@dataclass
class Delay:
    seconds: float
    then: Any = field(default_factory=lambda: Say("late"))


@dataclass
class Malformed:
    body: str = '{"id": "chatcmpl-broken", "choices": ['


Behaviour = Say | Fail | Delay | Malformed | str | int


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    """Lower-case header names."""
    body: Any
    """Parsed JSON when the body was JSON, else the raw text (None when empty)."""


def as_behaviour(item: Behaviour) -> Say | Fail | Delay | Malformed:
    if isinstance(item, str):
        return Say(item)
    if isinstance(item, bool):
        raise TypeError("a script item cannot be a bool")
    if isinstance(item, int):
        return Fail(item)
    if isinstance(item, (Say, Fail, Delay, Malformed)):
        return item
    raise TypeError(f"unknown script item {item!r}: use a str, an int, Say, Fail, Delay or Malformed")


def count_words(messages: list[dict]) -> int:
    """Deterministic stand-in for a tokenizer: words across every text part of every message."""
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            total += len(content.split())
        elif isinstance(content, list):
            total += sum(len(str(p.get("text", "")).split()) for p in content if p.get("type") == "text")
    return total


def pieces_of(text: str) -> list[str]:
    """A reply cut into word-sized stream deltas that join back to exactly `text`."""
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


PRESETS: dict[str, dict[str, Any]] = {
    "vllm": {"honour_n": True},
    "ollama": {"honour_n": False},
    "llamacpp": {"honour_n": False, "rejects_n": 500},
}
"""How the real servers treat `n` (all of them stream and take `seed`)."""

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_api_key",
    404: "model_not_found",
    429: "rate_limit_exceeded",
}


class OpenAITestServer:
    """A scripted `/v1/chat/completions` + `/v1/models` server in a daemon thread."""

    def __init__(
        self,
        script: list[Behaviour] | None = None,
        *,
        default: Behaviour | None = None,
        honour_n: bool = True,
        rejects_n: int | None = None,
        models: list[str] | None = None,
        api_key: str | None = None,
        latency: float = 0.0,
        seconds_per_token: float = 0.0,
        rejects_stream_options: bool = False,
        lifetime: float = 120.0,
    ) -> None:
        self._script = [as_behaviour(item) for item in (script or [])]
        self._default = as_behaviour(default) if default is not None else Fail(500, "test server script exhausted")
        self.honour_n = honour_n
        self.rejects_n = rejects_n
        self.models = models
        self.api_key = api_key
        self.latency = latency
        self.seconds_per_token = seconds_per_token
        self.rejects_stream_options = rejects_stream_options
        self.lifetime = lifetime
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    @classmethod
    def like(cls, name: str, script: list[Behaviour] | None = None, **options: Any) -> OpenAITestServer:
        """A server that treats `n` the way vLLM, Ollama or llama.cpp does; `options` override."""
        if name not in PRESETS:
            raise ValueError(f"no preset {name!r}: choose one of {', '.join(PRESETS)}")
        return cls(script, **{**PRESETS[name], **options})

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> OpenAITestServer:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        httpd.daemon_threads = True
        httpd.block_on_close = False  # a handler still sleeping in a Delay must not hold up stop()
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="openai-test-server", daemon=True
        )
        self._thread.start()
        self._timer = threading.Timer(self.lifetime, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        with self._lock:
            httpd, self._httpd = self._httpd, None
        self._stopping.set()
        if self._timer is not None and threading.current_thread() is not self._timer:
            self._timer.cancel()
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    def wait_stopped(self, timeout: float | None = None) -> bool:
        """True once the server has stopped (by `stop`, the context manager or its lifetime)."""
        return self._stopping.wait(timeout)

    def __enter__(self) -> OpenAITestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- what tests read -------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the test server is not running")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chat_requests(self) -> list[Any]:
        with self._lock:
            return [r.body for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]

    def add(self, *items: Behaviour) -> None:
        """Append behaviours to the script while the server runs."""
        with self._lock:
            self._script.extend(as_behaviour(item) for item in items)

    # ---- serving ---------------------------------------------------------------------------
    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _arrived(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _finished(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _next_behaviour(self) -> Say | Fail | Delay | Malformed:
        with self._lock:
            return self._script.pop(0) if self._script else self._default

    def _texts(self, behaviour: Say, body: dict) -> list[str]:
        n = int(body.get("n") or 1) if self.honour_n else 1
        return [_choice_text(behaviour.text, body, i) for i in range(n)]

    def _seconds_per_token(self, behaviour: Say) -> float:
        return self.seconds_per_token if behaviour.seconds_per_token is None else behaviour.seconds_per_token

    def _envelope(self, body: dict, kind: str) -> dict[str, Any]:
        return {"id": f"chatcmpl-test-{next(self._ids)}", "object": kind, "created": int(time.time()),
                "model": body.get("model", "unknown")}

    def _completion(self, behaviour: Say, body: dict, texts: list[str]) -> dict:
        response = self._envelope(body, "chat.completion")
        response["choices"] = [
            {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
            for i, t in enumerate(texts)
        ]
        if behaviour.usage:
            response["usage"] = _usage(behaviour, body, texts)
        return response

    def _chunks(self, behaviour: Say, body: dict, texts: list[str]) -> list[tuple[bool, dict]]:
        """(is_a_word, chunk) in sending order: role deltas, words interleaved by choice, finish, usage."""
        chunk_id = self._envelope(body, "chat.completion.chunk")

        def chunk(index: int, delta: dict, finish: str | None = None) -> dict:
            return {**chunk_id, "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}

        pieces = [pieces_of(t) for t in texts]
        events = [(False, chunk(i, {"role": "assistant", "content": ""})) for i in range(len(texts))]
        for step in range(max((len(p) for p in pieces), default=0)):
            events += [(True, chunk(i, {"content": p[step]})) for i, p in enumerate(pieces) if step < len(p)]
        events += [(False, chunk(i, {}, "stop")) for i in range(len(texts))]
        if behaviour.usage and (body.get("stream_options") or {}).get("include_usage"):
            events.append((False, {**chunk_id, "choices": [], "usage": _usage(behaviour, body, texts)}))
        return events


def _usage(behaviour: Say, body: dict, texts: list[str]) -> dict[str, int]:
    prompt = behaviour.prompt_tokens
    completion = behaviour.completion_tokens
    prompt = count_words(body.get("messages", [])) if prompt is None else prompt
    completion = sum(len(t.split()) for t in texts) if completion is None else completion
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _choice_text(source: TextSource, body: dict, index: int) -> str:
    if callable(source):
        return source(body, index)
    if isinstance(source, list):
        return source[index % len(source)]
    return source


def _lower(headers: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def _error_body(status: int, message: str | None) -> dict:
    return {
        "error": {
            "message": message or f"scripted HTTP {status}",
            "type": _ERROR_TYPES.get(status, "server_error"),
            "param": None,
            "code": _ERROR_TYPES.get(status),
        }
    }


def _make_handler(owner: OpenAITestServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "OpenAITestServer/1"
        counted = False
        """Whether this request is still in `owner.in_flight`."""

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
            pass

        def _done(self) -> None:
            """Leave `in_flight` before the last bytes go out: the client cannot send its next request sooner."""
            if self.counted:
                self.counted = False
                owner._finished()

        def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            raw = payload if isinstance(payload, str) else json.dumps(payload)
            self._send_raw(status, raw.encode(), headers)

        def _send_raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
            self._done()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout): nothing to answer

        def _authorised(self) -> bool:
            if owner.api_key is None:
                return True
            if self.headers.get("Authorization") == f"Bearer {owner.api_key}":
                return True
            self._send_json(401, _error_body(401, "Incorrect API key provided."))
            return False

        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            owner._record(RecordedRequest("GET", self.path, _lower(self.headers), None))
            if not self._authorised():
                return
            if self.path.rstrip("/").endswith("/models"):
                data = [{"id": m, "object": "model", "owned_by": "test"} for m in (owner.models or [])]
                self._send_json(200, {"object": "list", "data": data})
            else:
                self._send_json(404, _error_body(404, f"no route {self.path}"))

        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode() if length else ""
            try:
                body: Any = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = raw
            owner._record(RecordedRequest("POST", self.path, _lower(self.headers), body))
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send_json(404, _error_body(404, f"no route {self.path}"))
                return
            owner._arrived()
            self.counted = True
            try:
                self._chat(body)
            finally:
                self._done()

        def _chat(self, body: Any) -> None:
            if not self._authorised():
                return
            if not isinstance(body, dict):
                self._send_json(400, _error_body(400, "the request body is not a JSON object"))
            elif owner.models is not None and body.get("model") not in owner.models:
                message = f"The model `{body.get('model')}` does not exist or you do not have access to it."
                self._send_json(404, _error_body(404, message))
            elif owner.rejects_n is not None and int(body.get("n") or 1) != 1:
                self._send_json(owner.rejects_n, _error_body(owner.rejects_n, "Only one completion choice is allowed"))
            elif owner.rejects_stream_options and "stream_options" in body:
                self._send_json(400, _error_body(400, "stream_options: Extra inputs are not permitted"))
            elif not owner._stopping.wait(owner.latency):
                self._answer(owner._next_behaviour(), body)

        def _answer(self, behaviour: Say | Fail | Delay | Malformed, body: dict) -> None:
            streamed = bool(body.get("stream"))
            if isinstance(behaviour, Delay):
                if owner._stopping.wait(behaviour.seconds):
                    return  # stopping: drop the request
                self._answer(as_behaviour(behaviour.then), body)
            elif isinstance(behaviour, Fail):
                headers = {}
                if behaviour.retry_after is not None:
                    headers["Retry-After"] = f"{behaviour.retry_after:g}"
                self._send_json(behaviour.status, _error_body(behaviour.status, behaviour.message), headers)
            elif isinstance(behaviour, Malformed):
                self._send_raw(200, (f"data: {behaviour.body}\n\n" if streamed else behaviour.body).encode())
            elif streamed:
                self._stream(behaviour, body)
            else:
                texts = owner._texts(behaviour, body)
                words = sum(len(pieces_of(t)) for t in texts)
                if not owner._stopping.wait(owner._seconds_per_token(behaviour) * words):
                    self._send_json(200, owner._completion(behaviour, body, texts))

        def _stream(self, behaviour: Say, body: dict) -> None:
            """Server-sent events, one word per chunk, `seconds_per_token` apart; stops if the client leaves."""
            pause = owner._seconds_per_token(behaviour)
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                for is_word, chunk in owner._chunks(behaviour, body, owner._texts(behaviour, body)):
                    if is_word and owner._stopping.wait(pause):
                        return
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self._done()
                self.wfile.write(b"data: [DONE]\n\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout)

    return Handler
