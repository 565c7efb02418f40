"""A battery of hostile and broken reward programs against every layer of the sandbox.

Each program must be turned away by the static pass *and*, run straight through the runtime
(`run_reward`, no static pass) under each jail (bubblewrap, and Landlock + seccomp as where
bubblewrap is missing), stopped with a reason. Most are first stopped by the lint layer (audit
hook, restricted builtins), whose messages the model can act on; test_sandbox_jail.py switches
that layer off and attacks the jail alone. Sentinels prove the host untouched: a world-writable
directory the programs write into stays empty, a world-readable secret they read never appears in
any report, and a TCP listener on 127.0.0.1 they dial accepts no connection.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from sim_envs import codec, get_task
from text2reward.sandbox import Limits, collect_states, run_reward, static_check, validate
from text2reward.sandbox.isolation import bubblewrap_argv, check

MECHANISMS = [
    pytest.param(m, marks=pytest.mark.skipif(isinstance(check(m), str), reason=f"{m} unavailable here: {check(m)}"))
    for m in ("bubblewrap", "landlock")
]

# Reaches `os` at run time without an import statement: the classic escape through a class that
# holds a module whose globals hold the real builtins.
FIND_OS = '''
def find_os():
    for cls in ().__class__.__bases__[0].__subclasses__():
        if cls.__name__ == "catch_warnings":
            return cls()._module.__builtins__["__import__"]("os")
    raise LookupError("no route")
'''


@dataclass(frozen=True)
class Hostile:
    name: str
    code: str
    static: bool = True
    """True when the static pass must reject it (some broken programs are plain Python)."""
    runtime: bool = True
    """True when a run must end with an error; False for programs that only harm their own copy."""
    slow: bool = False

    @property
    def reason(self) -> str | tuple[str, ...]:
        """A phrase the runtime error must contain (or one of several): the layer that stopped it, in words."""
        return REASONS[self.name]


def reward(body: str, prelude: str = "import numpy as np\nimport math\n") -> str:
    lines = "\n".join("    " + line for line in body.strip("\n").splitlines())
    return f"{prelude}\ndef compute_dense_reward(self, action):\n{lines}\n"


PROGRAMS = [
    Hostile("import_os", reward('os.system("touch TARGET/os_system")\nreturn 0.0', "import os\n")),
    Hostile("import_subprocess", reward('subprocess.run(["touch", "TARGET/subprocess"])\nreturn 0.0', "import subprocess\n")),
    Hostile("import_socket", reward('s = socket.create_connection(("127.0.0.1", PORT), timeout=1)\nreturn 0.0', "import socket\n")),
    Hostile("import_ctypes", reward('ctypes.CDLL(None).system(b"touch TARGET/ctypes")\nreturn 0.0', "import ctypes\n")),
    Hostile("import_sys_modules", reward('sys.modules["os"].system("touch TARGET/sysmod")\nreturn 0.0', "import sys\n")),
    Hostile("from_numpy_f2py", reward('f2py.os.system("touch TARGET/f2py_from")\nreturn 0.0', "from numpy import f2py\n")),
    Hostile("dunder_import", reward('__import__("os").system("touch TARGET/dunder_import")\nreturn 0.0')),
    Hostile("builtins_dict", reward('__builtins__["__import__"]("os").system("touch TARGET/builtins")\nreturn 0.0')),
    Hostile("subclasses_os_system", reward('find_os().system("touch TARGET/subclasses")\nreturn 0.0', "import numpy as np\n" + FIND_OS)),
    Hostile("subclasses_os_open_write", reward(
        'os = find_os()\nfd = os.open("TARGET/os_open", os.O_WRONLY | os.O_CREAT)\nos.write(fd, b"x")\nreturn 0.0',
        "import numpy as np\n" + FIND_OS)),
    Hostile("subclasses_fork_bomb", reward('os = find_os()\nwhile True:\n    os.fork()', "import numpy as np\n" + FIND_OS)),
    Hostile("subclasses_fork_exec", reward(
        'os = find_os()\n'
        'sub = os.sys.modules["_posixsubprocess"]\n'
        'sub.fork_exec(["/bin/sh"], [b"/bin/sh"], True, (), None, None, -1, -1, -1, -1, -1, -1, -1, -1, False, False, None, None, None, -1, None, False)\n'
        'return 0.0', "import numpy as np\n" + FIND_OS)),
    Hostile("subclasses_exec_shell", reward('find_os().execv("/bin/sh", ["sh", "-c", "touch TARGET/execv"])', "import numpy as np\n" + FIND_OS)),
    Hostile("subclasses_kill_parent", reward('os = find_os()\nos.kill(os.getppid(), 9)\nreturn 0.0', "import numpy as np\n" + FIND_OS)),
    Hostile("subclasses_os_exit", reward('find_os()._exit(0)', "import numpy as np\n" + FIND_OS)),
    Hostile("subclasses_read_secret", reward('return 0.0, {find_os().popen("cat SECRET").read(): 1.0}', "import numpy as np\n" + FIND_OS)),
    Hostile("subclasses_eval", reward('b = find_os().sys.modules["builtins"]\nreturn b.eval("1 + 1")', "import numpy as np\n" + FIND_OS)),
    Hostile("subclasses_gc_objects", reward('gc = find_os().sys.modules["gc"]\nreturn float(len(gc.get_objects()))', "import numpy as np\n" + FIND_OS)),
    Hostile("subclasses_setrlimit", reward(
        'r = find_os().sys.modules["resource"]\nr.setrlimit(r.RLIMIT_AS, (-1, -1))\nreturn 0.0', "import numpy as np\n" + FIND_OS)),
    Hostile("subclasses_signal_ignore_loop", reward(
        's = find_os().sys.modules["signal"]\ns.signal(s.SIGTERM, s.SIG_IGN)\ns.signal(s.SIGXCPU, s.SIG_IGN)\nwhile True:\n    pass',
        "import numpy as np\n" + FIND_OS), slow=True),
    Hostile("match_class_dunder", reward('match ():\n    case tuple(__class__=t):\n        return 0.0\nreturn 1.0'), runtime=False),
    Hostile("getattr_f2py", reward('getattr(np, "f2py").os.system("touch TARGET/getattr")\nreturn 0.0')),
    Hostile("vars_numpy", reward('vars(np)["f2py"].os.system("touch TARGET/vars")\nreturn 0.0')),
    Hostile("numpy_f2py_os", reward('np.f2py.os.system("touch TARGET/np_f2py")\nreturn 0.0')),
    Hostile("numpy_ctypeslib", reward('np.ctypeslib.load_library("libc.so.6", "/lib/x86_64-linux-gnu")\nreturn 0.0')),
    Hostile("numpy_save", reward('np.save("TARGET/saved.npy", np.zeros(3))\nreturn 0.0')),
    Hostile("numpy_tofile", reward('np.zeros(3).tofile("TARGET/tofile.bin")\nreturn 0.0')),
    Hostile("numpy_load_secret", reward('data = np.fromfile("SECRET", dtype=np.uint8)\nraise ValueError(bytes(data).decode())')),
    Hostile("numpy_loadtxt_secret", reward('return 0.0, {str(np.loadtxt("SECRET", dtype=str)): 1.0}')),
    Hostile("open_read_secret", reward('raise ValueError(open("SECRET").read())')),
    Hostile("open_write", reward('open("TARGET/opened.txt", "w").write("pwned")\nreturn 0.0')),
    Hostile("exec_string", reward('exec("import os")\nreturn 0.0')),
    Hostile("eval_string", reward('return eval("1.0")')),
    Hostile("exit_call", reward('exit(0)')),
    Hostile("class_escape", reward('return 0.0', "import numpy as np\nclass Evil:\n    def __del__(self):\n        pass\n")),
    Hostile("format_leak", reward('return 0.0, {"{0.__class__.__init__.__globals__}".format(self): 1.0}')),
    Hostile("mutate_view_array", reward('self.robot.ee_position[:] = 0.0\nreturn 0.0')),
    Hostile("mutate_view_flags", reward('self.robot.ee_position.flags.writeable = True\nself.robot.ee_position[:] = 9.0\nreturn float(self.robot.ee_position[0])')),
    # Harmless at run time (state stays in the worker); statically refused, and `validate`'s
    # determinism check catches the programs whose output drifts with it.
    Hostile("global_state", reward('global calls\ncalls = 1\nreturn 0.0', "import numpy as np\ncalls = 0\n"), runtime=False),
    Hostile("infinite_loop", reward('while True:\n    pass'), static=False, slow=True),
    Hostile("module_level_loop", "import numpy as np\nwhile True:\n    pass\ndef compute_dense_reward(self, action):\n    return 0.0\n", static=False, slow=True),
    Hostile("huge_allocation", reward('x = np.ones((1 << 40,))\nreturn float(x[0])'), static=False),
    Hostile("huge_list", reward('x = [0.0] * (1 << 34)\nreturn x[0]'), static=False),
    Hostile("deep_recursion", reward('return f(0)', "import numpy as np\ndef f(n):\n    return f(n + 1)\n"), static=False),
    Hostile("exception_storm", reward('for i in range(100000):\n    try:\n        raise ValueError(i)\n    except ValueError:\n        pass\nraise ValueError("x" * 10_000_000)'), static=False),
    Hostile("raise_system_exit", reward('raise SystemExit(3)'), static=False),
    Hostile("subclasses_sys_exit", reward('find_os().sys.exit(3)', "import numpy as np\n" + FIND_OS)),
    Hostile("subclasses_socket", reward(
        'b = find_os().sys.modules["builtins"]\nb.__import__("socket").create_connection(("127.0.0.1", PORT), timeout=1)\nreturn 0.0',
        "import numpy as np\n" + FIND_OS)),
    Hostile("returns_string", reward('return "1.0"'), static=False),
    Hostile("returns_none", reward('return None'), static=False),
    Hostile("returns_list", reward('return [1.0, 2.0]'), static=False),
    Hostile("returns_string_component", reward('return 1.0, {"reach": "far"}'), static=False),
    Hostile("huge_output", reward('return 0.0, {"c" + str(i): float(i) for i in range(100000)}'), static=False),
    Hostile("huge_component_name", reward('return 0.0, {"x" * 1000000: 1.0}'), static=False),
    Hostile("print_storm", reward('while True:\n    print("x" * 100000)'), static=False, slow=True),
    Hostile("parser_bomb", "x = " + "-" * 90000 + "1\ndef compute_dense_reward(self, action):\n    return 0.0\n"),
    Hostile("nesting_bomb", "x = 1" + " + 1" * 20000 + "\ndef compute_dense_reward(self, action):\n    return 0.0\n"),
    Hostile("missing_entry_point", "import numpy as np\ndef reward(self, action):\n    return 0.0\n"),
    Hostile("syntax_error", "def compute_dense_reward(self, action)\n    return 0.0\n"),
]


REASONS = {
    "import_os": "import of 'os' is not allowed",
    "import_subprocess": "import of 'subprocess' is not allowed",
    "import_socket": "import of 'socket' is not allowed",
    "import_ctypes": "import of 'ctypes' is not allowed",
    "import_sys_modules": "import of 'sys' is not allowed",
    "from_numpy_f2py": ("blocked 'import'", "blocked 'os.system'"),
    "dunder_import": "import of 'os' is not allowed",
    "builtins_dict": "import of 'os' is not allowed",
    "subclasses_os_system": "blocked 'os.system'",
    "subclasses_os_open_write": "blocked 'open'",
    "subclasses_fork_bomb": "blocked 'os.fork'",
    "subclasses_fork_exec": "has no attribute 'fork_exec'",
    "subclasses_exec_shell": "blocked 'os.exec'",
    "subclasses_kill_parent": "blocked 'os.kill'",
    "subclasses_os_exit": "exited with code 0 before answering",
    "subclasses_read_secret": "blocked 'open'",
    "subclasses_eval": "blocked 'compile'",
    "subclasses_gc_objects": "blocked 'gc.get_objects'",
    "subclasses_setrlimit": "blocked 'resource.setrlimit'",
    "subclasses_signal_ignore_loop": "ms of CPU time, over the 50 ms limit",  # the parent reads its CPU per call and kills it
    "match_class_dunder": "",
    "getattr_f2py": "name 'getattr' is not defined",
    "vars_numpy": "name 'vars' is not defined",
    # numpy loads these lazily: blocked at the import, or (once scipy has loaded them into the
    # long-lived zygote) at the call they reach
    "numpy_f2py_os": ("blocked 'import'", "blocked 'os.system'"),
    "numpy_ctypeslib": ("blocked 'import'", "blocked 'ctypes.dlopen'"),
    "numpy_save": "blocked 'open'",
    # numpy swallows the hook's PermissionError and reports SystemError; the file is still never opened
    "numpy_tofile": "SystemError",
    "numpy_load_secret": "SystemError",
    "numpy_loadtxt_secret": "blocked 'import'",
    "open_read_secret": "name 'open' is not defined",
    "open_write": "name 'open' is not defined",
    "exec_string": "name 'exec' is not defined",
    "eval_string": "name 'eval' is not defined",
    "exit_call": "name 'exit' is not defined",
    "class_escape": "__build_class__ not found",
    "format_leak": "use short names",
    "mutate_view_array": "assignment destination is read-only",
    "mutate_view_flags": "cannot set WRITEABLE flag",
    "global_state": "",
    "infinite_loop": "ms of CPU time, over the 50 ms limit",
    # the module body, judged before it says ready: by the parent's reading or by the kernel's RLIMIT_CPU, both at 1 s
    "module_level_loop": ("ms of CPU time, over the 1000 ms limit", "went over its CPU-time (1 s)"),
    "huge_allocation": "MemoryError",
    "huge_list": "MemoryError",
    "deep_recursion": "RecursionError",
    "exception_storm": ("10,000,000 characters", "ms of CPU time, over the 50 ms limit"),  # 100k raises cost ~30-60 ms
    "raise_system_exit": "name 'SystemExit' is not defined",
    "subclasses_sys_exit": "SystemExit: 3",
    "subclasses_socket": "blocked 'import'",
    "returns_string": "reward must be a number, got str",
    "returns_none": "reward must be a number, got NoneType",
    "returns_list": "reward must be a number, got list",
    "returns_string_component": "component 'reach' must be a number",
    "huge_output": ("return at most 64 named terms", "ms of CPU time, over the 50 ms limit"),  # building it costs ~60 ms
    "huge_component_name": "use short names",
    "print_storm": "ms of CPU time, over the 50 ms limit",
    "parser_bomb": "cannot be compiled",
    "nesting_bomb": "cannot be compiled",
    "missing_entry_point": "defines no compute_dense_reward",
    "syntax_error": "SyntaxError",
}


@pytest.fixture(scope="module")
def sentinel():
    """A world-writable target dir, a world-readable secret, and a listener on 127.0.0.1."""
    base = Path(tempfile.mkdtemp(prefix="t2r-sentinel-", dir="/var/tmp" if os.access("/var/tmp", os.W_OK) else None))
    base.chmod(0o755)
    target = base / "target"
    target.mkdir()
    target.chmod(0o777)  # only the sandbox, not file permissions, may keep writes out
    token = uuid.uuid4().hex
    secret = base / "secret.txt"
    secret.write_text(token)
    secret.chmod(0o644)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    yield {"target": target, "secret": secret, "token": token, "listener": listener, "port": listener.getsockname()[1]}
    listener.close()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def samples():
    return collect_states(get_task("metaworld/reach-v3"), n_random=3, n_scripted=0, seed=0)


def fill(code: str, sentinel: dict) -> str:
    return code.replace("TARGET", str(sentinel["target"])).replace("SECRET", str(sentinel["secret"])).replace("PORT", str(sentinel["port"]))


def fast(mechanism: str) -> Limits:
    """A low CPU rlimit; the wall backstops stay at their defaults: hangs are stopped per call, on the kernel's clocks,
    and a short wall limit would only fail programs on a loaded machine."""
    return Limits(memory_mb=1024, cpu_seconds=1, isolation=mechanism)


def test_battery_is_large_enough():
    assert len(PROGRAMS) >= 30
    assert len({p.name for p in PROGRAMS}) == len(PROGRAMS)
    assert set(REASONS) == {p.name for p in PROGRAMS}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_static_pass_verdict(program, sentinel):
    problems = static_check(fill(program.code, sentinel))
    if program.static:
        assert problems, f"{program.name} passed the static check"
        assert all(p.startswith("line ") or "compute_dense_reward" in p or "nested too deeply" in p for p in problems)
    else:
        assert problems == []


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_runtime_layer_alone_stops_it(program, mechanism, sentinel, samples):
    before = [view.robot.ee_position.copy() for view, _ in samples]
    result = run_reward(fill(program.code, sentinel), samples, fast(mechanism))
    if program.runtime:
        assert result.error, f"{program.name} ran to completion"
        reasons = program.reason if isinstance(program.reason, tuple) else (program.reason,)
        assert any(reason in result.error for reason in reasons), result.error
        assert sentinel["token"] not in result.error
    else:
        assert result.ok
    for _total, components in result.outputs:
        assert all(sentinel["token"] not in name for name in components)
    assert all(np.array_equal(view.robot.ee_position, old) for (view, _), old in zip(samples, before))
    assert list(sentinel["target"].iterdir()) == []


JAIL_PROBE = """
import socket, sys
target, port = sys.argv[1], int(sys.argv[2])
try:
    open(target + "/from_jail", "w").write("x")
    print("wrote")
