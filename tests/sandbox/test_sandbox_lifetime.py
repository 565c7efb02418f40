"""The parent finds a reward's process by what it knows, and nothing of a jail outlives it (issue 42, items 2 and 3).

Attacked with the lint layers switched off (as in test_sandbox_jail.py), on both mechanisms and every path:
- a reward that rewrites its own command line at load (the parent once found its process by it) and then burns CPU
  must still be judged on its own kernel clocks: validation's time check fails, training stops the call;
- a reward that calls setsid(), clears its parent-death signal, tries to fork and then lingers must leave nothing
  behind: not after validation, a training call, `t2r validate`, `t2r train --reward` or a `t2r run` worker.

Processes are identified by what the test itself records: descendants of the process it started (or of itself) that
the test holds by pidfd while they run, named by a token the attack sets (so no other user's jail is ever counted or
touched), and waited on as events with generous bounds.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from attack_programs import CPU_BURN, LINT_OFF

from sim_envs import get_task
from sim_envs.errors import RewardProgramError
from text2reward.sandbox import Limits, SandboxedReward, collect_states, run_reward
from text2reward.sandbox.isolation import check
from text2reward.sandbox.validation import smoke_checks

MECHANISMS = [
    pytest.param(m, marks=pytest.mark.skipif(isinstance(check(m), str), reason=f"{m} unavailable here: {check(m)}"))
    for m in ("bubblewrap", "landlock")
]
OTHER = {"bubblewrap": "landlock", "landlock": "bubblewrap"}
TRAIN_TASK = "halfcheetah/forward"
TINY_PPO = {"n_steps": 64, "batch_size": 64, "n_epochs": 1}
ENDED_WITHIN = 20.0
"""Seconds a process of the attack may take to be gone once its command or call returned (it takes milliseconds)."""


BLIND = CPU_BURN + '''

def blind():
    """Overwrite the command line /proc shows for this process (argv's strings lie just before the environment's)."""
    os, real = lint_off()
    ctypes = real.__import__("ctypes")
    first_variable = ctypes.POINTER(ctypes.c_void_p).in_dll(ctypes.CDLL(None), "environ")[0]
    size = sum(len(arg.encode()) + 1 for arg in os.sys.orig_argv)
    assert ctypes.string_at(first_variable - size, 8) == os.sys.orig_argv[0].encode()[:8]
    ctypes.memset(first_variable - size, 0, size)


blind()
calls = [0]


def compute_dense_reward(self, action):
    calls[0] += 1
    spins = burn_cpu(CPU_SECONDS if calls[0] > FREE_CALLS else 0.0)
    return float(spins) * float(POSITION), {"burn": float(spins)}
'''


def blinding(cpu_seconds: float, free_calls: int = 0, position: str = "self.robot.ee_position[0]") -> str:
    """The blinding reward, burning `cpu_seconds` of its own CPU clock per call after `free_calls` light ones."""
    return (BLIND.replace("CPU_SECONDS", repr(cpu_seconds)).replace("FREE_CALLS", str(free_calls))
            .replace("POSITION", position))


@pytest.fixture(scope="module")
def samples():
    return collect_states(get_task("metaworld/reach-v3"), n_random=3, n_scripted=0, seed=0)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b"gone"


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _wait_for(condition, timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


# --- item 2: the judge finds the reward by what the parent knows ---


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_reward_that_rewrites_its_command_line_still_fails_the_time_check(mechanism, samples):
    """The child of the zygote loads a reward that blanks its command line, then burns ~6x validation's limit per
    call. The parent starts judging only once the blanking is done (waited for here, so the race the attack once won
    2 times in 16 is always won): its clocks are still the reward's, and the time check fails."""
    import numpy as np

    from text2reward.sandbox import runner
    from text2reward.sandbox.process import limit_config

    limits = Limits(isolation=mechanism)
    cpu_seconds = 6 * limits.max_call_us / 1e6
    code = blinding(cpu_seconds)
    modules = runner.view_modules([samples[0][0]])
    request = {"code": code, "modules": modules, "sources": runner.view_sources(modules), "wall_seconds": float(limits.wall_seconds),
               **limit_config(limits, cpu=True)}
    result = runner.RunResult()
    with runner._LOCK:
        zygote = runner._zygote(limits)
        child = runner.ValidationChild.fork(zygote, request, limits, time.monotonic() + 60)
        try:
            handed = int(Path(f"/proc/self/fdinfo/{child._pidfd}").read_text().split("Pid:")[1].split()[0])
            reward = handed if mechanism == "bubblewrap" else _children(handed)[0]  # its pid namespace's one process
            _wait_for(lambda: _cmdline(reward).strip(b"\0") == b"", what="the reward to blank its command line")
            child.calls.forget_clock()  # judged from here on with the clocks found now, after the blanking
            runner._drive(child, [(view, np.asarray(action)) for view, action in samples[:20]], modules, 2, limits, result)
        finally:
            child.close()
    assert result.ok, result.error
    check = smoke_checks(result, limits)["time_per_call"]
    assert check["ok"] is False and check["cpu_mean_us"] > limits.max_call_us, (cpu_seconds, check)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_reward_that_rewrites_its_command_line_is_stopped_in_training(mechanism, samples):
    """The same attack in a training worker: one free call, then 4x the 50 ms CPU limit per call by the reward's own
    CPU clock (the attack once ran 70 ms calls unstopped), judged after the blanking; the call is stopped for its CPU
    time, read from the reward's own clocks."""
    limits = Limits(isolation=mechanism)
    code = blinding(4 * limits.call_cpu_seconds, free_calls=1)
    view, action = samples[0]
    with SandboxedReward(code, "blind", limits) as reward:
        reward(view, action, 0.0, False)  # starts the worker; the module body has blanked its command line
        worker = reward._worker
        depth = 2 if mechanism == "bubblewrap" else 1
        pid = worker.pid
        for _ in range(depth):
            pid = _children(pid)[0]
        assert _cmdline(pid).strip(b"\0") == b""
        worker.calls.forget_clock()  # found again now, after the blanking
        with pytest.raises(RewardProgramError, match=r"ms of CPU time, over the 50 ms limit"):
            reward(view, action, 0.0, False)


