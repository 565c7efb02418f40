"""The Ray executor against a real Ray instance on 127.0.0.1 (2 CPUs, started here, stopped at the end): the same
artefacts as the local pool, early stopping through the board, a killed Ray worker retried, a killed driver
resumed, an application error not retried, no Ray port beyond 127.0.0.1, and a run that starts and stops a Ray of
its own. Real training, real Ray, real CLI processes; nothing is mocked."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from polling import wait_for
from short_training import SHORT_ALGO, SHORT_HP, SHORT_HP_ARGS

from policies.config import TrainConfig
from policies.curve import CurvePoint
from text2reward.loop import start_run
from text2reward.runs.store import STOP_FILE, RunStore
from text2reward.settings import RunConfig
from text2reward.training.early_stop import EarlyStopper, EarlyStopRule
from text2reward.training.job import PID_FILE, TrainJob
from text2reward.training.ray_pool import Board, ray_session, run_jobs_on_ray

pytestmark = pytest.mark.timeout(1500)  # a local Ray cluster on a loaded machine: minutes, not the default 300 s
FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture(scope="module")
def ray_address():
    """One local Ray instance for the module, started by the executor's own code (so its binding is what is tested)."""
    import ray

    with ray_session(num_cpus=2) as where:
        assert "127.0.0.1" in where and "2 CPU(s)" in where, where
        yield ray.get_runtime_context().gcs_address
    assert not ray.is_initialized()


def job(out: Path, steps: int, reward: str = "expert", **extra) -> TrainJob:
    train = TrainConfig(task_id="fetch/reach", out_dir=out / "train", reward=reward, steps=steps, eval_freq=100, eval_episodes=1,
                        overrides=SHORT_HP, algo=SHORT_ALGO, stop_file=str(out / STOP_FILE))
    return TrainJob(train=train, analysis_episodes=1, **extra)


def listing(folder: Path) -> list[str]:
    """Files under a job folder; TensorBoard names carry host and pid, so they are compared by kind."""
    names = [str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()]
    return sorted(re.sub(r"events\.out\.tfevents\..*", "events.out.tfevents", n) for n in names)


def test_a_run_made_before_executors_existed_opens_on_the_local_pool():
    (folder,) = (FIXTURES / "runs_v1").glob("*/config.json")
    config = RunConfig.from_record(RunStore(folder.parent).config_data())
    assert config.training.executor == "local" and config.training.ray_address is None


def test_executor_mistakes_are_one_line_before_any_run_folder(tmp_path):
    """An unknown executor, --executor ray where ray cannot be imported (the extra not installed; here it is hidden
    from a fresh interpreter), and an address where no cluster answers each end in one line naming the fix, and no
    run folder is made."""
    cli = ("import sys\nif sys.argv[1] == 'hide': sys.modules['ray'] = None  # `import ray` fails, as without the extra\n"
           "sys.argv = ['t2r'] + sys.argv[2:]\nfrom text2reward.cli import main\nmain()")
    base = ["run", "--task", "fetch/reach", "--runs-dir", str(tmp_path)]
    hidden = subprocess.run([sys.executable, "-c", cli, "hide", *base, "--executor", "ray"], capture_output=True, text=True, timeout=600)
    assert hidden.returncode != 0
    assert hidden.stderr.strip().splitlines() == ["error: --executor ray needs Ray, an optional extra: pip install -e '.[ray]'"], hidden.stderr
    unknown = subprocess.run([sys.executable, "-c", cli, "keep", *base, "--executor", "slurm"], capture_output=True, text=True, timeout=600)
    assert unknown.returncode != 0 and len(unknown.stderr.strip().splitlines()) == 1
    assert "unknown --executor 'slurm'" in unknown.stderr
    absent = subprocess.run([sys.executable, "-c", cli, "keep", *base, "--executor", "ray", "--ray-address", "127.0.0.1:1"],
                            capture_output=True, text=True, timeout=600)
    assert absent.returncode != 0 and len(absent.stderr.strip().splitlines()) == 1, absent.stderr
    assert "no Ray cluster answers at 127.0.0.1:1" in absent.stderr
    assert not list(tmp_path.glob("*/config.json"))