except OSError as exc:
    print("write refused:", exc.strerror)
try:
    socket.create_connection(("127.0.0.1", port), timeout=1)
    print("connected")
except OSError as exc:
    print("connect refused:", exc.strerror)
"""


@pytest.mark.skipif(isinstance(check("bubblewrap"), str), reason="bubblewrap is not installed or does not work here")
def test_bubblewrap_jail_alone_blocks_writes_and_network(sentinel):
    """bwrap by itself, with no audit hook, seccomp or Landlock: plain Python inside it cannot see the
    host's folders, write, or dial out."""
    command = bubblewrap_argv() + [sys.executable, "-c", JAIL_PROBE, str(sentinel["target"]), str(sentinel["port"])]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=True)
    assert "write refused: No such file or directory" in done.stdout
    assert "connect refused" in done.stdout and "connected" not in done.stdout.replace("connect refused", "")


@pytest.mark.parametrize("program", [p for p in PROGRAMS if not p.slow], ids=lambda p: p.name)
def test_validate_reports_a_reason(program, sentinel, samples):
    report = validate(fill(program.code, sentinel), get_task("metaworld/reach-v3"), samples, Limits(cpu_seconds=2))
    assert not report.ok
    assert report.errors and all(error.strip() for error in report.errors)
    failed = [name for name, check in report.checks.items() if check["ok"] is False]
    assert failed and report.errors[0] in report.checks[failed[0]]["detail"] or report.errors[0].startswith("line ")
    assert sentinel["token"] not in str(codec.write(report))


