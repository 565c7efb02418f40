"""The run store: `runs/<run-id>/` holds every artefact; `runs/index.sqlite` lists and compares runs.

Why files plus an index: files are what a person opens (code, prompts, videos) and what survives a
crash (each written atomically, so a file either exists whole or not at all); SQLite answers "which
runs, how good, how costly" without walking directories. The directory is the source of truth; the
index is rebuilt from it at any time.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
import uuid
from contextlib import closing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from policies.config import TrainConfig
from policies.io import write_json_atomic, write_text_atomic
from policies.reward_modes import REWARD_MODES
from sim_envs.errors import ConfigError
from text2reward.runs.records import Candidate, FinalSummary, RoundSummary, RunState, stamped, upgrade

INDEX_FILE = "index.sqlite"
CANDIDATE_FILE = "candidate.json"
TUNE_DIR = "tune"
"""In a run folder: `tune/<candidate id>/` holds a candidate's tuning (study.db, trial_<n>/, the tuned candidate)."""


STOP_FILE = "stop.json"
"""In a training job's folder: the run's early stopping asks the worker to stop (policies reads it)."""

EXECUTORS = ("local", "ray")
REWARD_SOURCES = ("code", "keypoints", "code+keypoints")
RAY_MISSING = "--executor ray needs Ray, an optional extra: pip install -e '.[ray]'"
"""The one line for `--executor ray` where ray is not installed (preflight and the Ray executor both say it)."""


