"""What a page shows about a run, gathered from the run directory into plain dataclasses.

Why one gathering step shared by the dashboard and the HTML export: both show the same facts, and
templates stay free of file access. Only `url_for` differs (a served URL, or an embedded data: URL).
Every file is read through `files.inside`, since artefacts name their own paths.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from markupsafe import Markup

from text2reward.dashboard import code as codeview
from text2reward.dashboard.files import inside, read_text
from text2reward.dashboard.plots import Series, line_chart
from text2reward.runs.keypoint_record import (
    KEYPOINT_IMAGE,
    KEYPOINT_REWARD,
    KEYPOINTS_FILE,
    KeypointRecord,
    format_metres,
    format_pixel,
    format_world,
    parse_keypoints,
)
from text2reward.runs.ranking import best_candidate
from text2reward.runs.records import TRAINED_STATUSES, Candidate, final_failures
from text2reward.runs.store import RunConfig, RunStore

HEURISTIC_LABEL = "heuristic (rule-based, no language model)"
LIVE_STATUSES = {"running", "starting"}
UrlFor = Callable[[str], "str | None"]
IMAGE_DATA_URL = re.compile(r"^data:image/(png|jpeg|webp);base64,[A-Za-z0-9+/=]+$")


def backend_label(backend: str, model: str | None) -> str:
    if backend == "heuristic":
        return HEURISTIC_LABEL
    if backend == "file":
        return "file (pasted replies)"
    return backend


def model_label(config: RunConfig) -> str:
    if config.backend == "heuristic":
        return "rule-based"
    return config.model or ("pasted replies" if config.backend == "file" else "-")


def display_status(store: RunStore, launching: bool) -> str:
    """The run's status as a person should read it: a launched resume counts as live at once, and a run whose
    process died is `interrupted`, never "live" (`RunStore.status` asks the run's lock)."""
    status = store.status()
    if (launching and status != "running") or status == "created":
        return "starting"
    return status.replace("_", " ")


def format_time(stamp: float | None) -> str:
    """A moment in local time, with the time zone (a run folder is read on other machines too)."""
    if not stamp:
        return "-"
    return datetime.fromtimestamp(stamp).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def iso_time(stamp: float | None) -> str:
    """The same moment for machines (`<time datetime>`): ISO 8601 with the UTC offset."""
    return datetime.fromtimestamp(stamp).astimezone().isoformat(timespec="seconds") if stamp else ""


def run_created(store: RunStore, state: Mapping[str, Any] | None = None) -> float | None:
    """When the run was started: state.json's `created` (set by the first loop start and kept by every resume),
    else the stamp in the run id (`RunStore.create` names the folder when it makes it). Never a file's mtime:
    config.json is rewritten by feedback, which would move the start."""
    state = store.state() if state is None else state
    created = state.get("created")
    if isinstance(created, (int, float)) and created > 0:
        return float(created)
    match = re.match(r"(\d{8}-\d{6})-", store.run_id)
    if match:
        try:
            return time.mktime(time.strptime(match[1], "%Y%m%d-%H%M%S"))
        except (ValueError, OverflowError):
            return None
    return None


def format_duration(seconds: float | None) -> str:
    if not seconds:
        return "-"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m" if hours else (f"{minutes}m {secs:02d}s" if minutes else f"{secs}s")


# --- views --------------------------------------------------------------------------------------------


@dataclass
class Check:
    name: str
    ok: bool | None  # None: skipped (an earlier check failed), neither passed nor failed
    detail: str

    @property
    def outcome(self) -> str:
        return "skipped" if self.ok is None else ("ok" if self.ok else "bad")


@dataclass
class VisionView:
    """A vision model's answer to "what went wrong?" about a failed candidate's keyframes: its opinion, shown as such."""

    model: str
    text: str
    images: list[str]
    """URLs of the keyframes it was shown, in time order."""


@dataclass
class CandidateView:
    id: str
    round: int
    sample: int
    status: str
    model: str
    rule_based: bool
    tokens: int
    reason: str = ""
    code: str = ""
    code_html: Markup | None = None
    diff_html: Markup | None = None
    diff_base: str | None = None
    diff_same: bool = False
    replies: list[tuple[str, str]] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    validation_errors: list[str] = field(default_factory=list)
    screening: dict[str, Any] | None = None
    training: dict[str, Any] = field(default_factory=dict)
    success_chart: Markup | None = None
    components_chart: Markup | None = None
    behaviour_text: str = ""
    feedback_text: str = ""
    video_url: str | None = None
    round_best: bool = False
    overall_best: bool = False
    diff_note: str = "previous round's best"
    parent: str | None = None
    """A tuned candidate (`t2r tune`): the candidate whose constants were tuned."""
    tuning: dict[str, Any] = field(default_factory=dict)
    """A tuned candidate's study summary: trials, the winner, `constants_diff` ({name, parent, tuned, ratio} each)."""
    backend: str = ""
    vision: VisionView | None = None

    @property
    def trained(self) -> bool:
        return self.status in TRAINED_STATUSES

    @property
    def keypoint_program(self) -> bool:
        """Written by text2reward from the run's keypoints: no language model's code."""
        return self.backend == "keypoints"

    @property
    def author(self) -> str:
        """Who wrote the code, as the card's first words say it."""
        if self.rule_based:
            return "rule-based (no language model)"
        if self.keypoint_program:
            return f"{self.model} (written by text2reward, no language model)"
        return self.model

    @property
    def reply_label(self) -> str:
        return "Rule-based" if self.rule_based else ("Keypoint program" if self.keypoint_program else "Model")

    @property
    def success(self) -> float | None:
        return self.training.get("success_rate")

    @property
    def checks_passed(self) -> int:
        return sum(1 for c in self.checks if c.ok is True)

    @property
    def checks_failed(self) -> int:
        return sum(1 for c in self.checks if c.ok is False)

    @property
    def checks_skipped(self) -> int:
        return sum(1 for c in self.checks if c.ok is None)


@dataclass
class Message:
    role: str
    text: str
    images: list[str] = field(default_factory=list)


@dataclass
class EventView:
    id: int
    time: str
    author: str
    source: str
    type: str
    text: str
    target: str
    for_round: int | None
    produced: bool


@dataclass
class RoundView:
    index: int
    candidates: list[CandidateView]
    messages: list[Message]
    context: dict[str, Any]
    event: EventView | None
    best_id: str | None
    state: str  # "done", "waiting", "in progress" (live run), else what stopped it ("interrupted", "failed", ...)

    @property
    def trained(self) -> list[CandidateView]:
        return [c for c in self.candidates if c.trained]

    @property
    def critique(self) -> str:
        return str(self.context.get("critique") or "")

    @property
    def vision_source(self) -> tuple[str, int, str] | None:
        """(candidate, keyframes, model) when this round's feedback included a vision model's reading of keyframes."""
        analysis = self.context.get("vision_analysis")
        if not isinstance(analysis, dict):
            return None
        images = analysis.get("images")
        return str(analysis.get("candidate") or "?"), len(images) if isinstance(images, list) else 0, str(analysis.get("model") or "?")

    @property
    def keypoint_round(self) -> bool:
        """Every candidate of the round is a keypoint program: its prompt was written but no model answered it."""
        return bool(self.candidates) and all(c.keypoint_program for c in self.candidates)

    @property
    def showed_keypoints(self) -> bool:
        """Round 0 of code+keypoints: the prompt showed the model the keypoints."""
        return bool(self.context.get("keypoints"))


@dataclass
class FinalRow:
    label: str
    rates: list[float]
    mean: float | None
    std: float | None
    failures: list[str]


@dataclass
class FinalView:
    seeds: list[int]
    rows: list[FinalRow]
    chart: Markup | None
    reason: str = ""
    best: str | None = None


@dataclass
class KeypointLine:
    """One row of the keypoint table, formatted the way report.md writes it."""

    name: str
    pixel: str
    height: str
    x: str
    y: str
    z: str
    anchor: str | None


@dataclass
class KeypointsView:
    """The run's keypoints (`keypoints/`): the picture with them drawn, where they came from, and the raw replies."""

    record: KeypointRecord
    lines: list[KeypointLine]
    image_url: str | None
    reward_file: str | None
    """Run-relative path of the keypoint reward program (linked, never embedded)."""
    replies: list[tuple[str, str, bool]]
    """(file name, text, used): every raw model reply in order; only the last one was used."""

    @property
    def effector(self) -> str:
        return format_world(self.record.effector) if self.record.effector is not None else ""


@dataclass
class RunView:
    run_id: str
    config: RunConfig
    state: Mapping[str, Any]
    status: str
    backend: str
    model: str
    rounds: list[RoundView]
    events: list[EventView]
    final: FinalView | None
    overview_chart: Markup | None
    tokens: int
    best_id: str | None
    best_success: float | None
    launch: dict[str, Any] | None
    signature: str
    created_at: float | None = None
    untrained_reason: str = ""  # why no candidate trained, by candidate ("" while one has)
    keypoints: KeypointsView | None = None

    @property
    def reward_source(self) -> str:
        """Where the rewards come from; with keypoints, also who placed them (the model's name once it answered)."""
        source = self.config.reward_source
        if source == "code":
            return "code"
        return f"{source} · points from {self.keypoints.record.source if self.keypoints else self.config.keypoints}"

    @property
    def live(self) -> bool:
        return self.status in LIVE_STATUSES

    @property
    def waiting_for_replies(self) -> bool:
        return self.status == "waiting for replies"

    @property
    def feedback_closed(self) -> str:
        """Why the feedback forms are closed, in a sentence shown beside them ("" when they are open)."""
        if self.status == "starting":
            return "Closed while the next round starts: feedback opens again when the run has finished."
        if self.live:
            return "Closed while the run is in progress: feedback opens when it has finished."
        if self.state.get("status") == "feedback_pending":
            waiting = [e for e in self.events if not e.produced]
            which = f"#{waiting[-1].id} " if waiting else ""
            return (f"Closed: feedback {which}is already waiting for the next round; run it first "
                    f"(`t2r resume {self.run_id}`), then give more.")
        return ""

    @property
    def accepts_feedback(self) -> bool:
        return not self.feedback_closed

    def critique_closed(self, candidate: CandidateView) -> str:
        """Why a candidate's critique form is closed ("" when it is open)."""
        if candidate.status == "pending_training":
            if self.live:
                return f"{candidate.id} is still training: it can be critiqued once it has trained and the run has finished."
            return f"{candidate.id} never finished training (the run stopped first), so it has no behaviour to critique."
        if not candidate.trained:
            return (f"{candidate.id} did not train ({candidate.status.replace('_', ' ')}), so it has no behaviour to "
                    "critique; critique a trained candidate.")
        return self.feedback_closed

    @property
    def wall_time(self) -> str:
        return format_duration(self.state.get("wall_seconds"))

    @property
    def created(self) -> str:
        return format_time(self.created_at)

    @property
    def created_iso(self) -> str:
        return iso_time(self.created_at)


# --- signature: has anything a page shows changed? -------------------------------------------------------------

SIGNATURE_GLOBS = ("state.json", "events.json", "config.json", "final/summary.json", "dashboard-resume.json", KEYPOINTS_FILE,
                   "rounds/r*/prompt.json", "rounds/r*/summary.json", "rounds/r*/s*/candidate.json", "tune/*/candidate.json")


def run_signature(root: Path, launching: bool = False) -> str:
    """A short hash of the files a run page is drawn from; the page polls it to refresh only on change."""
    digest = hashlib.sha1(f"{launching}:{RunStore(root).status()}".encode())  # a process dying changes no file
    for pattern in SIGNATURE_GLOBS:
        for path in sorted(root.glob(pattern)):
            try:
                stat = path.stat()
            except OSError:
                continue
            digest.update(f"{path.relative_to(root)}:{stat.st_mtime_ns}:{stat.st_size};".encode())
    return digest.hexdigest()[:16]


# --- gathering -----------------------------------------------------------------------------------------------


def _checks(validation: dict[str, Any] | None) -> tuple[list[Check], list[str]]:
    if not validation:
        return [], []
    checks = [Check(name.replace("_", " "), None if info.get("ok") is None else bool(info.get("ok")), str(info.get("detail", "")))
              for name, info in (validation.get("checks") or {}).items() if isinstance(info, dict)]
    return checks, [str(e) for e in validation.get("errors") or []]


def _success_chart(record: Mapping[str, Any]) -> Markup | None:
    curve = (record.get("training") or {}).get("curve") or []
    if not curve:
        return None
    series = [Series("success rate", [(p["steps"], p["success_rate"]) for p in curve], color="#2563eb")]
    return line_chart(series, title="success rate (evaluation)", y_label="success", y_range=(-0.02, 1.02), width=420, height=170)


def _components_chart(record: Mapping[str, Any]) -> Markup | None:
    history = (record.get("training_result") or {}).get("components") or []
    names = sorted({name for entry in history for name in entry.get("components", {})})
    if not names:
        return None
    series = []
    for name in names:
        stats = [(e["steps"], e["components"][name]) for e in history if name in e.get("components", {})]
        series.append(Series(
            name, [(x, float(s.get("mean", math.nan))) for x, s in stats],
            band=[(x, float(s.get("min", math.nan)), float(s.get("max", math.nan))) for x, s in stats],
        ))
    return line_chart(series, title="reward components (mean; band: min to max)", y_label="value", width=420, height=170)


def _code_of(record: Mapping[str, Any]) -> str | None:
    if record.get("code_file"):
        return record["code_file"]
    attempts = [a for a in record.get("attempts") or [] if a.get("code_file")]
    return attempts[-1]["code_file"] if attempts else None


def _tokens(record: Mapping[str, Any]) -> int:
    """Prompt plus completion tokens of a candidate (0 where its record has none)."""
    tokens = record.get("tokens") or {}
    return int(tokens.get("prompt", 0)) + int(tokens.get("completion", 0))


def _vision(root: Path, record: Mapping[str, Any], url_for: UrlFor) -> VisionView | None:
    """A candidate's vision analysis (None without one, or when its answer file is missing or outside the run)."""
    analysis = record.get("vision_analysis")
    if not isinstance(analysis, dict) or not isinstance(analysis.get("file"), str):
        return None
    text = (read_text(root, analysis["file"]) or "").strip()
    if not text:
        return None
    paths = [p for p in analysis.get("images") or [] if isinstance(p, str) and inside(root, p)]
    images = [url for url in map(url_for, paths) if url]
    return VisionView(str(analysis.get("model") or "?"), text, images)


def _candidate(root: Path, record: Mapping[str, Any], url_for: UrlFor) -> CandidateView:
    validation = record.get("validation") or next(
        (a["validation"] for a in reversed(record.get("attempts") or []) if a.get("validation")), None)
    checks, errors = _checks(validation)
    code = read_text(root, _code_of(record)) or ""
    directory = f"rounds/r{record['round']}/s{record['sample']}"
    replies = []
    tuned = bool(record.get("parent"))  # a tuned candidate has no replies of its own (its folder is its parent's)
    for path in [] if tuned else sorted(root.glob(f"{directory}/reply_*.md"), key=lambda p: p.stem):
        text = read_text(root, f"{directory}/{path.name}")
        if text is not None:
            replies.append((path.name, text))
    video_url = url_for(record["video_file"]) if record.get("video_file") and inside(root, record["video_file"]) else None
    return CandidateView(
        id=record["id"], round=record["round"], sample=record["sample"], status=record.get("status", "generating"),
        model=record.get("model") or "-", rule_based=bool(record.get("rule_based")),
        tokens=_tokens(record), reason=str(record.get("reason") or "") or _stopped_reason(record),
        code=code, code_html=codeview.highlight_python(code) if code else None,
        replies=replies, checks=checks, validation_errors=errors, screening=record.get("screening"),
        training=record.get("training") or {}, success_chart=_success_chart(record),
        components_chart=_components_chart(record), behaviour_text=str(record.get("behaviour_text") or ""),
        feedback_text=read_text(root, record.get("feedback_file")) or "",
        video_url=video_url, parent=record.get("parent") or None, tuning=dict(record.get("tuned") or {}),
        backend=str(record.get("backend") or ""), vision=_vision(root, record, url_for),
    )


def _keypoints(root: Path, url_for: UrlFor) -> KeypointsView | None:
    """The run's keypoints, or None when it has none or their record does not read (the page shows nothing then)."""
    text = read_text(root, KEYPOINTS_FILE)
    try:
        record = parse_keypoints(json.loads(text)) if text else None
    except ValueError:
        return None
    if record is None:
        return None
    lines = [KeypointLine(p.name, format_pixel(p.pixel), format_metres(p.height), format_metres(p.world[0]),
                          format_metres(p.world[1]), format_metres(p.world[2]), p.anchor) for p in record.points]
    replies = [(name, reply) for name in record.replies if (reply := read_text(root, f"keypoints/{name}")) is not None]
    return KeypointsView(
        record=record, lines=lines, image_url=url_for(KEYPOINT_IMAGE) if inside(root, KEYPOINT_IMAGE) else None,
        reward_file=KEYPOINT_REWARD if inside(root, KEYPOINT_REWARD) else None,
        replies=[(name, reply, index == len(replies) - 1) for index, (name, reply) in enumerate(replies)],
    )


def _messages(prompt: dict[str, Any] | None) -> list[Message]:
    messages = []
    for message in (prompt or {}).get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            messages.append(Message(str(message.get("role", "?")), content))
            continue
        texts, images = [], []
        for part in content or []:
            if part.get("type") == "text":
                texts.append(str(part.get("text", "")))
            elif part.get("type") == "image_url":
                url = str((part.get("image_url") or {}).get("url", ""))
                if IMAGE_DATA_URL.match(url):
                    images.append(url)
                else:
                    texts.append("[image]")
        messages.append(Message(str(message.get("role", "?")), "\n".join(texts), images))
    return messages


def _events(store: RunStore, rounds_present: set[int]) -> list[EventView]:
    views: list[EventView] = []
    for event in store.events():
        if event.get("type") == "preference":
            target = f"best {event.get('best')} over worst {event.get('worst')}"
        else:
            target = f"critique of {event.get('candidate')}"
        for_round = event.get("for_round")
        views.append(EventView(
            id=int(event.get("id", len(views))), time=format_time(event.get("time")), author=str(event.get("author") or "-"),
            source=str(event.get("source") or "-"), type=str(event.get("type") or "-"), text=str(event.get("text") or ""),
            target=target, for_round=for_round, produced=for_round in rounds_present,
        ))
    return views


def _final_best_id(summary: Mapping[str, Any]) -> str:
    """The candidate the final comparison re-trained."""
    return str(summary.get("best_candidate") or "?")


def _final(store: RunStore) -> FinalView | None:
    summary = store.final_summary()
    if not summary:
        return None
    if not summary.get("best_candidate"):
        return FinalView(seeds=[], rows=[], chart=None, reason=str(summary.get("reason") or ""))
    best_id = _final_best_id(summary)
    rows, series = [], []
    seeds = list(summary.get("seeds") or [])
    for kind, label, color, dashed in (("best", f"best reward ({best_id})", "#2563eb", False),
                                       ("expert", "expert reward (the task's own)", "#6b7280", True)):
        entry = summary.get(kind)
        if not isinstance(entry, dict):
            continue
        rows.append(FinalRow(label, list(entry.get("success_rates") or []), entry.get("mean"), entry.get("std"),
                             [f"seed {f['seed']} ({f.get('attempts', 1)} attempt(s)): {f['reason']}" for f in final_failures(entry)]))
        trained_seeds = list(entry.get("seeds") or seeds)  # newer summaries name the seeds that trained
        for index, curve in enumerate(entry.get("curves") or []):
            seed = trained_seeds[index] if index < len(trained_seeds) else index
            series.append(Series(f"{kind} seed {seed}", [(p["steps"], p["success_rate"]) for p in curve], color=color, dashed=dashed))
    chart = line_chart(series, title="final: success over seeds, best reward vs expert", y_label="success", width=620,
                       y_range=(-0.02, 1.02)) if series else None
    return FinalView(seeds=seeds, rows=rows, chart=chart, best=best_id)


def _overview(records: Sequence[Mapping[str, Any]]) -> Markup | None:
    series = [Series(r["id"], [(p["steps"], p["success_rate"]) for p in r["training"]["curve"]])
              for r in records if r.get("status") in TRAINED_STATUSES and (r.get("training") or {}).get("curve")]
    if not series:
        return None
    return line_chart(series, title="every trained candidate: success rate during training", y_label="success",
                      y_range=(-0.02, 1.02), width=620)


def load_run(store: RunStore, url_for: UrlFor, launch: dict[str, Any] | None = None, launching: bool = False) -> RunView:
    """Everything a run page shows, read once from the run directory."""
    root = store.root
    config, state = store.config(), store.state()
    status = display_status(store, launching)
    records = store.candidates()
    overall = best_candidate(records)
    round_indices = sorted({r["round"] for r in records} | {
        int(p.parent.name[1:]) for p in root.glob("rounds/r*/prompt.json") if p.parent.name[1:].isdigit()})
    events = _events(store, set(round_indices))
    waiting = sorted({e.for_round for e in events if e.for_round is not None and e.for_round not in round_indices})
    rounds: list[RoundView] = []
    previous_best: Candidate | None = None
    for index in round_indices + waiting:
        in_round = [r for r in records if r["round"] == index]
        views = [_candidate(root, r, url_for) for r in in_round]
        best = best_candidate(in_round)
        for view in views:
            view.round_best = best is not None and view.id == best["id"]
            view.overall_best = overall is not None and view.id == overall["id"]
            base_record = next((r for r in records if r["id"] == view.parent), None) if view.parent else previous_best
            if base_record is not None and view.code:
                base = read_text(root, base_record.get("code_file")) or ""
                label = "its parent" if view.parent else f"best of round {base_record['round']}"
                diff = codeview.diff_lines(base, view.code, f"{base_record['id']} ({label})", view.id)
                view.diff_base, view.diff_same = base_record["id"], not diff
                view.diff_html = codeview.highlight_diff(diff) if diff else None
                view.diff_note = "its parent: the constants before tuning" if view.parent else view.diff_note
        prompt = store.read_json(f"rounds/r{index}/prompt.json")
        context = (prompt or {}).get("context") or {}
        produced_by = [e for e in events if e.for_round == index]
        produced_by.sort(key=lambda e: e.id == context.get("feedback_event"))  # the one the prompt used, last
        summary = store.round_summary(index)
        round_state = "done" if summary else ("waiting" if index in waiting else _unfinished_round_state(status))
        rounds.append(RoundView(index, views, _messages(prompt), context,
                                produced_by[-1] if produced_by else None, best["id"] if best else None, round_state))
        previous_best = best or previous_best
    tokens = sum(_tokens(r) for r in records)
    return RunView(
        run_id=store.run_id, config=config, state=state, status=status,
        backend=backend_label(config.backend, config.model), model=model_label(config), rounds=rounds, events=events,
        final=_final(store), overview_chart=_overview(records), tokens=tokens,
        best_id=overall["id"] if overall else None, best_success=overall["training"]["success_rate"] if overall else None,
        launch=launch, signature=run_signature(root, launching), created_at=run_created(store, state),
        untrained_reason="" if overall else _untrained_reason(state, records), keypoints=_keypoints(root, url_for),
    )


def _unfinished_round_state(status: str) -> str:
    """A round with no summary: in progress only while the run is live; otherwise what stopped it."""
    if status in LIVE_STATUSES:
        return "in progress"
    return status if status in ("interrupted", "failed", "waiting for replies", "incomplete") else "stopped"


def _stopped_reason(record: Mapping[str, Any]) -> str:
    """A candidate stopped by the run's early stopping: at which step and why (shown where a reason goes)."""
    stop = record.get("stopped_early") or {}
    return f"stopped early at {stop.get('steps')} steps: {stop.get('reason', '')}" if stop else ""


def _untrained_reason(state: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> str:
    """Why no candidate trained, by candidate: the run's own reason where it wrote one (`no_result`)."""
    reason = " ".join(str(state.get("reason") or "").split())
    prefix = "no candidate trained:"
    if reason.lower().startswith(prefix):
        return reason[len(prefix):].strip()
    if reason:
        return reason
    parts = []
    for record in records:
        why = " ".join(str(record.get("reason") or "").split())
        parts.append(f"{record['id']} {str(record.get('status', '?')).replace('_', ' ')}" + (f" ({why[:120]})" if why else ""))
    return "; ".join(parts) or "no candidate was produced"