def test_a_validation_with_no_clock_reading_is_not_a_pass(samples, monkeypatch):
    """Where the parent cannot read the reward's clocks (here: it finds no process for it), validation fails with a
    reason instead of taking "0.0 us per call" for a pass; and a run with fewer readings than calls fails the check."""
    from text2reward.sandbox import runner

    def nowhere(root: int, generations: int):
        raise ValueError("the jailed worker is not running yet")

    monkeypatch.setattr(runner, "find_reward_process", nowhere, raising=False)
    result = run_reward("def compute_dense_reward(self, action):\n    return float(self.robot.ee_position[0])\n", samples, Limits())
    assert not result.ok and "could not read the reward process's CPU time" in str(result.error), result.error
    monkeypatch.undo()
    # 21 calls: a process's first call costs ~1.5 ms of CPU, which 3 calls alone would average close to the 2 ms check
    read = run_reward("def compute_dense_reward(self, action):\n    return float(self.robot.ee_position[0])\n", samples * 7, Limits(),
                      repeats=2)
    timing = smoke_checks(read, Limits())["time_per_call"]
    assert timing["ok"] is True, timing
    read.seconds = read.seconds[:-1]  # one call the kernel could not account for
    check = smoke_checks(read, Limits())["time_per_call"]
    assert check["ok"] is False and "could not be read from the kernel for 1 of" in check["detail"]


# --- item 3: nothing outlives its jail ---