@dataclass
class RunConfig:
    """Everything that defines a run; stored as config.json and reused verbatim by `t2r resume`."""

    task_id: str
    backend: str = "heuristic"
    model: str | None = None
    base_url: str | None = None
    reply_files: list[str] = field(default_factory=list)
    rounds: int = 2
    samples: int = 2
    steps: int | None = None
    workers: int = 2
    seed: int = 0
    few_shot: int = 0
    temperature: float = 1.0
    vision: bool = False
    screen: bool = True
    screen_threshold: float = 0.7
    fix_attempts: int = 1
    success_threshold: float = 0.9
    eval_episodes: int | None = None
    eval_freq: int | None = None
    final_seeds: int = 2
    compare_expert: bool = True
    device: str = "auto"
    algo: str | None = None
    """The training algorithm (`sbx-sac`, `sac`, `sbx-ppo`, `ppo`); None: the task family's default."""
    video: bool = True
    task_file: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = None
    """Seconds to wait for one model reply (None: the backend's default, minutes for a local server)."""
    max_retries: int | None = None
    concurrency: int | None = None
    """Model requests in flight at once (None: 1 for a local server, several for a hosted API)."""
    cache: bool = True
    """Serve replies already on disk for the same request and seed (`--no-cache` asks the model again)."""
    early_stop: bool = True
    """A round's candidates stop at `success_threshold`, or when clearly behind the round's leader at a rung of
    the budget (training/early_stop.py); `--no-early-stop` trains each to its full budget."""
    executor: str = "local"
    """Where training jobs run: "local" (worker processes on this machine) or "ray" (tasks on a Ray cluster)."""
    ray_address: str | None = None
    """With executor "ray": the cluster to join (`--ray-address` / RAY_ADDRESS); None starts a local Ray on 127.0.0.1."""
    reward_mode: str = "dense"
    """What the model writes and how it trains: a registered reward mode's name (policies.reward_modes.REWARD_MODES:
    "dense", "potential" or "progress" built in), whose RewardModeSpec says the rest."""
    tune: int = 0
    """Tuning trials for the best candidate after the last round (`--tune N`; text2reward.tuning); 0: none."""
    reward_source: str = "code"
    """Where round 0's rewards come from (text2reward.keypoints): "code" (the model writes them), "keypoints" (one
    program written from the task's keypoints) or "code+keypoints" (the model's code plus the keypoint reward)."""
    keypoints: str = "oracle"
    """With a keypoint reward source: "oracle" (the simulator's true points projected) or "model" (the run's backend
    points at an image of the first state; needs --vision)."""
    keypoint_camera: str | None = None
    """The camera keypoints are read from (None: the task's KeypointSetup.camera)."""
    keypoint_anchors: dict[str, str | None] = field(default_factory=dict)
    """A person's word on what a keypoint moves with (`--anchor grasp=obj`), over the model's or the oracle's."""
    vision_analysis: bool = False
    """A failed candidate's rollout keyframes go to the vision model with "what went wrong?", and its answer joins the
    next round's feedback (`--vision-analysis`; needs --vision)."""

    def train_config(self, task_id: str, out_dir: Path, reward: str, seed: int, early_stop: bool = False) -> TrainConfig:
        """The training settings of one of this run's jobs: the one place run settings become training settings.
        `early_stop` (a round's candidates, not the final comparison, which trains to the same budget for all):
        stop at the run's success threshold, and honour a stop file in the job's folder. HER is off for every job: a
        program cannot be relabelled (policies.her), so the expert reward it is compared with trains without it too."""
        stopping = early_stop and self.early_stop
        return TrainConfig(
            task_id=task_id, out_dir=Path(out_dir), reward=reward, reward_mode=self.reward_mode if reward == "code" else "dense",
            steps=self.steps, seed=seed, device=self.device, algo=self.algo,
            eval_freq=self.eval_freq, eval_episodes=self.eval_episodes, overrides=dict(self.overrides),
            stop_at_success=self.success_threshold if stopping and self.success_threshold <= 1.0 else None,
            stop_file=str(Path(out_dir).parent / STOP_FILE) if stopping else None, her=False,
        )

    def validate(self) -> None:
        """Numbers and names a person types; each mistake is one line naming the flag."""
        # steps, eval_freq and eval_episodes are training settings: preflight.check_train_config checks them,
        # for `t2r train` and for a run's jobs alike
        for name, least in (("rounds", 1), ("samples", 1), ("workers", 1), ("concurrency", 1), ("final_seeds", 0),
                            ("few_shot", 0), ("max_retries", 0), ("fix_attempts", 0), ("tune", 0)):
            value = getattr(self, name)
            if value is not None and value < least:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least {least}, got {value}")
        if self.timeout is not None and self.timeout <= 0:
            raise ConfigError(f"--timeout must be a positive number of seconds, got {self.timeout}")
        if not 0.0 <= self.screen_threshold <= 1.0:
            raise ConfigError(f"--screen-threshold must be between 0 and 1, got {self.screen_threshold}")
        if not 0.0 <= self.temperature <= 2.0:
            raise ConfigError(f"--temperature must be between 0 and 2, got {self.temperature}")
        if self.backend not in ("openai", "heuristic", "file"):
            raise ConfigError(f"unknown --llm {self.backend!r}: choose openai, heuristic (rule-based, no model) or file")
        if self.reward_source not in REWARD_SOURCES:
            raise ConfigError(f"unknown --reward-source {self.reward_source!r}: choose {', '.join(REWARD_SOURCES)}")
        if self.keypoints not in ("oracle", "model"):
            raise ConfigError(f"unknown --keypoints {self.keypoints!r}: choose oracle (true points) or model (the backend points)")
        mode = REWARD_MODES.get(self.reward_mode)
        if self.reward_source != "code" and (mode is None or mode.needs_program):
            raise ConfigError(f"--reward-source {self.reward_source} writes a dense reward: use it with --reward-mode dense")
        if self.reward_source != "code" and self.keypoints == "model" and not self.vision:
            raise ConfigError("--keypoints model reads an image: add --vision (the model must accept images), or use --keypoints oracle")
        if self.vision_analysis and not self.vision:
            raise ConfigError("--vision-analysis shows a vision model the rollout: add --vision (the model must accept images)")
        if self.vision_analysis and self.backend != "openai":
            raise ConfigError("--vision-analysis asks a vision model between rounds: use --llm openai with a model that accepts images")
        if (self.vision or self.vision_analysis) and self.backend == "heuristic":
            raise ConfigError("the heuristic backend is rule-based and cannot see images: drop --vision/--vision-analysis, "
                              "or use --llm openai with a vision model")
        if self.backend == "openai" and not self.model:
            raise ConfigError("the openai backend needs --model (or OPENAI_MODEL): e.g. --model gpt-4o or your server's model name")


def resolve_run_id(runs_dir: Path, run_id: str) -> str:
    """`latest`, a full id or a unique prefix -> the run's id; one line naming the choices otherwise."""
    ids = sorted(p.parent.name for p in runs_dir.glob("*/config.json"))  # ids start with a timestamp: sorted = oldest first
    listing = f"`t2r runs --runs-dir {runs_dir}` lists them"
    if run_id == "latest":
        if not ids:
            raise ConfigError(f"there are no runs in {runs_dir}; start one with `t2r run` (or pass --runs-dir)")
        return ids[-1]
    if run_id in ids:
        return run_id
    matches = [i for i in ids if i.startswith(run_id)] if run_id else []
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise ConfigError(f"run id prefix {run_id!r} matches {len(matches)} runs ({', '.join(matches[:4])}"
                          f"{', ...' if len(matches) > 4 else ''}); give more of the id")
    raise ConfigError(f"no run {run_id!r} in {runs_dir}; {listing}")


def new_run_id(task_id: str) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{task_id.replace('/', '-')}-{uuid.uuid4().hex[:6]}"


