"""Length-prefixed frames over pipes, shared by the parent and the sandboxed worker.

Why so small: the worker imports this before anything else, under its memory limit, so it uses
only the standard library. Parent -> worker frames carry pickles or packed views (the parent is
trusted); worker -> parent frames carry JSON or packed doubles (see wire.py), because the parent
must never unpickle bytes untrusted code could forge.

Why `FrameReader`: a training worker answers one frame per env step, so the per-frame cost
matters. The reader waits with one `poll` (made once) and takes header and payload in one `read`,
keeping any extra bytes for the next frame; writers try the write first and wait only if the pipe
is full.
"""

from __future__ import annotations

import math
import os
import select
import struct
import time

HEADER = struct.Struct(">I")


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
        if deadline is not None:  # a late caller still looks once: the bytes may be waiting
            left = max(deadline - time.monotonic(), 0.0)
            if not select.select([fd], [], [], left)[0]:
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
    """Write everything; on a non-blocking fd that is full, wait for room until `deadline`."""
    try:
        written = os.write(fd, data)  # the usual case: one small frame into an empty pipe
    except BlockingIOError:
        written = 0
    except OSError as exc:  # BrokenPipeError and the like
        raise ChannelClosed(f"the other end closed the pipe ({exc.strerror})") from exc
    view = memoryview(data)[written:]
    while view:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and (left <= 0 or not select.select([], [fd], [], left)[1]):
            raise ChannelTimeout("the other end stopped reading")
        if left is None:
            select.select([], [fd], [])
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            continue
        except OSError as exc:
            raise ChannelClosed(f"the other end closed the pipe ({exc.strerror})") from exc
        view = view[written:]


class FrameReader:
    """Frames from one fd, read in as few system calls as possible; extra bytes wait for the next call."""

    def __init__(self, fd: int):
        self.fd = fd
        self._buffer = bytearray()
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)

    def buffered(self) -> int:
        """Bytes read past the last frame returned (the start of another frame)."""
        return len(self._buffer)

    def ready(self) -> bool:
        """Whether bytes wait to be read (or the other end closed), without waiting."""
        return bool(self._buffer) or bool(self._poll.poll(0))

    def read(self, deadline: float | None = None, max_bytes: int | None = None) -> bytes:
        """The next frame's payload, waiting at most until `deadline` (time.monotonic()) when given."""
        buffer = self._buffer
        while True:
            have = len(buffer)
            if have >= HEADER.size:
                (size,) = HEADER.unpack_from(buffer)
                if max_bytes is not None and size > max_bytes:
                    raise ChannelClosed(f"a reply of {size:,} bytes exceeds the {max_bytes:,}-byte limit")
                end = HEADER.size + size
                if have >= end:
                    payload = bytes(buffer[HEADER.size:end])
                    del buffer[:end]
                    return payload
                want = end - have
            else:
                want = HEADER.size - have
            if deadline is not None:  # a late caller still looks once: the reply may be waiting
                left = max(deadline - time.monotonic(), 0.0)
                if not self._poll.poll(math.ceil(left * 1000)):
                    raise ChannelTimeout(f"no reply within the time limit ({have} bytes of a frame read)")
            chunk = os.read(self.fd, max(want, 1 << 16))
            if not chunk:
                raise ChannelClosed("the other end closed the pipe")
            if not buffer and len(chunk) > HEADER.size:  # the usual case: exactly one whole frame
                (size,) = HEADER.unpack_from(chunk)
                if len(chunk) == HEADER.size + size and (max_bytes is None or size <= max_bytes):
                    return chunk[HEADER.size:]
            buffer += chunk
