"""How the worker process is launched: bubblewrap when it works here, plain rlimits otherwise.

Why probe instead of checking `which bwrap`: bubblewrap can be installed yet unusable (no user
namespaces in a container, the project under a path the jail hides). The probe runs the real
worker import inside the real jail once per process and caches the answer.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys

BWRAP_ARGS = (
    "--ro-bind", "/", "/",
    "--dev", "/dev",
    "--proc", "/proc",
    "--tmpfs", "/tmp",
    "--unshare-all",       # no network (only its own lo), own pid/ipc/uts namespaces
    "--die-with-parent",
    "--new-session",       # no terminal injection through a shared session
    "--cap-drop", "ALL",
    "--chdir", "/tmp",
)
NOBODY = 65534
"""The uid a root parent drops the worker to when there is no bubblewrap jail."""


def python_command() -> list[str]:
    return [sys.executable, "-B", "-m", "text2reward.sandbox.worker"]


def worker_env(home: str) -> dict[str, str]:
    """A small, explicit environment: no secrets from ours, one BLAS thread, the parent's import path."""
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.pathsep.join(paths),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONHASHSEED": "0",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def hidden_by_tmpfs() -> list[str]:
    """Paths the worker needs (interpreter, import path, this project) that the jail's empty /tmp
    would hide: a virtual environment or a checkout under /tmp, as CI clones often are."""
    import text2reward

    needed = {sys.prefix, sys.base_prefix, os.path.dirname(sys.executable), *(p for p in sys.path if p)}
    needed.add(os.path.dirname(os.path.dirname(os.path.abspath(text2reward.__file__))))
    under_tmp = sorted({os.path.realpath(p) for p in needed if os.path.exists(p)})
    under_tmp = [p for p in under_tmp if p.startswith("/tmp/")]
    # keep only outermost paths: binding a folder also shows everything below it
    return [p for p in under_tmp if not any(p.startswith(q + "/") for q in under_tmp if q != p)]


def bubblewrap_prefix() -> list[str]:
    rebinds = [arg for path in hidden_by_tmpfs() for arg in ("--ro-bind", path, path)]
    return [shutil.which("bwrap") or "bwrap", *BWRAP_ARGS, *rebinds, "--"]


@functools.lru_cache(maxsize=1)
def bubblewrap_usable() -> bool:
    """True when the worker module imports inside the bubblewrap jail on this machine."""
    if os.environ.get("T2R_SANDBOX_BWRAP", "").lower() in {"0", "no", "false", "off"}:
        return False
    if shutil.which("bwrap") is None:
        return False
    command = bubblewrap_prefix() + [sys.executable, "-B", "-c", "import text2reward.sandbox.worker"]
    try:
        done = subprocess.run(command, env=worker_env("/tmp"), capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def describe(use_bubblewrap: bool) -> str:
    """One line for reports: which layers isolated the run."""
    layers = "rlimits + audit hook + restricted builtins"
    if use_bubblewrap:
        return f"bubblewrap (read-only /, no network, own pid namespace) + {layers}"
    if os.geteuid() == 0:
        return f"uid {NOBODY} + {layers} (no bubblewrap)"
    return f"{layers} (no bubblewrap)"
