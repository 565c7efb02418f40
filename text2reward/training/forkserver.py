"""The training fork server: one process that imports the heavy libraries once, then forks a child per training job.

Why: a fresh `python -m text2reward.training.job` spends ~6 s importing PyTorch, SB3, JAX, flax, SBX, Gymnasium,
MuJoCo and MetaWorld before its first step (benchmarks/RESULTS.md); a fork of a process that has imported them is
at its first step in about a second, and a test suite that trains a few hundred jobs pays the imports once per driver.
`torch._dynamo` is among them although no job compiles with it: torch's optimizers import it at their first
construction, ~1.5 s of every SB3 job's start (a forked SB3 SAC job's first step: ~2.0 s without it, ~0.5 s with).

Why fork is safe here: `fork` copies only the calling thread, so a child inherits a broken copy of whatever another
thread was doing (a lock held, a thread pool half-way through work) and of device contexts (CUDA's cannot cross a
fork). This server only imports; it initialises nothing that starts a thread or opens a device: JAX builds its
backend (XLA's client, its thread pools, a GPU's context) at the first `jax.devices()`, array or `jit` call, torch
its CUDA context at the first CUDA call and its OpenMP pool at the first parallel kernel, none of which an import
makes. OpenBLAS is the one library that starts threads at import (one per core, from numpy's and SciPy's copies),
so the server runs with `OPENBLAS_NUM_THREADS=1` (the jobs it forks keep it; fresh workers get the same default, so
both train alike). Before it says it is ready, and again before every fork, it checks that it has one thread
(/proc/self/task) and no JAX backend, and refuses to fork otherwise (the launcher then starts a fresh process). It
forks from its one thread, between two waits of its select loop. Each child is then a process of its own: its own
pid, resource limits and CPU clock (RLIMIT_CPU counts a process's own CPU from zero), stdout and stderr on its
job's worker.log, the environment and working folder the driver had when it asked, Python's default SIGINT
handler back, and numpy's global generator reseeded from the OS as a fresh process's is; it runs
`text2reward.training.job.main` and ends through the interpreter's normal exit (atexit hooks included), as a fresh
worker would.

Why not multiprocessing's "forkserver" start method: its children run the driver's `__main__` script again (a user's
script that starts a search without an `if __name__ == "__main__":` guard, which today's workers never needed, would
start it again in every job), each child holds the server's "alive" pipe (the server would outlive a killed driver
for as long as a job trains), children end with `os._exit` (skipping the atexit hooks the sandbox's clean-up runs),
and it starts a resource-tracker process beside it; a job needs none of its pickling (its input and outcome are
files). This is the sandbox zygote's pattern (sandbox/nursery.py) for trusted code.

The protocol, one JSON object a line. Requests on stdin: `{"job": PATH, "log": PATH, "cwd": DIR, "env": {...}}`.
Replies, on the stdout the server had when it started (its own fd 1 then points at its stderr, so a library's print
cannot corrupt them): `{"ready": true, "pid": N, "threads": 1, "jax_backend": false}` once; `{"started": PID}` (or
`{"started": null, "detail": WHY}`) per request, in order; `{"ended": PID, "code": CODE}` as each child ends (Popen's
`returncode`: -N for signal N). The server is killed when its owner dies (PR_SET_PDEATHSIG, even in the middle
of its imports, so it never holds the owner's stderr open after it), and leaves when its stdin closes (its owner let
it go) or its parent changes; it ignores SIGINT, which a Ctrl-C sends the whole
process group: the jobs get it as they always did, and the driver stops them and then the server.

Shared (`--listen PATH`, preloaded.start_shared_server): the server also accepts drivers of its user on a Unix socket
at PATH (bound before the imports, so a driver that connects early waits for its ready message). Each connected
driver gets the ready message with `"settings"` (the import-time variables before the imports), `"settings_after"` and
`"sid"`, sends the same requests with `"pgid"` (its process group, which the child joins before the reply) and gets its
own children's `started` and `ended` replies; a driver that disconnects leaves its jobs running.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import select
import signal
import socket
import struct
import sys
from dataclasses import dataclass
from typing import Any

from policies.algorithms import jax_backend_built

PRELOAD = ("numpy", "torch", "torch._dynamo", "stable_baselines3", "jax", "flax", "sbx", "gymnasium", "mujoco", "metaworld",
           "sim_envs", "policies.train", "policies.sbx_sampling", "policies.sbx_build", "text2reward.training.job",
           "text2reward.sandbox")
"""What a job imports before its first step (SBX and JAX are optional: a missing one is skipped)."""
SINGLE_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1"}
"""Set in the server before it imports (where the user set nothing): OpenBLAS would start a thread per core."""
IMPORT_TIME_PREFIXES = ("OPENBLAS_", "GOTO", "OMP_", "KMP_", "GOMP_", "MKL_", "NPY_", "NUMPY_", "JAX_", "XLA_", "TF_",
                        "TORCH", "PYTORCH_", "CUDA_", "NVIDIA_", "MUJOCO_", "PYOPENGL_", "EGL_", "LD_", "PYTHON", "DISPLAY")
"""Variables a preloaded library may read when it is imported: a job may only be forked from a server imported with
the same values (a driver whose values differ starts a server of its own)."""
BACKEND_TIME = ("XLA_FLAGS", "XLA_PYTHON_CLIENT_PREALLOCATE")
"""Read by XLA when JAX builds its backend, never at import (policies.algorithms.configure_jax sets them in a driver as
it checks a plan): they travel with each request, and a change needs no other server."""
PR_SET_PDEATHSIG = 1
REPLY_SEND_TIMEOUT_S = 10.0
"""How long a reply to a shared server's client may wait for room in its socket before the client is dropped."""
PARENT_CHECK_S = 1.0
"""How often the server looks whether its owner is still its parent, beside waiting on its stdin."""


