"""The run dashboard over real runs: a real uvicorn server on 127.0.0.1 (port 0) in a thread, raw HTTP
requests (http.client sends paths exactly as written, so `..` reaches the server un-normalised), real
feedback through `submit_feedback`, a real background `t2r resume`, and the self-contained HTML export."""

from __future__ import annotations

import http.client
import json
import re
import shutil
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
import uvicorn

from text2reward.dashboard import create_app
from text2reward.dashboard.export import export_html
from text2reward.loop import start_run
from text2reward.runs.store import RunConfig, RunStore

TINY = {"learning_starts": 50, "batch_size": 32}
HOSTILE_REPLY = """<script>window.pwned = 1; document.title = "pwned"</script>
Here is the reward. </pre></details><img src=x onerror="window.pwned = 2">

```python
import numpy as np

def compute_dense_reward(self, action):
    note = "</pre><script>window.pwned = 3</script>"
    return 0.0, {"constant": 0.0}
```
"""


# --- runs, built once per session and copied by tests that change them ----------------------------------------


def build_runs(base: Path) -> Path:
    """A trained heuristic run and a file-backend run whose reply carries <script> (rejected: constant)."""
    runs = base / "runs"
    if (base / "built").is_file():
        return runs
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    start_run(RunConfig(task_id="fetch/reach", backend="heuristic", rounds=1, samples=2, steps=200, workers=2,
                        final_seeds=1, eval_freq=100, eval_episodes=1, overrides=TINY, success_threshold=1.01), runs)
    reply = base / "hostile_reply.md"
    reply.write_text(HOSTILE_REPLY)
    start_run(RunConfig(task_id="fetch/reach", backend="file", reply_files=[str(reply)], rounds=1, samples=1,
                        fix_attempts=0, screen=False, steps=200, final_seeds=1, workers=1), runs)
    (base / "built").write_text("ok")
    return runs


@pytest.fixture(scope="session")
def pristine_runs(tmp_path_factory) -> Path:
    return build_runs(tmp_path_factory.getbasetemp() / "dashboard-runs")


def run_id(runs: Path, backend: str) -> str:
    for config in sorted(runs.glob("*/config.json")):
        if json.loads(config.read_text())["backend"] == backend:
            return config.parent.name
    raise AssertionError(f"no {backend} run in {runs}")


def copy_runs(pristine: Path, target: Path) -> Path:
    shutil.copytree(pristine, target, ignore=shutil.ignore_patterns("index.sqlite", "tb"))
    return target


# --- a real server -----------------------------------------------------------------------------------------------


class DashboardServer:
    """uvicorn serving `create_app(runs_dir)` on 127.0.0.1 with an OS-chosen port, in a thread."""

    def __init__(self, runs_dir: Path):
        self.app = create_app(runs_dir)
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def launcher(self):
        return self.app.state.dashboard.launcher

    @property
    def token(self) -> str:
        return self.app.state.dashboard.guard.token

    def __enter__(self) -> DashboardServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "the dashboard server did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.launcher.stop_all()
        self.server.should_exit = True
        self.thread.join(10)
        self.socket.close()

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            connection.close()

    def get(self, path: str, **headers: str):
        return self.request("GET", path, headers=headers)

    def post_form(self, path: str, fields: dict[str, str], origin: str | None = "same"):
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if origin == "same":
            headers["Origin"] = self.url
        elif origin:
            headers["Origin"] = origin
        return self.request("POST", path, body=urlencode(fields).encode(), headers=headers)


@pytest.fixture(scope="module")
def pristine_server(pristine_runs):
    """A server over the pristine runs, for tests that only read."""
    with DashboardServer(pristine_runs) as server:
        yield server


@pytest.fixture
def copied(pristine_runs, tmp_path):
    runs = copy_runs(pristine_runs, tmp_path / "runs")
    with DashboardServer(runs) as server:
        yield runs, server


