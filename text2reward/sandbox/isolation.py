"""Which operating-system jail runs model-written code here, proven by a self-test before first use.

Threat model: the reward program is hostile. It may reach the real builtins, `sys.modules`, `os`
and `ctypes` from allowed modules (the static pass and the audit hook are lint, not a boundary),
so everything the worker process can do, it can do. The jail must keep it from the host's files
(reading a secret, writing anywhere), the network (127.0.0.1 included), other processes (the
parent, sibling candidates: no signals, no ptrace, no shared memory or IPC objects), and must bound
its memory and time. Two mechanisms, tried in this order:

- `bubblewrap`: `bwrap` with new user, pid, ipc, net, uts, cgroup and mount namespaces whose root
  is an empty read-only tmpfs holding only read-only binds of what the reward needs (the
  interpreter, installed libraries, this project's packages, /usr): never the user's home, the
  working directory or the run directories. Inside it the worker adds the seccomp filter (and
  Landlock where the kernel has it), so candidates forked from one zygote cannot reach each other.
- `landlock`: where bubblewrap is missing, the worker itself applies Landlock (read-only access
  beneath those same paths, nothing else), a seccomp filter (no sockets, signals, ptrace, IPC,
  mknod, exec, fork), new user/net/ipc namespaces where the kernel allows them, and, for a root
  parent, uid 65534.

A mechanism is used only after its self-test (selftest.py) has run the real worker inside it and
seen every escape attempt fail. If none passes, `active_isolation` raises `SandboxUnavailable` and
no model-written code runs (fail closed). Platforms other than Linux have neither mechanism, so
they always refuse; only a user's own file may run there, with `t2r train --trusted-reward`.
"""

from __future__ import annotations

import functools
import importlib
import os
import shutil
import sys
from dataclasses import dataclass, field
from typing import Any

from sim_envs.errors import ConfigError

MECHANISMS = ("bubblewrap", "landlock")
HIDE_VARIABLE = "T2R_SANDBOX_HIDE"
"""Comma-separated mechanisms to treat as missing (tests, or a user who distrusts one)."""
NOBODY = 65534
"""The uid a root parent's worker becomes when there is no bubblewrap jail."""
NUMERIC_PREFIXES = ("OPENBLAS_", "MKL_", "NPY_")
"""Variables that select numeric kernels (e.g. OPENBLAS_CORETYPE): passed through, so a jailed
reward computes bit for bit what the same code computes in the parent."""
PROJECT_PACKAGES = ("text2reward", "sim_envs", "policies")
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin")
SYSTEM_FILES = ("/etc/ld.so.cache",)


class SandboxUnavailable(ConfigError):
    """No jail passed its self-test on this machine: model-written code must not run."""


@dataclass(frozen=True)
class Isolation:
    """A mechanism that passed its self-test, and what the test saw."""

    mechanism: str
    layers: dict[str, Any] = field(default_factory=dict)
    """What the worker reported in place: namespaces, Landlock ABI, seccomp, uid."""
    findings: dict[str, str] = field(default_factory=dict)
    """Escape attempt -> how it failed (every one must have)."""

    def describe(self) -> str:
        """One line for reports and result.json."""
        landlock = self.layers.get("landlock")
        parts = []
        if self.mechanism == "bubblewrap":
            parts.append("bubblewrap (user, pid, ipc, net, uts, mount namespaces; read-only minimal root)")
        else:
            namespaces = self.layers.get("namespaces", "")
            parts.append(f"namespaces: {namespaces}" if "unavailable" not in str(namespaces) else "no namespaces")
            if self.layers.get("root"):
                parts.append(f"{self.layers['root']} root")
        if isinstance(landlock, int):
            parts.append(f"Landlock ABI {landlock} (read-only view)")
        if "signals" in str(self.layers.get("landlock_scopes", "")):
            parts.append("Landlock scoping (signals, abstract sockets)")
        parts.append("seccomp (no sockets, signals, IPC, exec, fork, sessions, timers, priorities, watches)")
        if self.layers.get("uid") is not None:
            parts.append(f"uid {self.layers['uid']}")
        return f"{self.mechanism} jail: " + " + ".join(parts) + " + rlimits; self-test passed"