class RunStore:
    """One run directory. Paths are derived, never stored, so a moved run still opens."""

    def __init__(self, root: Path):
        self.root = Path(root).resolve()  # absolute: stage paths built from it must not be re-joined onto it

    @property
    def run_id(self) -> str:
        return self.root.name

    @property
    def runs_dir(self) -> Path:
        return self.root.parent

    # --- creation and lookup -------------------------------------------------------------
    @classmethod
    def create(cls, runs_dir: Path, config: RunConfig) -> RunStore:
        store = cls(Path(runs_dir) / new_run_id(config.task_id))
        store.root.mkdir(parents=True, exist_ok=False)
        write_json_atomic(store.root / "config.json", asdict(config))
        store.set_state(status="created", round=0)
        return store

    @classmethod
    def open(cls, runs_dir: Path, run_id: str) -> RunStore:
        """A run by its id, a unique prefix of it, or `latest` (the newest run in `runs_dir`)."""
        return cls(Path(runs_dir) / resolve_run_id(Path(runs_dir), run_id))

    def config(self) -> RunConfig:
        return RunConfig(**json.loads((self.root / "config.json").read_text()))

    # --- run state ------------------------------------------------------------------------
    def state(self) -> RunState:
        raw = self.read_json("state.json")
        return cast(RunState, upgrade(raw, f"run {self.run_id}")) if raw else {}

    def status(self) -> str:
        """The run's status as it really is: a run recorded as `running` (or just `created`) whose process is
        gone, killed or timed out before it could write anything, is `interrupted`."""
        state = self.state()
        return effective_status(self.root, state.get("status", "unknown"), state.get("updated"))

    def set_state(self, **changes: Any) -> RunState:
        state = stamped({**self.state(), **changes, "updated": time.time()})
        write_json_atomic(self.root / "state.json", state)
        return cast(RunState, state)

    # --- round and final summaries ---------------------------------------------------------
    def round_summary(self, round_index: int) -> RoundSummary | None:
        raw = self.read_json(f"rounds/r{round_index}/summary.json")
        return cast(RoundSummary, upgrade(raw, f"round {round_index} of run {self.run_id}")) if raw is not None else None

    def write_round_summary(self, summary: RoundSummary) -> None:
        self.write_json(f"rounds/r{summary['round']}/summary.json", stamped(dict(summary)))

    def final_summary(self) -> FinalSummary | None:
        raw = self.read_json("final/summary.json")
        return cast(FinalSummary, upgrade(raw, f"the final summary of run {self.run_id}")) if raw is not None else None

    def write_final_summary(self, summary: FinalSummary) -> None:
        self.write_json("final/summary.json", stamped(dict(summary)))

    # --- paths ------------------------------------------------------------------------------
    def round_dir(self, round_index: int) -> Path:
        return self.root / "rounds" / f"r{round_index}"

    def candidate_dir(self, round_index: int, sample: int) -> Path:
        return self.round_dir(round_index) / f"s{sample}"

    def tune_dir(self, candidate_id: str) -> Path:
        """Where tuning candidate `candidate_id` writes: its study, its trials, and the tuned candidate."""
        return self.root / TUNE_DIR / candidate_id

    def candidate_file(self, candidate: Candidate) -> Path:
        """Where a candidate's record lives: its round's folder, or for a tuned one its parent's tuning folder."""
        if candidate.get("parent"):
            return self.tune_dir(candidate["parent"]) / CANDIDATE_FILE
        return self.candidate_dir(candidate["round"], candidate["sample"]) / CANDIDATE_FILE

    # --- generic atomic I/O -----------------------------------------------------------------
    def read_json(self, relative: str | Path) -> Any:
        path = self.root / relative
        return json.loads(path.read_text()) if path.is_file() else None

    def write_json(self, relative: str | Path, data: Any) -> Path:
        return write_json_atomic(self.root / relative, data)

    def write_text(self, relative: str | Path, text: str) -> Path:
        return write_text_atomic(self.root / relative, text)

    def relative(self, path: Path) -> str:
        return str(Path(path).relative_to(self.root))

    # --- candidates ----------------------------------------------------------------------------
    def candidates(self, round_index: int | None = None) -> list[Candidate]:
        """Every candidate.json, in (round, sample) order; a tuned candidate (`tune/<parent>/candidate.json`) counts in
        its parent's round and comes right after it."""
        pattern = f"rounds/r{round_index}/s*/{CANDIDATE_FILE}" if round_index is not None else f"rounds/r*/s*/{CANDIDATE_FILE}"
        paths = [*self.root.glob(pattern), *self.root.glob(f"{TUNE_DIR}/*/{CANDIDATE_FILE}")]
        found = [cast(Candidate, upgrade(json.loads(p.read_text()), self.relative(p))) for p in paths]
        if round_index is not None:
            found = [c for c in found if c["round"] == round_index]
        return sorted(found, key=lambda c: (c["round"], c["sample"], c["id"]))

    def candidate(self, candidate_id: str | None) -> Candidate | None:
        """The candidate.json of an id like `r0-s1` (or `r0-s1-tuned`); None when the id is malformed or unknown."""
        tuned = re.fullmatch(r"(r\d+-s\d+(?:-tuned)*)-tuned", candidate_id or "")
        if tuned is not None:
            raw = self.read_json(self.tune_dir(tuned[1]) / CANDIDATE_FILE)
            return cast(Candidate, upgrade(raw, f"candidate {candidate_id}")) if raw is not None else None
        match = re.fullmatch(r"r(\d+)-s(\d+)", candidate_id or "")
        if match is None:
            return None
        return self.read_candidate(int(match[1]), int(match[2]))

    def read_candidate(self, round_index: int, sample: int) -> Candidate | None:
        raw = self.read_json(self.candidate_dir(round_index, sample) / "candidate.json")
        return cast(Candidate, upgrade(raw, f"candidate r{round_index}-s{sample}")) if raw is not None else None

    def write_candidate(self, candidate: Candidate) -> Candidate:
        record = cast(Candidate, stamped(dict(candidate)))
        write_json_atomic(self.candidate_file(candidate), record)
        return record

    # --- human feedback events (who, when, what, which round it produced) -------------------
    def add_event(self, event: dict[str, Any]) -> dict[str, Any]:
        events = self.events()
        event = {"id": len(events), "time": time.time(), **event}
        self.write_json("events.json", [*events, event])
        return event

    def events(self) -> list[dict[str, Any]]:
        return self.read_json("events.json") or []

    def update_event(self, event_id: int, **changes: Any) -> None:
        events = self.events()
        events[event_id].update(changes)
        self.write_json("events.json", events)


