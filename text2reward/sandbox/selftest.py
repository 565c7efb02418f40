"""The isolation self-test: start the real worker in a mechanism's jail and watch it fail to escape.

Why at run time: a jail that works on the developer's machine can be broken on the user's (no user
namespaces in a container, Landlock off in the kernel, a `bwrap` that is something else). The
worker runs the exact lock-down that reward code gets, then, as plain Python with no audit hook,
tries to read a world-readable secret under /tmp and one under /var/tmp, list the parent's home,
read the parent's /proc entry, write and make a fifo in a world-writable directory, create POSIX
shared memory, connect to a listener on 127.0.0.1, signal the parent, allocate System V shared
memory, fork, and exec. Every attempt must fail. The parent does not take the child's word for
it: it also checks its own sentinels (nothing written, nobody connected, the secret nowhere in the
reply). Any escape, a missing reply or a malformed one fails the mechanism.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PROBES = (
    "read_secret_tmp", "read_secret_var_tmp", "list_home", "read_parent_proc", "write_file", "make_fifo",
    "posix_shared_memory", "connect_loopback", "signal_parent", "sysv_shared_memory", "fork", "exec",
)
SELF_TEST_SECONDS = 60.0


@dataclass(frozen=True)
class Jail:
    """How the parent starts a mechanism's worker (isolation.py knows it and passes it in: the imports go one way)."""

    argv: list[str]
    spec: dict[str, Any]
    env: dict[str, str]
    readable: tuple[str, ...]
    """The paths the jail's view shows (the self-test checks that nothing else is)."""


@dataclass(frozen=True)
class Passed:
    """Every escape failed: what the worker reported of its layers, and how each attempt failed."""

    layers: dict[str, Any]
    findings: dict[str, str]