def guarantees(isolation: Isolation) -> dict[str, bool]:
    """Each promise the jail makes, and whether this mechanism, as its self-test found it here, keeps it."""
    layers = isolation.layers
    bwrap = isolation.mechanism == "bubblewrap"
    own = str(layers.get("namespaces", ""))
    minimal_root = bwrap or layers.get("root") == "minimal, read-only"
    scoped = "signals" in str(layers.get("landlock_scopes", ""))
    seccomp = bool(layers.get("seccomp"))
    return {
        "a minimal read-only root: files outside the reward's view are not there (no read, no stat, no listing)": minimal_root,
        "nothing writable": minimal_root and isinstance(layers.get("landlock"), int) or bwrap,
        "its own pid namespace: no other process is visible or addressable by its pid": bwrap or "pid" in own,
        "its own network namespace, and no sockets": (bwrap or "net" in own) and seccomp,
        "its own IPC namespace, and no shared memory or message queues": (bwrap or "ipc" in own) and seccomp,
        "no signal to any other process, by the code or by the kernel on its behalf (fcntl owner, timers)": seccomp,
        "Landlock's scoping: no signal or abstract socket outside its own domain": scoped,
        "no change to any process's priority, scheduling or CPUs": seccomp,
        "no timers, alarms or file-system watches": seccomp,
        "no new process or thread, no exec": seccomp,
        "nothing outlives its jail: no new session or process group, no change of credentials or parent-death signal; "
        "the reward's process held by the parent's pidfd and killed with its call, candidate or command": seccomp,
        "CPU and blocked time judged per call by the parent on the kernel's clocks; CPU between calls counted": True,
        "validation driven call by call by the parent, every check computed from the raw values": True,
    }


def hidden_mechanisms() -> set[str]:
    return {name.strip() for name in os.environ.get(HIDE_VARIABLE, "").split(",") if name.strip()}


def python_command() -> list[str]:
    # absolute and normalised (a `..` through a folder the jail hides cannot resolve inside it), but
    # not resolved: a virtual environment is found from the interpreter's own path
    return [os.path.abspath(sys.executable), "-B", "-m", "text2reward.sandbox.jailed"]