# --- pages ---------------------------------------------------------------------------------------------------------


def test_run_list_shows_runs_with_backend_and_status(pristine_runs, pristine_server):
    status, headers, body = pristine_server.get("/")
    html = body.decode()
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in headers["content-security-policy"]
    heuristic = run_id(pristine_runs, "heuristic")
    assert f'href="/runs/{heuristic}"' in html and "fetch/reach" in html
    assert "heuristic (rule-based, no language model)" in html
    assert "finished" in html
    listed = json.loads(pristine_server.get("/api/runs")[2])
    assert {r["run_id"] for r in listed["runs"]} == {heuristic, run_id(pristine_runs, "file")}


def test_run_page_shows_code_curves_video_prompt_and_final(pristine_runs, pristine_server):
    heuristic = run_id(pristine_runs, "heuristic")
    status, _, body = pristine_server.get(f"/runs/{heuristic}")
    html = body.decode()
    assert status == 200
    assert 'class="hl"' in html and "compute_dense_reward" in html  # highlighted code
    assert html.count('<svg class="chart"') >= 5  # overview, final, per candidate success + components
    assert f'src="/runs/{heuristic}/files/rounds/r0/s0/training/rollout.mp4"' in html
    assert "Prompt of round 0" in html and "Move the gripper to the goal" in html
    assert "expert reward (the task&#39;s own)" in html and "best reward (r0-s" in html
    assert "Validation: 8/8 checks passed" in html
    assert html.count('name="kind" value="critique"') == 2 and 'name="kind" value="preference"' in html
    live = json.loads(pristine_server.get(f"/runs/{heuristic}/status.json")[2])
    assert live["status"] == "finished" and not live["live"] and len(live["signature"]) == 16
    status, _, fragment = pristine_server.get(f"/runs/{heuristic}/fragment")
    assert status == 200 and fragment.decode().lstrip().startswith("<div id=\"live\"")


def test_unknown_run_is_404(pristine_server):
    status, _, body = pristine_server.get("/runs/no-such-run")
    assert status == 404 and "no run" in body.decode()
    assert pristine_server.get("/", Host="evil.example:80")[0] == 400  # DNS rebinding: foreign Host refused


def test_reply_with_script_is_shown_as_text(pristine_runs, pristine_server):
    hostile = run_id(pristine_runs, "file")
    status, _, body = pristine_server.get(f"/runs/{hostile}")
    html = body.decode()
    assert status == 200
    assert "&lt;script&gt;window.pwned = 1" in html
    assert "<script>window.pwned" not in html and "<img src=x" not in html
    assert re.findall(r"<script\b[^>]*>", html) == ['<script src="/static/dashboard.js" defer>']
    assert "pwned = 3" in html  # the code itself is shown (highlighted, escaped) though it was rejected
    assert "invalid" in html


# --- files ---------------------------------------------------------------------------------------------------------


def test_video_is_served_with_range_support(pristine_runs, pristine_server):
    heuristic = run_id(pristine_runs, "heuristic")
    path = f"/runs/{heuristic}/files/rounds/r0/s0/training/rollout.mp4"
    size = (pristine_runs / heuristic / "rounds/r0/s0/training/rollout.mp4").stat().st_size
    status, headers, body = pristine_server.get(path, Range="bytes=0-99")
    assert status == 206 and headers["content-type"] == "video/mp4"
    assert headers["content-range"] == f"bytes 0-99/{size}" and len(body) == 100
    status, headers, body = pristine_server.get(path)
    assert status == 200 and headers.get("accept-ranges") == "bytes" and len(body) == size
    status, headers, _ = pristine_server.get(f"/runs/{heuristic}/files/rounds/r0/s0/reward_0.py")
    assert status == 200 and headers["content-type"].startswith("text/plain")


