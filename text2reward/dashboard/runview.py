"""What a page shows about a run, gathered from the run directory into plain dataclasses.

Why one gathering step shared by the dashboard and the HTML export: both show the same facts, and
templates stay free of file access. Only `url_for` differs (a served URL, or an embedded data: URL).
Every file is read through `files.inside`, since artefacts name their own paths.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from markupsafe import Markup

from text2reward.dashboard import code as codeview
from text2reward.dashboard.files import inside, read_text
from text2reward.dashboard.plots import Series, line_chart
from text2reward.runs import layout
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
from text2reward.runs.pick_worth import pick_worth_lines
from text2reward.runs.ranking import best_candidate
from text2reward.runs.records import (
    Candidate,
    JobError,
    PromptContext,
    RecordError,
    RoundPrompt,
    RunHeader,
    RunState,
    TrainingSummary,
    TuningSummary,
    Validation,
    read,
)
from text2reward.runs.statuses import CandidateStatus, RunStatus
from text2reward.runs.store import RunStore

LIVE_STATUSES = {"running", "starting"}
"""As a page shows a status: a run's process working on it, or a resume just launched for it."""
UrlFor = Callable[[str], "str | None"]
IMAGE_DATA_URL = re.compile(r"^data:image/(png|jpeg|webp);base64,[A-Za-z0-9+/=]+$")


def display_status(store: RunStore, launching: bool) -> str:
    """The run's status as a person should read it: a launched resume counts as live at once, and a run whose
    process died is `interrupted`, never "live" (`RunStore.status` asks the run's lock)."""
    status = store.status()
    if (launching and status != RunStatus.RUNNING) or status == RunStatus.CREATED:
        return "starting"
    return status.words


def format_time(stamp: float | None) -> str:
    """A moment in local time, with the time zone (a run folder is read on other machines too)."""
    if not stamp:
        return "-"
    return datetime.fromtimestamp(stamp).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def iso_time(stamp: float | None) -> str:
    """The same moment for machines (`<time datetime>`): ISO 8601 with the UTC offset."""
    return datetime.fromtimestamp(stamp).astimezone().isoformat(timespec="seconds") if stamp else ""


def run_created(store: RunStore, state: RunState | None = None) -> float | None:
    """When the run was started: state.json's `created` (set by the first loop start and kept by every resume),
    else the stamp in the run id (`RunStore.create` names the folder when it makes it). Never a file's mtime:
    config.json is rewritten by feedback, which would move the start."""
    state = store.state() if state is None else state
    if state.created is not None and state.created > 0:
        return float(state.created)
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
    training: TrainingSummary | None = None
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
    tuning: TuningSummary | None = None
    """A tuned candidate's study summary: trials, the winner, `constants_diff` ({name, parent, tuned, ratio} each)."""
    author: str = ""
    """Who wrote the code, as the card's first words say it (records.author_label: a rule-based one says so)."""
    vision: VisionView | None = None

    @property
    def trained(self) -> bool:
        return CandidateStatus(self.status).has_training

    @property
    def reply_label(self) -> str:
        return "Rule-based" if self.rule_based else "Model"

    @property
    def success(self) -> float | None:
        return self.training.success_rate if self.training is not None else None

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
    context: PromptContext
    event: EventView | None
    best_id: str | None
    state: str  # "done", "waiting", "in progress" (live run), else what stopped it ("interrupted", "failed", ...)

    @property
    def trained(self) -> list[CandidateView]:
        return [c for c in self.candidates if c.trained]

    @property
    def critique(self) -> str:
        return self.context.critique or ""

    @property
    def vision_source(self) -> tuple[str, int, str] | None:
        """(candidate, keyframes, model) when this round's feedback included a vision model's reading of keyframes."""
        analysis = self.context.vision_analysis
        if analysis is None:
            return None
        return analysis.candidate or "?", len(analysis.images), analysis.model or "?"

    @property
    def keypoint_round(self) -> bool:
        """The round's candidate was written from the run's keypoints: its prompt was written but no model answered it."""
        return self.context.written_from_keypoints

    @property
    def showed_keypoints(self) -> bool:
        """The prompt showed the model the keypoints (round 0 of a source that adds them)."""
        return bool(self.context.keypoints)


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
    config: RunHeader
    state: RunState
    status: str
    backend: str
    """Who writes the run's rewards (the backend's label, as the run recorded it)."""
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
    pick_worth: list[str] = field(default_factory=list)
    """What the best's pick is worth (runs/pick_worth.py, as the report says it): its ties, the measured agreement."""

    @property
    def reward_source(self) -> str:
        """Where the rewards come from; with keypoints, also who placed them (the model's name once it answered)."""
        source = self.config.reward_source
        if source == "code":
            return source
        return f"{source} · points from {self.keypoints.record.source if self.keypoints else self.config.keypoints}"

    @property
    def keypoints_note(self) -> str:
        """What the run did with its keypoints, from its rounds."""
        if any(r.keypoint_round for r in self.rounds):
            return "Round 0's reward was written by text2reward from these points, not by a language model."
        if any(r.showed_keypoints for r in self.rounds):
            return "Round 0's prompt showed the model these points, and the keypoint reward was added to its programs."
        return "The points found for this run."

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
        if self.state.status == RunStatus.FEEDBACK_PENDING:
            waiting = [e for e in self.events if not e.produced]
            which = f"#{waiting[-1].id} " if waiting else ""
            return (f"Closed: feedback {which}is already waiting for the next round; run it first "
                    f"(`t2r resume {self.run_id}`), then give more.")
        return ""

    def critique_closed(self, candidate: CandidateView) -> str:
        """Why a candidate's critique form is closed ("" when it is open)."""
        if candidate.status == CandidateStatus.PENDING_TRAINING:
            if self.live:
                return f"{candidate.id} is still training: it can be critiqued once it has trained and the run has finished."
            return f"{candidate.id} never finished training (the run stopped first), so it has no behaviour to critique."
        if not candidate.trained:
            return (f"{candidate.id} did not train ({candidate.status.replace('_', ' ')}), so it has no behaviour to "
                    "critique; critique a trained candidate.")
        return self.feedback_closed

    @property
    def wall_time(self) -> str:
        return format_duration(self.state.wall_seconds)

    @property
    def created(self) -> str:
        return format_time(self.created_at)

    @property
    def created_iso(self) -> str:
        return iso_time(self.created_at)


