"""The operating-system jail, attacked with the lint layers switched off, on every path model code takes.

Each program below first does what a real attacker did: reach the real `os` and builtins through
public routes and switch the worker's audit hook off (it reads a module global on every event).
From then on only the OS jail stands between the code and the host, so every attack here tests
the jail alone: with bubblewrap, and with bubblewrap hidden (Landlock + seccomp + namespaces).

Sentinels, checked by the test (never by the program's word): a world-writable folder that must
stay empty, world-readable secrets under /tmp, /var/tmp and the home folder that must appear in no
output or stored file, a loopback listener that must accept no connection, a sibling process that
must stay alive, and a secret in the parent's environment.

Paths: `run_reward` (validation's runtime), `validate` (the static pass, then the same), a
`SandboxedReward` in SB3 training (`policies.train`), `t2r train --reward FILE.py` and a `t2r run`
training worker (`python -m text2reward.training.job`).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from attack_programs import CPU_BURN
from attack_programs import LINT_OFF as BASE_LINT_OFF
from short_training import SHORT_HP

from sim_envs import codec, get_task
from sim_envs.errors import RewardProgramError
from text2reward.sandbox import Limits, SandboxedReward, collect_states, run_reward, validate
from text2reward.sandbox.isolation import check
from text2reward.training.job import read_job

MECHANISMS = [
    pytest.param(m, marks=pytest.mark.skipif(isinstance(check(m), str), reason=f"{m} unavailable here: {check(m)}"))
    for m in ("bubblewrap", "landlock")
]
OTHER = {"bubblewrap": "landlock", "landlock": "bubblewrap"}

LINT_OFF = BASE_LINT_OFF + '''

def attempt(results, name, action):
    try:
        results[name] = "SUCCEEDED " + str(action())[:300]
    except Exception as exc:
        results[name] = "blocked " + exc.__class__.__name__
'''


def program(body: str) -> str:
    lines = "\n".join("    " + line for line in body.strip("\n").splitlines())
    return f"{LINT_OFF}\n\ndef compute_dense_reward(self, action):\n    os, real = lint_off()\n    results = {{}}\n{lines}\n"


ATTACKS = {
    # files: secrets under /tmp, /var/tmp and the home folder; the working directory; writes; nodes
    "read_secrets": 'for path in SECRETS:\n    attempt(results, path, lambda: real.open(path).read())\nraise ValueError(repr(results))',
    # listing may show the bound package folders, never the checkout's own files
    "list_working_dir": (
        'try:\n    results["cwd"] = str(os.listdir(CWD))\nexcept Exception as exc:\n    results["cwd"] = "blocked " + exc.__class__.__name__\n'
        'attempt(results, "file", lambda: real.open(CWD + "/pyproject.toml").read())\nraise ValueError(repr(results))'
    ),
    # the verdicts come first and the worker's own variable names last: the message is cut at 600 characters,
    # and a long environment (a long install path, variables a library set) must never push a verdict out of it
    "environment_and_proc": (
        'attempt(results, "environ", lambda: real.open("/proc/" + str(PARENT) + "/environ", "rb").read())\n'
        'attempt(results, "cmdline", lambda: real.open("/proc/" + str(PARENT) + "/cmdline", "rb").read())\n'
        'results["own_env"] = "SUCCEEDED: the parent secret is here" if any(TOKEN in v for v in os.environ.values()) else "blocked: no parent secret"\n'
        'results["own_env_names"] = str(sorted(os.environ))\n'
        'raise ValueError(repr(results))'
    ),
    "write_files": (
        'attempt(results, "open", lambda: real.open(TARGET + "/opened", "w").write("x"))\n'
        'attempt(results, "os_open", lambda: os.open(TARGET + "/os_open", os.O_CREAT | os.O_WRONLY))\n'
        'attempt(results, "mkdir", lambda: os.mkdir(TARGET + "/dir"))\n'
        'attempt(results, "shm", lambda: os.open("/dev/shm/t2r-" + TOKEN, os.O_CREAT | os.O_RDWR))\n'
        'raise ValueError(repr(results))'
    ),
    "mknod_mkfifo": (
        'attempt(results, "fifo", lambda: os.mkfifo(TARGET + "/fifo"))\n'
        'attempt(results, "node", lambda: os.mknod(TARGET + "/node"))\n'
        'attempt(results, "chmod", lambda: os.chmod(TARGET, 0o700))\n'
        'raise ValueError(repr(results))'
    ),
    "connect_loopback": (
        'sock = os.sys.modules["socket"] if "socket" in os.sys.modules else real.__import__("socket")\n'
        'attempt(results, "tcp", lambda: sock.create_connection(("127.0.0.1", PORT), timeout=1))\n'
        'attempt(results, "udp", lambda: sock.socket(sock.AF_INET, sock.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", PORT)))\n'
        'raise ValueError(repr(results))'
    ),
    "signal_sibling": (
        'attempt(results, "kill", lambda: os.kill(SIBLING, 9))\n'
        'attempt(results, "killpg", lambda: os.killpg(os.getpgid(SIBLING), 9))\n'
        'attempt(results, "parent", lambda: os.kill(PARENT, 9))\n'
        'raise ValueError(repr(results))'
    ),
    "sysv_shared_memory": (
        'ctypes = os.sys.modules["ctypes"]\n'
        'libc = ctypes.CDLL(None)\n'
        'segment = libc.shmget(KEY, 1 << 30, 0o1666)\n'
        'return 0.0, {"segment": float(segment)}'
    ),
    "processes": (
        'attempt(results, "fork", lambda: os.fork())\n'
        'attempt(results, "exec", lambda: os.execv("/bin/sh", ["sh", "-c", "touch " + TARGET + "/exec"]))\n'
        'attempt(results, "system", lambda: {0: "ran"}[os.system("touch " + TARGET + "/system")])\n'
        'attempt(results, "spawn", lambda: os.posix_spawn("/bin/sh", ["sh"], {}))\n'
        'raise ValueError(repr(results))'
    ),
    # the attack on the trusted path: find the live simulator through gc and move the goal onto the gripper
    "gc_reaches_no_simulator": (
        'gc = os.sys.modules["gc"] if "gc" in os.sys.modules else real.__import__("gc")\n'  # the jail may not have loaded it
        'mujoco, gym = os.sys.modules.get("mujoco"), os.sys.modules.get("gymnasium")\n'
        'kinds = tuple(k for k in (real.getattr(mujoco, "MjData", None), real.getattr(mujoco, "MjModel", None), real.getattr(gym, "Env", None)) if k)\n'
        'found = [o for o in gc.get_objects() if kinds and real.isinstance(o, kinds)]\n'
        'return 0.0, {"simulator_objects": float(len(found))}'
    ),
}


@pytest.fixture(scope="module")
def sentinel():
    """World-writable target, world-readable secrets (under /tmp, /var/tmp and home), a listener, a sibling."""
    token = uuid.uuid4().hex
    folders = [Path(tempfile.mkdtemp(prefix="t2r-jail-", dir=d)) for d in ("/tmp", "/var/tmp")]
    for folder in folders:
        folder.chmod(0o755)
    target = folders[0] / "target"
    target.mkdir()
    target.chmod(0o777)
    home_secret = Path.home() / f".t2r-test-secret-{uuid.uuid4().hex[:12]}"
    secrets = [folders[0] / "secret.txt", folders[1] / "secret.txt", home_secret]
    for secret in secrets:
        secret.write_text(token)
        secret.chmod(0o644)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.setblocking(False)
    sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield {"token": token, "target": target, "secrets": secrets, "listener": listener, "port": listener.getsockname()[1],
           "sibling": sibling}
    sibling.kill()
    sibling.wait()
    listener.close()
    home_secret.unlink(missing_ok=True)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


def fill(code: str, s: dict) -> str:
    return (code.replace("SECRETS", repr([str(p) for p in s["secrets"]])).replace("TARGET", repr(str(s["target"])))
            .replace("PORT", str(s["port"])).replace("SIBLING", str(s["sibling"].pid)).replace("PARENT", str(os.getpid()))
            .replace("CWD", repr(os.getcwd())).replace("TOKEN", repr(s["token"])).replace("KEY", str(0x7232 + os.getpid() % 1000)))


def assert_host_untouched(s: dict, *outputs: object) -> None:
    assert list(s["target"].iterdir()) == []
    assert not Path(f"/dev/shm/t2r-{s['token']}").exists()
    assert all(p.read_text() == s["token"] for p in s["secrets"])
    with pytest.raises(BlockingIOError):
        s["listener"].accept()
    assert s["sibling"].poll() is None, "the sibling process was killed"
    for output in outputs:
        assert s["token"] not in str(output)


@pytest.fixture(scope="module")
def samples():
    return collect_states(get_task("metaworld/reach-v3"), n_random=3, n_scripted=0, seed=0)


@pytest.fixture(autouse=True)
def parent_secret(monkeypatch, sentinel):
    monkeypatch.setenv("T2R_TEST_PARENT_SECRET", sentinel["token"])


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_jail_alone_contains_the_attack(attack, mechanism, sentinel, samples):
    code = fill(program(ATTACKS[attack]), sentinel)
    result = run_reward(code, samples, Limits(isolation=mechanism, cpu_seconds=2))
    assert "SUCCEEDED" not in str(result.error), result.error
    if result.ok:  # the programs that report through components
        for _, components in result.outputs:
            assert components.get("segment", -1.0) == -1.0  # no System V segment for anyone
            assert components.get("simulator_objects", 0.0) == 0.0  # the jail holds no simulator
    else:
        assert "blocked" in result.error, result.error  # the lint layer was really off: the OS said no
        assert "pyproject.toml" not in result.error and "README" not in result.error and "[project]" not in result.error
    assert_host_untouched(sentinel, result.error, result.outputs)


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_training_worker_contains_the_attack(attack, mechanism, sentinel, samples):
    """The same attacks in the long-lived worker that training calls every step."""
    view, action = samples[0]
    text = ""
    with SandboxedReward(fill(program(ATTACKS[attack]), sentinel), attack, Limits(isolation=mechanism)) as reward:
        try:
            total, components = reward(view, action, 0.0, False)
            assert components.get("segment", -1.0) == -1.0 and components.get("simulator_objects", 0.0) == 0.0
        except RewardProgramError as exc:
            text = str(exc)
            assert "blocked" in text and "SUCCEEDED" not in text, text
    assert "pyproject.toml" not in text
    assert_host_untouched(sentinel, text)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_t2r_validate_contains_an_attack(mechanism, sentinel, tmp_path):
    code = tmp_path / "attack.py"
    code.write_text(fill(program(ATTACKS["read_secrets"] + "\n"), sentinel))
    done = run_cli(["validate", "--task", "metaworld/reach-v3", "--code", str(code), "--json"], OTHER[mechanism], tmp_path)
    assert done.returncode == 1
    assert json.loads(done.stdout)["ok"] is False
    assert_host_untouched(sentinel, done.stdout, done.stderr)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_validate_contains_every_attack(mechanism, sentinel, samples):
    """Through `validate` (static pass first): refused, and the host untouched either way."""
    for attack in sorted(ATTACKS):
        report = validate(fill(program(ATTACKS[attack]), sentinel), get_task("metaworld/reach-v3"), samples, Limits(isolation=mechanism))
        assert not report.ok
        assert_host_untouched(sentinel, codec.write(report))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_candidates_share_no_ipc_and_cannot_signal_each_other(mechanism, sentinel, samples):
    """Two candidates alive at once (two training workers): neither reaches the other's System V
    segment nor its process, and a later candidate finds nothing the earlier one left."""
    key = 0x5151 + os.getpid() % 1000
    make = program(f'ctypes = os.sys.modules["ctypes"]\nreturn 0.0, {{"segment": float(ctypes.CDLL(None).shmget({key}, 4096, 0o1666))}}')
    pid_report = program('return 0.0, {"pid": float(os.getpid())}')
    limits = Limits(isolation=mechanism)
    view, action = samples[0]
    with SandboxedReward(make, "a", limits) as first, SandboxedReward(pid_report, "b", limits) as second:
        assert first(view, action, 0.0, False)[1]["segment"] == -1.0
        other = second._start(view).python_pid
        kill = program(f'attempt(results, "kill", lambda: os.kill({other}, 9))\nraise ValueError(repr(results))')
        with SandboxedReward(kill, "c", limits) as third, pytest.raises(RewardProgramError, match="blocked (PermissionError|ProcessLookupError)"):
            third(view, action, 0.0, False)
        assert second(view, action, 0.0, False)[0] == 0.0  # still alive and answering
    later = run_reward(make, samples, limits)
    assert all(c["segment"] == -1.0 for _, c in later.outputs)


KERNEL_REACH = """
fcntl, ctypes = real.__import__("fcntl"), real.__import__("ctypes")
libc = ctypes.CDLL(None, use_errno=True)


