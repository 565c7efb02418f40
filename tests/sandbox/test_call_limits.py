"""A training reward call is judged on the kernel's clocks of its worker, never on a loaded machine's wall clock.

Each limit has its own cause: CPU time (a busy loop), blocked time (a sleep), and the wall-clock backstop (a
worker kept from running: the machine's doing). A legitimate reward whose worker, or whose caller, is kept
from running for longer than any per-call limit is never failed. Real jailed workers, real signals.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from attack_programs import READ_ONE_REQUEST
from polling import wait_for

from sim_envs import get_task
from sim_envs.errors import RewardProgramError, RewardStoppedByMachine
from text2reward.sandbox import Limits, SandboxedReward
from text2reward.sandbox.clocks import CallLimits, CallTimes, CallWatch, KernelClock

PLAIN = '''
def compute_dense_reward(self, action):
    d = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    return -d, {"reach": -d}
'''

REAL_TIME = '''
def real_time():
    """The real `time` module, past the lint layer (the jail is what stands)."""
    for cls in ().__class__.__bases__[0].__subclasses__():
        if cls.__name__ == "catch_warnings":
            return cls()._module.__builtins__["__import__"]("os").sys.modules["time"]
'''


def after_calls(n: int, body: str) -> str:
    """A plain reach reward that does `body` from its n-th call on."""
    return REAL_TIME + textwrap.dedent(f'''
    calls = [0]


    def compute_dense_reward(self, action):
        calls[0] += 1
        if calls[0] >= {n}:
            {body}
        d = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
        return -d, {{"reach": -d}}
    ''')


@pytest.fixture(scope="module")
def view():
    task = get_task("fetch/reach")
    env = task.make_env(seed=0)
    env.reset(seed=0)
    yield task.view(env)
    env.close()


def call(reward: SandboxedReward, view, times: int = 1):
    for _ in range(times):
        result = reward(view, np.zeros(4), 0.0, False)
    return result


# --- the arithmetic: where a call's wall clock went -----------------------------------------------------------


def test_blocked_time_is_what_is_left_of_the_wall_clock():
    loaded = CallTimes(wall=2.0, cpu=0.001, waited=1.9, stopped=0.0)
    assert loaded.blocked == pytest.approx(0.099) and loaded.own == pytest.approx(0.1)
    stopped = CallTimes(wall=3.0, cpu=0.001, waited=0.0, stopped=2.99)
    assert stopped.blocked == pytest.approx(0.009)
    sleeping = CallTimes(wall=0.6, cpu=0.0001, waited=0.0)
    assert sleeping.blocked == pytest.approx(0.5999)
    assert "waiting for a CPU 1,900 ms" in loaded.numbers() and "stopped 2,990 ms" in stopped.numbers()


def test_each_limit_names_its_own_cause():
    limits = CallLimits(cpu=0.05, blocked=0.5, wall=60.0)
    assert limits.broken(CallTimes(wall=0.2, cpu=0.06, waited=0.0)) == "cpu"
    assert limits.broken(CallTimes(wall=0.7, cpu=0.001, waited=0.0)) == "blocked"
    assert limits.broken(CallTimes(wall=59.0, cpu=0.001, waited=58.9)) is None  # load alone never fails a call
    assert limits.broken(CallTimes(wall=61.0, cpu=0.001, waited=30.0, stopped=30.9)) == "wall"


def test_stopped_time_is_counted_from_the_kernel_state_of_a_real_process():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        clock = KernelClock.of_process(sleeper.pid)
        wait_for(lambda: clock.state() == b"S", 30, "the process to fall asleep")
        watch = CallWatch(clock, wait_for(clock.read, 10, "the process's clocks"), time.monotonic())
        time.sleep(0.3)
        assert watch.sample().blocked >= 0.25  # asleep: blocked, not stopped
        os.kill(sleeper.pid, signal.SIGSTOP)
        wait_for(clock.stopped, 10, "the process to stop")
        before = watch.sample()
        time.sleep(0.4)
        after = watch.sample()
        assert after.stopped - before.stopped >= 0.35 and after.blocked - before.blocked < 0.05
        os.kill(sleeper.pid, signal.SIGCONT)
    finally:
        sleeper.kill()
        sleeper.wait()


# --- real workers: each cause, and nothing else --------------------------------------------------------------


def test_a_busy_loop_is_stopped_for_its_cpu_time(view):
    reward = SandboxedReward(after_calls(3, "while True:\n                pass"), "spin")
    call(reward, view, 2)
    started = time.monotonic()
    with pytest.raises(RewardProgramError) as caught:
        call(reward, view)
    assert type(caught.value) is RewardProgramError and caught.value.cause == "reward"
    assert "failed at call 3: one reward call used" in str(caught.value) and "ms of CPU time, over the 50 ms limit" in str(caught.value)
    cpu_ms = float(caught.value.numbers.split("CPU ")[1].split(" ms")[0].replace(",", ""))
    # stopped per call, near the limit (a poll is 20 ms; this process may itself wait for a CPU or have its virtual
    # CPU stolen meanwhile, so a generous bound), not by the process's CPU rlimit of two hours
    assert 50 < cpu_ms < 1000
    assert time.monotonic() - started < Limits().call_wall_seconds


def test_a_sleep_is_stopped_for_its_blocked_time(view):
    reward = SandboxedReward(after_calls(3, "real_time().sleep(30)"), "sleep")
    call(reward, view, 2)
    with pytest.raises(RewardProgramError) as caught:
        call(reward, view)
    assert caught.value.cause == "reward"
    assert "blocked (sleeping or waiting, not computing), over the 500 ms limit" in str(caught.value)
    assert "blocked limit 500 ms" in caught.value.numbers


def test_a_stopped_worker_is_not_the_rewards_fault_and_the_backstop_ends_the_wait(view):
    """A hang that is neither computing nor blocking (a worker frozen from outside): only the wall backstop
    stops it, and the failure says the machine did it, so the model is told nothing false."""
    reward = SandboxedReward(PLAIN, "frozen", Limits(call_wall_seconds=3.0))  # warm-up calls far inside it, loaded
    call(reward, view, 3)
    os.kill(reward._worker.python_pid, signal.SIGSTOP)
    with pytest.raises(RewardStoppedByMachine) as caught:
        call(reward, view)
    assert caught.value.cause == "machine"
    assert "kept from running" in str(caught.value) and "sleep" not in str(caught.value)
    assert "wall backstop 3 s" in caught.value.numbers and "stopped" in caught.value.numbers


def test_a_worker_stopped_longer_than_every_per_call_limit_then_continued_is_not_failed(view):
    """The starved worker of a loaded machine, at its worst: SIGSTOP for 1.5 s (3x the blocked limit, 3x the old
    wall limit) while a call waits on it, then SIGCONT. The reward goes on, with the same value."""
    reward = SandboxedReward(PLAIN, "starved")
    expected = call(reward, view, 3)
    pid = reward._worker.python_pid
    started = time.monotonic()  # before the timer: the call below then waits 1.5 s at least, however late it starts
    os.kill(pid, signal.SIGSTOP)
    threading.Timer(1.5, os.kill, (pid, signal.SIGCONT)).start()
    assert call(reward, view) == expected
    assert time.monotonic() - started >= 1.4
    assert call(reward, view, 300) == expected  # and every call after it
    reward.close()


CALLER = '''
import sys, time
import numpy as np
from sim_envs import get_task
from text2reward.sandbox import SandboxedReward
task = get_task("fetch/reach")
env = task.make_env(seed=0)
env.reset(seed=0)
view = task.view(env)
reward = SandboxedReward(sys.argv[1], "plain")
reward(view, np.zeros(4), 0.0, False)
print("ready", flush=True)
failures, calls, until = 0, 0, time.monotonic() + float(sys.argv[2])
while time.monotonic() < until:
    try:
        reward(view, np.zeros(4), 0.0, False)
        calls += 1
    except Exception as exc:
        failures += 1
        print("FAILED", exc, flush=True)
        reward = SandboxedReward(sys.argv[1], "plain")
print("calls", calls, "failures", failures, flush=True)
'''


def test_a_caller_kept_from_running_never_fails_a_reward_that_answered():
    """The clock that misjudged under load: the caller's own. A training process kept waiting for a CPU past the old
    0.5 s limit came back to a reply that was already there, and failed the reward anyway. Here the caller is
    stopped for 0.7 s at arbitrary moments of its calls, ten times."""
    caller = subprocess.Popen([sys.executable, "-c", CALLER, PLAIN, "16"], stdout=subprocess.PIPE, text=True)
    try:
        assert caller.stdout.readline().strip() == "ready"
        for _ in range(10):
            time.sleep(0.4)
            caller.send_signal(signal.SIGSTOP)
            time.sleep(0.7)
            caller.send_signal(signal.SIGCONT)
        out, _ = caller.communicate(timeout=120)
    finally:
        caller.kill()
    assert "FAILED" not in out and " failures 0" in out, out[-2000:]
    assert int(out.split("calls ")[1].split()[0]) > 1000


def starve(pid: int) -> subprocess.Popen:
    """Keep `pid` runnable but (almost) never running: SCHED_IDLE on CPU 0 beside a busy loop pinned there."""
    hog = subprocess.Popen([sys.executable, "-c", "import os; os.sched_setaffinity(0, {0})\nwhile True: pass"])
    os.sched_setaffinity(pid, {0})
    os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    return hog


def test_a_wait_for_a_cpu_still_going_on_is_not_blocked_time():
    """schedstat adds a wait to its total only when the task gets the CPU: a task kept runnable for a long stretch
    must be read as waiting (its run state), not as blocked."""
    victim = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    hog = None
    try:
        clock = KernelClock.of_process(victim.pid)
        time.sleep(0.3)
        hog = starve(victim.pid)
        time.sleep(0.3)
        watch = CallWatch(clock, wait_for(clock.read, 10, "the process's clocks"), time.monotonic())
        for _ in range(40):  # 0.8 s of polls, as a call's would come
            time.sleep(0.02)
            times = watch.sample()
        assert times.wall > 0.7 and times.blocked < 0.2 and times.waited > 0.5, times
    finally:
        for process in (victim, hog):
            if process is not None:
                process.kill()
                process.wait()


def test_a_starved_worker_is_not_failed(view):
    """A worker kept runnable without a CPU for seconds (SCHED_IDLE behind a busy loop on its CPU): the calls are
    slow on the wall clock, and none fails."""
    reward = SandboxedReward(PLAIN, "starved")
    expected = call(reward, view, 3)
    pid = reward._worker.python_pid
    hog = starve(pid)
    try:
        started = time.monotonic()
        while time.monotonic() - started < 3.0:
            assert call(reward, view) == expected
    finally:
        hog.kill()
        hog.wait()
        os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
        os.sched_setaffinity(pid, range(os.cpu_count() or 1))
    assert call(reward, view, 100) == expected
    reward.close()


IDLE_SPINNER = '''
import os, sys, time
sys.path[:0] = [SRC]
from text2reward.sandbox.channel import FrameReader, frame, write_all
reader = FrameReader(0)
sys.stderr.write("ready\\n")  # started and imported: a first request then times only the call
sys.stderr.flush()
while True:
    reader.read()
    write_all(1, frame(b'{"ok": 1}'))
    started = time.thread_time()
    while time.thread_time() - started < 0.02:  # 20 ms of CPU after answering, while it should wait
        pass
'''


def test_cpu_used_between_calls_is_read_from_the_kernel_at_every_call_boundary():
    """The parent's clocks, not the worker's word: a process that computes after each answer, while it should wait for
    the next request, is seen doing it at the next call (the jail forbids the timers a reward would use for it; this
    checks the clocks behind that, on a plain process speaking the same frames)."""
    from pathlib import Path

    from text2reward.sandbox.calls import CallChannel, SandboxFailure

    source = IDLE_SPINNER.replace("SRC", repr(str(Path(__file__).resolve().parents[2])))
    process = subprocess.Popen([sys.executable, "-c", source], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # the interpreter's start and imports (~50 ms of CPU, more on a busy machine) are not a call's: the first
        # request goes once the process is ready, as the jail's workers answer a ready message first
        assert process.stderr.readline() == b"ready\n"
        os.set_blocking(process.stdin.fileno(), False)
        calls = CallChannel(process.stdin.fileno(), process.stdout.fileno(), lambda: process.pid, process.kill,
                            lambda detail: SandboxFailure(str(detail)))
        limits = CallLimits(cpu=0.05, blocked=0.5, wall=60.0)
        idle = []
        clock = None
        for _ in range(5):
            reply, own = calls.exchange(b"\0\0\0\x01x", limits)
            assert reply == b'{"ok": 1}' and own is not None
            idle.append(calls.idle_cpu)
            clock = clock or calls.clock()  # the parent's own work between steps: the process spins through it, then waits
            wait_for(lambda: clock.state() == b"S", 30, "the process to wait for the next request")  # noqa: B023
        assert idle[0] == 0.0 and min(idle[1:]) > 0.015, idle
    finally:
        process.kill()
        process.wait()


ANSWER_ONCE_AND_EXIT = READ_ONE_REQUEST + """
reply = b'{"forged": true}'
os.write(1, struct.pack(">I", len(reply)) + reply)
os._exit(0)
"""


def test_a_reply_written_before_the_process_ended_is_read_before_its_end_is_named():
    """Validation queues calls ahead; a process that answers the first and exits makes the next write fail. What it
    answered is still in the pipe and is what the parent judges (a forged reply must be named as one, not as an early
    exit that depends on who ran first). Calls of 40 kB: the second fills the pipe, so its write meets the exit."""
    from text2reward.sandbox.calls import CallChannel, SandboxFailure

    process = subprocess.Popen([sys.executable, "-c", ANSWER_ONCE_AND_EXIT], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        os.set_blocking(process.stdin.fileno(), False)
        calls = CallChannel(process.stdin.fileno(), process.stdout.fileno(), lambda: process.pid, process.kill,
                            lambda detail: SandboxFailure(f"ended before answering ({detail})"))
        payload = b"x" * 40_000
        frames = [len(payload).to_bytes(4, "big") + payload] * 4
        replies = calls.stream(frames, CallLimits(cpu=5.0, blocked=5.0, wall=60.0))
        assert next(replies)[0] == b'{"forged": true}'
        with pytest.raises(SandboxFailure, match="ended before answering"):
            next(replies)
    finally:
        process.kill()
        process.wait()


def test_a_seccomp_kill_reads_the_same_on_every_path():
    """Killed by SIGSYS directly (the validation child, the jail without bubblewrap) or reported by bubblewrap as its
    exit code 159: one reason, naming the forbidden system call."""
    from text2reward.sandbox.process import explain_exit

    direct = explain_exit(int(signal.SIGSYS), None, Limits())
    through_bwrap = explain_exit(None, 128 + int(signal.SIGSYS), Limits())
    assert direct == through_bwrap and "forbidden system call (SIGSYS: a call through the x32 or i386 entry point)" in direct
    assert "killed from outside" in explain_exit(int(signal.SIGKILL), None, Limits(), cpu_rlimit=False)
    assert "CPU-time (30 s) or memory" in explain_exit(int(signal.SIGKILL), None, Limits(), cpu_rlimit=True)
