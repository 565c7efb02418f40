"""The isolated process that runs untrusted reward code: `python -m text2reward.sandbox.jailed CONFIG`.

Three modes share one lock-down sequence:
- `serve`: one long-lived process per training env, answering one reward call per frame (views
  arrive in wire.py's compact format: a schema once, then numbers; replies settle into packed doubles);
- `zygote`: a trusted process that has imported numpy and the views once and forks a fresh child
  per validation request (a fork costs milliseconds, a fresh interpreter ~0.3 s). The child gets two
  pipes of its own, which the zygote hands to the parent (with a pidfd of the child) over a Unix
  socket; the parent then drives it call by call, exactly as it drives a `serve` worker, and
  computes every verdict itself. The zygote reports only how the child ended (trusted: its own
  wait), killing it at the request's wall-clock backstop;
- `selftest`: the lock-down alone, then the escape attempts of selftest.py (isolation.py runs it
  once per mechanism before any model-written code).

The lock-down, in order, in the process that will run the untrusted code:
1. resource limits: address space, CPU seconds, no file writes (RLIMIT_FSIZE 0), no core dumps;
2. trusted imports are already done: numpy, math, the view classes, and the allowed modules the
   code names (static.ALLOWED_MODULES: scipy's are imported only when named);
3. the OS jail (jail.py: uid drop, namespaces, Landlock, seccomp): the security boundary;
4. RLIMIT_NPROC 0, few open files, fds 0, 1 and 2 on /dev/null (nothing the code prints reaches
   the parent; replies go out on a private pipe);
5. lint, not a boundary (reachable code can switch both off; they turn ordinary mistakes into
   early, friendly errors): an audit hook that denies audited events (open, socket, subprocess,
   import, compile, exec, gc introspection...) except reading special attributes, unpickling the
   parent's views and the single exec of the reward module; restricted builtins whose
   `__import__` hands out loaded allowed modules only.
"""

from __future__ import annotations

import builtins
import json
import os
import pickle
import resource
import signal
import sys
from typing import TYPE_CHECKING

from text2reward.sandbox.channel import ChannelClosed, FrameReader, frame, read_frame, write_all
from text2reward.sandbox.untrusted import MAX_COMPONENTS, MAX_ERROR_CHARS, is_clean_name, name_problem

if TYPE_CHECKING:  # annotations only: the jailed process imports as little as it can before its limits
    from collections.abc import Callable
    from types import CodeType
    from typing import Any

FILENAME = "<reward>"
MAX_TRACE_FRAMES = 12
MAX_MESSAGE_CHARS = 600


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    if config.get("jail", {}).get("own_namespaces") and config.get("parent_pid"):
        _die_with(int(config["parent_pid"]))  # bubblewrap's --die-with-parent, where there is no bubblewrap
    if config["mode"] == "zygote":
        return _zygote(config)
    if config["mode"] == "selftest":
        return _self_test(config)
    return _serve(config)


# --- modes ---


def _serve(config: dict) -> int:
    """A training worker: limits first, then imports, lock-down, and one reply per request frame."""
    _apply_limits(config)
    proto_in, proto_out = _claim_stdio()
    reader = FrameReader(proto_in)
    hello = pickle.loads(reader.read())
    modules = _import_trusted(hello["code"], hello["modules"], hello.get("sources") or {})
    return _serve_calls(reader, proto_out, hello, modules, config)


def _serve_calls(reader: FrameReader, proto_out: int, hello: dict, modules: dict, config: dict) -> int:
    """Load the code (locking down first), say ready, then answer one reward call per request frame until EOF:
    the protocol of training and validation alike (the parent drives both, call by call)."""
    from text2reward.sandbox.wire import PICKLE, ReplyEncoder, ViewDecoder  # the serving modes' own, loaded after the limits

    views, replies = ViewDecoder(hello["modules"]), ReplyEncoder(check=_check_components)
    program = _load(hello, modules, config)
    if isinstance(program, dict):
        _send(proto_out, program)
        return 0
    _send(proto_out, {"ready": True})
    while True:
        try:
            payload = reader.read()
        except ChannelClosed:
            return 0
        if payload[:1] == PICKLE:  # a pickled view: unpickling is audited, and its failures are feedback
            try:
                request = views.feed(payload)
            except BaseException as exc:
                _send(proto_out, {"error": format_error(exc, hello["code"]), "kind": "exception"})
                continue
        else:
            request = views.feed(payload)  # the parent's own format: a failure here is a bug, so the worker stops
        if request is None:  # a schema frame: no reply
            continue
        try:
            reply = replies.encode(*program(*request))
        except BaseException as exc:  # untrusted code: every failure is feedback
            reply = frame(json.dumps({"error": format_error(exc, hello["code"]), "kind": _kind(exc)}).encode())
        write_all(proto_out, reply)


