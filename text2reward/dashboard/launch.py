"""Start `t2r resume RUN_ID` in the background after feedback, so the page returns at once.

Why a detached subprocess (its own session, output to a log in the run directory): the round it runs
trains policies for minutes; it must survive the request, not block the server, and leave a record a
person can read. The command is the CLI's own, so the dashboard and `t2r resume` do exactly the same.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from text2reward.runs.store import RunStore

LOG_FILE = "dashboard-resume.log"
RECORD_FILE = "dashboard-resume.json"


@dataclass
class Launcher:
    """Remembers the processes it started, so it can report them (and reap them: no zombies)."""

    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def command(self, store: RunStore) -> list[str]:
        return [sys.executable, "-m", "text2reward.cli", "resume", store.run_id, "--runs-dir", str(store.runs_dir.resolve())]

    def start(self, store: RunStore) -> dict[str, Any]:
        with self.lock:
            if self.alive(store.run_id):
                return store.read_json(RECORD_FILE) or {}
            command = self.command(store)
            env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
            with (store.root / LOG_FILE).open("a") as log:
                log.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} dashboard: {' '.join(command)}\n")
                log.flush()
                process = subprocess.Popen(
                    command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True, env=env, cwd=store.runs_dir.resolve(),
                )
            self.processes[store.run_id] = process
            record = {"pid": process.pid, "started": time.time(), "command": command, "log": LOG_FILE}
            store.write_json(RECORD_FILE, record)
            return record

    def alive(self, run_id: str) -> bool:
        process = self.processes.get(run_id)
        return process is not None and process.poll() is None

    def exit_code(self, run_id: str) -> int | None:
        process = self.processes.get(run_id)
        return None if process is None else process.poll()

    def stop_all(self, timeout: float = 10.0) -> None:
        """Terminate what this launcher started and is still running (used by tests and shutdown)."""
        for process in list(self.processes.values()):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)  # its own session: the resume and its workers
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
