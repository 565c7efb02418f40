"""Length-prefixed frames over pipes, shared by the parent and the sandboxed worker.

Why so small: the worker imports this before anything else, under its memory limit, so it uses
only `os` and `struct`. Parent -> worker frames carry pickles (the parent is trusted); worker ->
parent frames carry JSON, because the parent must never unpickle bytes untrusted code could forge.
"""

from __future__ import annotations

import os
import select
import struct
import time

HEADER = struct.Struct(">I")
MAX_REPLY_BYTES = 4 * 1024 * 1024
"""The parent refuses larger replies: a reward step's answer is a few hundred bytes."""


class ChannelClosed(Exception):
    """The other end closed its pipe (the process exited or was killed)."""


class ChannelTimeout(Exception):
    """No complete frame before the deadline."""


def frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload)) + payload


def read_exact(fd: int, size: int, deadline: float | None = None) -> bytes:
    """`size` bytes from `fd`, waiting at most until `deadline` (time.monotonic()) when given."""
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ChannelTimeout(f"no reply within the time limit ({size - remaining} of {size} bytes read)")
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise ChannelClosed("the other end closed the pipe")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, deadline: float | None = None, max_bytes: int | None = None) -> bytes:
    (size,) = HEADER.unpack(read_exact(fd, HEADER.size, deadline))
    if max_bytes is not None and size > max_bytes:
        raise ChannelClosed(f"a reply of {size:,} bytes exceeds the {max_bytes:,}-byte limit")
    return read_exact(fd, size, deadline)


def write_all(fd: int, data: bytes, deadline: float | None = None) -> None:
    """Write everything; on a non-blocking fd, wait for room until `deadline`."""
    view = memoryview(data)
    while view:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise ChannelTimeout("the other end stopped reading")
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            continue
        except (BrokenPipeError, OSError) as exc:
            raise ChannelClosed(f"the other end closed the pipe ({exc.strerror})") from exc
        view = view[written:]