def test_host_untouched(sentinel):
    """Runs last in this file: nothing was written, the secret is intact, nobody dialled the listener."""
    assert list(sentinel["target"].iterdir()) == []
    assert sentinel["secret"].read_text() == sentinel["token"]
    assert stat.S_IMODE(sentinel["secret"].stat().st_mode) == 0o644
    sentinel["listener"].settimeout(0.2)
    with pytest.raises(socket.timeout):
        sentinel["listener"].accept()


# A compromised training worker writes its own frames on the reply pipe (os.write is not audited).
FORGE = "import numpy as np\n" + FIND_OS + '''
calls = []


def forge(data):
    os = find_os()
    for fd in range(3, 16):
        try:
            os.write(fd, data)
        except Exception:
            pass


def wait():
    """Sleep past the parent's judgement, so the forged frame is the only reply it reads (a second reply is refused
    as one no request asked for: test_reward_names)."""
    for cls in ().__class__.__bases__[0].__subclasses__():
        if cls.__name__ == "catch_warnings":
            cls()._module.__builtins__["__import__"]("time").sleep(30)


def compute_dense_reward(self, action):
    calls.append(1)
    if len(calls) == FORGE_AT:
        forge(FRAME)
        wait()
    return 0.0
'''
FORGED = [
    # a packed reply before any JSON reply named the components: nothing to pair its numbers with
    ("packed_before_names", 1, b"\x00\x00\x00\x11R" + b"\x00" * 16, "malformed reply"),
    # a packed reply with one number too many for the names already checked
    ("packed_wrong_size", 2, b"\x00\x00\x00\x19R" + b"\x00" * 24, "malformed reply"),
    ("huge_length", 2, b"\xff\xff\xff\xff", "exceeds the 65,536-byte limit"),
]


@pytest.mark.parametrize("name, forge_at, frame, reason", FORGED, ids=[f[0] for f in FORGED])
def test_forged_training_replies_are_refused(name, forge_at, frame, reason, samples):
    from sim_envs.errors import RewardProgramError
    from text2reward.sandbox import SandboxedReward

    code = FORGE.replace("FORGE_AT", str(forge_at)).replace("FRAME", repr(frame))
    view, action = samples[0]
    sandboxed = SandboxedReward(code, name, Limits(isolation="landlock"))
    pid = sandboxed._start(view).pid  # started ahead of the first call, to watch it end
    for _ in range(forge_at - 1):
        assert sandboxed(view, action, 0.0, False) == (0.0, {"reward": 0.0})
    with pytest.raises(RewardProgramError, match=reason):
        sandboxed(view, action, 0.0, False)
    assert sandboxed._worker is None and not Path(f"/proc/{pid}").exists()  # killed, not trusted further
    sandboxed.close()
