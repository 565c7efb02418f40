"""A training that holds a free core of its own (policies/cpu_affinity.py): every thread it has or starts and the
processes it starts run there; two trainings never hold one core; a core is free again the moment its holder ends; a
training started when every core is held, or not asked to hold one, holds none."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from policies.cpu_affinity import HOLD_VARIABLE, LOCKS_VARIABLE
from text2reward.training.pool import PIN_VARIABLE, core_environment

USABLE = sorted(os.sched_getaffinity(0))
needs_two_cores = pytest.mark.skipif(len(USABLE) < 2, reason="holding a core needs a machine with two")

HOLD = """
import json, os, subprocess, sys, threading
from policies.cpu_affinity import hold_to_a_free_core
before = threading.Thread(target=threading.Event().wait, args=(30,), daemon=True)
before.start()  # a thread that exists before the hold, as XLA's pool may
held = hold_to_a_free_core()
after = threading.Thread(target=threading.Event().wait, args=(30,), daemon=True)
after.start()
threads = {t: sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")}
child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"], capture_output=True, text=True)
print(json.dumps({"held": held, "threads": threads, "child": json.loads(child.stdout)}), flush=True)
sys.stdin.read()  # hold the core until the test lets go
"""


class Training:
    """A process that asks for a core as a training job does, and keeps it until `end`."""

    def __init__(self, locks, hold: str | None = "1"):
        env = {k: v for k, v in os.environ.items() if k != HOLD_VARIABLE} | {LOCKS_VARIABLE: str(locks)}
        if hold is not None:
            env[HOLD_VARIABLE] = hold
        self.process = subprocess.Popen([sys.executable, "-c", HOLD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.seen = json.loads(self.process.stdout.readline())

    def end(self) -> None:
        self.process.communicate("", timeout=60)


@needs_two_cores
def test_every_thread_and_child_of_a_training_holds_its_core(tmp_path):
    training = Training(tmp_path)
    core = training.seen["held"]
    assert core in USABLE
    assert len(training.seen["threads"]) >= 3 and all(cores == [core] for cores in training.seen["threads"].values())
    assert training.seen["child"] == [core]  # the jailed reward it starts shares the core: its calls are synchronous
    training.end()


@needs_two_cores
def test_trainings_side_by_side_hold_different_cores_and_one_past_them_holds_none(tmp_path):
    trainings = [Training(tmp_path) for _ in USABLE]
    assert sorted(t.seen["held"] for t in trainings) == USABLE
    extra = Training(tmp_path)
    assert extra.seen["held"] is None and all(cores == USABLE for cores in extra.seen["threads"].values())
    extra.end()
    freed = trainings.pop(0)
    freed.process.kill()  # however it ends, its core is free at once
    freed.process.wait()
    again = Training(tmp_path)
    assert again.seen["held"] == freed.seen["held"]
    for training in [*trainings, again]:
        training.end()


def test_a_lock_folder_that_cannot_be_made_holds_nothing_and_fails_nothing(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    seen = Training(blocker / "cores").seen  # a folder under a file cannot be made
    assert seen["held"] is None and all(cores == USABLE for cores in seen["threads"].values())


@pytest.mark.parametrize("hold", [None, "0", ""])
def test_a_training_not_asked_to_hold_a_core_holds_none(tmp_path, hold):
    seen = Training(tmp_path, hold).seen
    assert seen["held"] is None
    assert all(cores == USABLE for cores in seen["threads"].values()) and seen["child"] == USABLE


def test_the_local_launcher_asks_its_jobs_to_hold_a_core_unless_told_not_to(monkeypatch):
    monkeypatch.delenv(PIN_VARIABLE, raising=False)
    assert core_environment() == {HOLD_VARIABLE: "1"}
    monkeypatch.setenv(PIN_VARIABLE, "0")
    assert core_environment() == {}
