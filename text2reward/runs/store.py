"""The run store: `runs/<run-id>/` holds every artefact; `runs/index.sqlite` lists and compares runs.

Why files plus an index: files are what a person opens (code, prompts, videos) and what survives a
crash (each written atomically, so a file either exists whole or not at all); SQLite answers "which
runs, how good, how costly" without walking directories. The directory is the source of truth; the
index is rebuilt from it at any time.

The store only persists: it reads and writes the typed records (records.py), parsing each once here through their codec, and the run's
settings as the plain mapping config.json holds (the loop's `RunConfig`, which knows the backends, executors and
modes, lives above; readers below it see a `RunHeader`). A damaged file is one line naming it and what to do.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Mapping
from contextlib import closing
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from policies.io import write_json_atomic, write_text_atomic
from text2reward.errors import ConfigError
from text2reward.runs import layout
from text2reward.runs.layout import RunLayout
from text2reward.runs.lock import held_by_a_live_process, unrecorded_seconds
from text2reward.runs.records import (
    Candidate,
    FeedbackEvent,
    FinalSummary,
    Json,
    RecordError,
    RoundSummary,
    RunHeader,
    RunState,
    read,
    read_versioned,
    write,
    write_versioned,
)
from text2reward.runs.statuses import RunStatus

STOP_FILE = "stop.json"
"""In a training job's folder: the run's early stopping asks the worker to stop (policies reads it)."""


def resolve_run_id(runs_dir: Path, run_id: str) -> str:
    """`latest`, a full id or a unique prefix -> the run's id; one line naming the choices otherwise."""
    ids = sorted(p.parent.name for p in runs_dir.glob(f"*/{layout.CONFIG}"))  # ids start with a timestamp: sorted = oldest first
    listing = f"`t2r runs --runs-dir {runs_dir}` lists them"
    if run_id == "latest":
        if not ids:
            raise RecordError(f"there are no runs in {runs_dir}; start one with `t2r run` (or pass --runs-dir)")
        return ids[-1]
    if run_id in ids:
        return run_id
    matches = [i for i in ids if i.startswith(run_id)] if run_id else []
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise RecordError(f"run id prefix {run_id!r} matches {len(matches)} runs ({', '.join(matches[:4])}"
                          f"{', ...' if len(matches) > 4 else ''}); give more of the id")
    raise RecordError(f"no run {run_id!r} in {runs_dir}; {listing}")


def new_run_id(task_id: str) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{task_id.replace('/', '-')}-{uuid.uuid4().hex[:6]}"