def worker_env() -> dict[str, str]:
    """A small, explicit environment: no secrets from ours, one BLAS thread, the same numeric kernels."""
    env = {key: value for key, value in os.environ.items() if key.startswith(NUMERIC_PREFIXES)}
    env.update(
        {
            "PATH": "/usr/bin:/bin",
            "HOME": "/nonexistent",
            "LANG": "C.UTF-8",
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "PYTHONHASHSEED": "0",
            # one thread: the jail forbids creating threads, and training runs one worker per env
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
    )
    return env


@functools.lru_cache(maxsize=1)
def readable_paths() -> tuple[str, ...]:
    """What the jail shows, read-only: the interpreter, installed libraries, this project's
    packages (not the checkout around them: it holds runs, the user's files and other candidates'
    outputs) and the system libraries. Other import-path entries (the working directory, a tests
    folder) stay hidden. Outermost paths only."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    wanted = set(prefixes) | {os.path.dirname(os.path.abspath(sys.executable)), os.path.dirname(os.path.realpath(sys.executable))}
    wanted.update(p for p in sys.path if p and os.path.isdir(p) and _is_library_path(p, prefixes))
    for name in PROJECT_PACKAGES:
        wanted.update(importlib.import_module(name).__path__)
    wanted.update(d for d in SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d))
    real = {os.path.realpath(p) for p in wanted if os.path.exists(p)}
    return tuple(sorted(p for p in real if not any(p.startswith(q.rstrip("/") + "/") for q in real if q != p)))


def _is_library_path(path: str, prefixes: set[str]) -> bool:
    real = os.path.realpath(path)
    inside = any(real == p or real.startswith(p.rstrip("/") + "/") for p in prefixes)
    return inside or os.path.basename(real) in ("site-packages", "dist-packages")


def bubblewrap_argv() -> list[str]:
    """bwrap with fresh namespaces and a read-only root built only from the readable paths."""
    args = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
    for path in readable_paths():
        args += ["--ro-bind", path, path]
    for path in SYSTEM_FILES:
        args += ["--ro-bind-try", path, path]
    args += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/", "--"]
    return args


def jail_spec(mechanism: str) -> dict[str, Any]:
    """What the worker applies to itself (jail.lock_down_os) under `mechanism`."""
    return {
        "readable": list(readable_paths()),
        "drop_to_uid": NOBODY if mechanism == "landlock" and os.geteuid() == 0 else None,
        "landlock_required": mechanism == "landlock",
        # without bubblewrap the worker builds the same namespaces and minimal root itself (namespaces.py)
        "own_namespaces": mechanism == "landlock",
        "symlinks": [[path, os.readlink(path)] for path in SYSTEM_DIRS if os.path.islink(path)],
        "files": [path for path in SYSTEM_FILES if os.path.isfile(path)],
    }


def launch_argv(mechanism: str) -> list[str]:
    prefix = bubblewrap_argv() if mechanism == "bubblewrap" else []
    return prefix + python_command()


def unavailable_reason(mechanism: str) -> str | None:
    """Why a mechanism cannot even be tried here (before any self-test), or None."""
    if not sys.platform.startswith("linux"):
        return f"not available on {sys.platform} (Linux only)"
    if mechanism == "bubblewrap" and shutil.which("bwrap") is None:
        return "bwrap is not installed (apt-get install bubblewrap)"
    return None


HOW_TO_FIX = (
    "install bubblewrap (apt-get install bubblewrap) or use Linux >= 5.13 with Landlock enabled "
    "(lsm=...,landlock) and libseccomp2; `t2r doctor` shows what failed"
)


@functools.cache
def _checked(mechanism: str, pid: int) -> Isolation | str:
    """The mechanism's self-test result in this process: an Isolation, or why it failed."""
    from text2reward.sandbox.selftest import Jail, self_test  # ~2 ms at every `t2r` start: only a run or `t2r doctor` tests a jail

    reason = unavailable_reason(mechanism)
    if reason is not None:
        return reason
    outcome = self_test(mechanism, Jail(launch_argv(mechanism), jail_spec(mechanism), worker_env(), readable_paths()))
    return outcome if isinstance(outcome, str) else Isolation(mechanism, layers=outcome.layers, findings=outcome.findings)


def check(mechanism: str) -> Isolation | str:
    """The mechanism's self-test outcome (run once per process); hiding it takes effect at once."""
    if mechanism in hidden_mechanisms():
        return f"hidden by {HIDE_VARIABLE}"
    return _checked(mechanism, os.getpid())


def active_isolation(wanted: str = "auto") -> Isolation:
    """The first mechanism (or the one wanted) whose self-test passes; otherwise refuse.

    Raises SandboxUnavailable with one line that says what failed and how to get a jail."""
    if wanted not in ("auto", *MECHANISMS):
        raise ConfigError(f"unknown sandbox isolation {wanted!r}; use auto, bubblewrap or landlock")
    failures = []
    for mechanism in MECHANISMS if wanted == "auto" else (wanted,):
        outcome = check(mechanism)
        if isinstance(outcome, Isolation):
            return outcome
        failures.append(f"{mechanism}: {outcome}")
    raise SandboxUnavailable(
        f"refusing to run model-written code: no sandbox passed its self-test here ({'; '.join(failures)}); {HOW_TO_FIX}"
    )