class OwnerGone(Exception):
    """The driver no longer reads the server's replies."""


@dataclass(frozen=True)
class Request:
    """One job to fork, as the driver asked for it."""

    job: str
    log: str
    cwd: str
    env: dict[str, str]
    pgid: int | None = None
    """The process group the child joins (a shared server's client's: its Ctrl-C and kills reach its jobs)."""

    @classmethod
    def parse(cls, line: bytes) -> Request:
        data = json.loads(line)
        env, pgid = data["env"], data.get("pgid")
        if not (isinstance(data["job"], str) and isinstance(data["log"], str) and isinstance(data["cwd"], str)
                and isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
                and (pgid is None or (isinstance(pgid, int) and not isinstance(pgid, bool) and pgid > 0))):
            raise ValueError("a request needs job, log and cwd strings, an env of strings and an optional positive pgid")
        return cls(data["job"], data["log"], data["cwd"], env, pgid)


def import_time_settings(env: dict[str, str]) -> list[list[str]]:
    return [[k, v] for k, v in sorted(env.items()) if k.startswith(IMPORT_TIME_PREFIXES) and k not in BACKEND_TIME]


def thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def unsafe_to_fork() -> str | None:
    """Why forking now could hand a child a broken copy of this process, or None."""
    threads = thread_count()
    if threads != 1:
        return f"the fork server has {threads} threads"
    if jax_backend_built():
        return "the fork server has initialised a JAX backend"
    return None


def preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # an optional library (SBX, JAX) that is not installed: its jobs import nothing of it


class Client:
    """A driver connected to a shared server's socket: what it has sent so far and the channel for the replies."""

    def __init__(self, connection: socket.socket):
        self.connection = connection
        self.buffer = b""