# --- signature: has anything a page shows changed? -------------------------------------------------------------

SIGNATURE_GLOBS = (*layout.RECORD_FILES, "dashboard-resume.json", KEYPOINTS_FILE)


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


def _checks(validation: Validation | None) -> tuple[list[Check], list[str]]:
    if validation is None:
        return [], []
    checks = [Check(name.replace("_", " "), info.ok, info.detail) for name, info in validation.checks.items()]
    return checks, list(validation.errors)


def _success_chart(record: Candidate) -> Markup | None:
    curve = record.training.curve if record.training is not None else []
    if not curve:
        return None
    series = [Series("success rate", [(p.steps, p.success_rate) for p in curve], color="#2563eb")]
    return line_chart(series, title="success rate (evaluation)", y_label="success", y_range=(-0.02, 1.02), width=420, height=170)


def _components_chart(record: Candidate) -> Markup | None:
    history = record.training_result.components if record.training_result is not None else []
    names = sorted({name for entry in history for name in entry.components})
    if not names:
        return None
    series = []
    for name in names:
        stats = [(e.steps, e.components[name]) for e in history if name in e.components]
        series.append(Series(
            name, [(x, s.mean) for x, s in stats],
            band=[(x, s.min, s.max) for x, s in stats],
        ))
    return line_chart(series, title="reward components (mean; band: min to max)", y_label="value", width=420, height=170)


def _code_of(record: Candidate) -> str | None:
    if record.code_file:
        return record.code_file
    attempts = [a.code_file for a in record.attempts if a.code_file]
    return attempts[-1] if attempts else None


def _vision(root: Path, record: Candidate, url_for: UrlFor) -> VisionView | None:
    """A candidate's vision analysis (None without one, or when its answer file is missing or outside the run)."""
    analysis = record.vision_analysis
    if analysis is None:
        return None
    text = (read_text(root, analysis.file) or "").strip()
    if not text:
        return None
    images = [url for url in map(url_for, [p for p in analysis.images if inside(root, p)]) if url]
    return VisionView(analysis.model or "?", text, images)


