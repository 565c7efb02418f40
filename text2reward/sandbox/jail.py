"""The operating-system half of the lock-down, applied inside the worker before untrusted code runs.

This is the security boundary (the audit hook and restricted builtins in jailed.py are lint). In
order, in the process that will run the reward:
1. a root parent's worker becomes uid/gid 65534 with no supplementary groups;
2. new user, network, IPC and UTS namespaces where the kernel allows them: no network but a
   down loopback, System V objects of its own only (best effort: seccomp below closes both anyway);
3. Landlock: read-only access beneath the paths the reward needs (interpreter, installed libraries,
   project code) and nothing else: no other file can be opened, created, renamed or linked;
4. no-new-privs and a seccomp filter that fails, with EPERM, the calls that reach outside the
   process: sockets, signals to any process, ptrace and cross-process memory, System V and POSIX
   message IPC, mknod, execve, fork/clone (no processes, no threads), setsid/setpgid and changes of
   credentials or of the parent-death signal (nothing leaves its jail's session or outlives it), namespace and mount calls,
   changes to file metadata (chmod, chown, xattrs, times: Landlock does not cover them), raising
   resource limits, keyrings, BPF, perf, userfaultfd and io_uring.

Which layers are required depends on the mechanism the parent chose (isolation.py): under
bubblewrap the namespaces and the read-only mount tree come from bwrap and Landlock is added when
the kernel has it; without bubblewrap Landlock and seccomp are both required. A required layer that
fails raises `JailError` and the worker exits before reading any code.

Linux only; the parent never starts a worker where its self-test did not pass.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import struct
import threading
from typing import Any

from text2reward.sandbox.namespaces import NamespaceError, build, enter_per_child, enter_shared

CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000

DENIED_SYSCALLS = (
    # network and local sockets (abstract unix sockets included)
    "socket", "socketpair",
    # reaching other processes
    "kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal",
    "pidfd_getfd", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    # System V and POSIX message IPC, shared memory that outlives the process
    "shmget", "shmat", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop",
    "semctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    "memfd_create", "memfd_secret",
    # new programs and processes
    "execve", "execveat", "fork", "vfork", "clone", "clone3",
    # leaving the jail's process group and session (a kill of the group must reach it), and changing credentials,
    # which also clears the parent-death signal (prctl's own way to clear it is filtered below)
    "setsid", "setpgid", "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid",
    "setfsgid", "setgroups",
    # namespaces, mounts, roots
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr",
    # device nodes and fifos, file metadata and links that Landlock does not mediate
    "mknod", "mknodat", "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat",
    "utime", "utimes", "utimensat", "futimesat", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
    "lremovexattr", "fremovexattr", "truncate", "ftruncate", "fallocate", "link", "linkat", "symlink",
    "symlinkat", "rename", "renameat", "renameat2", "unlink", "unlinkat", "rmdir", "mkdir", "mkdirat",
    "name_to_handle_at", "open_by_handle_at",
    # other processes' priority, scheduling and CPUs (a reward has no business with its own either)
    "setpriority", "sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr", "ioprio_set",
    "process_madvise", "process_mrelease", "migrate_pages", "move_pages", "set_mempolicy_home_node",
    # watching the file system: names and events outside the view
    "inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_init", "fanotify_mark",
    # timers and alarms: CPU spent between calls, signals delivered later
    "alarm", "setitimer", "timer_create", "timer_settime", "timerfd_create", "timerfd_settime",
    # limits, kernel facilities
    "setrlimit", "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "init_module", "finit_module", "delete_module",
    "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "quotactl", "acct", "syslog",
    "settimeofday", "clock_settime", "adjtimex", "clock_adjtime", "sethostname", "setdomainname",
)


FCNTL_SIGNALLING = (8, 10, 15, 1024)
"""fcntl's F_SETOWN, F_SETSIG, F_SETOWN_EX and F_SETLEASE: each has the kernel send a signal for the file later, to a
process the caller names (the way a reward killed a sibling although `kill` was denied)."""
LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET = 1
LANDLOCK_SCOPE_SIGNAL = 2
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_RESTRICT_SELF = 446
PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1


class JailError(Exception):
    """A required isolation layer could not be put in place: the worker must not run the code."""


def lock_down_os(spec: dict[str, Any], open_files: int | None = None, shared: dict[str, Any] | None = None) -> dict[str, Any]:
    """Apply the OS layers described by `spec` (built by isolation.jail_spec); return what took effect.

    `open_files`: RLIMIT_NOFILE from here on (set after the namespaces are built: building them opens files).
    `shared`: in a zygote's child, what `prepare_zygote` already put in place in the zygote (the minimal root and the
    user namespace without bubblewrap, Landlock's file rules): the child adds only what must be its own."""
    if threading.active_count() != 1:
        raise JailError("the worker has threads; namespaces and seccomp need a single-threaded process")
    import_layers()  # before the uid drop: a root-owned interpreter may be unreadable to uid 65534
    if shared is not None:  # a zygote's child: in its own namespaces already (`enter_child_namespaces`)
        applied = dict(shared)
    else:
        applied = _namespaces_and_uid(spec)
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))  # counts the user's processes: no fork, no thread from here on
    if open_files is not None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))
    if shared is None:
        applied["landlock"] = _landlock(spec["readable"], required=bool(spec["landlock_required"]))
    applied["landlock_scopes"] = _landlock_scopes()  # a domain of its own: no signal to a sibling or the zygote
    _seccomp()
    applied["seccomp"] = True
    return applied