LINGER = LINT_OFF + '''
calls = [0]


def leave_the_session():
    """Named for the test, then everything the attack once did to outlive its jail."""
    os, real = lint_off()
    libc = real.__import__("ctypes").CDLL(None)
    libc.prctl(15, TOKEN, 0, 0, 0)  # PR_SET_NAME: how the test tells its own attack from any other process
    libc.setsid()
    libc.setpgid(0, 0)
    libc.prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG: none
    try:
        os.fork()
    except Exception:  # PermissionError: seccomp (restricted builtins name no OSError)
        pass
    return os


def linger(os):
    while True:
        os.sys.modules["time"].sleep(0.05)


def linger_at_eof(os):
    """Answer every call, then ignore the closed pipe that tells the worker to end."""
    channel = os.sys.modules["text2reward.sandbox.channel"]
    original = channel.FrameReader.read

    def read(self, *args, **kwargs):
        try:
            return original(self, *args, **kwargs)
        except channel.ChannelClosed:
            linger(os)

    channel.FrameReader.read = read


if WHEN == "load":
    leave_the_session()
elif WHEN == "eof":
    linger_at_eof(leave_the_session())


def compute_dense_reward(self, action):
    calls[0] += 1
    if WHEN != "eof" and calls[0] >= FROM_CALL:
        linger(leave_the_session())
    if WHEN == "eof" and calls[0] == 1:  # alive long enough for the test to see it, under the 0.5 s blocked limit
        lint_off()[0].sys.modules["time"].sleep(0.3)
    return float(self.FIELD), {"x": 0.0}
'''
WHEN = ["call", "load", "eof"]
"""Where the attack leaves its session (in a call, or at load) and where it lingers: in a call that never ends, or
after answering every call, ignoring the closed pipe."""


def lingering(token: str, from_call: int = 1, field: str = "robot.ee_position[0]", when: str = "call") -> str:
    return (LINGER.replace("TOKEN", repr(token.encode())).replace("FROM_CALL", str(from_call)).replace("FIELD", field)
            .replace("WHEN", repr(when)))


class Attackers:
    """Watches the descendants of `root` for processes named `token` (the attack's own), holding each by a pidfd from
    the moment it is seen, so the test can wait for exactly those to end (and, if they do not, kill exactly those)."""

    def __init__(self, root: int, token: str):
        self.root, self.token = root, token
        self.seen: dict[int, int] = {}  # pid -> pidfd
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            todo = [self.root]
            while todo:
                pid = todo.pop()
                todo += _children(pid)
                if pid in self.seen:
                    continue
                try:
                    named = Path(f"/proc/{pid}/comm").read_text().strip() == self.token
                    if named:
                        self.seen[pid] = os.pidfd_open(pid)
                except OSError:
                    pass
            time.sleep(0.005)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def left_behind(self, within: float = ENDED_WITHIN) -> list[int]:
        """The attack's processes still running `within` seconds from now (each waited for as an event); those are
        then killed (they are this test's own), so a failure leaves nothing behind either."""
        self.stop()
        deadline = time.monotonic() + within
        alive = [pid for pid, fd in self.seen.items() if not select.select([fd], [], [], max(deadline - time.monotonic(), 0))[0]]
        for pid, fd in self.seen.items():
            if pid in alive:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            os.close(fd)
        return alive


def _token() -> str:
    return "t2r" + uuid.uuid4().hex[:12]  # a process name holds 15 characters


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("when", WHEN)
def test_a_reward_that_leaves_its_session_leaves_nothing_after_validation(when, mechanism, samples):
    token = _token()
    attackers = Attackers(os.getpid(), token)
    result = run_reward(lingering(token, when=when), samples, Limits(isolation=mechanism))
    assert result.ok if when == "eof" else not result.ok and "blocked" in str(result.error), result.error
    left = attackers.left_behind()
    assert attackers.seen, "the attack never ran"
    assert left == []


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("when", WHEN)
def test_a_reward_that_leaves_its_session_leaves_nothing_after_a_training_call(when, mechanism, samples):
    token = _token()
    attackers = Attackers(os.getpid(), token)
    view, action = samples[0]
    with SandboxedReward(lingering(token, when=when), "linger", Limits(isolation=mechanism)) as reward:
        if when == "eof":
            assert reward(view, action, 0.0, False)[1] == {"x": 0.0}
        else:
            with pytest.raises(RewardProgramError, match="blocked"):
                reward(view, action, 0.0, False)
    left = attackers.left_behind()
    assert attackers.seen, "the attack never ran"
    assert left == []


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_the_jail_denies_sessions_and_parent_death_changes_and_training_has_a_cpu_limit(mechanism, samples):
    code = LINT_OFF + '''

def compute_dense_reward(self, action):
    os, real = lint_off()
    libc = real.__import__("ctypes").CDLL(None)
    resource = real.__import__("resource")
    return 0.0, {"cpu_rlimit": float(resource.getrlimit(resource.RLIMIT_CPU)[0]), "setsid": float(libc.setsid()),
                 "setpgid": float(libc.setpgid(0, 0)), "pdeathsig": float(libc.prctl(1, 0, 0, 0, 0)),
                 "setuid": float(libc.setuid(os.getuid()))}
'''
    limits = Limits(isolation=mechanism)
    with SandboxedReward(code, "probe", limits) as reward:
        _, components = reward(samples[0][0], samples[0][1], 0.0, False)
    assert components == {"cpu_rlimit": float(limits.training_cpu_seconds), "setsid": -1.0, "setpgid": -1.0, "pdeathsig": -1.0,
                          "setuid": -1.0}
    validated = run_reward(code, samples[:1], limits)
    assert validated.ok and validated.outputs[0][1]["setsid"] == -1.0 and validated.outputs[0][1]["pdeathsig"] == -1.0