class Server:
    """The loop: requests in, children out, their ends reported to whoever asked. Requests come on the owner's pipe
    and, for a shared server, from any driver of the same user connected to its socket (`listener`)."""

    def __init__(self, requests: int, replies: int, listener: socket.socket | None = None,
                 settings: list[list[str]] | None = None):
        self.requests, self.replies = requests, replies
        self.listener = listener
        self.clients: dict[int, Client] = {}
        """The connected drivers, by their socket's fd."""
        self.asked_by: dict[int, Client] = {}
        """Each running child a client asked for (the others are the owner's): where its end is reported."""
        self.unheard: set[int] = set()
        """Running children of clients that have left: their ends are nobody's to hear."""
        self.parent = os.getppid()
        self.buffer = b""
        self.settings = settings if settings is not None else import_time_settings(dict(os.environ))
        """The import-time variables as they were before the imports (some libraries set their own as they import)."""
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)

    def say(self, message: dict[str, Any], client: Client | None = None) -> None:
        """To the owner (OwnerGone when it stopped reading), or to a client (dropped when it stopped reading)."""
        data = (json.dumps(message) + "\n").encode()
        if client is not None:
            try:
                client.connection.sendall(data)
            except OSError:
                self.drop(client)
            return
        try:
            while data:
                data = data[os.write(self.replies, data):]
        except OSError as exc:  # nobody reads any more: the owner is gone
            raise OwnerGone from exc

    def ready_message(self) -> dict[str, Any]:
        return {"ready": True, "pid": os.getpid(), "threads": thread_count(), "jax_backend": jax_backend_built(),
                "settings": self.settings, "settings_after": import_time_settings(dict(os.environ)), "sid": os.getsid(0)}

    def serve(self) -> Request | None:
        """Serve until the owner leaves (None); in a forked child, return its request instead."""
        try:
            return self.loop()
        except OwnerGone:
            return None

    def loop(self) -> Request | None:
        signal.signal(signal.SIGCHLD, lambda number, frame: None)  # wakes the select through the wakeup fd
        signal.set_wakeup_fd(self.wake_w)
        self.say(self.ready_message())
        while True:
            watched = [self.requests, self.wake_r, *self.clients] + ([self.listener.fileno()] if self.listener else [])
            ready, _, _ = select.select(watched, [], [], PARENT_CHECK_S)
            self.reap()
            if os.getppid() != self.parent:
                return None
            if self.wake_r in ready:
                while True:
                    try:
                        if not os.read(self.wake_r, 4096):
                            break
                    except BlockingIOError:
                        break
            if self.listener is not None and self.listener.fileno() in ready:
                self.accept()
            for fd in ready:
                client = self.clients.get(fd)
                if client is None:
                    continue
                try:
                    chunk = client.connection.recv(65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    self.drop(client)
                    continue
                client.buffer += chunk
                while b"\n" in client.buffer and fd in self.clients:
                    line, client.buffer = client.buffer.split(b"\n", 1)
                    child = self.fork(line, client)
                    if child is not None:
                        return child
            if self.requests not in ready:
                continue
            chunk = os.read(self.requests, 65536)
            if not chunk:
                return None
            self.buffer += chunk
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                child = self.fork(line)
                if child is not None:
                    return child

    def accept(self) -> None:
        """A driver connects: served only if it runs as this server's user (the socket's folder is private too)."""
        assert self.listener is not None
        try:
            connection, _ = self.listener.accept()
        except OSError:
            return
        _, uid, _ = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        if uid != os.getuid():
            connection.close()
            return
        connection.settimeout(REPLY_SEND_TIMEOUT_S)
        client = Client(connection)
        self.clients[connection.fileno()] = client
        self.say(self.ready_message(), client)

    def drop(self, client: Client) -> None:
        self.clients.pop(client.connection.fileno(), None)
        for pid in [pid for pid, asker in self.asked_by.items() if asker is client]:
            del self.asked_by[pid]  # its jobs run on
            self.unheard.add(pid)
        client.connection.close()

    def fork(self, line: bytes, client: Client | None = None) -> Request | None:
        try:
            request = Request.parse(line)
        except (ValueError, KeyError, TypeError) as exc:
            self.say({"started": None, "detail": f"bad request: {exc}"}, client)
            return None
        reason = unsafe_to_fork()
        if reason is not None:
            self.say({"started": None, "detail": reason}, client)
            return None
        sys.stdout.flush()
        sys.stderr.flush()
        gc.freeze()  # the imported objects leave the collector's view: a child's collections neither walk nor copy them
        try:
            pid = os.fork()
        except OSError as exc:
            self.say({"started": None, "detail": f"fork failed: {exc}"}, client)
            return None
        if pid == 0:
            self.leave_for_child()
            return request
        if request.pgid is not None:
            try:  # before the reply: from then on the driver's group signals reach the job
                os.setpgid(pid, request.pgid)
            except OSError as exc:
                os.kill(pid, signal.SIGKILL)
                self.say({"started": None, "detail": f"the job cannot join process group {request.pgid}: {exc}"}, client)
                return None
        if client is not None:
            self.asked_by[pid] = client
        self.say({"started": pid}, client)
        return None

    def leave_for_child(self) -> None:
        """In the child: drop the server's pipes, sockets and handlers (a driver must see EOF when the server goes)."""
        gc.enable()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in (self.requests, self.replies, self.wake_r, self.wake_w):
            os.close(fd)
        for client in self.clients.values():
            client.connection.close()
        if self.listener is not None:
            self.listener.close()

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.unheard:
                self.unheard.discard(pid)
                continue
            self.say({"ended": pid, "code": os.waitstatus_to_exitcode(status)}, self.asked_by.pop(pid, None))


def become_job(request: Request) -> int:
    """In a forked child: take on the job's process state, as a fresh `python -m text2reward.training.job` has it."""
    log = os.open(request.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    for fd in (1, 2):
        os.dup2(log, fd)
    os.close(log)
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)
    sys.path[0] = request.cwd  # where `python -m` puts the working folder
    sys.argv = [sys.modules["text2reward.training.job"].__file__ or "job.py", request.job]
    import numpy as np  # preloaded

    np.random.seed()  # the global generator, from the OS as in a fresh process (Python's `random` reseeds itself at fork)
    from text2reward.training.job import main  # preloaded before the fork: already in sys.modules

    return main([request.job])


def listen(path: str) -> socket.socket:
    """The shared server's socket, readable and writable by its user only (its folder should be private as well)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    listener.listen(64)
    return listener


def start(owner: int, listen_at: str | None = None) -> int:
    """The server's main: bound to its owner's life, private copies of the pipes, fd 0 on /dev/null and fd 1 on
    stderr, then preload and serve (also on a socket at `listen_at`, bound before the imports and answered after them)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # from the start: a Ctrl-C during the imports is the driver's to handle
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # its owner's death kills it, even mid-import
    if os.getppid() != owner:
        return 0  # the owner died before the line above: nobody to serve (its children do not inherit the signal)
    requests, replies = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    for name, value in SINGLE_THREAD_ENV.items():
        os.environ.setdefault(name, value)
    gc.disable()  # as the gc module advises for a process that forks without exec: no collections leave holes in its pages
    listener = listen(listen_at) if listen_at else None  # bound now: a driver that connects during the imports waits
    settings = import_time_settings(dict(os.environ))
    preload()
    request = Server(requests, replies, listener, settings).serve()
    if request is None:
        return 0
    return become_job(request)


if __name__ == "__main__":
    sys.exit(start(int(sys.argv[1]), sys.argv[3] if sys.argv[2:3] == ["--listen"] else None))