def _loopback(hex_address: str) -> bool:
    """A /proc/net/tcp{,6} local address (little-endian hex words) is 127.0.0.0/8, ::1 or ::ffff:127.x."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    if len(words) == 4:
        return words[0] == 127
    return words == bytes(15) + b"\x01" or (words[:12] == bytes(10) + b"\xff\xff" and words[12] == 127)


def _descendants(root: int) -> set[int]:
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in found]
        found.update(children)
        frontier.extend(children)
    return found


def _training_tasks() -> list[int]:
    """Ray workers of this test's instance (descendants of this process) running a training task now."""
    pids = []
    for pid in _descendants(os.getpid()):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::t2r-train"):
                pids.append(pid)
        except OSError:
            continue
    return pids


def test_ray_listens_on_127_0_0_1_only(ray_address):
    """Every listening TCP socket of this process and the Ray processes it started (GCS, raylet, agents, a live
    worker holding an actor) is on a loopback address; Ray's default is every interface."""
    import ray

    board = ray.remote(num_cpus=0)(Board).remote()
    assert ray.get(board.post.remote("k", None, 0)) is None  # the actor answers: a worker process is up
    listening: dict[str, tuple[str, bool]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                address, port = fields[1].split(":")
                listening[fields[9]] = (f"{table[-4:]} {address}:{int(port, 16)}", _loopback(address))
    owners: dict[int, list[tuple[str, bool]]] = {}
    for pid in _descendants(os.getpid()):
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        for link in links:
            inode = link[len("socket:["):-1] if link.startswith("socket:[") else None
            if inode in listening:
                owners.setdefault(pid, []).append(listening[inode])
    names = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace") for pid in owners}
    ray.kill(board)
    assert any("gcs_server" in n for n in names.values()) and any("raylet" in n for n in names.values()), names
    assert sum(len(sockets) for sockets in owners.values()) >= 5, owners
    beyond = {names[pid]: [s for s, local in sockets if not local] for pid, sockets in owners.items() if not all(local for _, local in sockets)}
    assert not beyond, f"Ray listens beyond 127.0.0.1: {beyond}"


@pytest.mark.slow
def test_a_round_on_ray_stores_what_the_local_pool_stores(tmp_path, ray_address):
    """The same 2-candidate round (heuristic rewards, real training, videos) on both executors: the same candidate
    records and the same files in every job folder, with keyframe paths pointing into this run's folder."""
    config = RunConfig.of(task_id="fetch/reach", backend="heuristic", rounds=1, samples=2, steps=200, workers=2, final_seeds=0,
                          eval_freq=100, eval_episodes=1, overrides=SHORT_HP, algo=SHORT_ALGO, success_threshold=1.01, early_stop=False)
    local = start_run(config, tmp_path / "local")
    said: list[str] = []
    on_ray = start_run(config.updated(executor="ray"), tmp_path / "ray", emit=lambda e: said.append(e.text))
    assert any(m.startswith("training on Ray: the Ray instance already open") for m in said), said
    assert RunConfig.from_record(on_ray.config_data()).training.executor == "ray"
    assert [c.status for c in on_ray.candidates()] == [c.status for c in local.candidates()] == ["trained", "trained"]
    for mine, theirs in zip(on_ray.candidates(), local.candidates()):
        folder, their_folder = (store.candidate_dir(0, c.sample) / "training" for store, c in ((on_ray, mine), (local, theirs)))
        assert listing(folder) == listing(their_folder)
        assert {"done.json", "rollout.mp4", "feedback.md", "train/model.zip", "train/result.json", "worker.log"} <= set(listing(folder))
        assert mine.training.steps == theirs.training.steps == 200
        assert mine.video_file and (on_ray.root / mine.video_file).stat().st_size > 1000
        assert len(mine.keyframes) == len(theirs.keyframes) > 0
        assert all((on_ray.root / k).is_file() and not k.startswith("/") for k in mine.keyframes)
        result = json.loads((folder / "train" / "result.json").read_text())
        assert result["model_path"] == str(folder / "train" / "model.zip")
        assert "t2r-job-" not in (folder / "done.json").read_text()


@pytest.mark.slow
def test_a_job_behind_a_finished_leader_is_stopped_through_the_board(tmp_path, ray_address):
    """Early stopping without a shared disk: the driver mirrors the task's evaluations, the stopper writes the stop
    file, the board carries it to the task, which stops at the rung and keeps its partial result."""
    # the mechanism, not the rule: one reading may decide here (tests/training/test_early_stop.py tests the rule)
    stopper = EarlyStopper(budget=800, eval_freq=100, rule=EarlyStopRule(rungs=(0.25, 0.5), min_evaluations=1))  # rungs at 200 and 400
    stopper.observe("leader", [CurvePoint(steps=s, success_rate=1.0, mean_native_return=-1.0, episodes=30)
                               for s in (200, 400, 600, 800)])
    out = tmp_path / "behind"
    polls: list[dict] = []
    progress = out / "progress.json"
    (outcome,) = run_jobs_on_ray([job(out, 800, reward="sparse")], 1, early_stopper=stopper, names=["behind"],
                                 on_poll=lambda: progress.is_file() and polls.append(json.loads(progress.read_text())))
    assert outcome.ok, outcome.reason
    result = outcome.record.result
    assert result.stopped_behind and result.stopped_early.rung == 0, result.stopped_early
    assert result.steps < 400 and result.extra["requested_steps"] == 800, result.steps  # before the next rung's evaluation
    assert json.loads((out / STOP_FILE).read_text())["steps"] == 200
    assert any(p.get("steps") == 100 and p.get("total_steps") == 800 for p in polls)  # live progress reached the driver's disk


def worker_folders(pid: int) -> list[Path]:
    """The scratch folders a Ray worker made for its jobs (policies.scratch names them after their maker)."""
    return list(Path(tempfile.gettempdir()).glob(f"t2r-job-*-{pid}-*-*"))


@pytest.mark.slow
def test_a_killed_ray_worker_is_retried_and_an_application_error_is_not(tmp_path, ray_address):
    """SIGKILL to the Ray worker process training a job (its pid from worker.pid, mid-training): Ray reruns it and
    it finishes. Beside it, a job whose code raises fails with its own reason, once, and costs nobody else."""
    good, broken = tmp_path / "good", tmp_path / "broken"
    killed: list[int] = []

    def kill_mid_training() -> None:
        progress = good / "progress.json"
        if killed or not progress.is_file() or json.loads(progress.read_text()).get("steps", 0) < 100:
            return
        pid = int((good / PID_FILE).read_text())
        assert Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::"), "worker.pid names the Ray worker"
        assert worker_folders(pid), "the worker trains in a folder named after it"
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    outcomes = run_jobs_on_ray([job(good, 300), job(broken, 300, reward="code")], 2, on_poll=kill_mid_training)
    assert killed, "the job was never seen mid-training"
    assert outcomes[0].ok, outcomes[0].reason
    assert int((good / PID_FILE).read_text()) != killed[0]
    assert not worker_folders(killed[0]), "the retry removed the folder the killed worker left (its reward code, its log)"
    assert outcomes[0].record.result.steps == 300
    assert not outcomes[1].ok and not outcomes[1].interrupted
    assert "names no code_path" in (outcomes[1].reason or "")


@pytest.mark.slow
def test_a_worker_that_keeps_dying_fails_its_job_with_the_reason(tmp_path, ray_address):
    out = tmp_path / "doomed"
    killed: list[int] = []

    def kill() -> None:
        if (out / PID_FILE).is_file() and not killed:
            killed.append(int((out / PID_FILE).read_text()))
            os.kill(killed[0], signal.SIGKILL)

    (outcome,) = run_jobs_on_ray([job(out, 300)], 1, on_poll=kill, max_retries=0)
    assert killed and not outcome.ok and not outcome.interrupted
    assert "training worker died 1 time(s)" in (outcome.reason or ""), outcome.reason


@pytest.mark.slow
def test_a_driver_killed_under_ray_is_resumed_without_redoing_finished_jobs(tmp_path, ray_address):
    """`t2r run --executor ray` joins the cluster; SIGKILL while the second candidate trains; `t2r resume` on Ray
    trains only that one."""
    runs = tmp_path / "runs"
    command = [sys.executable, "-m", "text2reward.cli", "run", "--task", "fetch/reach", "--llm", "heuristic", "--rounds", "1",
               "--samples", "2", "--workers", "1", "--steps", "200", "--final-seeds", "0", "--eval-freq", "100",
               "--eval-episodes", "1", "--no-video", "--no-early-stop", "--algo", SHORT_ALGO, *SHORT_HP_ARGS,
               "--executor", "ray", "--ray-address", ray_address, "--runs-dir", str(runs)]
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        run_dir = wait_for(lambda: next(iter(runs.glob("*/config.json")), None), 300, "the run directory").parent
        first = wait_for(lambda: next(iter(run_dir.glob("rounds/r0/s*/training/done.json")), None), 600, "a finished candidate")
        second = run_dir / "rounds/r0" / ("s1" if first.parts[-3] == "s0" else "s0") / "training"
        wait_for(lambda: (second / PID_FILE).is_file(), 300, "the second candidate's Ray worker")
        assert _training_tasks(), "the second candidate trains in a Ray worker of this test's instance"
        driver.kill()
        driver.communicate(timeout=150)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert not (second / "done.json").exists()
    wait_for(lambda: not _training_tasks(), 300, "Ray to end the dead driver's task")
    kept = first.stat().st_mtime_ns, (first.parent / "train" / "model.zip").stat().st_mtime_ns
    resumed = subprocess.run([sys.executable, "-m", "text2reward.cli", "resume", run_dir.name, "--runs-dir", str(runs),
                              "--executor", "ray", "--ray-address", ray_address], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"training on Ray: the cluster at {ray_address}" in resumed.stdout, resumed.stdout
    store = RunStore(run_dir)
    assert store.state().status == "finished"
    assert [c.status for c in store.candidates()] == ["trained", "trained"]
    assert (first.stat().st_mtime_ns, (first.parent / "train" / "model.zip").stat().st_mtime_ns) == kept
    assert (second / "done.json").is_file()


@pytest.mark.slow
def test_a_run_without_an_address_starts_its_own_ray_and_stops_it(tmp_path):
    """`t2r run --executor ray` with no address (and no RAY_ADDRESS): a Ray instance of its own on 127.0.0.1 trains the
    candidate, and none of its processes outlive the run (they are found by the temporary folder it was given)."""
    ray_tmp = Path(tempfile.mkdtemp(prefix="t2r-ray-", dir="/tmp"))  # short: Ray's socket paths live under it
    try:
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {"RAY_TMPDIR": str(ray_tmp)}
        done = subprocess.run([sys.executable, "-m", "text2reward.cli", "run", "--task", "fetch/reach", "--llm", "heuristic", "--rounds", "1",
                               "--samples", "1", "--steps", "200", "--final-seeds", "0", "--eval-freq", "100", "--eval-episodes", "1",
                               "--no-video", "--algo", SHORT_ALGO, *SHORT_HP_ARGS, "--executor", "ray",
                               "--runs-dir", str(tmp_path)], capture_output=True, text=True, timeout=1200, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "training on Ray: a local Ray instance on 127.0.0.1" in done.stdout, done.stdout
        (config,) = tmp_path.glob("*/config.json")
        store = RunStore(config.parent)
        config = RunConfig.from_record(store.config_data())
        assert config.training.executor == "ray" and config.training.ray_address is None
        assert [c.status for c in store.candidates()] == ["trained"]
        assert list(ray_tmp.glob("**/session_*")), "the run's Ray kept its session under RAY_TMPDIR"

        def leftovers() -> list[str]:
            found = []
            for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                if str(ray_tmp) in text:
                    found.append(text[:120])
            return found

        wait_for(lambda: not leftovers(), 150, "the run's Ray processes to end")
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