def prepare_zygote(spec: dict[str, Any]) -> dict[str, Any]:
    """What every validation child of a zygote shares, put in place once in the zygote (which runs trusted code only):
    without bubblewrap the user and mount namespaces and the minimal root (`namespaces.enter_shared`; a root parent's
    zygote becomes uid 65534), and Landlock's read-only file rules. Each child then makes its own pid, network, IPC,
    UTS (and cgroup) namespaces, its own Landlock domain (the scoping, stacked) and its seccomp filter.

    Why: building the root and the file ruleset cost ~4 ms per child, and they are the same for every candidate."""
    if threading.active_count() != 1:
        raise JailError("the zygote has threads; namespaces need a single-threaded process")
    import_layers()
    applied: dict[str, Any] = {}
    if spec.get("own_namespaces"):
        drop = int(spec["drop_to_uid"]) if spec.get("drop_to_uid") is not None else None
        try:
            enter_shared(spec["readable"], spec.get("symlinks", []), spec.get("files", []), drop)
        except (NamespaceError, OSError) as exc:
            raise JailError(f"the namespaces could not be built: {exc}") from None
        applied["root"] = "minimal, read-only"
        if drop is not None:
            applied["uid"] = os.getuid()
    applied["landlock"] = _landlock(spec["readable"], required=bool(spec["landlock_required"]))
    return applied


def _namespaces_and_uid(spec: dict[str, Any]) -> dict[str, Any]:
    """A process's own namespaces (and minimal root without bubblewrap), and its uid dropped where asked."""
    applied: dict[str, Any] = {}
    drop = int(spec["drop_to_uid"]) if spec.get("drop_to_uid") is not None else None
    if spec.get("own_namespaces"):  # no bubblewrap: the same namespaces and minimal root, built here (or refuse)
        try:
            applied.update(build(spec["readable"], spec.get("symlinks", []), spec.get("files", []), drop))
        except (NamespaceError, OSError) as exc:
            raise JailError(f"the namespaces could not be built: {exc}") from None
        if drop is not None:
            applied["uid"] = os.getuid()
    else:
        if drop is not None:
            _drop_privileges(drop)
            applied["uid"] = os.getuid()
        applied["namespaces"] = _unshare_namespaces()
    return applied


def enter_child_namespaces(spec: dict[str, Any]) -> dict[str, Any]:
    """A zygote child's own namespaces, entered while it waits as the spare: without bubblewrap pid (entered by a
    fork), net, ipc, uts and cgroup inside the zygote's user namespace and root; under bubblewrap user, net, ipc and
    uts (the pid namespace is bubblewrap's, shared with the zygote, which no child can see or signal)."""
    if not spec.get("own_namespaces"):
        return {"namespaces": _unshare_namespaces()}
    try:
        return enter_per_child()
    except (NamespaceError, OSError) as exc:
        raise JailError(f"the namespaces could not be built: {exc}") from None


def import_layers() -> None:
    """Import the layers' libraries while the interpreter's files are still readable, and compile the seccomp filter
    once: a zygote's children then only load it (~20 us instead of ~2 ms for libseccomp to build and compile it)."""
    for name in ("landlock", "pyseccomp"):
        try:
            __import__(name)
        except ImportError:
            pass  # reported by the layer that needs it
    try:
        seccomp_program()
    except JailError:
        pass  # reported when the filter is loaded


def _drop_privileges(uid: int) -> None:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getgid() != uid:
        raise JailError("could not drop root privileges")


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _unshare_namespaces() -> str:
    """New user + network + IPC + UTS namespaces; a reason string when the kernel refuses."""
    flags = CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    if _libc().unshare(ctypes.c_int(flags)) != 0:
        return f"unavailable ({os.strerror(ctypes.get_errno())})"
    return "user, net, ipc, uts"


