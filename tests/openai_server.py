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
- `Say(text, prompt_tokens=None, completion_tokens=None, usage=True)`: a completion. `text` is a str,
  a list (choice i gets item i, cycling) or a callable `(body, choice_index) -> str`. Token counts
  default to whitespace-separated words (prompt: every text part of every message; completion: all
  choices); `usage=False` leaves `usage` out of the response.
- `Fail(status, message=None, retry_after=None)`: an OpenAI-style error body with that HTTP status.
- `Delay(seconds, then=Say("late"))`: waits (longer than a client timeout, typically), then answers.
- `Malformed(body)`: HTTP 200 with a body that is not valid JSON.

Options: `honour_n` (False: one choice whatever `n` asks), `models` (GET /v1/models lists them;
when given, a chat request for another model gets a 404 like OpenAI's), `api_key` (when given, a
request without `Authorization: Bearer <api_key>` gets a 401), `lifetime` (seconds after which the
server stops itself, so a forgotten server cannot hang a test run).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Union

TextSource = Union[str, list[str], Callable[[dict, int], str]]


@dataclass
class Say:
    text: TextSource = "ok"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usage: bool = True


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


Behaviour = Union[Say, Fail, Delay, Malformed, str, int]


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
        models: list[str] | None = None,
        api_key: str | None = None,
        lifetime: float = 120.0,
    ) -> None:
        self._script = [as_behaviour(item) for item in (script or [])]
        self._default = as_behaviour(default) if default is not None else Fail(500, "test server script exhausted")
        self.honour_n = honour_n
        self.models = models
        self.api_key = api_key
        self.lifetime = lifetime
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> "OpenAITestServer":
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

    def __enter__(self) -> "OpenAITestServer":
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

    def _next_behaviour(self) -> Say | Fail | Delay | Malformed:
        with self._lock:
            return self._script.pop(0) if self._script else self._default

    def _completion(self, behaviour: Say, body: dict) -> dict:
        n = int(body.get("n") or 1) if self.honour_n else 1
        texts = [_choice_text(behaviour.text, body, i) for i in range(n)]
        response: dict[str, Any] = {
            "id": f"chatcmpl-test-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "unknown"),
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                for i, t in enumerate(texts)
            ],
        }
        if behaviour.usage:
            prompt = behaviour.prompt_tokens
            completion = behaviour.completion_tokens
            prompt = count_words(body.get("messages", [])) if prompt is None else prompt
            completion = sum(len(t.split()) for t in texts) if completion is None else completion
            response["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        return response


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

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
            pass

        def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            raw = payload if isinstance(payload, str) else json.dumps(payload)
            self._send_raw(status, raw.encode(), headers)

        def _send_raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
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
            if not self._authorised():
                return
            if not isinstance(body, dict):
                self._send_json(400, _error_body(400, "the request body is not a JSON object"))
                return
            if owner.models is not None and body.get("model") not in owner.models:
                message = f"The model `{body.get('model')}` does not exist or you do not have access to it."
                self._send_json(404, _error_body(404, message))
                return
            self._answer(owner._next_behaviour(), body)

        def _answer(self, behaviour: Say | Fail | Delay | Malformed, body: dict) -> None:
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
                self._send_raw(200, behaviour.body.encode())
            else:
                self._send_json(200, owner._completion(behaviour, body))

    return Handler
