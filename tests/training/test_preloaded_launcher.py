"""The training fork server (training/forkserver.py, preloaded.py) through the local launcher: a job forked from it
trains as a fresh worker does, crashes and kills cost only the job, a dead server is replaced, and the server never
outlives the process that started it. Real processes and real training throughout; waits are bounded, never timed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from polling import alive, wait_for

from policies.config import TrainConfig
from policies.cpu_affinity import LOCKS_VARIABLE
from text2reward.training.job import ERROR_FILE, JOB_FILE, PID_FILE, WORKER_LOG, TrainJob, read_job
from text2reward.training.pool import JobOutcome, LocalLauncher
from text2reward.training.preloaded import SOCKET_VARIABLE, fork_server, start_shared_server

BOUND = 600.0
"""Seconds a job or a process may take to do what the test waits for on a loaded machine: a bound, not a timing."""


@pytest.fixture(autouse=True)
def own_server(monkeypatch):
    """These tests are about a driver's own server: not the test session's shared one (conftest.py)."""
    monkeypatch.delenv(SOCKET_VARIABLE, raising=False)


def same_training(a, b) -> bool:
    """Two results trained alike: the same curve (steps, success, returns at each evaluation) and final evaluation."""
    figures = [[(p.steps, p.success_rate, p.mean_return, p.std_return) for p in r.curve] for r in (a, b)]
    return figures[0] == figures[1] and a.final_eval == b.final_eval and a.success_rate == b.success_rate


def tiny_job(out: Path, steps: int = 200, seed: int = 0, task_id: str = "fetch/reach") -> TrainJob:
    return TrainJob(train=TrainConfig(task_id=task_id, out_dir=out / "train", reward="sparse", steps=steps, seed=seed,
                                      eval_freq=100, eval_episodes=2, overrides={"learning_starts": 50, "batch_size": 32}),
                    analysis_episodes=0)


def start(launcher: LocalLauncher, job: TrainJob, index: int = 0) -> None:
    """What `pool.schedule` does before it starts a job: its folder and its job.json."""
    Path(job.out_dir).mkdir(parents=True, exist_ok=True)
    job.write()
    launcher.start(index, job)


def outcome_of(launcher: LocalLauncher, index: int = 0) -> JobOutcome:
    found: dict[int, JobOutcome] = {}

    def ended() -> bool:
        found.update(launcher.collect())
        return index in found

    wait_for(ended, BOUND, f"job {index} to end")
    return found[index]


def parent_of(pid: int) -> int:
    return int(next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("PPid:")).split()[1])


@pytest.fixture
def shared(shared_fork_server, tmp_path):
    """The test process's shared fork server and its socket (tests/conftest.py: each started here would import
    everything again), or one of this test's own where the session has none; the test must leave it alive."""
    if shared_fork_server is not None:
        yield shared_fork_server
        assert shared_fork_server[0].alive(), "the shared server died in the test"
        return
    folder = tmp_path / "shared"
    folder.mkdir()
    server, path = start_shared_server(str(folder))
    try:
        yield server, path
    finally:
        server.close()


@pytest.fixture(scope="module")
def fresh_outcome(tmp_path_factory) -> JobOutcome:
    """The tiny job trained by a fresh worker (its own interpreter, nothing preloaded): what a forked job must equal.
    Once per module: a fresh worker imports everything (~5 s of CPU) and its result is only read."""
    said: list[str] = []
    fresh = LocalLauncher(said.append, preload=False)
    start(fresh, tiny_job(tmp_path_factory.mktemp("fresh"), seed=3))
    outcome = outcome_of(fresh)
    assert outcome.ok and not said, (outcome.reason, said)
    return outcome


def test_a_job_forked_from_the_server_trains_like_a_fresh_one(tmp_path, fresh_outcome):
    """Same seed, same settings: the forked job's curve, returns and final evaluation equal a fresh worker's."""
    said: list[str] = []
    forked = LocalLauncher(said.append)
    start(forked, tiny_job(tmp_path / "forked", seed=3))
    (job, server, pid) = forked.forked[0]
    assert parent_of(pid) == server.pid, "the job is a child of the fork server"
    forked_outcome = outcome_of(forked)
    assert not said, said
    assert fresh_outcome.ok and forked_outcome.ok, (fresh_outcome.reason, forked_outcome.reason)
    a, b = fresh_outcome.record.result, forked_outcome.record.result  # type: ignore[union-attr]
    assert same_training(a, b)
    assert "Traceback" not in (tmp_path / "forked" / "worker.log").read_text()


def test_the_server_forks_from_one_thread_with_the_libraries_imported_and_no_jax_backend():
    server = fork_server(lambda line: None)
    assert server is not None
    assert len(os.listdir(f"/proc/{server.pid}/task")) == 1, "one thread: nothing started a pool before the fork"
    maps = Path(f"/proc/{server.pid}/maps").read_text()
    assert "libtorch" in maps and "mujoco" in maps, "the heavy libraries are loaded in the server"
    assert server.wait_ready()["jax_backend"] is False and server.wait_ready()["threads"] == 1