def _landlock(readable: list[str], required: bool) -> int | str:
    """Read-only access beneath `readable`; the ABI version applied, or why not."""
    try:
        from landlock import FSAccess, Ruleset, landlock_abi_version  # Linux only, optional: its absence is reported below

        abi = landlock_abi_version()
        read = FSAccess.READ_FILE | FSAccess.READ_DIR | FSAccess.EXECUTE
        ruleset = Ruleset()  # handles every access right the kernel's ABI knows
        for path in readable:
            if os.path.isdir(path):
                ruleset.allow(path, rules=read)
            elif os.path.exists(path):
                ruleset.allow(path, rules=FSAccess.READ_FILE | FSAccess.EXECUTE)
        ruleset.apply()
        return abi
    except Exception as exc:  # ImportError, an old kernel (ENOSYS, EOPNOTSUPP), a refused ruleset
        if required:
            raise JailError(f"Landlock could not be applied: {type(exc).__name__}: {exc}") from None
        return f"unavailable ({type(exc).__name__}: {exc})"


def _landlock_scopes() -> str:
    """Landlock's scoping (ABI 6+): no signal to, and no abstract Unix socket of, any process outside this domain.

    The `landlock` package sets file rules only, so this domain is made with the system calls themselves: a ruleset
    that handles no access right, only the two scopes, stacked on the file ruleset."""
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 6:
        return f"unavailable (Landlock ABI {abi if abi > 0 else 'none'}; scoping needs 6)"
    attr = ctypes.create_string_buffer(struct.pack("=QQQ", 0, 0, LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL))
    ruleset = libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), attr, ctypes.c_size_t(24), ctypes.c_uint32(0))
    if ruleset < 0:
        return f"unavailable ({os.strerror(ctypes.get_errno())})"
    try:
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.syscall(
                ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return f"unavailable ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    return "signals, abstract unix sockets"


_PROGRAM: bytes | None = None
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class _SockFilterProgram(ctypes.Structure):
    """The kernel's struct sock_fprog: a count of 8-byte instructions and where they lie."""

    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def seccomp_program() -> bytes:
    """The filter as classic BPF, compiled by libseccomp once per process: a deny-list with EPERM (argument filters
    on prlimit64, prctl and fcntl); a call from a foreign architecture (x32, i386) kills the process, libseccomp's
    default for an architecture the filter does not name."""
    global _PROGRAM
    if _PROGRAM is not None:
        return _PROGRAM
    try:
        import pyseccomp as seccomp  # Linux only, optional: its absence is reported below

        denied = seccomp.ERRNO(errno.EPERM)
        syscall_filter = seccomp.SyscallFilter(seccomp.ALLOW)
        for name in DENIED_SYSCALLS:
            try:
                syscall_filter.add_rule(denied, name)
            except (OSError, ValueError, RuntimeError):
                pass  # not a system call on this architecture
        # prlimit64 may read limits (new_limit NULL) but never set them
        syscall_filter.add_rule(denied, "prlimit64", seccomp.Arg(2, seccomp.NE, 0))
        # the parent-death signal that ends the reward with its jail's process stays as the jail set it
        syscall_filter.add_rule(denied, "prctl", seccomp.Arg(0, seccomp.EQ, PR_SET_PDEATHSIG))
        # fcntl may not make the kernel signal another process on the file's behalf (SIGIO, leases)
        for command in FCNTL_SIGNALLING:
            syscall_filter.add_rule(denied, "fcntl", seccomp.Arg(1, seccomp.EQ, command))
        read_end, write_end = os.pipe()
        try:
            with os.fdopen(write_end, "wb") as sink:
                syscall_filter.export_bpf(sink)
            program = os.read(read_end, 1 << 16)
        finally:
            os.close(read_end)
    except Exception as exc:
        raise JailError(f"the seccomp filter could not be built: {type(exc).__name__}: {exc} (install libseccomp2)") from None
    if not program or len(program) % 8:
        raise JailError("the seccomp filter could not be built: libseccomp exported no program")
    _PROGRAM = program
    return program


def _seccomp() -> None:
    """Load the filter (`seccomp_program`) with no-new-privs set first, as libseccomp's own load does."""
    program = seccomp_program()
    libc = _libc()
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFilterProgram(len(program) // 8, ctypes.addressof(buffer))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise JailError(f"no-new-privs could not be set: {os.strerror(ctypes.get_errno())}")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise JailError(f"the seccomp filter could not be loaded: {os.strerror(ctypes.get_errno())}")
