"""The jail bubblewrap builds, built by the worker itself where bubblewrap is missing.

Why: without bubblewrap a worker used to keep the host's process and mount namespaces: a reward could see every
process, address its siblings by pid, and read metadata (sizes, times, names) of files outside its view. So the
worker makes the same namespaces bubblewrap makes, with the kernel's calls, at lock-down (after its trusted
imports, before any model-written code):

1. new user, mount, pid, network, IPC, UTS and cgroup namespaces (unprivileged users may make them: the user
   namespace grants the other ones); the user namespace maps only the worker's own uid and gid;
2. a minimal root: an empty tmpfs holding read-only binds of exactly what the reward needs (the interpreter,
   installed libraries, this project's packages, the system libraries), the same list bubblewrap binds, a few
   device files, and no /proc; `pivot_root` into it, the old root detached, the new root remounted read-only;
3. a fork: the child is pid 1 of the fresh pid namespace and goes on to run the reward (it dies with its parent);
   the parent only waits for it, holding no pipe, and ends as it ended.

The caller then drops what is left (Landlock, seccomp). Any step that fails raises `NamespaceError`: the worker
exits before reading code, the self-test fails, and this mechanism is refused (fail closed).
"""

from __future__ import annotations

import ctypes
import os
import signal
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
ALL_NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_GET_PDEATHSIG = 2
PR_SET_DUMPABLE = 4
SYS_PIVOT_ROOT = 155
STATVFS_TO_MOUNT = ((1, MS_RDONLY), (2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, MS_NOATIME),
                    (2048, MS_NODIRATIME), (4096, MS_RELATIME))
"""statvfs's f_flag bits and the mount flags they stand for: a bind's remount must keep the flags the kernel locked."""
DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
ROOT_MOUNT_POINTS = ("/tmp", "/mnt", "/media", "/srv", "/var/tmp", "/opt", "/run")
"""Where the new root's tmpfs may be mounted before `pivot_root` (inside the new mount namespace only): the first
existing folder that holds nothing the root binds, since the tmpfs hides what lies below it (a virtual environment or
checkout under /tmp, as on many CI machines)."""


def root_mount_point(sources: list[str]) -> str:
    """The first of `ROOT_MOUNT_POINTS` that is a real folder and neither holds nor is any of `sources`."""
    for folder in ROOT_MOUNT_POINTS:
        covers = any(path == folder or path.startswith(folder + "/") for path in sources)
        if os.path.isdir(folder) and not os.path.islink(folder) and not covers:
            return folder
    raise NamespaceError(f"no folder to build the new root on: each of {', '.join(ROOT_MOUNT_POINTS)} is missing "
                         "or holds the interpreter or the project")


class NamespaceError(Exception):
    """The namespaces or the minimal root could not be built: this mechanism must not run the code."""


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    return libc


def _check(result: int, what: str) -> None:
    if result != 0:
        raise NamespaceError(f"{what} failed: {os.strerror(ctypes.get_errno())}")


PER_CHILD = CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP
"""What each validation child of a zygote makes anew: its own process, network, IPC, host-name and cgroup views."""


def build(readable: list[str], symlinks: list[list[str]], files: list[str], drop_to_uid: int | None = None) -> dict[str, Any]:
    """Enter fresh namespaces and a minimal read-only root; returns (in the child that goes on) what took effect.

    Must be called single-threaded, after the trusted imports and before Landlock and seccomp (which forbid these
    calls). A root caller names `drop_to_uid`: it builds the root as root, in a mount namespace of the host's user
    namespace (its paths may lie under a home only root can enter, e.g. a pyenv under /root, and the jailed process
    then holds no capability over its own mounts), becomes that uid, and only then makes the other namespaces.
    Anyone else makes them all at once, owning a user namespace that maps its own uid alone."""
    enter_shared(readable, symlinks, files, drop_to_uid, others=ALL_NAMESPACES & ~CLONE_NEWNS)
    _enter_new_pid_namespace(_libc())
    return {"namespaces": "user, mount, pid, net, ipc, uts, cgroup", "root": "minimal, read-only"}


def enter_shared(readable: list[str], symlinks: list[list[str]], files: list[str], drop_to_uid: int | None = None,
                 others: int = ALL_NAMESPACES & ~CLONE_NEWNS & ~CLONE_NEWPID) -> None:
    """The user and mount namespaces and the minimal root (and `others`), without the pid namespace's fork.

    A zygote calls this once, so each validation child it forks only adds what must be its own (`enter_per_child`):
    the root is the same read-only tree for every candidate, and building it costs a few ms per child."""
    libc = _libc()
    proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the id maps, after the old root is gone
    try:
        if drop_to_uid is not None and os.geteuid() == 0:
            _check(libc.unshare(ctypes.c_int(CLONE_NEWNS)), "unshare (mount namespace)")
            _make_root(libc, readable, symlinks, files)
            death_signal, parent = ctypes.c_int(0), os.getppid()
            _check(libc.prctl(PR_GET_PDEATHSIG, ctypes.byref(death_signal), 0, 0, 0), "reading the parent-death signal")
            os.setgroups([])
            os.setgid(drop_to_uid)
            os.setuid(drop_to_uid)  # from root to another uid: every capability goes
            if os.getuid() != drop_to_uid or os.geteuid() != drop_to_uid or os.getgid() != drop_to_uid:
                raise NamespaceError("could not drop root privileges")
            if death_signal.value:  # a change of credentials clears it: set again, so the worker still dies with its parent
                _check(libc.prctl(PR_SET_PDEATHSIG, death_signal.value, 0, 0, 0), "tying the worker to its parent again")
                if os.getppid() != parent:  # the parent ended while it was not tied
                    os._exit(1)
            _own_user_namespace(libc, others | CLONE_NEWUSER, proc)
        else:
            _own_user_namespace(libc, others | CLONE_NEWUSER | CLONE_NEWNS, proc)
            _make_root(libc, readable, symlinks, files)
    finally:
        os.close(proc)