LIVE_STATUSES = ("created", "running")
"""Statuses only a working process keeps; without one holding the run's lock they are stale."""
STARTING_GRACE_SECONDS = 60.0
"""A run just `created` has no lock for the moment before its loop starts."""


def effective_status(root: Path, recorded: str, updated: float | None) -> str:
    from text2reward.runs.lock import held_by_a_live_process

    if recorded not in LIVE_STATUSES or held_by_a_live_process(root):
        return recorded
    if recorded == "created" and updated is not None and time.time() - updated < STARTING_GRACE_SECONDS:
        return recorded
    return "interrupted"


# --- the SQLite index ------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    task_id TEXT, backend TEXT, model TEXT, status TEXT,
    rounds_done INTEGER, best_success REAL, best_candidate TEXT,
    prompt_tokens INTEGER, completion_tokens INTEGER,
    wall_seconds REAL, created REAL, updated REAL, path TEXT
)
"""


def index_run(store: RunStore) -> dict[str, Any]:
    """Write (or refresh) the run's row in `<runs_dir>/index.sqlite` from its files."""
    config, state = store.config(), store.state()
    candidates = store.candidates()
    row = {
        "run_id": store.run_id,
        "task_id": config.task_id,
        "backend": config.backend,
        "model": config.model or ("rule-based" if config.backend == "heuristic" else config.backend),
        "status": state.get("status", "unknown"),
        "rounds_done": state.get("rounds_done", 0),
        "best_success": state.get("best_success"),
        "best_candidate": state.get("best"),
        "prompt_tokens": sum(c.get("tokens", {}).get("prompt", 0) for c in candidates),
        "completion_tokens": sum(c.get("tokens", {}).get("completion", 0) for c in candidates),
        "wall_seconds": state.get("wall_seconds", 0.0),
        "created": state.get("created", (store.root / "config.json").stat().st_mtime),
        "updated": state.get("updated"),
        "path": str(store.root),
    }
    with closing(sqlite3.connect(store.runs_dir / INDEX_FILE, timeout=30)) as db, db:
        db.execute(_SCHEMA)
        db.execute(
            f"INSERT OR REPLACE INTO runs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )
    return row


def list_runs(runs_dir: Path) -> list[dict[str, Any]]:
    """Rows of the index, newest first; runs whose directory exists but whose row is missing are indexed."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return []
    for config_path in runs_dir.glob("*/config.json"):
        store = RunStore(config_path.parent)
        with closing(sqlite3.connect(runs_dir / INDEX_FILE, timeout=30)) as db:
            db.execute(_SCHEMA)
            known = db.execute("SELECT 1 FROM runs WHERE run_id = ?", (store.run_id,)).fetchone()
        if not known:
            index_run(store)
    with closing(sqlite3.connect(runs_dir / INDEX_FILE, timeout=30)) as db:
        db.row_factory = sqlite3.Row
        db.execute(_SCHEMA)
        rows = db.execute("SELECT * FROM runs ORDER BY created DESC").fetchall()
    listed = [dict(r) for r in rows if Path(r["path"]).is_dir()]
    for row in listed:  # the index holds what was last written; a dead run's process wrote nothing more
        row["status"] = effective_status(Path(row["path"]), row["status"], row["updated"])
    return listed