def _cli_with_static_pass_off(args: list[str], hide: str, cwd: Path) -> subprocess.Popen:
    """`t2r ARGS` with the static pass switched off in that process, as if an attacker had found a way past it: the jail
    alone stands in the way then."""
    launcher = ("import sys; from text2reward.sandbox import reward, validation; "
                "validation.static_check = lambda code, mode='dense': []; reward.check_program = lambda *a, **k: None; "
                "from text2reward.cli import main; sys.argv = ['t2r', *sys.argv[1:]]; main()")
    env = dict(os.environ, T2R_SANDBOX_HIDE=hide)
    return subprocess.Popen([sys.executable, "-c", launcher, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=cwd)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_t2r_validate_and_train_leave_nothing_of_a_reward_that_leaves_its_session(mechanism, tmp_path):
    token = _token()
    reward = tmp_path / "reward.py"
    reward.write_text(lingering(token))
    done = _cli_with_static_pass_off(["validate", "--task", "metaworld/reach-v3", "--code", str(reward)], OTHER[mechanism], tmp_path)
    attackers = Attackers(done.pid, token)
    stdout, stderr = done.communicate(timeout=300)
    assert done.returncode == 1 and "blocked" in stdout + stderr, (stdout + stderr)[-2000:]
    assert attackers.seen, "the attack never ran"
    assert attackers.left_behind() == []

    reward.write_text(lingering(token, field="torso.x_velocity"))
    args = ["train", "--task", TRAIN_TASK, "--reward", str(reward), "--steps", "128", "--out", str(tmp_path / "out"),
            "--eval-freq", "128", "--eval-episodes", "1"] + [f"--hp={k}={v}" for k, v in TINY_PPO.items()]
    done = _cli_with_static_pass_off(args, OTHER[mechanism], tmp_path)
    attackers = Attackers(done.pid, token)
    _, stderr = done.communicate(timeout=300)
    assert done.returncode == 1 and "failed at call 1" in stderr, stderr[-2000:]
    assert attackers.seen, "the attack never ran"
    assert attackers.left_behind() == []


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_run_worker_leaves_nothing_of_a_reward_that_leaves_its_session(mechanism, tmp_path):
    """A `t2r run` training worker (`python -m text2reward.training.job`): the candidate fails, and nothing of it stays."""
    token = _token()
    (tmp_path / "candidate.py").write_text(lingering(token, from_call=5, field="torso.x_velocity"))
    job = {"task_id": TRAIN_TASK, "out_dir": str(tmp_path / "job"), "reward": "code", "code_path": str(tmp_path / "candidate.py"),
           "steps": 128, "eval_freq": 128, "eval_episodes": 1, "overrides": TINY_PPO, "analysis_episodes": 0}
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "job.json").write_text(json.dumps(job))
    env = dict(os.environ, T2R_SANDBOX_HIDE=OTHER[mechanism])
    done = subprocess.Popen([sys.executable, "-m", "text2reward.training.job", str(tmp_path / "job" / "job.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    attackers = Attackers(done.pid, token)
    _, stderr = done.communicate(timeout=300)
    assert done.returncode == 1, stderr[-2000:]
    assert "blocked" in json.loads((tmp_path / "job" / "error.json").read_text())["reason"]
    assert attackers.seen, "the attack never ran"
    assert attackers.left_behind() == []


PARENT = """
import sys
from pathlib import Path
from sim_envs import get_task
from text2reward.sandbox import Limits, SandboxedReward, collect_states, run_reward

code, mechanism, path = Path(sys.argv[1]).read_text(), sys.argv[2], sys.argv[3]
samples = collect_states(get_task("metaworld/reach-v3"), n_random=1, n_scripted=0, seed=0)
if path == "validation":
    run_reward(code, samples, Limits(isolation=mechanism, call_blocked_seconds=600.0))
else:
    SandboxedReward(code, "linger", Limits(isolation=mechanism, call_blocked_seconds=600.0))(samples[0][0], samples[0][1], 0.0, False)
"""


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("path", ["validation", "training"])
def test_a_reward_that_leaves_its_session_dies_with_a_killed_parent(path, mechanism, tmp_path):
    """The parent itself is killed (SIGKILL: no clean-up of its own runs) while the attack lingers in a call: every
    process of the jail ends with it (bubblewrap's --die-with-parent; without it, the worker's parent-death signal,
    which the reward can no longer clear)."""
    token = _token()
    (tmp_path / "reward.py").write_text(lingering(token))
    env = dict(os.environ, T2R_SANDBOX_HIDE=OTHER[mechanism])
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path / "reward.py"), mechanism, path], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    attackers = Attackers(parent.pid, token)
    try:
        _wait_for(lambda: bool(attackers.seen) or parent.poll() is not None, timeout=120, what="the attack to start")
        assert attackers.seen, "the attack never ran"
    finally:
        parent.kill()
        parent.wait()
    assert attackers.left_behind() == []


def test_the_sweep_kills_and_names_a_held_process_that_outlived_its_jail():
    """The last line of defence at every command's end: a process its jail told to end, still running, is killed and
    named; one still in use when the command ends is killed quietly."""
    from text2reward.sandbox import leftovers

    told = subprocess.Popen(["sleep", "300"])
    in_use = subprocess.Popen(["sleep", "300"])
    try:
        held_told, held_in_use = leftovers.hold(told.pid), leftovers.hold(in_use.pid)
        held_told.told_to_end()
        found = leftovers.sweep(grace=0.2)
        assert [left.pid for left in found] == [told.pid] and "sleep" in found[0].describe()
        assert told.wait(timeout=ENDED_WITHIN) == -signal.SIGKILL and in_use.wait(timeout=ENDED_WITHIN) == -signal.SIGKILL
        assert held_told.pidfd == -1 and held_in_use.pidfd == -1  # released: nothing held after the sweep
    finally:
        for process in (told, in_use):
            process.kill()
            process.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a process of uid 65534 needs root")
def test_doctor_lists_a_process_of_the_jails_uid_left_behind(tmp_path):
    """A process of uid 65534 whose command has ended (orphaned: its parent is the machine's init) is listed by
    `t2r doctor`, in its JSON and in words."""
    started = subprocess.run(["setsid", "sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True,
                             user=65534, group=65534, extra_groups=[], timeout=30, check=True)
    pid = int(started.stdout.split()[0])
    pidfd = os.pidfd_open(pid)
    try:
        _wait_for(lambda: Path(f"/proc/{pid}/status").read_text().split("PPid:")[1].split()[0] == "1", what="an orphan")
        env = dict(os.environ)
        done = subprocess.run([sys.executable, "-m", "text2reward.cli", "doctor", "--json"], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=300)
        report = json.loads(done.stdout)
        assert pid in [left["pid"] for left in report["leftovers"]], report["leftovers"]
        words = subprocess.run([sys.executable, "-m", "text2reward.cli", "doctor"], capture_output=True, text=True, env=env,
                               cwd=tmp_path, timeout=300)
        assert "left behind" in words.stdout and f"pid {pid}: sleep" in words.stdout, words.stdout[-2000:]
    finally:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        os.close(pidfd)