def read_json_file(path: Path, run_id: str | None = None) -> Any:
    """A JSON file's contents, None where it does not exist; a damaged one is a RecordError naming it and the fix."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise RecordError(_damaged(path, "it is not text", run_id)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(_damaged(path, f"{exc.msg}: line {exc.lineno}, column {exc.colno}", run_id)) from None


def _damaged(path: Path, what: str, run_id: str | None) -> str:
    fix = f"; restore it from a copy, or remove the run with `t2r runs rm {run_id}`" if run_id else "; restore it from a copy"
    return f"{path} is damaged ({what}){fix}"


class RunStore:
    """One run directory. Paths are derived, never stored, so a moved run still opens."""

    def __init__(self, root: Path):
        self.root = Path(root).resolve()  # absolute: stage paths built from it must not be re-joined onto it
        self.paths = RunLayout(self.root)

    @property
    def run_id(self) -> str:
        return self.root.name

    @property
    def runs_dir(self) -> Path:
        return self.root.parent

    # --- creation and lookup -------------------------------------------------------------
    @classmethod
    def create(cls, runs_dir: Path, config: Mapping[str, Any]) -> RunStore:
        """A new run folder holding `config` (the run's settings, as config.json stores them: `task_id` among them)."""
        store = cls(Path(runs_dir) / new_run_id(str(config["task_id"])))
        store.root.mkdir(parents=True, exist_ok=False)
        write_json_atomic(store.paths.config, dict(config))
        store.set_state(status=RunStatus.CREATED, round=0)
        return store

    @classmethod
    def open(cls, runs_dir: Path, run_id: str) -> RunStore:
        """A run by its id, a unique prefix of it, or `latest` (the newest run in `runs_dir`)."""
        return cls(Path(runs_dir) / resolve_run_id(Path(runs_dir), run_id))

    def remove(self) -> None:
        """Delete the run's folder and its row in the index (`t2r runs rm`)."""
        shutil.rmtree(self.root)
        forget_run(self.runs_dir, self.run_id)

    # --- settings ---------------------------------------------------------------------------
    def config_data(self) -> Json:
        """config.json as stored: the loop's RunConfig parses it (text2reward.settings)."""
        data = self.read_json(layout.CONFIG)
        if not isinstance(data, dict):
            raise RecordError(f"{self.paths.config} is missing or is no JSON object; restore it from a copy, or remove the run "
                              f"with `t2r runs rm {self.run_id}`")
        return data

    def write_config(self, config: Mapping[str, Any]) -> None:
        self.write_json(layout.CONFIG, dict(config))

    def header(self) -> RunHeader:
        """What the run is, for readers that show it (report, dashboard, index): config.json's descriptive fields."""
        header = read(RunHeader, self.config_data(), str(self.paths.config))
        if header.author:
            return header
        # written before runs recorded their author: whether its replies were rule-based is in its candidates' records
        return header.with_author(rule_based=any(c.rule_based for c in self.candidates()))

    # --- run state ------------------------------------------------------------------------
    def state(self) -> RunState:
        raw = self.read_json(layout.STATE)
        return read_versioned(RunState, raw, str(self.paths.state)) if raw is not None else RunState()

    def wall_seconds(self) -> float:
        """The run's wall time so far: what its state recorded, plus the running (or killed) attempt's own."""
        state = self.state()
        return state.wall_seconds + (unrecorded_seconds(self.root) if state.status.live else 0.0)

    def status(self) -> RunStatus:
        """The run's status as it really is: a run recorded as `running` (or just `created`) whose process is
        gone, killed or timed out before it could write anything, is `interrupted`."""
        state = self.state()
        return effective_status(self.root, state.status, state.updated)

    def set_state(self, **changes: Any) -> RunState:
        """state.json with `changes` (RunState's field names) applied, stamped with the time."""
        known = {f.name for f in fields(RunState)}
        unknown = set(changes) - known
        if unknown:
            raise TypeError(f"RunState has no field {', '.join(sorted(unknown))}")
        if "status" in changes:
            changes["status"] = RunStatus(changes["status"])
        state = replace(self.state(), **changes, updated=time.time())
        write_json_atomic(self.paths.state, write_versioned(state))
        return state

    # --- round and final summaries ---------------------------------------------------------
    def round_summary(self, round_index: int) -> RoundSummary | None:
        path = self.paths.round_summary(round_index)
        raw = self.read_json(path)
        return read_versioned(RoundSummary, raw, str(path)) if raw is not None else None

    def write_round_summary(self, summary: RoundSummary) -> None:
        self.write_json(self.paths.round_summary(summary.round), write_versioned(summary))

    def final_summary(self) -> FinalSummary | None:
        raw = self.read_json(layout.FINAL_SUMMARY)
        if raw is None:
            return None
        return read_versioned(FinalSummary, raw, str(self.paths.final_summary))

    def write_final_summary(self, summary: FinalSummary) -> None:
        self.write_json(layout.FINAL_SUMMARY, write_versioned(summary))

    # --- paths ------------------------------------------------------------------------------
    def candidate_dir(self, round_index: int, sample: int) -> Path:
        return self.paths.candidate_dir(round_index, sample)

    def tune_dir(self, candidate_id: str) -> Path:
        return self.paths.tune_dir(candidate_id)

    def candidate_file(self, candidate: Candidate) -> Path:
        """Where a candidate's record lives: its round's folder, or for a tuned one its parent's tuning folder."""
        if candidate.parent:
            return self.paths.tuned_candidate_file(candidate.parent)
        return self.paths.candidate_file(candidate.round, candidate.sample)

    # --- generic atomic I/O -----------------------------------------------------------------
    def read_json(self, relative: str | Path) -> Any:
        return read_json_file(self.root / relative, self.run_id)

    def write_json(self, relative: str | Path, data: Any) -> Path:
        return write_json_atomic(self.root / relative, data)

    def write_text(self, relative: str | Path, text: str) -> Path:
        return write_text_atomic(self.root / relative, text)

    def read_text(self, relative: str | Path) -> str:
        """A text file of the run (code, feedback, an answer); a missing or damaged one is one line naming it."""
        path = self.root / relative
        try:
            return path.read_text()
        except FileNotFoundError:
            raise RecordError(f"{path} is missing; restore it from a copy, or remove the run with `t2r runs rm {self.run_id}`") from None
        except UnicodeDecodeError:
            raise RecordError(_damaged(path, "it is not text", self.run_id)) from None

    def relative(self, path: Path) -> str:
        return self.paths.relative(path)

    # --- candidates ----------------------------------------------------------------------------
    def candidates(self, round_index: int | None = None) -> list[Candidate]:
        """Every candidate.json, in (round, sample) order; a tuned candidate (`tune/<parent>/candidate.json`) counts in
        its parent's round and comes right after it."""
        pattern = layout.CANDIDATES if round_index is None else f"rounds/r{round_index}/s*/{layout.CANDIDATE}"
        paths = [*self.root.glob(pattern), *self.root.glob(layout.TUNED_CANDIDATES)]
        found = [self._read_candidate(p) for p in paths]
        if round_index is not None:
            found = [c for c in found if c.round == round_index]
        return sorted(found, key=lambda c: c.order)

    def _read_candidate(self, path: Path) -> Candidate:
        what = str(path)
        return read_versioned(Candidate, self.read_json(path), what)

    def candidate(self, candidate_id: str | None) -> Candidate | None:
        """The candidate.json of an id like `r0-s1` (or `r0-s1-tuned`); None when the id is malformed or unknown."""
        tuned = re.fullmatch(r"(r\d+-s\d+(?:-tuned)*)-tuned", candidate_id or "")
        if tuned is not None:
            path = self.paths.tuned_candidate_file(tuned[1])
            return self._read_candidate(path) if path.is_file() else None
        match = re.fullmatch(r"r(\d+)-s(\d+)", candidate_id or "")
        if match is None:
            return None
        return self.read_candidate(int(match[1]), int(match[2]))

    def read_candidate(self, round_index: int, sample: int) -> Candidate | None:
        path = self.paths.candidate_file(round_index, sample)
        return self._read_candidate(path) if path.is_file() else None

    def write_candidate(self, candidate: Candidate) -> Candidate:
        write_json_atomic(self.candidate_file(candidate), write_versioned(candidate))
        return candidate

    # --- human feedback events (who, when, what, which round it produced) -------------------
    def add_event(self, event: FeedbackEvent) -> FeedbackEvent:
        """`event` stored as the run's next, numbered and stamped with the time."""
        events = self.events()
        event = replace(event, id=len(events), time=time.time())
        self.write_json(layout.EVENTS, [write(e) for e in [*events, event]])
        return event

    def events(self) -> list[FeedbackEvent]:
        events = self.read_json(layout.EVENTS) or []
        if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
            raise RecordError(_damaged(self.paths.events, "it is not a list of events", self.run_id))
        return [read(FeedbackEvent, e, f"{self.paths.events} (event {index})") for index, e in enumerate(events)]


STARTING_GRACE_SECONDS = 60.0
"""A run just `created` has no lock for the moment before its loop starts."""


def effective_status(root: Path, recorded: RunStatus, updated: float | None) -> RunStatus:
    if not recorded.live or held_by_a_live_process(root):
        return recorded
    if recorded == RunStatus.CREATED and updated is not None and time.time() - updated < STARTING_GRACE_SECONDS:
        return recorded
    return RunStatus.INTERRUPTED


# --- the SQLite index ------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    task_id TEXT, backend TEXT, model TEXT, status TEXT,
    rounds_done INTEGER, best_success REAL, best_candidate TEXT,
    prompt_tokens INTEGER, completion_tokens INTEGER,
    wall_seconds REAL, created REAL, updated REAL, path TEXT, author TEXT, damaged TEXT, best_episodes INTEGER
)
"""
_ADDED_COLUMNS = {"author": "TEXT", "damaged": "TEXT", "best_episodes": "INTEGER"}
"""Columns an index written by an older text2reward lacks (added in place: the index is derived from the folders)."""


def check_writable(runs_dir: Path) -> None:
    """The runs folder exists (made here if need be) and takes a new file: checked before a run starts, so a read-only
    or full place is one line instead of a traceback from deep in the first write."""
    runs_dir = Path(runs_dir)
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=runs_dir, prefix=".t2r-write-check-"):
            pass
    except OSError as exc:
        raise ConfigError(_unwritable(runs_dir, exc.strerror or str(exc))) from None


def _unwritable(runs_dir: Path, why: str) -> str:
    return f"the runs folder {runs_dir} cannot be written ({why}); pass --runs-dir (runs_dir= in Python) a folder you can write to"


def _index(runs_dir: Path) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(Path(runs_dir) / layout.INDEX, timeout=30)
        db.execute(_SCHEMA)
    except sqlite3.OperationalError as exc:  # a read-only folder or file, a full disk
        raise ConfigError(_unwritable(Path(runs_dir), f"its index {layout.INDEX}: {exc}")) from None
    have = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
    for column, kind in _ADDED_COLUMNS.items():
        if column not in have:
            db.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")
    return db


def index_run(store: RunStore) -> dict[str, Any]:
    """Write (or refresh) the run's row in `<runs_dir>/index.sqlite` from its files; a run whose records are damaged is
    listed with `damaged` naming the file (so one broken run never hides the others)."""
    row: dict[str, Any] = {"run_id": store.run_id, "path": str(store.root), "damaged": None}
    try:
        header, state, candidates = store.header(), store.state(), store.candidates()
    except RecordError as exc:
        row.update(status=RunStatus.UNKNOWN.value, damaged=str(exc), created=_folder_time(store))
    else:
        row.update(
            task_id=header.task_id, backend=header.backend, model=header.model, author=header.author, status=state.status.value,
            rounds_done=state.rounds_done, best_success=state.best_success, best_candidate=state.best,
            best_episodes=next((c.training.episodes for c in candidates if c.id == state.best and c.training is not None), None),
            prompt_tokens=sum(c.tokens.prompt for c in candidates), completion_tokens=sum(c.tokens.completion for c in candidates),
            wall_seconds=state.wall_seconds, created=state.created or _folder_time(store), updated=state.updated,
        )
    with closing(_index(store.runs_dir)) as db, db:
        db.execute(f"INSERT OR REPLACE INTO runs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values()))
    return row


def _folder_time(store: RunStore) -> float:
    return (store.paths.config if store.paths.config.exists() else store.root).stat().st_mtime


def _changed_since(store: RunStore, updated: float | None) -> bool:
    """Whether the run's state or config was written after its row (by another process, or damaged by hand)."""
    try:
        newest = max(p.stat().st_mtime for p in (store.paths.state, store.paths.config) if p.exists())
    except ValueError:
        return False
    return updated is None or newest > float(updated) + 1.0