def test_only_files_inside_the_run_are_served(copied, tmp_path):
    runs, server = copied
    heuristic = run_id(runs, "heuristic")
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT")
    (runs / heuristic / "leak.txt").symlink_to(secret)
    (runs / heuristic / "leakdir").symlink_to(tmp_path)
    attempts = [
        f"/runs/{heuristic}/files/../../secret.txt",
        f"/runs/{heuristic}/files/rounds/../../../secret.txt",
        f"/runs/{heuristic}/files/%2e%2e/%2e%2e/secret.txt",
        f"/runs/{heuristic}/files/%2e%2e%2f%2e%2e%2fsecret.txt",
        f"/runs/{heuristic}/files/..%5c..%5csecret.txt",
        f"/runs/{heuristic}/files//etc/passwd",
        f"/runs/{heuristic}/files/%2fetc%2fpasswd",
        f"/runs/{heuristic}/files/{tmp_path}/secret.txt",  # files//tmp/...: an absolute path
        f"/runs/{heuristic}/files/leak.txt",
        f"/runs/{heuristic}/files/leakdir/secret.txt",
        f"/runs/..%2f{tmp_path.name}/files/secret.txt",
        "/runs/%2e%2e/files/secret.txt",
    ]
    for path in attempts:
        status, _, body = server.get(path)
        assert status in (403, 404), (path, status)
        assert b"TOP-SECRET" not in body and b"root:" not in body, path


# --- feedback ------------------------------------------------------------------------------------------------------


def critique(server: DashboardServer, run: str, text: str, candidate: str = "r0-s0", origin: str | None = "same", **extra: str):
    fields = {"kind": "critique", "candidate": candidate, "text": text, "csrf_token": server.token, **extra}
    return server.post_form(f"/runs/{run}/feedback", fields, origin=origin)


def test_empty_or_oversized_critique_is_refused_with_the_message(copied):
    runs, server = copied
    heuristic = run_id(runs, "heuristic")
    status, _, body = critique(server, heuristic, "   ")
    assert status == 400 and "the critique is empty" in body.decode()
    status, _, body = critique(server, heuristic, "x" * 4001)
    assert status == 400 and "keep it under 4000" in body.decode()
    status, _, body = critique(server, heuristic, "fine text", candidate="r7-s7")
    assert status == 400 and "has no candidate" in body.decode()
    status, _, body = server.post_form(f"/runs/{heuristic}/feedback", {"kind": "preference", "best": "r0-s0", "worst": "r0-s0",
                                                                        "csrf_token": server.token})
    assert status == 400 and "two different trained candidates" in body.decode()
    status, _, body = critique(server, heuristic, "y" * 70_000)
    assert status == 413 and "larger than 64 KB" in body.decode()
    assert RunStore(runs / heuristic).events() == []


def test_cross_origin_or_tokenless_posts_are_refused(copied):
    runs, server = copied
    heuristic = run_id(runs, "heuristic")
    status, _, body = critique(server, heuristic, "overshoots the goal", origin="http://evil.example")
    assert status == 403 and "cross-origin" in body.decode()
    fields = {"kind": "critique", "candidate": "r0-s0", "text": "overshoots the goal"}
    status, _, body = server.post_form(f"/runs/{heuristic}/feedback", fields)
    assert status == 403 and "token" in body.decode()
    status, _, _ = server.request("POST", f"/runs/{heuristic}/feedback", body=urlencode({**fields, "csrf_token": server.token}).encode(),
                                  headers={"Content-Type": "application/x-www-form-urlencoded", "Referer": "http://evil.example/page"})
    assert status == 403
    assert RunStore(runs / heuristic).events() == []


