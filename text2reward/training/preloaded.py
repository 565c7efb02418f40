"""The driver's end of the training fork server (forkserver.py): one server per driver process, started when jobs
first train, kept for every later round, restarted if it dies, given up (fresh worker processes) if it cannot start.

Why one per driver: the server's whole worth is its imports; a run trains round after round and a test session
hundreds of jobs, each then paying ~1 s instead of ~6 s. Why it is restarted when the driver's environment changes in
a variable a library reads as it is imported (the BLAS and OpenMP thread counts, JAX's and XLA's settings, MuJoCo's
GL backend, the library paths): a fresh worker would read the new value; a child of the old server has the old one
imported already. Every other variable travels with each request and is the child's whole environment.
The server is bound to the thread that started it (the kernel's parent-death signal follows the thread): where a
driver starts runs from a short-lived thread, the server ends with that thread and the next job starts another.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from text2reward.training.forkserver import SINGLE_THREAD_ENV

Say = Callable[[str], None]

DISABLE_VARIABLE = "T2R_FORKSERVER"
"""Set to 0 to start every training job as a fresh process (as before the fork server)."""
IMPORT_TIME_PREFIXES = ("OPENBLAS_", "GOTO", "OMP_", "KMP_", "GOMP_", "MKL_", "NPY_", "NUMPY_", "JAX_", "XLA_", "TF_",
                        "TORCH", "PYTORCH_", "CUDA_", "NVIDIA_", "MUJOCO_", "PYOPENGL_", "EGL_", "LD_", "PYTHON", "DISPLAY")
"""Variables a preloaded library may read when it is imported: a change restarts the server."""
READY_TIMEOUT_S = 300.0
"""How long the server may take to import everything (about 6 s idle; minutes on a machine at load 20)."""
REPLY_TIMEOUT_S = 60.0
"""How long a fork request may wait for its answer (a fork takes milliseconds; a loaded machine may be slow)."""


def job_environment() -> dict[str, str]:
    """The environment a training job runs with, however it is started: the driver's, with one OpenBLAS thread unless
    the user chose otherwise (the fork server cannot import with more; a fresh worker gets the same, so both train
    alike: with W workers on the machine a BLAS pool per job only fights the others for cores)."""
    return {**SINGLE_THREAD_ENV, **os.environ}


def import_time_settings(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(IMPORT_TIME_PREFIXES)))


def enabled() -> bool:
    return os.environ.get(DISABLE_VARIABLE, "1").strip().lower() not in ("0", "false", "no", "off")


class ServerGone(Exception):
    """The server ended, or did not answer in time."""


class ForkServer:
    """A running `python -m text2reward.training.forkserver` and its replies: children started, children ended."""

    def __init__(self, env: dict[str, str]):
        self.settings = import_time_settings(env)
        self.process = subprocess.Popen([sys.executable, "-m", "text2reward.training.forkserver", str(os.getpid())], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, env=env)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.requests, self.output = self.process.stdin, self.process.stdout
        self.replies = self.output.fileno()
        self.buffer = b""
        self.ended: dict[int, int] = {}
        self.gone = False
        self.ready: dict[str, Any] | None = None
        self.lock = threading.RLock()
        """One conversation at a time: launchers in several threads share the server."""

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> dict[str, Any]:
        """The server's ready message, once it has imported everything (ServerGone if it died or took too long)."""
        with self.lock:
            if self.ready is None:
                self.ready = self._next(lambda m: "ready" in m, timeout)
            return self.ready

    def fork(self, job_file: str, log: str) -> int:
        """Start a job: the child's pid (ServerGone; ValueError with the server's reason where it refused)."""
        request = {"job": job_file, "log": log, "cwd": os.getcwd(), "env": job_environment()}
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
            if not self.gone and self.process.poll() is not None:
                self._read(0.0)  # what it said before it died still counts
                self.gone = True
            return not self.gone

    def close(self) -> None:
        """Let the server go: it leaves when its stdin closes (children it forked keep running)."""
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


_LOCK = threading.Lock()
_SERVER: list[ForkServer] = []
_GAVE_UP: list[str] = []


def warm_up() -> None:
    """Start this driver's server now without waiting for it: a run calls this when it opens its executor, so the
    server imports while the first round's replies are written and checked, and its first job waits less or not at all."""
    if not enabled() or _GAVE_UP:
        return
    with _LOCK:
        if not _SERVER:
            try:
                _SERVER.append(ForkServer(job_environment()))
            except OSError:
                pass  # `fork_server` tries again when a job starts, and says what went wrong


def fork_server(say: Say) -> ForkServer | None:
    """This driver's ready fork server, started or restarted as needed; None where jobs should start fresh (switched
    off, or the server could not start: said once)."""
    if not enabled() or _GAVE_UP:
        return None
    env = job_environment()
    with _LOCK:
        server = _SERVER[0] if _SERVER else None
        if server is not None and not (server.alive() and server.settings == import_time_settings(env)):
            if not server.alive():
                say(f"the training fork server (pid {server.pid}) ended; starting another")
            server.close()
            _SERVER.clear()
            server = None
        try:
            if server is None:
                server = ForkServer(env)
                _SERVER.append(server)
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