def _self_test(config: dict) -> int:
    """The real lock-down (without the lint layer), then every escape attempt; findings on stdout."""
    _apply_limits(config)
    proto_in, proto_out = _claim_stdio()
    _import_trusted("", [], {})
    from text2reward.sandbox.selftest import probe  # the selftest mode's own, loaded after the limits

    layers = _lock_down(config)
    _send(proto_out, {"layers": layers, "findings": probe(config["targets"])}, newline=True)
    return 0


def _zygote(config: dict) -> int:
    """Hand the parent one jailed child per validation request (its pipes and a pidfd), and report how each ended.

    The parent then drives the child call by call over those pipes, exactly as it drives a training worker; the
    zygote never relays a byte of the child's, so nothing the child writes can pass for the zygote's word. What
    every child shares is set up here once (`jail.prepare_zygote`); each child adds its own namespaces while it
    waits as the spare (nursery.py), and its own Landlock domain and seccomp filter once its code arrives."""
    import socket  # the zygote's own modules, loaded after the limits (worker start imports only what the mode needs)

    from text2reward.sandbox.jail import JailError, enter_child_namespaces, prepare_zygote
    from text2reward.sandbox.nursery import Nursery

    proto_in, proto_out = _claim_stdio()
    handoff = socket.socket(fileno=int(config["handoff_fd"]))
    _import_trusted("", [], {})
    devnull = os.open(os.devnull, os.O_RDWR)  # the children's fds 0-2: the zygote's Landlock rules forbid opening it later
    try:
        shared = prepare_zygote(config["jail"])
    except JailError as exc:
        _send(proto_out, {"forked": False, "detail": f"the sandbox could not be set up: {exc}"})
        return 1

    def spare_main(control: int, ready: int, calls_in: int, replies_out: int) -> None:
        """In a spare: shed every other fd, enter its own namespaces, say so, wait for its request, serve it."""
        _tie_to_parent()
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        keep = sorted((control, ready, calls_in, replies_out))
        for low, high in zip([2, *keep], [*keep, 1 << 16]):
            os.closerange(low + 1, high)
        try:
            entered = enter_child_namespaces(config["jail"])
        except JailError:
            os._exit(3)  # the ready pipe closes without its byte: the zygote never hands this child over
        os.write(ready, b"1")
        os.close(ready)
        try:
            request = pickle.loads(read_frame(control))
        except ChannelClosed:  # the zygote discarded this spare
            os._exit(0)
        os.close(control)
        modules = _import_trusted(request["code"], request["modules"], request.get("sources") or {})  # the zygote's already: no cost
        _apply_limits(request)
        child_config = dict(request, jail=config["jail"], shared={**shared, **entered})
        _serve_calls(FrameReader(calls_in), replies_out, request, modules, child_config)

    nursery = Nursery(spare_main, lambda message: _send(proto_out, message), handoff)
    return nursery.serve(proto_in, lambda request: _import_trusted(request["code"], request["modules"], request.get("sources") or {}))


def _die_with(parent: int) -> None:
    """A SIGKILL when the process that started this worker ends (its spares, and the reward's process forked into a pid
    namespace of its own, die with it in turn: namespaces.py, `_tie_to_parent`); leave at once if it has ended already."""
    import ctypes  # loaded by the jail's layers anyway

    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)


def _tie_to_parent() -> None:
    """Die with the zygote (a SIGKILL when it ends), and leave at once if it ended before the tie was made."""
    import ctypes  # a zygote's spares only (loaded there already, by the jail)

    parent = os.getppid()
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)


# --- lock-down ---