def enter_per_child() -> dict[str, Any]:
    """In a zygote's child (already in the zygote's user and mount namespaces and root): its own pid, network, IPC,
    UTS and cgroup namespaces, the pid namespace entered by a fork (the reward runs as its pid 1)."""
    libc = _libc()
    _check(libc.unshare(ctypes.c_int(PER_CHILD)), "unshare (pid, net, ipc, uts, cgroup namespaces)")
    _enter_new_pid_namespace(libc)
    return {"namespaces": "user, mount, pid, net, ipc, uts, cgroup", "root": "minimal, read-only"}


def _own_user_namespace(libc: ctypes.CDLL, flags: int, proc: int) -> None:
    """unshare `flags` (a user namespace among them), mapping only this process's own uid and gid."""
    uid, gid = os.geteuid(), os.getegid()
    # a process whose uid was just dropped is not dumpable, and its /proc files stay root's: for the maps only
    _check(libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "making /proc/self the worker's own")
    _check(libc.unshare(ctypes.c_int(flags)), "unshare (user and other namespaces)")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        fd = os.open(f"self/{name}", os.O_WRONLY, dir_fd=proc)  # `self` resolves now: this process, its new namespace
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
    _check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "making the worker undumpable again")


def _make_root(libc: ctypes.CDLL, readable: list[str], symlinks: list[list[str]], files: list[str]) -> None:
    """In a new mount namespace: a tmpfs holding read-only binds of `readable` and `files`, the symlinks and a few
    device files; pivot_root into it, the old root detached, the new root read-only."""
    new_root = root_mount_point([os.path.realpath(p) for p in [*readable, *files]])
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "making the mounts private")
    _check(libc.mount(b"t2r-root", new_root.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"size=1m,mode=0755"), "mounting the new root")
    for path in readable:
        _bind(libc, path, new_root + path, directory=os.path.isdir(path))
    for path in files:
        inside = any(path.startswith(folder.rstrip("/") + "/") for folder in readable)
        if os.path.exists(path) and not inside:
            _bind(libc, path, new_root + path, directory=False)
    for device in DEVICES:
        if os.path.exists(device) and not os.path.exists(new_root + device):
            _bind(libc, device, new_root + device, directory=False, read_only=False)
    for path, target in symlinks:
        if os.path.lexists(new_root + path):  # inside a folder bound already
            continue
        os.makedirs(os.path.dirname(new_root + path), exist_ok=True)
        os.symlink(target, new_root + path)
    os.chdir(new_root)
    os.mkdir(".old")
    libc.syscall.restype = ctypes.c_long
    _check(libc.syscall(ctypes.c_long(SYS_PIVOT_ROOT), b".", b".old"), "pivot_root")
    os.chdir("/")
    _check(libc.umount2(b"/.old", ctypes.c_int(MNT_DETACH)), "detaching the old root")
    os.rmdir("/.old")
    _check(libc.mount(None, b"/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None), "making the new root read-only")


def _bind(libc: ctypes.CDLL, source: str, target: str, directory: bool, read_only: bool = True) -> None:
    """A bind of `source` at `target` in the new root; read-only, keeping the flags the kernel locked on the source."""
    if directory:
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
    _check(libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), f"binding {source}")
    locked = 0
    flags = os.statvfs(source).f_flag
    for bit, mount_flag in STATVFS_TO_MOUNT:
        if flags & bit:
            locked |= mount_flag
    if read_only:
        locked |= MS_RDONLY
    _check(libc.mount(None, target.encode(), None, MS_REMOUNT | MS_BIND | locked, None), f"making {source} read-only")


def _enter_new_pid_namespace(libc: ctypes.CDLL) -> None:
    """Fork: the child (pid 1 of the new pid namespace) returns and runs the reward, dying with its parent; the parent
    lets go of every file, waits, and ends as the child ended (the same exit code, or the same signal)."""
    child = os.fork()
    if child == 0:  # its parent is outside its pid namespace (getppid says 0): a parent gone before the tie is not seen,
        # and the parent cannot be gone, it waits for this child
        _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "tying the worker to its waiting parent")
        return
    os.closerange(0, 1 << 16)  # the pipes are the child's: EOF and errors must reach the parent through it alone
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number != signal.SIGKILL:
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)
