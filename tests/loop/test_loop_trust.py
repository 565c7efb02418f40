"""Trust in the loop, through the `t2r` command a user runs: a candidate's failure stays its own, nothing
trained is not success, mistakes are refused before a run folder exists, one process works on a run at a
time, sampling is reproducible on purpose, and a person can drive a multi-round run with reply files.

Real everything: the CLI as a subprocess, the OpenAI-protocol test server on 127.0.0.1, the jail, MuJoCo
and SB3 workers (tiny budgets).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_runs import FINISHED_RUN
from openai_server import Fail, OpenAITestServer, Say
from replies import REACH_REPLY
from short_training import SHORT_ALGO, SHORT_HP_ARGS

from text2reward.runs.lock import LOCK_FILE, RunLock
from text2reward.runs.store import RunStore
from text2reward.settings import RunConfig

GOOD = REACH_REPLY

SCREENING_BOMB = '''```python
import numpy as np

calls = []

def compute_dense_reward(self, action):
    calls.append(1)
    if len(calls) > 450:  # validation replays fewer states than screening does: this passes one, not the other
        raise ValueError("math domain error on a state validation never showed")
    distance = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    return -distance, {"distance": -distance}
```
'''

INVERTED = '''```python
import numpy as np

def compute_dense_reward(self, action):
    distance = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    return distance, {"distance": distance}
```
'''

PROSE = "I would reward the robot for getting close to the goal."

TINY_TRAINING = ["--steps", "150", "--eval-freq", "150", "--eval-episodes", "1", "--final-seeds", "0",
                 "--no-compare-expert", "--workers", "1", "--algo", SHORT_ALGO, *SHORT_HP_ARGS]


def t2r(*args: object, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`t2r ...` in a new process, as a user runs it (for what needs its own process: a pid, an environment)."""
    full_env = {**os.environ, "OPENAI_API_KEY": "test-key", **(env or {})}
    return subprocess.run([sys.executable, "-m", "text2reward.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=full_env, timeout=timeout)


def cli(*args: object, env: dict[str, str] | None = None, **_: object) -> subprocess.CompletedProcess:
    """The same `t2r` command line through Typer's runner, in this process: seconds cheaper per call, for
    checks that end before any worker starts. Exit code, stdout and stderr as a subprocess would give."""
    from typer.testing import CliRunner

    from text2reward.cli.shared import app

    result = CliRunner().invoke(app, [str(a) for a in args], env={"OPENAI_API_KEY": "test-key", **(env or {})})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def error_line(result: subprocess.CompletedProcess) -> str:
    """The first non-empty line on stderr: where a user reads what went wrong."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines, f"nothing on stderr; stdout: {result.stdout}"
    assert "Traceback" not in result.stderr, result.stderr
    return lines[0]


def only_run(runs: Path) -> RunStore:
    [config] = list(runs.glob("*/config.json"))
    return RunStore(config.parent)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- 1. a candidate's failure is its own ---------------------------------------------------------------------


@pytest.mark.slow
def test_a_reward_that_fails_while_screened_is_sent_back_and_the_round_goes_on(tmp_path):
    """A reward that passes validation but raises on a screening state, and one screening ranks wrongly: both
    go back to the model with what went wrong (the error; the comparison), and their fixes train."""
    replies = []
    for name, text in (("a_bomb", SCREENING_BOMB), ("b_inverted", INVERTED), ("c_fix", GOOD), ("d_fix", GOOD)):
        (tmp_path / f"{name}.md").write_text(text)
        replies += ["--reply-file", tmp_path / f"{name}.md"]
    result = t2r("run", "--task", "metaworld/reach-v3", "--llm", "file", *replies, "--rounds", "1", "--samples", "2",
                 "--screen-threshold", "0.5", "--no-video", *TINY_TRAINING, "--runs-dir", tmp_path / "runs")
    assert result.returncode == 0, result.stderr
    store = only_run(tmp_path / "runs")
    bomb, inverted = store.candidates()
    assert bomb.attempts[0].screening_error.startswith("the reward failed on a recorded rollout")
    assert "math domain error" in bomb.attempts[0].screening_error
    fix_prompt = json.dumps(store.read_json("rounds/r0/s0/fix_prompt_1.json"))
    assert "math domain error" in fix_prompt, "the screening error must reach the model"
    assert not inverted.attempts[0].screening["passed"]
    assert "Screening before training" in json.dumps(store.read_json("rounds/r0/s1/fix_prompt_1.json"))
    assert [c.status for c in (bomb, inverted)] == ["trained", "trained"]
    assert store.state().status == "finished"


@pytest.mark.slow
def test_a_video_that_cannot_render_is_a_warning_on_a_trained_candidate(tmp_path):
    result = t2r("run", "--task", "fetch/reach", "--llm", "heuristic", "--rounds", "1", "--samples", "1", "--no-screen",
                 *TINY_TRAINING, "--runs-dir", tmp_path / "runs", env={"MUJOCO_GL": "disable"})  # physics runs, rendering cannot
    assert result.returncode == 0, result.stderr
    [candidate] = only_run(tmp_path / "runs").candidates()
    assert candidate.status == "trained"
    assert candidate.warnings and candidate.warnings[0].startswith("rollout video failed")
    assert "warning: rollout video failed" in result.stdout


# --- 2. nothing trained is not success ------------------------------------------------------------------------


@pytest.mark.parametrize("behaviour, why", [(Say(PROSE), "no_code"), (Fail(400, "bad request body"), "HTTP 400")])
def test_a_run_where_nothing_trained_ends_no_result_with_exit_1(tmp_path, behaviour, why):
    with OpenAITestServer(default=behaviour) as server:
        result = cli("run", "--task", "fetch/reach", "--llm", "openai", "--model", "m", "--base-url", server.base_url,
                     "--rounds", "1", "--samples", "2", "--fix-attempts", "0", *TINY_TRAINING, "--runs-dir", tmp_path / "runs")
    assert result.returncode == 1, result.stdout
    line = error_line(result)
    assert "ended with no result: no candidate trained: r0-s0" in line and why in line
    state = only_run(tmp_path / "runs").state()
    assert state.status == "no_result" and why in state.reason


# --- 3. checks before starting ------------------------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    (("run", "--task", "fetch/reach", "--hp", "lerning_rate=0.01"), "--hp lerning_rate is not a setting of SBX-SAC (did you mean learning_rate?); valid keys:"),
    (("run", "--task", "fetch/reach", "--steps", "0"), "--steps must be at least 1, got 0"),
    (("run", "--task", "fetch/reach", "--device", "tpu"), "unknown device 'tpu'"),
    (("run", "--task", "fetch/reach", "--algo", "td3"), "unknown algorithm 'td3'; use one of sac, ppo, sbx-sac, sbx-ppo"),
    (("run", "--task", "fetch/nope"), "unknown task 'fetch/nope'"),
    (("run", "--task", "fetch/reach", "--llm", "openai"), "the openai backend needs --model (or OPENAI_MODEL)"),
    (("run", "--task", "fetch/reach", "--llm", "file", "--reply-file", "missing.md"), "reply file missing.md not found"),
    (("train", "--task", "fetch/reach", "--hp", "lerning_rate=0.01"), "--hp lerning_rate is not a setting of SBX-SAC"),
    (("train", "--task", "fetch/reach", "--steps", "0"), "--steps must be at least 1, got 0"),
    (("train", "--task", "fetch/reach", "--eval-episodes", "0"), "--eval-episodes must be at least 1, got 0"),
    (("dashboard", "--port", "70000"), "--port must be between 1 and 65535, got 70000"),
])
def test_mistakes_are_one_line_before_any_run_folder(tmp_path, args, message):
    env = {"OPENAI_MODEL": "", "OPENAI_BASE_URL": ""}
    result = cli(*args, "--runs-dir" if args[0] == "run" else "--out" if args[0] == "train" else "--runs", tmp_path / "runs",
                 cwd=tmp_path, env=env, timeout=120)
    assert result.returncode == 1
    assert error_line(result) == f"error: {message}" or error_line(result).startswith(f"error: {message}"), result.stderr
    assert not (tmp_path / "runs").exists(), "a refused command must not leave a run folder"


@pytest.mark.parametrize("algo", ["sac", "sbx-sac"])
def test_a_gpu_that_does_not_exist_is_refused_before_the_run(tmp_path, algo):
    """Asked of the library that will train (torch for SB3, JAX for SBX), with or without a GPU here."""
    import torch

    from policies.algorithms import jax_gpu_count

    has_gpu = torch.cuda.is_available() if algo == "sac" else jax_gpu_count() > 0
    missing = "no CUDA GPU is visible" if algo == "sac" else "JAX sees no GPU"
    device, message = ("cuda:99", "--device cuda:99 names no GPU here") if has_gpu else ("cuda", missing)
    result = cli("run", "--task", "fetch/reach", "--algo", algo, "--device", device, "--runs-dir", tmp_path / "runs", timeout=120)
    assert result.returncode == 1 and message in error_line(result)
    assert not (tmp_path / "runs").exists()


def test_an_endpoint_that_is_not_running_is_one_line_before_the_run(tmp_path):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    result = cli("run", "--task", "fetch/reach", "--llm", "openai", "--model", "m", "--base-url", url,
                 "--runs-dir", tmp_path / "runs", timeout=120)
    assert result.returncode == 1
    assert error_line(result).startswith(f"error: cannot reach {url}; is the server running?")
    assert not (tmp_path / "runs").exists()


def test_a_model_the_server_does_not_serve_is_refused_and_openai_model_is_honoured(tmp_path):
    with OpenAITestServer(models=["qwen2.5-coder"], default=Say(PROSE)) as server:
        wrong = cli("run", "--task", "fetch/reach", "--llm", "openai", "--model", "llama3", "--base-url", server.base_url,
                    "--runs-dir", tmp_path / "runs", timeout=120)
        assert wrong.returncode == 1 and "qwen2.5-coder" in error_line(wrong) and "llama3" in error_line(wrong)
        assert not (tmp_path / "runs").exists()
        env = {"OPENAI_MODEL": "qwen2.5-coder", "OPENAI_BASE_URL": server.base_url}
        cli("run", "--task", "fetch/reach", "--llm", "openai", "--rounds", "1", "--samples", "1", "--fix-attempts", "0",
            "--runs-dir", tmp_path / "runs", env=env, timeout=120)
        asked, url = [body["model"] for body in server.chat_requests], server.base_url
    config = RunConfig.from_record(only_run(tmp_path / "runs").config_data())
    assert asked == ["qwen2.5-coder"] and (config.generation.model, config.generation.base_url) == ("qwen2.5-coder", url)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> RunStore:
    """A finished run (one round, rule-based backend), copied from the fixtures, for the tests that only resume it:
    a resume of a finished run trains nothing, so a run trained here would only cost a training."""
    runs = tmp_path_factory.mktemp("lock") / "runs"
    shutil.copytree(FINISHED_RUN, runs / FINISHED_RUN.name)
    return only_run(runs)


@pytest.mark.slow
def test_a_run_held_by_a_live_process_is_not_resumed_twice(finished_run):
    with RunLock(finished_run.root):  # this test process holds it, beating, as a resume in another terminal would
        result = t2r("resume", finished_run.run_id, "--runs-dir", finished_run.runs_dir, timeout=120)
    assert result.returncode == 1
    assert error_line(result).startswith(f"error: run {finished_run.run_id} is being worked on by process {os.getpid()}")
    assert finished_run.state().status == "finished", "a refused resume must not touch the run's state"


@pytest.mark.slow
def test_a_stale_lock_from_a_dead_process_is_taken_over_with_a_message(finished_run):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (finished_run.root / LOCK_FILE).write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "heartbeat": 0}))
    result = t2r("resume", finished_run.run_id, "--runs-dir", finished_run.runs_dir, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"taking over the lock of run {finished_run.run_id}: its process {dead.pid} is no longer running" in result.stdout
    assert not (finished_run.root / LOCK_FILE).exists(), "the lock is released when the resume ends"


@pytest.mark.parametrize("content", ["{not json", json.dumps(["a list"]), json.dumps({"pid": "1", "host": "h", "heartbeat": 1.0}),
                                     json.dumps({"pid": 1, "heartbeat": "now"})])
def test_a_garbled_lock_reads_as_one_with_no_live_owner(tmp_path, content):
    """run.lock is read through the record codec: a lock that does not read, or holds a wrong value, has no owner that
    can be alive, so it is stale (taken over with a message), never a traceback and never a live owner."""
    from text2reward.runs.lock import GARBLED, read_lock, stale_reason

    (tmp_path / LOCK_FILE).write_text(content)
    assert read_lock(tmp_path / LOCK_FILE) == GARBLED and stale_reason(GARBLED) is not None
    assert read_lock(tmp_path / "absent.lock") is None


def test_a_held_lock_is_written_and_read_back_as_its_holder(tmp_path):
    from text2reward.runs.lock import read_lock, stale_reason

    with RunLock(tmp_path):
        holder = read_lock(tmp_path / LOCK_FILE)
        assert holder is not None and holder.pid == os.getpid() and holder.host == socket.gethostname()
        assert holder.started is not None and holder.heartbeat >= holder.started and stale_reason(holder) is None
    assert not (tmp_path / LOCK_FILE).exists()


# --- 4. reproducible sampling, on purpose -------------------------------------------------------------------


def test_the_reply_cache_is_keyed_by_seed_and_can_be_bypassed(tmp_path):
    def echo_seed(body: dict, index: int) -> str:
        return f"no code here; seed {body.get('seed')}"

    runs = tmp_path / "runs"
    common = ["run", "--task", "fetch/reach", "--llm", "openai", "--model", "m", "--rounds", "1", "--samples", "1",
              "--fix-attempts", "0", "--runs-dir", runs]

    def asked(*extra: object) -> list[dict]:
        with OpenAITestServer(default=Say(echo_seed)) as server:
            cli(*common, "--base-url", server.base_url, *extra, timeout=120)
            return server.chat_requests

    first = asked("--seed", "0")
    assert len(first) == 1 and first[0]["seed"] == 0
    assert asked("--seed", "0") == [], "the same request and seed is served from the cache"
    again = asked("--seed", "1")
    assert len(again) == 1 and again[0]["seed"] == 1, "a new seed asks for new samples"
    assert len(asked("--seed", "0", "--no-cache")) == 1, "--no-cache asks the model again"


def test_the_heuristic_backend_seed_changes_the_cached_samples(tmp_path):
    from text2reward.generation.llm import BackendSettings, CachedBackend, GenerationRequest, ReplyCache, backend_spec

    cache = ReplyCache(tmp_path / "cache")
    messages = [{"role": "user", "content": "reach"}]

    def texts(seed: int) -> list[str]:
        backend = CachedBackend(backend_spec("heuristic").make(BackendSettings(seed=seed)), cache)
        return [r.text for r in backend.generate(GenerationRequest(messages, n=2, task_id="fetch/reach", seed=seed))]

    zero, one = texts(0), texts(1)
    assert zero[1] != one[1], "sample 2 is drawn from the seed"
    assert texts(0) == zero


# --- 5. real local model servers ----------------------------------------------------------------------------


def test_a_local_server_that_ignores_n_gets_one_streamed_request_at_a_time(tmp_path):
    """Ollama-like (ignores n, takes a while per reply): K samples are K streamed requests in turn by default,
    at most --concurrency at once when asked, with --temperature in every body."""
    common = ["run", "--task", "fetch/reach", "--llm", "openai", "--model", "m", "--samples", "3", "--rounds", "1",
              "--fix-attempts", "0", "--temperature", "0.2"]
    for extra, bound in (([], 1), (["--concurrency", "2", "--no-cache"], 2)):
        with OpenAITestServer.like("ollama", default=Say(PROSE), latency=0.3) as server:
            result = cli(*common, "--base-url", server.base_url, *extra, "--runs-dir", tmp_path / "runs", timeout=120)
            bodies, peak = server.chat_requests, server.max_in_flight
        assert result.returncode == 1 and "no_code" in error_line(result)  # prose only: nothing to train
        assert len(bodies) == 3 and all(b["stream"] is True and b["temperature"] == 0.2 for b in bodies)
        assert peak == bound if bound == 1 else 1 <= peak <= bound


def test_timeout_and_max_retries_reach_the_backend(tmp_path):
    with OpenAITestServer.like("ollama", default=Say(PROSE), latency=3.0) as server:
        result = cli("run", "--task", "fetch/reach", "--llm", "openai", "--model", "m", "--base-url", server.base_url,
                     "--samples", "1", "--rounds", "1", "--timeout", "0.5", "--max-retries", "0", "--runs-dir", tmp_path / "runs",
                     timeout=120)
        asked = len(server.chat_requests)
    assert result.returncode == 1 and "gave up after 1 attempts" in error_line(result)
    assert asked == 1, "--max-retries 0 sends one request"


# --- 6. multi-round runs with replies from a person -------------------------------------------------------------


@pytest.mark.slow
def test_reply_files_drive_a_multi_round_run_that_waits_for_the_next_reply(tmp_path):
    (tmp_path / "r0.md").write_text(GOOD)
    (tmp_path / "r1.md").write_text(GOOD.replace("10.0", "5.0"))
    runs = tmp_path / "runs"
    first = t2r("run", "--task", "fetch/reach", "--llm", "file", "--reply-file", tmp_path / "r0.md", "--rounds", "2",
                "--samples", "1", "--success-threshold", "1.01", "--no-screen", "--no-video", *TINY_TRAINING,
                "--runs-dir", runs)
    assert first.returncode == 0, first.stderr
    store = only_run(runs)
    state = store.state()
    assert state.status == "waiting_for_replies" and state.replies_needed == 1
    assert f"waiting for 1 reply(ies) to the prompt in {store.root / 'pending_prompt.md'}" in " ".join(first.stdout.split())
    pending = t2r("prompt", "--run", store.run_id, "--runs-dir", runs)
    assert pending.returncode == 0 and "(round 1)" in pending.stdout and "compute_dense_reward" in pending.stdout
    assert pending.stdout == (store.root / "pending_prompt.md").read_text()

    resumed = t2r("resume", store.run_id, "--runs-dir", runs, "--reply-file", tmp_path / "r1.md")
    assert resumed.returncode == 0, resumed.stderr
    assert store.state().status == "finished"
    assert [c.status for c in store.candidates()] == ["trained", "trained"]
    assert "5.0" in (store.root / "rounds/r1/s0/reward_0.py").read_text()
    refused = t2r("prompt", "--run", store.run_id, "--runs-dir", runs)
    assert refused.returncode == 1 and "is not waiting for replies" in error_line(refused)