def _apply_limits(config: dict) -> None:
    """Memory, CPU and file-size limits; CPU soft == hard, so the kernel kills rather than warns."""
    memory = int(config["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    if config.get("cpu_seconds"):
        seconds = int(config["cpu_seconds"])
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing


def _claim_stdio() -> tuple[int, int]:
    """Keep private copies of the protocol pipes and point fds 0 and 1 at /dev/null."""
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    return proto_in, proto_out


def _import_trusted(code: str, view_modules: list[str], sources: dict[str, str]) -> dict:
    """Import numpy, math, the views' modules (those the jail does not show run from `sources`, sent by the parent:
    runner.view_sources), and the allowed modules the code names; return the latter."""
    import ast  # the trusted imports: after the limits, before the lock-down (the module docstring's step 2)
    import importlib
    import types
    import warnings

    import numpy

    import policies.reward_program  # noqa: F401 - normalise_output, imported before lock-down
    import text2reward.sandbox.wire  # noqa: F401 - the call protocol: in a zygote, once for all its children (~6 ms)
    from text2reward.sandbox.static import ALLOWED_MODULES, EAGER_MODULES

    for name, source in sources.items():
        module = sys.modules[name] = types.ModuleType(name)  # registered first: dataclasses look their module up
        exec(compile(source, f"<view module {name}>", "exec"), module.__dict__)
    for name in view_modules:
        importlib.import_module(name)
    wanted = set(EAGER_MODULES)  # the rest of the allow-list (scipy) only when the code names it
    try:
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Import):
                wanted.update(a.name for a in node.names if a.name in ALLOWED_MODULES)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                wanted.update(name for name in names if name in ALLOWED_MODULES)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        pass  # compile() reports it
    warnings.simplefilter("ignore")
    numpy.seterr(all="ignore")
    return {name: importlib.import_module(name) for name in sorted(wanted)}


def _load(hello: dict, modules: dict, config: dict) -> Callable[[Any, Any], tuple[float, dict]] | dict[str, str]:
    """Compile, lock down, run the module body: the reward caller, or an error reply.

    The caller returns (total, components) and leaves the component check to the reply encoder, which runs it
    whenever the names change: unchanged names were checked already."""
    from policies.reward_program import normalise_output  # numpy and sim_envs: after the limits (_import_trusted loads it)

    code = hello["code"]
    try:
        compiled = compile(code, FILENAME, "exec")
    except SyntaxError as exc:
        return {"error": f"line {exc.lineno}: SyntaxError: {exc.msg}", "kind": "load"}
    except (ValueError, MemoryError, RecursionError) as exc:
        return {"error": f"the code cannot be compiled: {type(exc).__name__}: {exc}", "kind": "load"}
    namespace = _namespace(modules)
    roots = frozenset({name.split(".")[0] for name in hello["modules"]} | {"numpy", "sim_envs"})
    _lock_down(config)
    _install_audit_hook(compiled, roots)
    try:
        exec(compiled, namespace)
        entry = namespace.get("compute_dense_reward")
        if not callable(entry):
            raise NameError("the code defines no compute_dense_reward(self, action); add it at module level")
    except BaseException as exc:  # the module body is untrusted: every failure is feedback
        return {"error": format_error(exc, code), "kind": "load"}

    def call(view: Any, action: Any) -> tuple[float, dict]:
        return normalise_output(entry(view, action))

    return call


SAFE_BUILTINS = (
    "abs all any bool bytes callable chr complex dict divmod enumerate filter float format frozenset hasattr hash "
    "int isinstance issubclass iter len list map max min next ord pow print range repr reversed round set slice "
    "sorted str sum tuple zip ArithmeticError AssertionError AttributeError Exception FloatingPointError IndexError "
    "KeyError LookupError NameError NotImplementedError OverflowError RuntimeError StopIteration TypeError "
    "ValueError ZeroDivisionError Ellipsis NotImplemented False True None"
).split()


def _namespace(modules: dict) -> dict:
    """The reward module's globals, built by the same function as in-process rewards' (the pre-imported
    `np` and `math`), with safe builtins and an `__import__` for loaded allowed modules only."""
    from policies.reward_program import program_namespace  # numpy and sim_envs: after the limits (_import_trusted loads them)
    from text2reward.sandbox.static import ALLOWED_TEXT

    roots = {name.partition(".")[0] for name in modules} - {"math"}

    def guarded_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        # numpy's C code imports its own loaded helpers (numpy._core._methods for .sum()) through
        # the calling frame's __import__, so loaded submodules of an allowed package pass too.
        known = name in modules or (fromlist and all(f"{name}.{item}" in modules for item in fromlist))
        known = known or (name.partition(".")[0] in roots and name in sys.modules)
        if level or not known:
            raise ImportError(f"import of '{name}' is not allowed in reward code; import only {ALLOWED_TEXT}")
        if fromlist:
            return modules[name] if name in modules else sys.modules[name]
        return sys.modules[name.partition(".")[0]]

    safe = {name: getattr(builtins, name) for name in SAFE_BUILTINS}
    safe["__import__"] = guarded_import
    return program_namespace("reward", builtins=safe)


def _lock_down(config: dict) -> dict:
    """After the last trusted import: the OS jail, no new processes, few files, a silent stderr.

    Returns the layers the jail put in place (for the self-test's report)."""
    from text2reward.sandbox.jail import lock_down_os  # the OS layers' libraries: after the limits, in every mode

    shared = config.get("shared")
    # opened now: the jail may hide /dev/null's path (a zygote's child has fd 2 on it already: the zygote's Landlock
    # rules forbid opening it for writing)
    devnull = os.open(os.devnull, os.O_WRONLY) if shared is None else None
    # last: its seccomp filter forbids changing limits; it sets RLIMIT_NPROC 0 (no fork, no thread) and few open files
    layers = lock_down_os(config["jail"], open_files=int(config["open_files"]), shared=shared)
    spawner = sys.modules.get("_posixsubprocess")
    if spawner is not None and hasattr(spawner, "fork_exec"):
        del spawner.fork_exec  # lint: a clear error instead of EPERM from seccomp
    if devnull is not None:
        os.dup2(devnull, 2)  # a flood of writes to stderr costs the child's own time, never the parent's
        os.close(devnull)
    return layers


HARMLESS_EVENTS = frozenset(
    {
        "object.__getattr__",  # reading special attributes: format_error walks traceback frames
        "builtins.id",  # numpy's array printing keys its recursion guard on id()
    }
)


def _install_audit_hook(reward_module: CodeType, pickle_roots: frozenset) -> None:
    """Deny every audited event but the harmless ones, unpickling the views, and the reward module's exec."""
    from text2reward.sandbox.static import ALLOWED_TEXT  # loaded after the limits, by _import_trusted

    pending = [reward_module]

    def audit(event: str, args: tuple) -> None:
        if event in HARMLESS_EVENTS:
            return
        if event == "pickle.find_class" and str(args[0]).partition(".")[0] in pickle_roots:
            return
        if event == "exec" and pending and args[0] is pending[0]:
            pending.clear()
            return
        raise PermissionError(
            f"the sandbox blocked '{event}': reward code may only compute on `self` and `action` "
            f"(no files, processes, network, imports beyond {ALLOWED_TEXT}, or introspection)"
        )

    sys.addaudithook(audit)


# --- replies ---


def _send(fd: int, message: object, newline: bool = False) -> None:
    if newline:  # the self-test's one line of JSON, read by subprocess.run
        write_all(fd, json.dumps(message).encode() + b"\n")
        return
    write_all(fd, frame(json.dumps(message).encode()))


def _check_components(components: dict) -> None:
    from sim_envs.errors import RewardProgramError  # sim_envs loads numpy and the views: after the limits (_import_trusted)

    if len(components) > MAX_COMPONENTS:
        raise RewardProgramError(f"the reward returns {len(components)} components; return at most {MAX_COMPONENTS} named terms")
    for name in components:
        if not is_clean_name(name):
            raise RewardProgramError(name_problem(name) if isinstance(name, str) else f"component name {name!r} is not a string")


def _kind(exc: BaseException) -> str:
    """'output' when the return value broke the contract, 'exception' when the code raised."""
    from sim_envs.errors import RewardProgramError  # sim_envs loads numpy and the views: after the limits (_import_trusted)

    return "output" if type(exc) is RewardProgramError else "exception"


def format_error(exc: BaseException, code: str) -> str:
    """The traceback trimmed to frames inside the reward code, plus the exception line.

    This text goes back to the model as feedback, so the sandbox's own frames are noise."""
    lines = code.splitlines()
    frames: list[str] = []
    tb = exc.__traceback__
    while tb is not None:
        frame_code = tb.tb_frame.f_code
        if frame_code.co_filename == FILENAME:
            text = f"  line {tb.tb_lineno}, in {frame_code.co_name}"
            if 0 < tb.tb_lineno <= len(lines):
                text += "\n    " + lines[tb.tb_lineno - 1].strip()[:200]
            frames.append(text)
        tb = tb.tb_next
    try:
        detail = str(exc)
    except BaseException:  # a broken __str__ is still an error to report
        detail = "(the exception message could not be printed)"
    if len(detail) > MAX_MESSAGE_CHARS:
        detail = detail[:MAX_MESSAGE_CHARS] + f"... ({len(detail):,} characters)"
    out = []
    if frames:
        out.append("Traceback (most recent call last, reward code only):")
        if len(frames) > MAX_TRACE_FRAMES:
            out.append(f"  ... {len(frames) - MAX_TRACE_FRAMES} earlier frames ...")
        out.extend(frames[-MAX_TRACE_FRAMES:])
    out.append(f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__)
    text = "\n".join(out)
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS - 40] + f"... ({len(text):,} characters)"  # untrusted.ERROR_REPLY_BYTES


if __name__ == "__main__":
    try:
        status = main(sys.argv)
    except BaseException as exc:  # report and leave; never run interpreter shutdown under the hook
        try:
            sys.stderr.write(f"sandbox worker failed: {type(exc).__name__}: {exc}\n")
            sys.stderr.flush()
        except BaseException:
            pass
        os._exit(2)
    try:
        sys.stderr.flush()
    finally:
        os._exit(status or 0)