TORCH_AFTER_PRELOAD = """
import json, sys
from pathlib import Path
from text2reward.training.forkserver import preload
preload()
before = set(sys.modules)
from policies.config import TrainConfig
from policies.train import train
train(TrainConfig(task_id="fetch/reach", out_dir=Path(sys.argv[2]), reward="expert", steps=60, algo=sys.argv[1],
                  eval_freq=60, eval_episodes=1, overrides={"learning_starts": 20, "batch_size": 16}))
print(json.dumps(sorted(name for name in set(sys.modules) - before if name.split(".")[0] == "torch")))
"""


def test_an_sb3_job_imports_no_more_of_torch_after_the_servers_preload(tmp_path):
    """SB3's optimizers import `torch._dynamo` (~320 modules, 1.2-1.9 s) at their first construction, which every SB3
    job would otherwise pay after its fork: the server imports it, so a forked job's first step comes ~1.5 s sooner."""
    done = subprocess.run([sys.executable, "-c", TORCH_AFTER_PRELOAD, "sac", str(tmp_path / "out")], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(imported) < 10 and not any(name.startswith("torch._dynamo") for name in imported), imported


def test_crashed_and_killed_jobs_cost_only_themselves(tmp_path, monkeypatch):
    monkeypatch.setenv(LOCKS_VARIABLE, str(tmp_path / "cores"))  # cores this test's jobs alone claim: other tests' jobs hold none
    said: list[str] = []
    server = fork_server(said.append)
    assert server is not None
    launcher = LocalLauncher(said.append)
    start(launcher, tiny_job(tmp_path / "crash", task_id="metaworld/no-such-task-v3"))
    crashed = outcome_of(launcher)
    assert not crashed.ok and "no-such-task" in json.loads((tmp_path / "crash" / ERROR_FILE).read_text())["reason"]
    start(launcher, tiny_job(tmp_path / "killed", steps=100_000), index=1)
    pid_file = tmp_path / "killed" / PID_FILE
    pid = wait_for(lambda: pid_file.is_file() and pid_file.read_text().isdigit() and int(pid_file.read_text()), BOUND, "the worker's pid")
    if len(os.sched_getaffinity(0)) > 1:  # a core of its own, held by every thread of the job (policies/cpu_affinity.py)
        log = tmp_path / "killed" / WORKER_LOG
        said_core = wait_for(lambda: re.search(r"training on CPU core (\d+)", log.read_text()), BOUND, "the job's core on its log")
        core = int(said_core.group(1))
        wait_for(lambda: all(os.sched_getaffinity(int(t)) == {core} for t in os.listdir(f"/proc/{pid}/task")), BOUND,
                 f"the job's threads held to core {core}")
    os.kill(pid, signal.SIGKILL)
    killed = outcome_of(launcher, 1)
    assert killed.interrupted and "killed by signal 9" in (killed.reason or ""), killed.reason
    assert server.alive() and fork_server(said.append) is server, "the server outlives its jobs' deaths"
    start(launcher, tiny_job(tmp_path / "after"), index=2)
    assert outcome_of(launcher, 2).ok and not said, said


def test_a_dead_server_is_replaced_and_the_launcher_says_so(tmp_path):
    said: list[str] = []
    old = fork_server(said.append)
    assert old is not None
    os.kill(old.pid, signal.SIGKILL)
    wait_for(lambda: not old.alive(), BOUND, "the server's end to be seen")
    launcher = LocalLauncher(said.append)
    start(launcher, tiny_job(tmp_path / "job"))
    assert launcher.forked[0][1].pid != old.pid
    assert any(f"fork server (pid {old.pid}) ended; starting another" in line for line in said), said
    assert outcome_of(launcher).ok


DRIVER = """
import sys
from pathlib import Path
from policies.config import TrainConfig
from text2reward.training.job import TrainJob
from text2reward.training.pool import LocalLauncher
out = Path(sys.argv[1])
job = TrainJob(train=TrainConfig(task_id="fetch/reach", out_dir=out / "train", reward="sparse", steps=1_000_000, eval_freq=100,
                                 eval_episodes=1, overrides={"learning_starts": 50, "batch_size": 32}), analysis_episodes=0)
out.mkdir(parents=True)
job.write()
launcher = LocalLauncher()
launcher.start(0, job)
(_, server, pid) = launcher.forked[0]
print(server.pid, pid, flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("how", ["killed", "exits"])
def test_the_server_never_outlives_its_driver_and_a_training_job_lives_on(tmp_path, how):
    """SIGKILL or a plain exit of the driver: the server leaves at once, even while a job it forked trains; the job goes
    on (a resumed run adopts it, as it adopts a fresh worker: `pool.running_worker`)."""
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path / "job")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2])
    server_pid, job_pid = (int(word) for word in driver.stdout.readline().split())  # type: ignore[union-attr]
    try:
        assert alive(server_pid) and alive(job_pid)
        if how == "killed":
            driver.kill()
        else:
            driver.stdin.close()  # type: ignore[union-attr]
        driver.wait(BOUND)
        wait_for(lambda: not alive(server_pid), BOUND, "the server to leave with its driver")
        assert alive(job_pid), "the job keeps training"
        job = read_job(json.loads((tmp_path / "job" / JOB_FILE).read_text()))
        from text2reward.training.pool import running_worker

        assert wait_for(lambda: running_worker(job), BOUND, "the job's pid file") == job_pid, "a resumed run adopts it"
    finally:
        for pid in (job_pid, server_pid):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        driver.kill()


@pytest.mark.parametrize("session", ["same", "new"])
def test_a_driver_forks_from_the_shared_server_into_its_own_group_or_starts_its_own(tmp_path, session, shared):
    """A driver given a shared server's socket forks its jobs there, each job in the driver's process group (a kill of
    the group reaches it, the shared server lives on); a driver in another session cannot put a job in its group, so
    it starts a server of its own, its child."""
    shared, path = shared
    folder = Path(path).parent
    assert Path(path).stat().st_mode & 0o077 == 0 and folder.stat().st_mode & 0o077 == 0, "private"
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path / "job")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2],
                              env={**os.environ, SOCKET_VARIABLE: path}, process_group=0 if session == "same" else None,
                              start_new_session=session == "new")
    server_pid, job_pid = (int(word) for word in driver.stdout.readline().split())  # type: ignore[union-attr]
    try:
        assert os.getpgid(job_pid) == driver.pid, "the job is in the driver's process group"
        if session == "same":
            assert server_pid == shared.pid and parent_of(job_pid) == shared.pid
        else:
            assert server_pid != shared.pid and parent_of(server_pid) == driver.pid and parent_of(job_pid) == server_pid
        os.killpg(driver.pid, signal.SIGKILL)  # the driver and its workers, as a test or a user kills a command
        driver.wait(BOUND)
        wait_for(lambda: not alive(job_pid), BOUND, "the job to die with its driver's group")
        assert shared.alive(), "the shared server outlives a driver"
    finally:
        for pid in (job_pid, server_pid):
            if alive(pid) and pid != shared.pid:
                os.kill(pid, signal.SIGKILL)
        driver.kill()


def test_the_shared_server_trains_a_job_like_a_fresh_one_and_refuses_other_settings(tmp_path, monkeypatch, fresh_outcome, shared):
    """Same seed: a job forked from the shared server ends with the curve a fresh worker's has, its end reported to the
    driver that asked; a driver with other import-time settings (here MUJOCO_GL) gets a server of its own."""
    shared, path = shared
    said: list[str] = []
    monkeypatch.setenv(SOCKET_VARIABLE, path)
    forked = LocalLauncher(said.append)
    start(forked, tiny_job(tmp_path / "forked", seed=3))
    (_, server, pid) = forked.forked[0]
    assert server.pid == shared.pid and parent_of(pid) == shared.pid
    forked_outcome = outcome_of(forked)
    assert fresh_outcome.ok and forked_outcome.ok and not said, (fresh_outcome.reason, forked_outcome.reason, said)
    a, b = fresh_outcome.record.result, forked_outcome.record.result  # type: ignore[union-attr]
    assert same_training(a, b)
    monkeypatch.setenv("MUJOCO_GL", "disable")
    own = fork_server(said.append)
    assert own is not None and own.pid != shared.pid and parent_of(own.pid) == os.getpid() and not said, said


@pytest.mark.slow
def test_t2r_run_forks_its_job_from_the_shared_server_and_a_kill_of_its_group_ends_the_job(tmp_path, shared):
    """The real command (which sets XLA's settings for its jobs as it checks the plan): its job is a child of the
    shared server, in the command's process group, so killing the group ends the job as it would a child of its own."""
    shared, path = shared
    runs = tmp_path / "runs"
    driver = subprocess.Popen([sys.executable, "-m", "text2reward.cli", "run", "--task", "fetch/reach", "--llm", "heuristic",
                               "--rounds", "1", "--samples", "1", "--steps", "100000", "--no-screen", "--no-video",
                               "--final-seeds", "0", "--no-compare-expert", "--runs-dir", str(runs)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, SOCKET_VARIABLE: path},
                              process_group=0)
    job_pid = 0
    try:
        pid_file = wait_for(lambda: next(iter(runs.glob("*/rounds/r0/s0/training/worker.pid")), None), BOUND, "training to start")
        job_pid = wait_for(lambda: pid_file.read_text().isdigit() and int(pid_file.read_text()), BOUND, "the worker's pid")
        assert parent_of(job_pid) == shared.pid and os.getpgid(job_pid) == driver.pid
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(BOUND)
        wait_for(lambda: not alive(job_pid), BOUND, "the job to die with the command's group")
        assert shared.alive()
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        if job_pid and alive(job_pid):
            os.kill(job_pid, signal.SIGKILL)
