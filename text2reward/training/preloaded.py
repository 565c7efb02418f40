"""The driver's end of the training fork server (forkserver.py): one server per driver process, started when jobs
first train, kept for every later round, restarted if it dies, given up (fresh worker processes) if it cannot start.

Why one per driver: the server's whole worth is its imports; a run trains round after round and a test session
hundreds of jobs, each then paying ~1 s instead of ~6 s. Why it is restarted when the driver's environment changes in
a variable a library reads as it is imported (the BLAS and OpenMP thread counts, JAX's and XLA's settings, MuJoCo's
GL backend, the library paths): a fresh worker would read the new value; a child of the old server has the old one
imported already. Every other variable travels with each request and is the child's whole environment.
The server is bound to the thread that started it (the kernel's parent-death signal follows the thread): where a
driver starts runs from a short-lived thread, the server ends with that thread and the next job starts another.
A driver given a shared server's socket (T2R_FORKSERVER_SOCKET: a test session starts one for every command its tests
run) forks its jobs there instead, where that server was imported with the driver's import-time settings and runs in
the driver's session (`SharedForkServer`).
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from policies.config import switched_on
from text2reward.training.forkserver import SINGLE_THREAD_ENV, import_time_settings

Say = Callable[[str], None]

DISABLE_VARIABLE = "T2R_FORKSERVER"
"""Set to 0 to start every training job as a fresh process (as before the fork server)."""
SOCKET_VARIABLE = "T2R_FORKSERVER_SOCKET"
"""The socket of a shared fork server (`start_shared_server`, as the test session starts one) that this driver's jobs
are forked from instead of a server of its own, where it can serve them (`SharedForkServer.usable`); empty: none."""
READY_TIMEOUT_S = 300.0
"""How long the server may take to import everything (about 6 s idle; minutes on a machine at load 20)."""
REPLY_TIMEOUT_S = 60.0
"""How long a fork request may wait for its answer (a fork takes milliseconds; a loaded machine may be slow)."""


def job_environment() -> dict[str, str]:
    """The environment a training job runs with, however it is started: the driver's, with one OpenBLAS thread unless
    the user chose otherwise (the fork server cannot import with more; a fresh worker gets the same, so both train
    alike: with W workers on the machine a BLAS pool per job only fights the others for cores)."""
    return {**SINGLE_THREAD_ENV, **os.environ}


def enabled() -> bool:
    return switched_on(DISABLE_VARIABLE, default=True)


class ServerGone(Exception):
    """The server ended, or did not answer in time."""


class ForkServer:
    """A running `python -m text2reward.training.forkserver` of this driver's and its replies: children started,
    children ended. With `listen`, it also serves other drivers of this user on a socket there (`SharedForkServer`)."""

    socket_path: str | None = None
    """Where a shared server listens, for a connection to one; None for a driver's own server."""

    def __init__(self, env: dict[str, str], listen: str | None = None):
        self.settings = import_time_settings(env)
        self.process: subprocess.Popen | None = subprocess.Popen(
            [sys.executable, "-m", "text2reward.training.forkserver", str(os.getpid()), *(["--listen", listen] if listen else [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        assert self.process.stdin is not None and self.process.stdout is not None
        self._converse(self.process.stdin, self.process.stdout.fileno())
        self.output: Any = self.process.stdout

    def _converse(self, requests: Any, replies: int) -> None:
        self.requests, self.replies = requests, replies
        self.buffer = b""
        self.ended: dict[int, int] = {}
        self.gone = False
        self.ready: dict[str, Any] | None = None
        self.lock = threading.RLock()
        """One conversation at a time: launchers in several threads share the server."""

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> dict[str, Any]:
        """The server's ready message, once it has imported everything (ServerGone if it died or took too long)."""
        with self.lock:
            if self.ready is None:
                self.ready = self._next(lambda m: "ready" in m, timeout)
            return self.ready

    def request(self, job_file: str, log: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        return {"job": job_file, "log": log, "cwd": os.getcwd(), "env": {**job_environment(), **(env or {})}}

    def fork(self, job_file: str, log: str, env: dict[str, str] | None = None) -> int:
        """Start a job, with `env` added to its environment: the child's pid (ServerGone; ValueError with the server's
        reason where it refused)."""
        request = self.request(job_file, log, env)
        with self.lock:
            self.wait_ready()
            try:
                self.requests.write((json.dumps(request) + "\n").encode())
                self.requests.flush()
            except (OSError, ValueError) as exc:
                self.gone = True
                raise ServerGone(f"the fork server stopped ({exc})") from exc
            reply = self._next(lambda m: "started" in m, REPLY_TIMEOUT_S)
        if not isinstance(reply["started"], int):
            raise ValueError(str(reply.get("detail") or "the fork server did not start the job"))
        return reply["started"]

    def returncode(self, pid: int) -> int | None:
        """The exit status of a child that has ended (Popen's convention), or None while it runs or if unknown."""
        with self.lock:
            self._read(0.0)
            return self.ended.pop(pid, None)

    def alive(self) -> bool:
        with self.lock:
            if not self.gone and self.process is not None and self.process.poll() is not None:
                self._read(0.0)  # what it said before it died still counts
                self.gone = True
            return not self.gone

    def close(self) -> None:
        """Let the server go: it leaves when its stdin closes (children it forked keep running)."""
        assert self.process is not None
        try:
            self.requests.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.output.close()
        self.gone = True

    def _next(self, wanted: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            message = self._read(max(0.0, deadline - time.monotonic()), wanted)
            if message is not None:
                return message
            if self.gone:
                raise ServerGone(f"the fork server (pid {self.pid}) ended")
            if time.monotonic() >= deadline:
                self.gone = True  # a server that does not answer is treated as dead: the next job starts another
                raise ServerGone(f"the fork server (pid {self.pid}) did not answer in {timeout:.0f} s")

    def _read(self, timeout: float, wanted: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any] | None:
        """Take what the server has said (waiting up to `timeout` for a first byte): ends are kept; the first message
        `wanted` accepts is returned (the rest stays buffered)."""
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                message = json.loads(line)
                if "ended" in message:
                    self.ended[int(message["ended"])] = int(message["code"])
                elif wanted is not None and wanted(message):
                    return message
            if self.gone:
                return None
            ready, _, _ = select.select([self.replies], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(self.replies, 65536)
            if not chunk:
                self.gone = True
                return None
            self.buffer += chunk
            timeout = 0.0


def same_imports(driver: dict[str, str], before: dict[str, str], after: dict[str, str]) -> bool:
    """Whether a server imported with the variables `before` (which its imports changed to `after`: MuJoCo sets
    PYOPENGL_PLATFORM, JAX TF_CPP_MIN_LOG_LEVEL) is what a driver with the variables `driver` would have imported: each
    of the driver's values is the server's before its imports, or the value those imports set themselves."""
    for name in set(driver) | set(before) | set(after):
        value = driver.get(name)
        if value != before.get(name) and not (after.get(name) != before.get(name) and value == after.get(name)):
            return False
    return True


class SharedForkServer(ForkServer):
    """This driver's connection to a fork server another process started and shares through a socket (a test session
    starts one, so that the hundreds of `t2r` commands it runs do not each import the heavy libraries again).

    Why it is safe to share: the socket's folder and the socket are its user's only and the server serves no other
    user (SO_PEERCRED); every request carries the driver's environment and folder as a driver's own server's does; the
    server forks only where it was imported with the driver's import-time settings and runs in the driver's session,
    and each job joins the driver's process group, so a Ctrl-C or a kill of the driver's group reaches its jobs as it
    reaches a child of its own server. What differs: the server is not the driver's child (it outlives the driver, as a
    job does), and a job inherits the server's resource limits rather than the driver's."""

    def __init__(self, path: str):
        self.socket_path = path
        self.settings = import_time_settings(job_environment())
        self.process = None
        self.connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.connection.connect(path)
        except OSError:
            self.connection.close()
            raise
        self._converse(self.connection.makefile("wb"), self.connection.fileno())
        self.output = self.connection

    @property
    def pid(self) -> int:
        return int((self.ready or {}).get("pid", 0))

    def usable(self) -> str | None:
        """Why this driver's jobs cannot be forked from this server, or None."""
        ready = self.wait_ready()
        if not same_imports(dict(self.settings), dict(ready.get("settings", [])), dict(ready.get("settings_after", []))):
            return "it was started with other import-time settings"
        if ready.get("sid") != os.getsid(0):
            return "it runs in another session"
        return None

    def request(self, job_file: str, log: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        return {**super().request(job_file, log, env), "pgid": os.getpgrp()}

    def alive(self) -> bool:
        with self.lock:
            self._read(0.0)  # a server that has gone is an end of file on the socket
            return not self.gone

    def close(self) -> None:
        """Leave the server to its owner (jobs forked for this driver keep running)."""
        self.connection.close()
        self.gone = True


SOCKET_NAME = "forkserver.sock"


def start_shared_server(folder: str) -> tuple[ForkServer, str]:
    """Start a fork server of this process's that other drivers of this user reach through the socket it returns (in
    `folder`, made private: mode 0700); it leaves with this process. Give
    the socket to the drivers in T2R_FORKSERVER_SOCKET. It returns at once: the server binds the socket, then imports;
    a driver that connects meanwhile waits for its ready message."""
    os.chmod(folder, 0o700)
    path = os.path.join(folder, SOCKET_NAME)
    server = ForkServer(job_environment(), listen=path)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not os.path.exists(path) and server.alive() and time.monotonic() < deadline:
        time.sleep(0.01)  # the bind comes before the imports: milliseconds after the interpreter starts
    return server, path


_LOCK = threading.Lock()
_SERVER: list[ForkServer] = []
_GAVE_UP: list[str] = []
_REFUSED: dict[tuple[str, str], str] = {}
"""Shared servers this driver cannot use, by socket and import-time settings: why."""
_UNANSWERED: list[str] = []
"""What to say once: a shared server's socket that did not answer (other settings or sessions are expected: silent)."""


def _shared_wanted(env: dict[str, str]) -> str | None:
    """The shared server's socket this driver should fork from (T2R_FORKSERVER_SOCKET), unless it has refused it."""
    path = os.environ.get(SOCKET_VARIABLE) or None
    if path is None or (path, json.dumps(import_time_settings(env))) in _REFUSED:
        return None
    return path


def _connect_shared(path: str, env: dict[str, str]) -> ForkServer | None:
    """A connection to the shared server at `path`, or None where this driver cannot use it (kept in _REFUSED)."""
    server: SharedForkServer | None = None
    try:
        server = SharedForkServer(path)
        why = server.usable()
    except (OSError, ServerGone, ValueError) as exc:
        why = f"the shared training fork server at {path} does not answer ({exc}); this driver starts its own"
        _UNANSWERED.append(why)
    if why is None:
        return server
    if server is not None:
        server.close()
    _REFUSED[(path, json.dumps(import_time_settings(env)))] = why
    return None


def _say_refusals(say: Say) -> None:
    while _UNANSWERED:
        say(_UNANSWERED.pop(0))


def _new_server(env: dict[str, str]) -> ForkServer:
    """The shared server where this driver may use it, else a server of its own (starting: ready later)."""
    path = _shared_wanted(env)
    shared = _connect_shared(path, env) if path else None
    return shared or ForkServer(env)


def warm_up() -> None:
    """Start this driver's server now without waiting for it: a run calls this when it opens its executor, so the
    server imports while the first round's replies are written and checked, and its first job waits less or not at all."""
    if not enabled() or _GAVE_UP:
        return
    with _LOCK:
        if not _SERVER:
            try:
                _SERVER.append(_new_server(job_environment()))
            except OSError:
                pass  # `fork_server` tries again when a job starts, and says what went wrong


def fork_server(say: Say) -> ForkServer | None:
    """This driver's ready fork server (the shared one where it can use it), started or restarted as needed; None where
    jobs should start fresh (switched off, or the server could not start: said once)."""
    if not enabled() or _GAVE_UP:
        return None
    env = job_environment()
    with _LOCK:
        server = _SERVER[0] if _SERVER else None
        if server is not None and not (server.alive() and server.settings == import_time_settings(env)
                                       and server.socket_path == _shared_wanted(env)):
            if not server.alive():
                say(f"the training fork server (pid {server.pid}) ended; starting another")
            server.close()
            _SERVER.clear()
            server = None
        try:
            if server is None:
                server = _new_server(env)
                _SERVER.append(server)
            _say_refusals(say)
            ready = server.wait_ready()
            if ready.get("threads") != 1 or ready.get("jax_backend"):
                raise ValueError(f"it has {ready.get('threads')} threads and a JAX backend {ready.get('jax_backend')} "
                                 f"after its imports (set OPENBLAS_NUM_THREADS=1)")
        except (ServerGone, ValueError, OSError) as exc:
            _GAVE_UP.append(str(exc))
            for each in _SERVER:
                each.close()
            _SERVER.clear()
            say(f"training jobs start as fresh processes: the training fork server cannot serve them ({exc})")
            return None
        return server
