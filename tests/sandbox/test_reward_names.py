"""What a reward returns is data the parent bounds: its component names, the size and shape of its replies, and its
time over a whole training, on both jails (issue 42, items 1 and 4).

Names match an identifier pattern, at most 64 per call and per run, and validation's set binds training; a reply
frame larger than any answer is refused from its header (never read, never parsed), one with extra items is
malformed; a reward that answers calls it was not sent, or stops reading its requests, is the reward's failure,
never the machine's; and budgets over a candidate's whole training stop a reward slow on a minority of its calls,
which the per-call limits and the median let through. Real jailed workers on real states.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from attack_programs import READ_ONE_REQUEST

from sim_envs import get_task
from sim_envs.errors import RewardProgramError, RewardStoppedByMachine
from text2reward.sandbox import Limits, SandboxedReward, collect_states, validate
from text2reward.sandbox.isolation import check

MECHANISMS = [
    pytest.param(m, marks=pytest.mark.skipif(isinstance(check(m), str), reason=f"{m} unavailable here: {check(m)}"))
    for m in ("bubblewrap", "landlock")
]
HOSTILE_NAMES = ["_steps", "_components", "_step_success", "_native", "steps", "components"]

LINT_OFF = '''
def real(module):
    """A real module past the lint layer (the jail is what stands)."""
    for cls in ().__class__.__bases__[0].__subclasses__():
        if cls.__name__ == "catch_warnings":
            return cls()._module.__builtins__["__import__"](module)
    raise LookupError("no route")


def write_reply(data):
    """Write on the reply pipe as the harness would (fds 3-15 hold it: the worker moved its stdio there)."""
    os = real("os")
    for fd in range(3, 16):
        try:
            os.write(fd, data)
        except Exception:
            pass
'''


@pytest.fixture(scope="module")
def samples():
    return collect_states(get_task("fetch/reach"), n_random=3, n_scripted=0, seed=0)


def reward(components: str, prelude: str = "") -> str:
    """A reach reward returning `components` (an expression over `d`, the distance to the goal)."""
    return "import numpy as np\n" + prelude + textwrap.dedent(f'''

    def compute_dense_reward(self, action):
        d = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
        return -d, {components}
    ''')


def jailed(mechanism: str, **limits: float) -> Limits:
    return Limits(isolation=mechanism, cpu_seconds=2, **limits)  # type: ignore[arg-type]


def call(sandboxed: SandboxedReward, samples, times: int) -> None:
    for index in range(times):
        view, action = samples[index % len(samples)]
        sandboxed(view, action, 0.0, False)


# --- names ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_names_that_are_our_own_keys_are_ordinary_names(mechanism, samples):
    code = reward("{" + ", ".join(f"{name!r}: -d * {i + 1}" for i, name in enumerate(HOSTILE_NAMES)) + "}")
    # 21 calls: a process's first call costs ~1.5 ms of CPU, which 3 calls alone would average close to the 2 ms check
    report = validate(code, get_task("fetch/reach"), samples * 7, jailed(mechanism))
    assert report.ok, report.errors
    assert report.component_names == sorted(HOSTILE_NAMES)
    with SandboxedReward(code, "hostile", jailed(mechanism), names=report.component_names) as sandboxed:
        view, action = samples[0]
        total, components = sandboxed(view, action, 0.0, False)
        assert sorted(components) == sorted(HOSTILE_NAMES) and components["_steps"] == pytest.approx(total)


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("name, problem", [
    ("reach dist", "not a plain name"),
    ("1st", "not a plain name"),
    ("</script><script>", "not a plain name"),
    ("r\u00e9ach", "not a plain name"),
    ("\u202ereach", "not a plain name"),
    ("x" * 65, "65 characters; use short names (at most 64)"),
])
def test_names_off_the_pattern_fail_validation_with_a_message(mechanism, name, problem, samples):
    report = validate(reward("{" + repr(name) + ": -d}"), get_task("fetch/reach"), samples, jailed(mechanism))
    assert not report.ok
    assert report.checks["output"]["ok"] is False and problem in report.checks["output"]["detail"]
    assert "letters, digits and underscores" in report.errors[0] or "at most 64" in report.errors[0]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_more_names_than_a_run_may_have_fail_validation(mechanism, samples):
    """40 names a state, made from the state (deterministic): 120 over the three states, past the 64 a run may have."""
    code = reward('{f"s{int(abs(float(self.robot.ee_position[0])) * 1e6) % 1000}_{i}": -d for i in range(40)}')
    report = validate(code, get_task("fetch/reach"), samples, jailed(mechanism))
    assert not report.ok
    assert "more than 64 different component names" in report.checks["output"]["detail"]
    too_many = reward("{f'n{i}': -d for i in range(65)}")
    report = validate(too_many, get_task("fetch/reach"), samples, jailed(mechanism))
    assert not report.ok and "returns 65 components; return at most 64" in report.errors[0]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_name_validation_never_saw_fails_the_candidate_in_training(mechanism, samples):
    code = reward('{"reach": -d, **({"bonus": 1.0} if len(calls) > 3 else {})}', "calls = []\n").replace(
        "    d = float", "    calls.append(1)\n    d = float")
    sandboxed = SandboxedReward(code, "late_bonus", jailed(mechanism), names=["reach"])
    call(sandboxed, samples, 3)
    with pytest.raises(RewardProgramError) as caught:
        call(sandboxed, samples, 1)
    assert caught.value.cause == "reward"
    assert "component 'bonus', which it never returned in validation (there: reach)" in str(caught.value)
    with pytest.raises(RewardProgramError, match="never returned in validation"):  # failed for good
        call(sandboxed, samples, 1)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_names_made_from_the_state_are_bounded_over_a_training(mechanism, samples):
    """Without validation's set (a reward file), at most 64 distinct names over the run: a new name every call fails
    at the 65th, never growing the records and the next prompt without end."""
    code = reward('{f"n{len(calls)}": -d}', "calls = []\n").replace("    d = float", "    calls.append(1)\n    d = float")
    sandboxed = SandboxedReward(code, "growing", jailed(mechanism))
    call(sandboxed, samples, 64)
    with pytest.raises(RewardProgramError, match="more than 64 different component names") as caught:
        call(sandboxed, samples, 1)
    assert caught.value.cause == "reward"


# --- replies ----------------------------------------------------------------------------------------------------


def forging(frame: bytes, at: int) -> str:
    """A reward that writes `frame` on its reply pipe at its `at`-th call in place of its answer (it then waits, so
    the forged frame is the only reply the parent reads)."""
    return reward('{"reach": -d}', LINT_OFF + "calls = []\n").replace(
        "    d = float", f"    calls.append(1)\n    if len(calls) == {at}:\n        write_reply({frame!r})\n"
        "        real('time').sleep(30)\n    d = float")


def framed(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("name, frame, reason", [
    # a valid 4 MB reply, `[total, {components}, 0, 0, ...]`: refused from its header, never read or parsed
    ("four_megabytes", framed(json.dumps([0.0, {"reach": 0.0}] + [0] * 1_400_000).encode()), "exceeds the 65,536-byte limit"),
    ("extra_items", framed(json.dumps([0.0, {"reach": 0.0}, 0, 0]).encode()), "malformed reply"),
    ("padded_json", framed(b"[0.0, {\"reach\": 0.0}" + b" " * 20_000 + b"]"), "longer than any answer can be"),
])
def test_replies_beyond_what_an_answer_needs_are_refused(mechanism, name, frame, reason, samples):
    sandboxed = SandboxedReward(forging(frame, 2), name, jailed(mechanism))
    call(sandboxed, samples, 1)
    with pytest.raises(RewardProgramError, match=reason) as caught:
        call(sandboxed, samples, 1)
    assert caught.value.cause == "reward"
    assert sandboxed._worker is None


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_reward_that_answers_calls_it_was_not_sent_is_the_rewards_failure(mechanism, samples):
    """At its second call the reward stops reading requests and writes its own replies for ever (the pipe fills, it
    blocks, the parent's next request meets a full pipe): before, the parent took them as answers, then waited out
    the wall backstop and blamed the machine (retried)."""
    packed = b"R" + struct.pack("<2d", 1.0, 1.0)
    code = reward('{"reach": -d}', LINT_OFF + "calls = []\n").replace(
        "    d = float", f"    calls.append(1)\n    while len(calls) == 2:\n        write_reply({framed(packed)!r} * 512)\n    d = float")
    sandboxed = SandboxedReward(code, "self_answering", jailed(mechanism, call_wall_seconds=5.0))
    call(sandboxed, samples, 1)
    with pytest.raises(RewardProgramError) as caught:
        call(sandboxed, samples, 200)
    assert not isinstance(caught.value, RewardStoppedByMachine) and caught.value.cause == "reward"
    assert "not asked for" in str(caught.value)


STOPS_READING = READ_ONE_REQUEST + """
import time
reply = b'{"ready": true}'
os.write(1, struct.pack(">I", len(reply)) + reply)
time.sleep(60)
"""


def test_a_process_that_stops_reading_its_requests_is_judged_on_its_clocks():
    """A request the process does not read (a pipe full, a process asleep): judged on its blocked time while the
    parent waits to write, not left to the wall backstop that blames the machine."""
    from text2reward.sandbox.calls import CallChannel, CallStopped, SandboxFailure
    from text2reward.sandbox.clocks import CallLimits

    process = subprocess.Popen([sys.executable, "-c", STOPS_READING], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        os.set_blocking(process.stdin.fileno(), False)
        calls = CallChannel(process.stdin.fileno(), process.stdout.fileno(), lambda: process.pid, process.kill,
                            lambda detail: SandboxFailure(f"ended ({detail})"))
        hello = b"{}"
        reply, _ = calls.exchange(framed(hello), CallLimits(cpu=5.0, blocked=5.0, wall=60.0))
        assert reply == b'{"ready": true}'
        with pytest.raises(SandboxFailure) as caught:
            calls.exchange(framed(b"x" * 1_000_000), CallLimits(cpu=0.05, blocked=0.3, wall=30.0))
        assert not isinstance(caught.value, CallStopped) and not caught.value.by_machine
        assert "stopped reading its requests" in str(caught.value) and "blocked" in str(caught.value)
    finally:
        process.kill()
        process.wait()


# --- budgets over a whole training ----------------------------------------------------------------------------


def sometimes(body: str) -> str:
    """A reach reward that does `body` on 9 calls of every 20 (45%), from its second call on."""
    return reward('{"reach": -d}', LINT_OFF + "calls = []\n").replace(
        "    d = float", f"    calls.append(1)\n    if len(calls) > 1 and len(calls) % 20 < 9:\n        {body}\n    d = float")


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sleeping_on_some_calls_is_stopped_by_the_blocked_budget(mechanism, samples):
    """Under the per-call limit on every call and under the median over a window, but not under the budget: small
    budgets here, so the test is quick; the defaults scale the same arithmetic (Limits)."""
    limits = jailed(mechanism, call_blocked_seconds=0.5, total_blocked_seconds=0.6, total_blocked_per_call=0.001)
    sandboxed = SandboxedReward(sometimes('real("time").sleep(0.15)'), "sometimes_asleep", limits)
    with pytest.raises(RewardProgramError) as caught:
        call(sandboxed, samples, 40)
    assert caught.value.cause == "reward"
    assert "blocked (sleeping or waiting, not computing), over its budget" in str(caught.value)
    assert "not even on some calls" in str(caught.value) and "blocked" in caught.value.numbers


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_computing_on_some_calls_is_stopped_by_the_cpu_budget(mechanism, samples):
    """30 ms of CPU (on the process's own CPU clock) on 45% of calls: under the 50 ms per-call limit, over the budget."""
    spin = 'clock = real("time").process_time\n        start = clock()\n        while clock() - start < 0.03:\n            pass'
    limits = jailed(mechanism, total_cpu_seconds=0.2, total_cpu_per_call=0.001)
    sandboxed = SandboxedReward(sometimes(spin), "sometimes_busy", limits)
    with pytest.raises(RewardProgramError) as caught:
        call(sandboxed, samples, 60)
    assert caught.value.cause == "reward"
    assert "of CPU time in all, over its budget" in str(caught.value)


def test_an_ordinary_reward_stays_far_inside_the_default_budgets(samples):
    """The default budgets never touch a numpy reward: its totals after some calls are a sliver of the grant."""
    with SandboxedReward(reward('{"reach": -d, "smooth": -0.01 * float(np.sum(np.square(action)))}'), "plain") as sandboxed:
        call(sandboxed, samples, 300)
        limits = sandboxed.limits
        assert sandboxed._cpu_total < 0.01 * limits.total_cpu_seconds
        assert sandboxed._blocked_total < 0.01 * limits.total_blocked_seconds
    assert np.isfinite(sandboxed._cpu_total)