def _stopped_reason(record: Candidate) -> str:
    """A candidate stopped by the run's early stopping: at which step and why (shown where a reason goes)."""
    stop = record.stopped_early
    return f"stopped early at {stop.steps} steps: {stop.reason}" if stop is not None else ""


def _training_error(root: Path, record: Candidate) -> str:
    """Why a candidate still waiting for training failed its last attempt (its job's error.json), or ""."""
    if not record.status.needs_training or record.parent:
        return ""
    job = RunStore(root).paths.training_dir(record.round, record.sample)
    text = read_text(root, str((job / "error.json").relative_to(root)))
    try:
        reason = read(JobError, json.loads(text), "error.json").reason if text else ""
    except (ValueError, RecordError):
        return ""
    return f"its last training attempt failed: {reason}" if reason else ""


def _candidate(root: Path, record: Candidate, url_for: UrlFor) -> CandidateView:
    validation = record.validation or next((a.validation for a in reversed(record.attempts) if a.validation), None)
    checks, errors = _checks(validation)
    code = read_text(root, _code_of(record)) or ""
    replies = []
    directory = RunStore(root).paths.candidate_dir(record.round, record.sample)
    for path in [] if record.parent else sorted(directory.glob("reply_*.md"), key=lambda p: p.stem):  # a tuned one has no replies
        text = read_text(root, str(path.relative_to(root)))
        if text is not None:
            replies.append((path.name, text))
    video_url = url_for(record.video_file) if record.video_file and inside(root, record.video_file) else None
    return CandidateView(
        id=record.id, round=record.round, sample=record.sample, status=record.status.value, model=record.model or "-",
        rule_based=record.rule_based, tokens=record.tokens.total,
        reason=record.reason or _stopped_reason(record) or _training_error(root, record),
        code=code, code_html=codeview.highlight_python(code) if code else None,
        replies=replies, checks=checks, validation_errors=errors, screening=record.screening,
        training=record.training, success_chart=_success_chart(record),
        components_chart=_components_chart(record), behaviour_text=record.behaviour_text,
        feedback_text=read_text(root, record.feedback_file) or "",
        video_url=video_url, parent=record.parent, tuning=record.tuned,
        author=record.author, vision=_vision(root, record, url_for),
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


def _messages(prompt: RoundPrompt | None) -> list[Message]:
    messages = []
    for message in prompt.messages if prompt is not None else []:
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
        if event.type == "preference":
            target = f"best {event.best} over worst {event.worst}"
        else:
            target = f"critique of {event.candidate}"
        views.append(EventView(
            id=event.id, time=format_time(event.time), author=event.author or "-", source=event.source or "-",
            type=event.type or "-", text=event.text, target=target, for_round=event.for_round,
            produced=event.for_round in rounds_present,
        ))
    return views


def _final(store: RunStore) -> FinalView | None:
    summary = store.final_summary()
    if summary is None:
        return None
    if summary.best_candidate is None:
        return FinalView(seeds=[], rows=[], chart=None, reason=summary.reason or "")
    best_id = summary.best_candidate
    rows, series = [], []
    labels = {"best": (f"best reward ({best_id})", "#2563eb", False), "expert": ("expert reward (the task's own)", "#6b7280", True)}
    for kind, arm in summary.arms():
        label, color, dashed = labels[kind]
        rows.append(FinalRow(label, arm.success_rates, arm.mean, arm.std,
                             [f"seed {f.seed} ({f.attempts} attempt(s)): {f.reason}" for f in arm.failed_seeds]))
        trained_seeds = arm.seeds or summary.seeds  # newer summaries name the seeds that trained
        for index, curve in enumerate(arm.curves):
            seed = trained_seeds[index] if index < len(trained_seeds) else index
            series.append(Series(f"{kind} seed {seed}", [(p.steps, p.success_rate) for p in curve], color=color, dashed=dashed))
    chart = line_chart(series, title="final: success over seeds, best reward vs expert", y_label="success", width=620,
                       y_range=(-0.02, 1.02)) if series else None
    return FinalView(seeds=summary.seeds, rows=rows, chart=chart, best=best_id)


def _overview(records: Sequence[Candidate]) -> Markup | None:
    series = [Series(r.id, [(p.steps, p.success_rate) for p in r.training.curve])
              for r in records if r.has_training and r.training is not None and r.training.curve]
    if not series:
        return None
    return line_chart(series, title="every trained candidate: success rate during training", y_label="success",
                      y_range=(-0.02, 1.02), width=620)


def _diff_against(root: Path, view: CandidateView, base: Candidate | None) -> None:
    """The candidate's code as a diff against its parent's (a tuned one) or the previous round's best."""
    if base is None or not view.code:
        return
    base_code = read_text(root, base.code_file) or ""
    label = "its parent" if view.parent else f"best of round {base.round}"
    diff = codeview.diff_lines(base_code, view.code, f"{base.id} ({label})", view.id)
    view.diff_base, view.diff_same = base.id, not diff
    view.diff_html = codeview.highlight_diff(diff) if diff else None
    view.diff_note = "its parent: the constants before tuning" if view.parent else view.diff_note


def _round_prompt(store: RunStore, index: int) -> RoundPrompt | None:
    path = store.paths.round_prompt(index)
    data = store.read_json(path)
    return read(RoundPrompt, data, str(path)) if data is not None else None


def load_run(store: RunStore, url_for: UrlFor, launch: dict[str, Any] | None = None, launching: bool = False) -> RunView:
    """Everything a run page shows, read once from the run directory."""
    root = store.root
    header, state = store.header(), store.state()
    status = display_status(store, launching)
    records = store.candidates()
    overall = best_candidate(records)
    round_indices = sorted({r.round for r in records} | set(store.paths.rounds_with_prompts()))
    events = _events(store, set(round_indices))
    waiting = sorted({e.for_round for e in events if e.for_round is not None and e.for_round not in round_indices})
    rounds: list[RoundView] = []
    previous_best: Candidate | None = None
    for index in round_indices + waiting:
        in_round = [r for r in records if r.round == index]
        views = [_candidate(root, r, url_for) for r in in_round]
        best = best_candidate(in_round)
        for view in views:
            view.round_best = best is not None and view.id == best.id
            view.overall_best = overall is not None and view.id == overall.id
            _diff_against(root, view, next((r for r in records if r.id == view.parent), None) if view.parent else previous_best)
        prompt = _round_prompt(store, index)
        context = prompt.context if prompt is not None else PromptContext()
        produced_by = [e for e in events if e.for_round == index]
        produced_by.sort(key=lambda e: e.id == context.feedback_event)  # the one the prompt used, last
        summary = store.round_summary(index)
        round_state = "done" if summary else ("waiting" if index in waiting else _unfinished_round_state(status))
        rounds.append(RoundView(index, views, _messages(prompt), context,
                                produced_by[-1] if produced_by else None, best.id if best else None, round_state))
        previous_best = best or previous_best
    return RunView(
        run_id=store.run_id, config=header, state=state, status=status, backend=header.author, model=header.model or "-",
        rounds=rounds, events=events, final=_final(store), overview_chart=_overview(records),
        tokens=sum(r.tokens.total for r in records), best_id=overall.id if overall else None,
        best_success=overall.success if overall else None, launch=launch, signature=run_signature(root, launching),
        created_at=run_created(store, state), untrained_reason="" if overall else _untrained_reason(state, records),
        keypoints=_keypoints(root, url_for),
        pick_worth=[line.removeprefix("- ").replace("`", "") for line in pick_worth_lines(overall, records, header.steps)]
        if overall is not None else [],
    )


STOPPING_STATUSES = {s.words for s in (RunStatus.INTERRUPTED, RunStatus.FAILED, RunStatus.WAITING_FOR_REPLIES, RunStatus.INCOMPLETE)}


def _unfinished_round_state(status: str) -> str:
    """A round with no summary: in progress only while the run is live; otherwise what stopped it."""
    if status in LIVE_STATUSES:
        return "in progress"
    return status if status in STOPPING_STATUSES else "stopped"


def _untrained_reason(state: RunState, records: Sequence[Candidate]) -> str:
    """Why no candidate trained, by candidate: the run's own structured account where it wrote one (`no_result`)."""
    if state.untrained:
        return "; ".join(u.text() for u in state.untrained)
    if state.reason:  # runs written before the account was structured: their one line, as written
        return " ".join(state.reason.split())
    parts = [f"{r.id} {r.status.words}" + (f" ({' '.join(r.reason.split())[:120]})" if r.reason else "") for r in records]
    return "; ".join(parts) or "no candidate was produced"