def self_test(mechanism: str, jail: Jail) -> Passed | str:
    """`Passed` when every escape failed, else a one-line reason (the first escape or error)."""
    from policies.scratch import scratch_folder
    from text2reward.sandbox.limits import Limits, limit_config  # the parent's side: the jailed worker imports this module for `probe`

    token = uuid.uuid4().hex
    folders = [str(scratch_folder("t2r-selftest-", d)) for d in _sentinel_dirs()]  # a process killed mid-test leaves them to the next
    listener = socket.socket()
    try:
        secrets = []
        for folder in folders:
            os.chmod(folder, 0o755)
            secret = os.path.join(folder, "secret.txt")
            with open(secret, "w") as handle:
                handle.write(token)
            os.chmod(secret, 0o644)  # world-readable: only the jail may keep it unread
            secrets.append(secret)
        target = os.path.join(folders[0], "writable")
        os.mkdir(target)
        os.chmod(target, 0o777)  # world-writable: only the jail may keep writes out
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        listener.setblocking(False)
        targets = {
            "secrets": secrets, "home": os.path.expanduser("~"), "parent": os.getpid(), "target": target,
            "shm_name": f"/dev/shm/t2r-selftest-{token}", "port": listener.getsockname()[1],
            "readable": list(jail.readable),
        }
        config = {"mode": "selftest", "jail": jail.spec, "targets": targets, **limit_config(Limits(), cpu=True)}
        try:
            done = subprocess.run(
                jail.argv + [json.dumps(config)], env=jail.env, cwd="/", capture_output=True,
                timeout=SELF_TEST_SECONDS, check=False, start_new_session=True,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return f"the self-test could not start the worker ({type(exc).__name__}: {exc})"
        return _verdict(mechanism, done, token, targets, listener)
    finally:
        listener.close()
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


def _sentinel_dirs() -> list[str]:
    """A world-writable folder under /tmp and one outside it, where they exist."""
    dirs = [tempfile.gettempdir()]
    if os.path.isdir("/var/tmp") and os.access("/var/tmp", os.W_OK) and "/var/tmp" not in dirs:
        dirs.append("/var/tmp")
    return dirs


def _verdict(mechanism: str, done: subprocess.CompletedProcess, token: str, targets: dict, listener: socket.socket) -> Passed | str:
    from text2reward.sandbox.untrusted import clean_text  # the parent's side, as in self_test

    escapes = []
    if os.listdir(targets["target"]):
        escapes.append("wrote into a world-writable folder")
    if os.path.exists(targets["shm_name"]):
        os.unlink(targets["shm_name"])
        escapes.append("created POSIX shared memory")
    try:
        listener.accept()[0].close()
        escapes.append("connected to 127.0.0.1")
    except (BlockingIOError, OSError):
        pass
    if token.encode() in done.stdout or token.encode() in done.stderr:
        escapes.append("read the secret")
    try:
        reply = json.loads(done.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
        findings, layers = reply["findings"], reply["layers"]
        if not (isinstance(findings, dict) and set(findings) == set(PROBES) and isinstance(layers, dict)):
            raise ValueError("incomplete")
    except (ValueError, KeyError, IndexError, TypeError):
        detail = clean_text(done.stderr.decode("utf-8", "replace").strip().splitlines()[-1] if done.stderr.strip() else "", 300)
        return escapes[0] if escapes else f"the jailed worker did not finish its self-test (exit {done.returncode}{': ' + detail if detail else ''})"
    escapes += [f"{name}: {clean_text(str(outcome), 200)}" for name, outcome in findings.items() if not str(outcome).startswith("blocked")]
    if escapes:
        return f"the self-test escaped the {mechanism} jail ({'; '.join(escapes)})"
    return Passed(layers={k: v for k, v in layers.items() if k in ("namespaces", "root", "landlock", "landlock_scopes", "seccomp", "uid")}, findings=findings)


# --- in the jailed worker ---


def probe(targets: dict) -> dict[str, str]:
    """Run every escape attempt (trusted code, after the OS lock-down); 'blocked: ...' or what happened."""
    attempts = _escape_attempts(targets)
    findings: dict[str, str] = {}
    for name in PROBES:
        try:
            outcome = attempts[name]()
            findings[name] = f"succeeded ({outcome})"
        except OSError as exc:
            findings[name] = f"blocked: {exc.strerror or type(exc).__name__}"
        except BaseException as exc:
            findings[name] = f"error: {type(exc).__name__}: {exc}"
    return findings


def _escape_attempts(targets: dict) -> dict[str, Callable[[], object]]:
    """Each of PROBES as a call that returns what it managed, or raises (OSError: the jail blocked it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    parent = int(targets["parent"])
    return {
        "read_secret_tmp": lambda: f"read {len(_read_all(targets['secrets'][0]))} bytes",
        "read_secret_var_tmp": lambda: f"read {len(_read_all(targets['secrets'][-1]))} bytes",
        "list_home": lambda: _list_home(targets["home"], targets["readable"]),
        "read_parent_proc": lambda: f"read {len(_read_all(f'/proc/{parent}/cmdline'))} bytes",
        "write_file": lambda: open(os.path.join(targets["target"], "written"), "w").write("x"),
        "make_fifo": lambda: os.mkfifo(os.path.join(targets["target"], "fifo")),
        "posix_shared_memory": lambda: os.close(os.open(targets["shm_name"], os.O_CREAT | os.O_RDWR, 0o600)),
        "connect_loopback": lambda: _connect(int(targets["port"])),
        "signal_parent": lambda: os.kill(parent, 0),
        "sysv_shared_memory": lambda: _sysv_shm(libc),
        "fork": _fork,
        "exec": lambda: os.execv("/bin/sh", ["sh", "-c", "exit 0"]),
    }


def _read_all(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def _sysv_shm(libc: ctypes.CDLL) -> str:
    result = libc.shmget(0, 4096, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
    if result == -1:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return f"segment {result}"


def _list_home(home: str, readable: list[str]) -> str:
    # bubblewrap shows a home only as the folders leading to a bound path (e.g. ~/.pyenv)
    on_the_way = {p[len(home):].lstrip("/").split("/")[0] for p in readable if p.startswith(home.rstrip("/") + "/")}
    extra = sorted(set(os.listdir(home)) - on_the_way)
    if not extra:
        raise PermissionError(0, "only the folders leading to the jail's own paths are visible")
    return f"listed {len(extra)} entries"


def _connect(port: int) -> str:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(2.0)
    sock.connect(("127.0.0.1", port))
    return "connected"


def _fork() -> str:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return "forked"