def checked(value):
    if value < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return value


r, w = os.pipe()
attempt(results, "fcntl_setown", lambda: fcntl.fcntl(r, fcntl.F_SETOWN, VICTIM))
attempt(results, "fcntl_setsig", lambda: fcntl.fcntl(r, 10, 9))
attempt(results, "fcntl_setown_ex", lambda: fcntl.fcntl(r, 15, bytes(8)))
attempt(results, "setpriority", lambda: os.setpriority(os.PRIO_PROCESS, VICTIM, 19))
attempt(results, "own_priority", lambda: os.setpriority(os.PRIO_PROCESS, 0, 19))
attempt(results, "sched_setaffinity", lambda: os.sched_setaffinity(VICTIM, {0}))
attempt(results, "sched_setscheduler", lambda: os.sched_setscheduler(VICTIM, os.SCHED_IDLE, os.sched_param(0)))
attempt(results, "inotify_init", lambda: checked(libc.inotify_init()))
attempt(results, "fanotify_init", lambda: checked(libc.fanotify_init(0, 0)))
attempt(results, "timer_create", lambda: checked(libc.timer_create(1, None, ctypes.byref(ctypes.c_void_p()))))
attempt(results, "alarm", lambda: os.sys.modules["signal"].setitimer(0, 1.0))
attempt(results, "pidfd_open", lambda: os.pidfd_open(VICTIM))
for path in SECRETS + [CWD + "/pyproject.toml"]:  # the checkout itself shows only the folders leading to its packages
    attempt(results, "stat " + path, lambda: os.stat(path).st_size)