def test_critique_is_stored_and_the_next_round_is_launched(copied):
    runs, server = copied
    heuristic = run_id(runs, "heuristic")
    text = "it hovers 20 cm away <b>and</b> never closes in"
    status, headers, _ = critique(server, heuristic, text, author="ada")
    assert status == 303 and headers["location"] == f"/runs/{heuristic}#round-1"
    store = RunStore(runs / heuristic)
    [event] = store.events()
    assert event["type"] == "critique" and event["text"] == text and event["candidate"] == "r0-s0"
    assert event["author"] == "ada" and event["source"] == "dashboard" and event["for_round"] == 1
    record = store.read_json("dashboard-resume.json")
    assert record["command"][-4:] == ["resume", heuristic, "--runs-dir", str(runs.resolve())]
    log = (store.root / "dashboard-resume.log").read_text()
    assert f"text2reward.cli resume {heuristic}" in log
    html = server.get(f"/runs/{heuristic}")[2].decode()
    assert "it hovers 20 cm away &lt;b&gt;and&lt;/b&gt; never closes in" in html  # in the timeline, escaped
    assert "live · starting" in html or "live · running" in html
    # a second critique while the round is pending is refused, with the reason
    status, _, body = critique(server, heuristic, "another thought", candidate="r0-s1")
    assert status == 400 and ("still running" in body.decode() or "already waiting" in body.decode())
    server.launcher.stop_all()  # the full round is exercised by the browser test


def test_preference_is_stored(copied):
    runs, server = copied
    heuristic = run_id(runs, "heuristic")
    fields = {"kind": "preference", "best": "r0-s1", "worst": "r0-s0", "text": "", "round": "0", "csrf_token": server.token}
    status, _, _ = server.post_form(f"/runs/{heuristic}/feedback", fields)
    assert status == 303
    [event] = RunStore(runs / heuristic).events()
    assert (event["type"], event["best"], event["worst"], event["for_round"]) == ("preference", "r0-s1", "r0-s0", 1)
    server.launcher.stop_all()


def test_live_signature_changes_when_the_run_changes(copied):
    runs, server = copied
    heuristic = run_id(runs, "heuristic")
    store = RunStore(runs / heuristic)
    before = json.loads(server.get(f"/runs/{heuristic}/status.json")[2])
    # a run caught early in a new round: bare state, a prompt written, no candidate yet
    store.write_json("state.json", {"status": "running", "round": 1})
    store.write_json("rounds/r1/prompt.json", {"messages": [{"role": "user", "content": "do better <now>"}], "context": {"round": 1}})
    after = json.loads(server.get(f"/runs/{heuristic}/status.json")[2])
    assert after["signature"] != before["signature"] and after["live"] and after["status"] == "running"
    status, _, body = server.get(f"/runs/{heuristic}")
    html = body.decode()
    assert status == 200 and "The page refreshes by itself" in html and "<fieldset disabled>" in html
    assert 'id="round-1"' in html and "Generating and validating candidates" in html and "do better &lt;now&gt;" in html
    rows = json.loads(server.get("/api/runs")[2])["runs"]
    assert next(r for r in rows if r["run_id"] == heuristic)["live"]


# --- HTML export -------------------------------------------------------------------------------------------------


def test_export_html_is_self_contained(copied):
    runs, server = copied
    for backend in ("heuristic", "file"):
        store = RunStore(runs / run_id(runs, backend))
        path = export_html(store)
        assert path == store.root / "report.html"
        html = path.read_text()
        external = re.findall(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, flags=re.I)
        assert external == [], external
        assert "<link" not in html and "<script" not in html and "<style>" in html
        assert not list(store.root.glob(".report.html.*"))  # written atomically, no temporary left
        if backend == "heuristic":
            assert "data:video/mp4;base64," in html and '<svg class="chart"' in html and 'class="hl"' in html
            assert "Critique r0-s0" not in html  # no forms in a report
        else:
            assert "&lt;script&gt;window.pwned = 1" in html
    heuristic = run_id(runs, "heuristic")
    status, headers, _ = server.get(f"/runs/{heuristic}/export")
    assert status == 303 and headers["location"] == f"/runs/{heuristic}/files/report.html"
    status, headers, body = server.get(headers["location"])
    assert status == 200 and headers["content-type"].startswith("text/html") and b"text2reward" in body
