"""What the dashboard's tests share: real runs built once per session (a trained heuristic run, a file-backend run whose
reply carries <script>, a run where nothing trained), copies of them, and a real uvicorn server on 127.0.0.1.

The fixtures here are registered for every test folder by tests/conftest.py."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import threading
import time
from html import unescape
from pathlib import Path
from urllib.parse import urlencode

import pytest
import uvicorn
from filelock import FileLock
from short_training import SHORT_ALGO, SHORT_HP

from text2reward.dashboard import create_app
from text2reward.loop import start_run
from text2reward.settings import RunConfig

TERMINAL_ESCAPES = "\x1b]0;pwned\x07 \x1b[2J\x1b[31m \u202eevil\u202c \u2066iso\u2069 \x9b1m \u200f"
"""OSC (sets a terminal's title), CSI (clears, colours), bidi overrides and isolates, a C1 CSI, a right-to-left mark."""
HOSTILE_REPLY = f"""<script>window.pwned = 1; document.title = "pwned"</script>
Here is the reward. </pre></details><img src=x onerror="window.pwned = 2"> {TERMINAL_ESCAPES}

```python
import numpy as np

def compute_dense_reward(self, action):
    note = "</pre><script>window.pwned = 3</script>"
    escapes = "{TERMINAL_ESCAPES}"
    return 0.0, {{"constant": 0.0}}
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
    start_run(RunConfig.of(task_id="fetch/reach", backend="heuristic", rounds=1, samples=2, steps=200, workers=2,
                           final_seeds=1, eval_freq=100, eval_episodes=1, overrides=SHORT_HP, algo=SHORT_ALGO, success_threshold=1.01,
                           early_stop=False), runs)  # both candidates train to the end: the pages' figures are fixed
    reply = base / "hostile_reply.md"
    reply.write_text(HOSTILE_REPLY)
    start_run(RunConfig.of(task_id="fetch/reach", backend="file", reply_files=[str(reply)], rounds=1, samples=1,
                           fix_attempts=0, screen=False, steps=200, final_seeds=1, workers=1), runs)
    (base / "built").write_text("ok")
    return runs


CODELESS_REPLY = """I would rather explain than write code: reward <b>closeness</b> & speed.
</pre><script>window.pwned = 4</script> (no function here)
"""
RAISING_REPLY = """```python
def compute_dense_reward(self, action):
    raise ValueError("boom")
```
"""


@pytest.fixture(scope="session")
def pristine_runs(tmp_path_factory) -> Path:
    """Built once per session: under xdist the first test process builds them in the session's folder, under a lock
    the others wait on (a build is four trainings); without xdist, in this process's own folder."""
    base = tmp_path_factory.getbasetemp()
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return build_runs(base / "dashboard-runs")
    with FileLock(str(base.parent / "dashboard-runs.lock")):
        return build_runs(base.parent / "dashboard-runs")


@pytest.fixture(scope="session")
def codeless_run(tmp_path_factory) -> tuple[Path, str]:
    """A finished file-backend run where nothing trained: r0-s0's reply holds no code (`no_code`), r0-s1's
    reward raises, so validation fails at `runs` and the checks after it are skipped (`ok: None`)."""
    base = tmp_path_factory.mktemp("codeless")
    replies = [base / "no_code.md", base / "raises.md"]
    replies[0].write_text(CODELESS_REPLY)
    replies[1].write_text(RAISING_REPLY)
    store = start_run(RunConfig.of(task_id="fetch/reach", backend="file", reply_files=[str(p) for p in replies], rounds=1,
                                   samples=2, fix_attempts=0, screen=False, steps=200, final_seeds=1, workers=1), base / "runs")
    return base / "runs", store.run_id


def hold_lock(root: Path) -> None:
    """What a live `t2r run` keeps: state `running` and a lock held by a live process (this one) with a fresh heartbeat."""
    state = json.loads((root / "state.json").read_text())
    (root / "state.json").write_text(json.dumps({**state, "status": "running"}))
    (root / "run.lock").write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "heartbeat": time.time()}))


def visible_prose(html: str) -> str:
    """The page's own words: without model replies, code, prompts and critiques (their text is not ours)."""
    html = re.sub(r"<pre\b.*?</pre>|<blockquote\b.*?</blockquote>|<div class=\"code.*?</div>|<svg\b.*?</svg>", " ", html, flags=re.S)
    return unescape(re.sub(r"<[^>]+>", " ", html))


def form_of(html: str, key: str) -> str:
    """The HTML of the form with `data-key=key`."""
    match = re.search(rf'<form [^>]*data-key="{re.escape(key)}".*?</form>', html, flags=re.S)
    assert match, f"no form {key}"
    return match[0]


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
