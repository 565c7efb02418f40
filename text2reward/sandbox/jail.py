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
   message IPC, mknod, execve, fork/clone (no processes, no threads), namespace and mount calls,
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
import threading
from typing import Any

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


class JailError(Exception):
    """A required isolation layer could not be put in place: the worker must not run the code."""


def lock_down_os(spec: dict[str, Any], open_files: int | None = None) -> dict[str, Any]:
    """Apply the OS layers described by `spec` (built by isolation.jail_spec); return what took effect.

    `open_files`: RLIMIT_NOFILE from here on (set after the namespaces are built: building them opens files)."""
    if threading.active_count() != 1:
        raise JailError("the worker has threads; namespaces and seccomp need a single-threaded process")
    import_layers()  # before the uid drop: a root-owned interpreter may be unreadable to uid 65534
    applied: dict[str, Any] = {}
    drop = int(spec["drop_to_uid"]) if spec.get("drop_to_uid") is not None else None
    if spec.get("own_namespaces"):  # no bubblewrap: the same namespaces and minimal root, built here (or refuse)
        from text2reward.sandbox.namespaces import NamespaceError, build

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
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))  # counts the user's processes: no fork, no thread from here on
    if open_files is not None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))
    applied["landlock"] = _landlock(spec["readable"], required=bool(spec["landlock_required"]))
    applied["landlock_scopes"] = _landlock_scopes()
    _seccomp()
    applied["seccomp"] = True
    return applied


def import_layers() -> None:
    """Import the layers' libraries while the interpreter's files are still readable."""
    for name in ("landlock", "pyseccomp"):
        try:
            __import__(name)
        except ImportError:
            pass  # reported by the layer that needs it


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
        from landlock import FSAccess, Ruleset, landlock_abi_version

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
    import struct

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


def _seccomp() -> None:
    """Deny-list filter with EPERM; calls from a foreign architecture (x32, i386) kill the process."""
    try:
        import pyseccomp as seccomp

        denied = seccomp.ERRNO(errno.EPERM)
        syscall_filter = seccomp.SyscallFilter(seccomp.ALLOW)
        for name in DENIED_SYSCALLS:
            try:
                syscall_filter.add_rule(denied, name)
            except (OSError, ValueError, RuntimeError):
                pass  # not a system call on this architecture
        # prlimit64 may read limits (new_limit NULL) but never set them
        syscall_filter.add_rule(denied, "prlimit64", seccomp.Arg(2, seccomp.NE, 0))
        # fcntl may not make the kernel signal another process on the file's behalf (SIGIO, leases)
        for command in FCNTL_SIGNALLING:
            syscall_filter.add_rule(denied, "fcntl", seccomp.Arg(1, seccomp.EQ, command))
        syscall_filter.load()  # sets no-new-privs first
    except Exception as exc:
        raise JailError(f"the seccomp filter could not be loaded: {type(exc).__name__}: {exc} (install libseccomp2)") from None
