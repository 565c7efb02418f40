"""Replies written by a person: read from files, or pasted on stdin from a chat window.

Why: anyone with access to a chat UI but no API key can still run the loop. The prompt goes to
stderr (stdout stays clean for the CLI's own output); replies come back one per sample.

Files are consumed in order across calls, one per sample: with 4 files, a first request for 2
samples gets files 1-2 and the next gets 3-4. A directory means its non-hidden files in name order.
When there are too few, the backend raises `RepliesExhausted` before using any (or cycles, with
`cycle=True`): a run then waits for a person's replies (`t2r resume RUN --reply-file NEW.md`).

On stdin, each reply ends at end-of-input (Ctrl-D; Ctrl-Z Enter on Windows), and a line holding only
`%%%` separates several replies pasted at once.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from text2reward.generation.llm.base import ChatMessage, GenerationRequest, Reply
from text2reward.generation.llm.errors import BackendError, RepliesExhausted
from text2reward.generation.llm.spec import BackendSettings, BackendSpec

SEPARATOR = "%%%"


class FileBackend:
    name = "file"
    model = "file"
    rule_based = False
    cacheable = False
    """Its replies already live on disk (or came from a person): caching would only serve stale ones."""

    def __init__(
        self,
        paths: str | Path | Sequence[str | Path] | None = None,
        *,
        cycle: bool = False,
        start: int = 0,
        stdin: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        """`start`: reply files already used (a resumed run continues after them, never re-reads them)."""
        self.files = None if paths is None else _expand(paths)
        self.cycle = cycle
        self._stdin = stdin
        self._stderr = stderr
        self._cursor = start
        self._pending: deque[str] = deque()
        self._seen: list[str] = []
        self._stdin_closed = False

    def generate(self, request: GenerationRequest) -> list[Reply]:
        if request.n <= 0:
            return []
        if self.files is not None:
            return self._from_files(request)
        return self._from_stdin(request)

    # ---- files -----------------------------------------------------------------------------
    def _from_files(self, request: GenerationRequest) -> list[Reply]:
        assert self.files is not None
        n = request.n
        if not self.cycle and self._cursor + n > len(self.files):
            left = max(len(self.files) - self._cursor, 0)
            raise RepliesExhausted(
                f"the file backend has {left} unused reply file(s) left but {n} were asked for: "
                "add reply files (one per sample), ask fewer samples, or allow reuse with cycle",
                request, n - left,
            )
        replies = []
        for _ in range(n):
            path = self.files[self._cursor % len(self.files)]
            self._cursor += 1
            try:
                text = path.read_text()
            except OSError as exc:
                raise BackendError(f"cannot read reply file {path} ({exc.strerror}): check the path") from None
            except UnicodeDecodeError:
                raise BackendError(f"reply file {path} is not text (it holds bytes no editor wrote as UTF-8): save the "
                                   "model's reply as a text file and pass that") from None
            replies.append(_reply(text, error=None if text.strip() else f"reply file {path} is empty"))
        return replies

    # ---- stdin -----------------------------------------------------------------------------
    def _from_stdin(self, request: GenerationRequest) -> list[Reply]:
        stdin = self._stdin or sys.stdin
        err = self._stderr or sys.stderr
        err.write(render_prompt(request))
        texts: list[str] = []
        started = time.perf_counter()
        while len(texts) < request.n:
            if not self._pending:
                if self._stdin_closed:
                    break
                err.write(f"===== paste reply {len(texts) + 1} of {request.n}, then Ctrl-D "
                          f"(or separate several with a line '{SEPARATOR}') =====\n")
                err.flush()
                chunk = stdin.read()
                parts = [p for p in split_replies(chunk) if p.strip()]
                if not parts:
                    self._stdin_closed = True
                    break
                self._pending.extend(parts)
            texts.append(self._pending.popleft())
        self._seen.extend(texts)
        if len(texts) < request.n:
            if not (self.cycle and self._seen):
                raise BackendError(
                    f"stdin gave {len(texts)} reply(ies) but {request.n} samples were asked for: paste one reply "
                    f"per sample (end each with Ctrl-D or separate them with a line '{SEPARATOR}'), "
                    "or ask fewer samples"
                )
            texts.extend(self._seen[i % len(self._seen)] for i in range(request.n - len(texts)))
        latency = time.perf_counter() - started
        return [_reply(text, latency=latency) for text in texts]


def split_replies(text: str) -> list[str]:
    """Several replies pasted at once, split on lines holding only the separator."""
    replies: list[str] = []
    current: list[str] = []
    for line in text.splitlines(keepends=True):
        if line.strip() == SEPARATOR:
            replies.append("".join(current))
            current = []
        else:
            current.append(line)
    replies.append("".join(current))
    return replies


def render_prompt(request: GenerationRequest) -> str:
    """The chat as plain text a person can copy into a chat window."""
    lines = [f"===== prompt for {request.task_id} (round {request.round}): copy everything below =====\n"]
    for message in request.messages:
        lines.append(f"[{message.get('role', 'user')}]\n{_text_of(message)}\n")
    images = request.context.images
    if images:
        lines.append(f"[{len(images)} image(s) for vision models: attach them in the chat window]\n")
    return "\n".join(lines) + "\n"


def _text_of(message: ChatMessage) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        parts.append(part.get("text", "") if part.get("type") == "text" else f"[{part.get('type', 'part')}]")
    return "\n".join(parts)


def _expand(paths: str | Path | Sequence[str | Path]) -> list[Path]:
    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    files: list[Path] = []
    for item in items:
        path = Path(item).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
            if not found:
                raise BackendError(f"reply directory {path} holds no files: put one reply per file in it")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise BackendError(f"reply file {path} not found: check the path given to the file backend")
    if not files:
        raise BackendError("the file backend was given no reply files: pass files or a directory, or none for stdin")
    return files


def _reply(text: str, latency: float = 0.0, error: str | None = None) -> Reply:
    return Reply(text=text if error is None else None, backend="file", model="file",
                 latency_seconds=latency, error=error)


# --- the backend's spec (generation.llm.spec) ---


def _build(settings: BackendSettings) -> FileBackend:
    """Replies from the run's reply files (after those it already used), or from stdin when it names none."""
    return FileBackend(list(settings.reply_files) or None, start=settings.replies_used if settings.reply_files else 0)


def _check(settings: BackendSettings, task: Any) -> None:
    if settings.reply_files:
        _build(settings)  # every file exists and can be listed


SPEC = BackendSpec(
    name="file", summary="(replies you paste from a chat window)", build=_build, check=_check, accepts_images=True,
    reads_reply_files=True, cache_replies=False, model_label="pasted replies",
)