attempt(results, "list_proc", lambda: os.listdir("/proc"))
through = {name: outcome for name, outcome in results.items() if not outcome.startswith("blocked")}
raise ValueError("pid " + str(os.getpid()) + "; tried " + str(len(results)) + "; through " + repr(through))
"""


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_candidate_reaches_no_sibling_through_the_kernel_and_sees_nothing_outside_its_view(mechanism, sentinel, samples):
    """What got through without bubblewrap: a signal the kernel sends for a file (fcntl's owner), a sibling's priority,
    scheduling and CPUs, timers, pidfds, and metadata (stat, inotify) outside the view. Each is tried against a live
    sibling candidate's worker, by host pid, and checked by the victim's own state (read by this process from /proc) and
    its answers, never by the program's word. The pid the program sees is that of a fresh pid namespace."""
    limits = Limits(isolation=mechanism)
    view, action = samples[0]
    victim_code = program('return float(self.robot.ee_position[0]), {"x": float(self.robot.ee_position[0])}')
    with SandboxedReward(victim_code, "victim", limits) as victim:
        expected = victim(view, action, 0.0, False)
        target = victim._worker.python_pid
        before = (os.getpriority(os.PRIO_PROCESS, target), os.sched_getaffinity(target), os.sched_getscheduler(target))
        attack = fill(program(KERNEL_REACH.replace("VICTIM", str(target))), sentinel)
        with SandboxedReward(attack, "attacker", limits) as attacker, pytest.raises(RewardProgramError) as caught:
            attacker(view, action, 0.0, False)
        results = caught.value.args[0]
        assert "; tried 17; through {}" in results, results  # every attempt blocked
        assert "ValueError: pid 1;" in results or "ValueError: pid 2;" in results  # its own pid namespace's, not a host pid
        validated = run_reward(attack, samples, limits)  # the validation path: a zygote's child, driven call by call
        assert "; tried 17; through {}" in str(validated.error), validated.error
        time.sleep(0.5)
        assert victim(view, action, 0.0, False) == expected  # alive and answering
        assert (os.getpriority(os.PRIO_PROCESS, target), os.sched_getaffinity(target), os.sched_getscheduler(target)) == before
    assert_host_untouched(sentinel, results)


# --- the parent decides: strict parsing of whatever the child sends ---

FORGE_VALIDATION = LINT_OFF + '''

def compute_dense_reward(self, action):
    os, real = lint_off()
    frame = os.sys._getframe()
    while frame is not None and "proto_out" not in frame.f_locals:
        frame = frame.f_back
    fd = frame.f_locals["proto_out"]  # the child's own reply pipe: all it can write to
    payload = real.__import__("json").dumps(PAYLOAD).encode()
    os.write(fd, len(payload).to_bytes(4, "big") + payload)
    os._exit(0)
'''


@pytest.mark.parametrize(
    "payload, reason",
    [
        ({"ok": True, "errors": [], "passes": [[[1.0, {"r": 1.0}]]]}, "malformed reply"),  # a verdict is not the child's to give
        ([1.0, {"r": 1.0}], "exited with code 0"),  # a well-formed answer to one call buys nothing: the next call finds it gone
        (["1" * 400, {"r": 1.0}], "malformed reply"),
        ([10**400, {"r": 1.0}], "exited with code 0"),  # huge integers parse as floats (inf), never crash the parent
        ([2.0, {"\x1b[31mred": 1.0}], "is not a plain name"),
        ({"error": "\x1b]0;owned\x07\x1b[2J" + "x" * 10_000, "kind": "exception", "index": 10**30}, "characters)"),
    ],
    ids=["verdict", "one_answer", "string_number", "huge_integer", "escape_in_name", "escape_in_error"],
)
def test_forged_validation_replies_are_judged_by_the_parent(payload, reason, sample_limits, samples):
    code = FORGE_VALIDATION.replace("PAYLOAD", repr(payload))
    result = run_reward(code, samples, sample_limits)  # the runtime alone (the static pass would refuse it)
    from text2reward.sandbox.validation import smoke_checks

    checks = smoke_checks(result, sample_limits)
    text = json.dumps(checks) + str(result.error)
    assert not result.ok and checks["runs"]["ok"] is False  # whatever the child wrote, validation failed it
    assert reason in text
    assert "\x1b" not in text and "\x07" not in text
    assert len(str(result.error or "")) < 4100


def test_a_reward_that_raises_on_every_state_cannot_forge_a_passing_validation(samples):
    """The attack that passed before: the child answered for the harness with a passing batch. Now it is asked one
    state at a time, and every answer but a value is an error of its own."""
    code = FORGE_VALIDATION.replace("PAYLOAD", repr({"passes": [[[float(i), {"r": float(i)}] for i in range(len(samples))]] * 2}))
    code = code.replace("    os._exit(0)\n", "    raise ValueError('never computes')\n")
    report = validate(code, get_task("metaworld/reach-v3"), samples)  # the static pass refuses the lint-off code...
    assert not report.ok
    result = run_reward(code, samples, Limits(), repeats=2)  # ...and the jail's runtime alone fails it too
    assert not result.ok and result.passes == []


@pytest.fixture
def sample_limits():
    return Limits(cpu_seconds=2)


@pytest.mark.parametrize("total", ["10 ** 400", "-(10 ** 400)", "float('nan')"])
def test_huge_and_non_finite_totals_are_the_candidates_error(total, samples):
    code = f"import numpy as np\n\ndef compute_dense_reward(self, action):\n    return {total}\n"
    report = validate(code, get_task("metaworld/reach-v3"), samples)
    assert not report.ok  # the child cannot turn it into a float (OverflowError) or the parent finds it non-finite
    assert report.checks["runs"]["ok"] is False or report.checks["finite_total"]["ok"] is False


# --- training: the same jail, limits on every call ---

TRAIN_TASK = "halfcheetah/forward"
TINY_PPO = {"n_steps": 64, "batch_size": 64, "n_epochs": 1}
BOMB = LINT_OFF + '''
calls = [0]


def compute_dense_reward(self, action):
    calls[0] += 1
    if calls[0] > 50:
        os, real = lint_off()
        BODY
    return float(self.torso.x_velocity), {"forward": float(self.torso.x_velocity)}
'''
BOMBS = {
    "sleep": ('os.sys.modules["time"].sleep(2.0)', "blocked \\(sleeping or waiting, not computing\\), over the 500 ms limit"),
    "cpu_between_calls": (  # a timer whose handler computes while the worker should wait for the next state
        'sig, clock = os.sys.modules["signal"], os.sys.modules["time"]\n'
        '        def spin(*_):\n'
        '            started = clock.perf_counter()\n'
        '            while clock.perf_counter() - started < 0.001:\n'
        '                pass\n'
        '        if calls[0] == 51:  # armed once: re-arming on every call would postpone it forever\n'
        '            sig.signal(sig.SIGALRM, spin)\n'
        # timers are denied by the seccomp filter now; where a kernel allowed one, the parent's clocks would catch it
        '            sig.setitimer(sig.ITIMER_REAL, 0.005, 0.005)', "CPU time between calls|itimer_error: \\[Errno 1\\] Operation not permitted"),
    "slow_sleep": ('os.sys.modules["time"].sleep(0.03)', "calls became slow"),
    "busy_loop": ("while True:\n            pass", "ms of CPU time"),
    "nan": ('return float("nan"), {"forward": 0.0}', "the total is nan"),
    "nan_component": ('return 0.0, {"forward": float("inf")}', "component 'forward' is inf"),
    "huge_integer": ('return 10 ** 400, {"forward": 0.0}', "OverflowError|the total is inf"),
    "exit": ("os._exit(0)", "exited with code 0"),
    "read_secret": ('raise ValueError(real.open(SECRET).read())', "PermissionError|FileNotFoundError"),
}


def train_with(code: str, tmp_path: Path, limits: Limits, steps: int = 400):
    from policies.train import TrainConfig, train

    config = TrainConfig(task_id=TRAIN_TASK, out_dir=tmp_path, steps=steps, eval_freq=128, eval_episodes=1, overrides=dict(TINY_PPO))
    with SandboxedReward(code, "bomb", limits) as reward:
        return train(config, reward_fn=reward)


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_training_stops_cleanly_on_a_time_bomb(bomb, mechanism, sentinel, tmp_path):
    body, reason = BOMBS[bomb]
    code = fill(BOMB.replace("BODY", body).replace("SECRET", repr(str(sentinel["secrets"][-1]))), sentinel)
    limits = Limits(isolation=mechanism, slow_window=16)
    with pytest.raises(RewardProgramError, match=reason):
        train_with(code, tmp_path, limits)
    result = json.loads((tmp_path / "result.json").read_text())  # the partial run is kept
    assert result["reward_failure"] and result["steps"] >= 40
    assert result["curve"] and mechanism in result["reward_isolation"]
    assert_host_untouched(sentinel, result, *(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_stderr_flood_costs_the_parent_nothing(mechanism, tmp_path):
    code = BOMB.replace("calls[0] > 50", "calls[0] > 0").replace("BODY", 'os.write(2, b"x" * 65536)')
    result = train_with(code, tmp_path, Limits(isolation=mechanism), steps=256)
    assert result.reward_failure is None and result.steps == 256


def run_cli(args: list[str], hide: str, cwd: Path, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, T2R_SANDBOX_HIDE=hide, **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "text2reward.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_t2r_train_runs_a_reward_file_in_the_jail(mechanism, sentinel, tmp_path):
    """`t2r train --reward FILE.py` gives a file the verdict `t2r validate` gives: a hostile one is refused by
    the static check before anything runs; one the check accepts trains in the jail, which stops it."""
    body = 'attempt(results, "w", lambda: real.open(TARGET + "/train", "w").write("x"))\nattempt(results, "r", lambda: real.open(SECRETS[0]).read())'
    code = fill(BOMB.replace("calls[0] > 50", "calls[0] == 60").replace("BODY", "results = {}\n        " + body.replace("\n", "\n        ") + "\n        raise ValueError(repr(results))"), sentinel)
    reward = tmp_path / "reward.py"
    reward.write_text(code)
    args = ["train", "--task", TRAIN_TASK, "--reward", str(reward), "--steps", "256", "--out", str(tmp_path / "out"),
            "--eval-freq", "128", "--eval-episodes", "1"] + [f"--hp={k}={v}" for k, v in TINY_PPO.items()]
    done = run_cli(args, OTHER[mechanism], tmp_path)
    assert done.returncode == 1 and "refused by the static check" in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "out" / "result.json").exists()
    assert_host_untouched(sentinel, done.stdout, done.stderr, {})
    reward.write_text("calls = [0]\n\n\ndef compute_dense_reward(self, action):\n    calls[0] += 1\n    if calls[0] == 60:\n"
                      "        while True:\n            pass\n    return float(self.torso.x_velocity)\n")
    done = run_cli(args, OTHER[mechanism], tmp_path)
    assert done.returncode == 1 and "reward program 'reward' failed at call 60" in done.stderr, done.stderr[-2000:]
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert mechanism in result["reward_isolation"] and "failed at call 60" in result["reward_failure"]


def test_t2r_train_trusted_reward_is_in_process_and_says_so(tmp_path):
    reward = tmp_path / "mine.py"
    reward.write_text("def compute_dense_reward(self, action):\n    return float(self.torso.x_velocity)\n")
    args = ["train", "--task", TRAIN_TASK, "--reward", str(reward), "--trusted-reward", "--steps", "128", "--out", str(tmp_path / "out"),
            "--eval-freq", "128", "--eval-episodes", "1"] + [f"--hp={k}={v}" for k, v in TINY_PPO.items()]
    done = run_cli(args, "", tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["reward_isolation"].startswith("none: trusted code run in the training process")


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_run_worker_contains_the_candidate(mechanism, sentinel, tmp_path):
    """A `t2r run` training worker with a hostile candidate: the candidate fails with its reason, the host is untouched."""
    body = ('attempt(results, "w", lambda: real.open(TARGET + "/worker", "w").write("x"))\n'
            'attempt(results, "kill", lambda: os.kill(SIBLING, 9))\n'
            'return float("nan"), {"forward": 0.0}')
    code = fill(BOMB.replace("BODY", "results = {}\n        " + body.replace("\n", "\n        ")), sentinel)
    (tmp_path / "candidate.py").write_text(code)
    job = {"task_id": TRAIN_TASK, "out_dir": str(tmp_path / "job"), "reward": "code", "code_path": str(tmp_path / "candidate.py"),
           "steps": 256, "eval_freq": 128, "eval_episodes": 1, "overrides": TINY_PPO, "analysis_episodes": 0}
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "job.json").write_text(json.dumps(job))
    env = dict(os.environ, T2R_SANDBOX_HIDE=OTHER[mechanism])
    done = subprocess.run([sys.executable, "-m", "text2reward.training.job", str(tmp_path / "job" / "job.json")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1
    error = json.loads((tmp_path / "job" / "error.json").read_text())
    assert "the total is nan" in error["reason"]
    assert json.loads((tmp_path / "job" / "train" / "result.json").read_text())["reward_failure"]
    assert_host_untouched(sentinel, done.stdout, done.stderr, error)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_training_job_forked_by_the_fork_server_contains_the_candidate(mechanism, sentinel, tmp_path, monkeypatch):
    """The attack of `test_run_worker_contains_the_candidate`, in a job the local launcher forks from its preloaded
    server (training/forkserver.py) rather than a fresh `python -m text2reward.training.job`: jailed exactly as before."""
    from text2reward.runs.statuses import FailureCause
    from text2reward.training.pool import LocalLauncher

    body = ('attempt(results, "w", lambda: real.open(TARGET + "/worker", "w").write("x"))\n'
            'attempt(results, "kill", lambda: os.kill(SIBLING, 9))\n'
            'return float("nan"), {"forward": 0.0}')
    (tmp_path / "candidate.py").write_text(fill(BOMB.replace("BODY", "results = {}\n        " + body.replace("\n", "\n        ")), sentinel))
    job = read_job({"task_id": TRAIN_TASK, "out_dir": str(tmp_path / "job"), "reward": "code",
                              "code_path": str(tmp_path / "candidate.py"), "steps": 256, "eval_freq": 128, "eval_episodes": 1,
                              "overrides": TINY_PPO, "analysis_episodes": 0})
    (tmp_path / "job").mkdir()
    job.write()
    monkeypatch.setenv("T2R_SANDBOX_HIDE", OTHER[mechanism])  # travels with the fork request: the child's environment
    said: list[str] = []
    launcher = LocalLauncher(said.append)
    launcher.start(0, job)
    assert 0 in launcher.forked and not said, said
    ended: list = []
    deadline = time.monotonic() + 300
    while not ended and time.monotonic() < deadline:
        ended = launcher.collect()
        time.sleep(0.2)
    ((_, outcome),) = ended
    assert not outcome.ok and outcome.cause == FailureCause.REWARD, outcome.reason
    error = json.loads((tmp_path / "job" / "error.json").read_text())
    assert "the total is nan" in error["reason"]
    assert json.loads((tmp_path / "job" / "train" / "result.json").read_text())["reward_failure"]
    assert mechanism in json.loads((tmp_path / "job" / "train" / "result.json").read_text())["reward_isolation"]
    assert_host_untouched(sentinel, (tmp_path / "job" / "worker.log").read_text(), "", error)


# --- fail closed ---

REFUSED = "refusing to run model-written code: no sandbox passed its self-test"


def test_every_entry_point_refuses_when_no_jail_works(tmp_path):
    marker = tmp_path / "ran"
    code = tmp_path / "reward.py"
    code.write_text(f"open({str(marker)!r}, 'w').write('x')\ndef compute_dense_reward(self, action):\n    return 0.0\n")
    hide = "bubblewrap,landlock"
    for args in (
        ["validate", "--task", "metaworld/reach-v3", "--code", str(code)],
        ["train", "--task", TRAIN_TASK, "--reward", str(code), "--steps", "64", "--out", str(tmp_path / "t")],
        ["run", "--task", "metaworld/reach-v3", "--llm", "heuristic", "--runs-dir", str(tmp_path / "runs")],
        ["doctor"],
    ):
        done = run_cli(args, hide, tmp_path)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert REFUSED in done.stderr and "apt-get install bubblewrap" in done.stderr
        assert "Traceback" not in done.stderr
    assert not marker.exists() and not (tmp_path / "runs").exists() and not (tmp_path / "t").exists()


def test_api_refuses_when_no_jail_works(monkeypatch, samples):
    from text2reward.sandbox import SandboxUnavailable

    monkeypatch.setenv("T2R_SANDBOX_HIDE", "bubblewrap,landlock")
    with pytest.raises(SandboxUnavailable, match=REFUSED):
        validate("def compute_dense_reward(self, action):\n    return 0.0\n", get_task("metaworld/reach-v3"), samples,
                 Limits(isolation="landlock"))
    with pytest.raises(SandboxUnavailable):
        SandboxedReward("def compute_dense_reward(self, action):\n    return 0.0\n")(samples[0][0], samples[0][1], 0.0, False)


def test_a_jail_that_does_not_isolate_fails_its_self_test(tmp_path):
    """A `bwrap` on the PATH that is something else (here it exits at once), and Landlock hidden: the
    self-test gets no findings, the mechanism fails, and the toolkit refuses."""
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}:{os.environ['PATH']}"}
    done = run_cli(["doctor", "--json"], "landlock", tmp_path, env)
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["active"] is None
    assert "did not finish its self-test" in report["mechanisms"]["bubblewrap"]["reason"]


def test_a_landlock_view_of_everything_fails_its_self_test(monkeypatch):
    """A jail that runs but shows too much (its view and Landlock's also holding /var/tmp, where the self-test leaves a
    secret): the self-test reads the secret and the mechanism is refused."""
    from text2reward.sandbox import isolation
    from text2reward.sandbox.selftest import Jail, self_test

    too_much = (*isolation.readable_paths(), "/var/tmp")
    monkeypatch.setattr(isolation, "readable_paths", lambda: too_much)  # the jail's view and Landlock's
    outcome = self_test("landlock", Jail(isolation.launch_argv("landlock"), isolation.jail_spec("landlock"), isolation.worker_env(), too_much))
    assert isinstance(outcome, str) and "read_secret" in outcome and ": succeeded" in outcome, outcome


def test_doctor_reports_the_active_jail_and_its_findings(tmp_path):
    done = run_cli(["doctor", "--json"], "", tmp_path)
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["active"] in ("bubblewrap", "landlock")
    findings = report["mechanisms"][report["active"]]["findings"]
    assert len(findings) == 12 and all(f.startswith("blocked") for f in findings.values())


@pytest.mark.skipif(any(isinstance(check(m), str) for m in ("bubblewrap", "landlock")),
                    reason="needs both jails: bubblewrap (apt-get install -y bubblewrap) and Landlock + seccomp")
def test_both_jails_build_when_a_library_folder_lies_under_tmp():
    """A virtual environment under /tmp, as on many CI machines: the jail without bubblewrap once built its new root on
    a tmpfs over /tmp, hiding the folder it then had to bind ("binding /tmp/... failed"), and failed closed."""
    library = Path(tempfile.mkdtemp(prefix="t2r-venv-", dir="/tmp")) / "site-packages"
    library.mkdir()
    (library / "t2r_probe_under_tmp.py").write_text("VALUE = 1\n")
    try:
        done = run_cli(["doctor", "--json"], "", library.parent, {"PYTHONPATH": str(library)})
        report = json.loads(done.stdout)
        assert {name: m["ok"] for name, m in report["mechanisms"].items()} == {"bubblewrap": True, "landlock": True}, report
        from text2reward.sandbox.namespaces import root_mount_point
        assert root_mount_point([str(library), "/usr"]) != "/tmp" and root_mount_point(["/usr"]) == "/tmp"
    finally:
        shutil.rmtree(library.parent)


TIME_BOMB_REPLY = '''A reward that behaves while it is validated.

```python
import numpy as np

calls = []


def compute_dense_reward(self, action):
    calls.append(1)
    distance = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    if len(calls) > 450:
        return float("nan"), {"reach": 0.0}
    return -distance, {"reach": -distance}
```
'''


@pytest.mark.slow
def test_a_time_bomb_fails_its_candidate_in_a_run_and_the_run_goes_on(tmp_path):
    """Through `t2r run`: the bomb passes validation (400 calls), goes off in training; that candidate
    fails with the reason, its partial curve is kept, and the run ends: with no result, since nothing trained."""
    from text2reward.loop import start_run
    from text2reward.settings import RunConfig

    reply = tmp_path / "reply.md"
    reply.write_text(TIME_BOMB_REPLY)
    config = RunConfig.of(task_id="fetch/reach", backend="file", reply_files=[str(reply)], rounds=1, samples=1, steps=600,
                          workers=1, final_seeds=1, compare_expert=False, screen=False, eval_freq=200, eval_episodes=1,
                          overrides=SHORT_HP)
    store = start_run(config, tmp_path / "runs")
    [candidate] = store.candidates()
    assert candidate.validation.ok is True
    assert candidate.status == "failed" and "the total is nan" in candidate.reason
    result = json.loads(next(store.root.rglob("train/result.json")).read_text())
    assert result["reward_failure"] and result["curve"] and "jail" in result["reward_isolation"]
    state = store.state()
    assert state.status == "no_result" and "r0-s0 failed" in state.reason


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_screening_runs_the_candidate_in_the_jail(mechanism, sentinel):
    """Screening replays scripted trajectories through the same jailed runner as validation."""
    from text2reward.screening import screen_program, screening_trajectories

    task = get_task("metaworld/reach-v3")
    trajectories = screening_trajectories(task, n_success=1, n_failure=1, seed=0)
    body = ('attempt(results, "w", lambda: real.open(TARGET + "/screen", "w").write("x"))\n'
            'attempt(results, "r", lambda: real.open(SECRETS[1]).read())\nraise ValueError(repr(results))')
    errors: list[str] = []

    def run_returns(code: str, samples: list) -> list[float]:
        result = run_reward(code, samples, Limits(isolation=mechanism))
        errors.append(str(result.error))
        return [total for total, _ in result.outputs]

    with pytest.raises(RewardProgramError):  # no totals came back: the candidate, not the host, pays
        screen_program(task, fill(program(body), sentinel), trajectories, run_returns)
    assert "blocked" in errors[0] and "SUCCEEDED" not in errors[0]
    assert_host_untouched(sentinel, errors)


def test_the_time_check_reads_the_kernel_not_the_child(samples):
    """The time per call is the child's CPU and blocked time by the kernel's clocks, read by the parent: a reward
    that burns 6x the limit a call (by its own CPU clock, so on a fast CPU and a busy one alike) fails it, however it
    reports itself."""
    from text2reward.sandbox.validation import smoke_checks

    limits = Limits()
    cpu_seconds = 6 * limits.max_call_us / 1e6
    code = CPU_BURN + f"\n\ndef compute_dense_reward(self, action):\n    return float(burn_cpu({cpu_seconds!r}))\n"
    result = run_reward(code, samples[:20], limits, repeats=2)
    assert result.ok, result.error
    check = smoke_checks(result, limits)["time_per_call"]
    assert check["ok"] is False and check["cpu_mean_us"] > limits.max_call_us, (cpu_seconds, check)
    assert "compute with vectorised numpy" in check["detail"]


def test_a_reward_that_sleeps_every_call_fails_the_time_check_on_its_blocked_time(samples):
    """Sleeping costs training as computing does: 25x the limit asleep on every call fails the check, named as a
    sleep. Sleeping can only overshoot; a reply this process reads late lumps the next ones' blocked time into its
    own share, so 21 calls of 50 ms: only a stall of ~0.5 s could bring the median under the limit."""
    from text2reward.sandbox.validation import smoke_checks

    limits = Limits()
    seconds = 25 * limits.max_call_us / 1e6
    code = BASE_LINT_OFF + f"\n_sleep = lint_off()[1].__import__('time').sleep\n\n\ndef compute_dense_reward(self, action):\n" \
                      f"    _sleep({seconds!r})\n    return float(self.robot.ee_position[0])\n"
    result = run_reward(code, samples * 7, limits)
    assert result.ok, result.error
    check = smoke_checks(result, limits)["time_per_call"]
    assert check["ok"] is False and check["blocked_median_us"] > limits.max_call_us, check
    assert "never sleep or wait" in check["detail"]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_busy_loop_in_validation_is_stopped_within_the_per_call_cpu_limit(mechanism, samples):
    started = time.monotonic()
    report = validate("import numpy as np\n\ndef compute_dense_reward(self, action):\n    while True:\n        pass\n",
                      get_task("metaworld/reach-v3"), samples, Limits(isolation=mechanism))
    assert not report.ok and "ms of CPU time, over the 50 ms limit" in report.checks["runs"]["detail"]
    assert time.monotonic() - started < 55  # was 65 s: stopped at its call, not at the whole run's 60 s limit


# --- the zygote's other children, and the foreign system-call entry points ---

FOREIGN_ENTRY = {  # getpid through the x32 and the i386 entry points: the filter kills such a call, it never runs
    "x32": 'ctypes = real.__import__("ctypes")\nreturn float(ctypes.CDLL(None).syscall(0x40000000 | 39)), {}',
    "i386": (
        'ctypes, mmap = real.__import__("ctypes"), real.__import__("mmap")\n'
        'page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n'
        'page.write(bytes([0xB8, 0x14, 0, 0, 0, 0xCD, 0x80, 0xC3]))  # mov eax, 20 (getpid); int 0x80; ret\n'
        'address = ctypes.addressof(ctypes.c_char.from_buffer(page))\n'
        'return float(ctypes.CFUNCTYPE(ctypes.c_int)(address)()), {}'
    ),
}


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("entry", sorted(FOREIGN_ENTRY))
def test_a_call_through_a_foreign_entry_point_is_killed_and_named_alike_on_both_paths(entry, mechanism, samples):
    limits = Limits(isolation=mechanism)
    code = program(FOREIGN_ENTRY[entry])
    validated = run_reward(code, samples, limits)
    assert not validated.ok and "forbidden system call (SIGSYS" in str(validated.error), validated.error
    view, action = samples[0]
    with SandboxedReward(code, "foreign", limits) as reward, pytest.raises(RewardProgramError) as caught:
        reward(view, action, 0.0, False)
    assert "forbidden system call (SIGSYS" in str(caught.value)
    assert str(caught.value).endswith(str(validated.error))  # the same words on the training path


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            todo += [int(p) for p in Path(f"/proc/{current}/task/{current}/children").read_text().split()]
        except OSError:
            pass
    return found


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_validation_child_reaches_neither_the_zygote_nor_the_next_child(mechanism, samples):
    """The zygote forks the next child (the spare) as soon as it hands one over: the child handed over tries to signal,
    renice and pin the zygote and that spare by host pid (given to it in the action: it cannot see them), and every pid
    of its own pid namespace; all stay alive and untouched (read by this process), and the same zygote serves on."""
    import numpy as np

    from text2reward.sandbox import runner
    from text2reward.sandbox.process import limit_config

    def _runs_worker(pid: int) -> bool:  # the zygote's Python or a spare forked from it (trusted: they keep their argv)
        try:
            return b"text2reward.sandbox.jailed" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False

    limits = Limits(isolation=mechanism)
    assert run_reward("def compute_dense_reward(self, action):\n    return 0.0\n", samples, limits).ok
    attack = program(
        'for pid in [int(p) for p in action if p > 0] + list(range(2, 64)):\n'
        '    attempt(results, "kill " + str(pid), lambda: os.kill(pid, 9))\n'
        '    attempt(results, "renice " + str(pid), lambda: os.setpriority(os.PRIO_PROCESS, pid, 19))\n'
        '    attempt(results, "pin " + str(pid), lambda: os.sched_setaffinity(pid, {0}))\n'
        'through = {name: outcome for name, outcome in results.items() if not outcome.startswith("blocked")}\n'
        'raise ValueError("tried " + str(len(results)) + "; through " + repr(through))'
    )
    modules = runner.view_modules([samples[0][0]])
    request = {"code": attack, "modules": modules, "wall_seconds": float(limits.wall_seconds), **limit_config(limits, cpu=True)}
    with runner._LOCK:
        zygote = runner._zygote(limits)
        child = runner.ValidationChild.fork(zygote, request, limits, time.monotonic() + 60)
        time.sleep(0.5)  # the next spare is forked and in its namespaces
        fdinfo = Path(f"/proc/self/fdinfo/{child._pidfd}").read_text()
        handed = int(fdinfo.split("Pid:")[1].split()[0])  # the zygote's child that was handed over, and what it forked
        attacker = set(_descendants(handed))
        targets = [pid for pid in _descendants(zygote.process.pid) if pid not in attacker]
        assert len(targets) >= 2 and any(_runs_worker(pid) for pid in targets)  # the zygote and the spare, at least
        before = {pid: (os.getpriority(os.PRIO_PROCESS, pid), os.sched_getaffinity(pid)) for pid in targets}
        action = np.array(targets + [0] * (8 - len(targets)), dtype=float)
        result = runner.RunResult()
        try:
            runner._drive(child, [(samples[0][0], action)], modules, 1, limits, result)
        finally:
            child.close()
    assert f"tried {(len(targets) + 62) * 3}; through {{}}" in str(result.error), result.error
    time.sleep(0.2)
    assert all(Path(f"/proc/{pid}").exists() for pid in targets)
    assert {pid: (os.getpriority(os.PRIO_PROCESS, pid), os.sched_getaffinity(pid)) for pid in targets} == before
    after = run_reward("def compute_dense_reward(self, action):\n    return 1.0\n", samples, limits)
    assert after.ok and runner._ZYGOTES[(mechanism, os.getpid())] is zygote