def forget_run(runs_dir: Path, run_id: str) -> None:
    index = Path(runs_dir) / layout.INDEX
    if index.is_file():
        with closing(_index(runs_dir)) as db, db:
            db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))


def list_runs(runs_dir: Path) -> list[dict[str, Any]]:
    """Rows of the index, newest first; runs whose directory exists but whose row is missing are indexed."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return []
    configs = list(runs_dir.glob(f"*/{layout.CONFIG}"))
    if not configs and not (runs_dir / layout.INDEX).is_file():
        return []  # nothing to list, and no index to write (the folder may be read-only)
    for config_path in configs:
        store = RunStore(config_path.parent)
        with closing(_index(runs_dir)) as db:
            known = db.execute("SELECT updated, author FROM runs WHERE run_id = ?", (store.run_id,)).fetchone()
        if not known or known[1] is None or _changed_since(store, known[0]):  # missing, older layout, or written since
            index_run(store)
    with closing(_index(runs_dir)) as db:
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT * FROM runs ORDER BY created DESC").fetchall()
    listed = [dict(r) for r in rows if Path(r["path"]).is_dir()]
    for row in listed:  # the index holds what was last written; a dead run's process wrote nothing more
        recorded = RunStatus.read(row["status"])
        row["status"] = effective_status(Path(row["path"]), recorded, row["updated"]).value
        if recorded.live:
            row["wall_seconds"] = (row["wall_seconds"] or 0.0) + unrecorded_seconds(Path(row["path"]))
    return listed
