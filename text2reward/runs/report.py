"""A run's written report: `report.md` with the best code, per-round results, learning curves (PNG),
the final comparison with the expert reward, and links to rollout videos; with a keypoint reward source, the
keypoints (picture, table, files), and any vision model's reading of keyframes, labelled as a model's opinion.

Why markdown + PNG: readable in any editor, on GitHub, and convertible; the dashboard renders richer views.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from policies.reward_modes import mode_report_text
from text2reward.runs.keypoint_record import (
    KEYPOINT_IMAGE,
    KEYPOINT_REWARD,
    KeypointRecord,
    format_metres,
    format_pixel,
    format_world,
    read_keypoint_record,
    reward_source_text,
)
from text2reward.runs.records import Candidate, FinalSummary, final_failures, has_training, short_reason
from text2reward.runs.store import RunStore

HEURISTIC_LABEL = "heuristic (rule-based composer, no language model)"
VISION_NOTE = "*A model's reading of the rollout's keyframes, not a measurement: the numbers above are the measurements.*"


def _pyplot() -> Any:
    """matplotlib's pyplot on the file-only backend (reports are written on machines with no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _plot_curves(store: RunStore, candidates: list[Candidate], final: FinalSummary) -> Path | None:
    plt = _pyplot()
    trained = [c for c in candidates if has_training(c)]
    if not trained:
        return None
    panels = 2 if any(isinstance(final.get(k), dict) for k in ("best", "expert")) else 1
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4), squeeze=False)
    ax = axes[0][0]
    for c in trained:
        curve = c["training"]["curve"]
        ax.plot([p["steps"] for p in curve], [p["success_rate"] for p in curve], marker="o", label=c["id"])
    ax.set(title="candidates: success rate", xlabel="env steps", ylabel="success rate", ylim=(-0.05, 1.05))
    ax.legend(fontsize=8)
    if panels == 2:
        ax = axes[0][1]
        for kind, style in (("best", "-"), ("expert", "--")):
            entry = final.get(kind)
            for i, curve in enumerate(entry.get("curves", []) if isinstance(entry, dict) else []):
                ax.plot([p["steps"] for p in curve], [p["success_rate"] for p in curve], style,
                        color="tab:blue" if kind == "best" else "tab:gray", label=kind if i == 0 else None)
        ax.set(title="final: best reward vs expert, over seeds", xlabel="env steps", ylim=(-0.05, 1.05))
        ax.legend(fontsize=8)
    return _save(plt, fig, store.root / "curves.png")


def _plot_components(store: RunStore, best: Candidate) -> Path | None:
    plt = _pyplot()
    history = (best.get("training_result") or {}).get("components") or []
    names = sorted({name for entry in history for name in entry["components"]})
    if not names:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in names:
        points = [(e["steps"], e["components"][name]["mean"]) for e in history if name in e["components"]]
        ax.plot(*zip(*points), marker=".", label=name)
    ax.set(title=f"{best['id']}: reward components (mean per window)", xlabel="env steps")
    ax.legend(fontsize=8)
    return _save(plt, fig, store.root / "components.png")


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell (and as HTML, where a renderer passes HTML through)."""
    return html.escape(" ".join(text.split()), quote=False).replace("|", "\\|") or "-"


def keypoint_section(store: RunStore, record: KeypointRecord) -> list[str]:
    """## Keypoints: where the keypoints came from, the picture with them drawn, the table, and their files."""
    lines = ["", "## Keypoints", "", f"- source: {record.source_text}", f"- camera: {record.camera_text}"]
    if record.effector is not None:
        lines.append(f"- end effector in the pictured state: {format_world(record.effector)} m")
    if (store.root / KEYPOINT_IMAGE).is_file():
        lines += ["", f"![keypoints]({KEYPOINT_IMAGE})"]
    lines += ["", "| keypoint | pixel (u, v) | height (m) | x (m) | y (m) | z (m) | moves with |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for p in record.points:
        x, y, z = (format_metres(v) for v in p.world)
        lines.append(f"| {_cell(p.name)} | {format_pixel(p.pixel)} | {format_metres(p.height)} | {x} | {y} | {z} | "
                     f"{_cell(p.anchor) if p.anchor else 'fixed (world point)'} |")
    if record.reason:
        lines += ["", f"Reason given: {html.escape(record.reason, quote=False)}"]
    replies = [name for name in record.replies if (store.root / "keypoints" / name).is_file()]
    if replies:
        lines += ["", "Model replies (the last was used): " + ", ".join(f"[{name}](keypoints/{name})" for name in replies)]
    if (store.root / KEYPOINT_REWARD).is_file():
        lines += ["", f"Keypoint reward program: [{KEYPOINT_REWARD}]({KEYPOINT_REWARD})"]
    return lines


def vision_analysis_lines(store: RunStore, candidate: Mapping[str, Any]) -> list[str]:
    """A candidate's vision analysis, quoted and labelled as a model's opinion ([] when it has none)."""
    analysis = candidate.get("vision_analysis")
    if not isinstance(analysis, dict) or not isinstance(analysis.get("file"), str):
        return []
    path = store.root / analysis["file"]
    try:
        answer = path.read_text().strip() if path.is_file() and path.resolve().is_relative_to(store.root.resolve()) else ""
    except (OSError, ValueError):
        answer = ""
    if not answer:
        return []
    images = [str(i) for i in analysis.get("images") or [] if isinstance(i, str)]
    lines = ["", f"### What a vision model ({analysis.get('model') or '?'}) saw in its keyframes", "",
             VISION_NOTE, "", *(f"> {html.escape(line, quote=False)}".rstrip() for line in answer.splitlines())]
    if images:
        lines += ["", "Keyframes it was shown: " + ", ".join(f"[{i + 1}]({image})" for i, image in enumerate(images))]
    return lines


def image_rounds(store: RunStore) -> list[str]:
    """The rounds whose feedback used images, each with how: a vision model's reading, or keyframes shown to the author."""
    found = []
    for path in sorted(store.root.glob("rounds/r*/prompt.json"), key=lambda p: int(p.parent.name[1:]) if p.parent.name[1:].isdigit() else -1):
        try:
            context = json.loads(path.read_text()).get("context") or {}
        except (OSError, ValueError, AttributeError):
            continue
        ways = []
        analysis = context.get("vision_analysis") if isinstance(context, dict) else None
        if isinstance(analysis, dict):
            ways.append(f"a vision model's reading of {len(analysis.get('images') or [])} keyframes of {analysis.get('candidate', '?')}")
        if isinstance(context, dict) and context.get("images"):
            ways.append(f"{len(context['images'])} keyframes shown to the reward author")
        if ways:
            found.append(f"round {path.parent.name[1:]} ({'; '.join(ways)})")
    return found


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:g}"


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


def tuning_note(candidate: Candidate) -> str:
    """One line on how a tuned candidate was found."""
    tuned = candidate.get("tuned") or {}
    return (f"trial {tuned.get('trial')} of {tuned.get('trials')} ({tuned.get('complete', 0)} complete, {tuned.get('pruned', 0)} pruned, "
            f"{tuned.get('failed', 0)} failed), {tuned.get('steps') or 'default'} steps each"
            + ("; no trial beat the parent's constants by the margin, so they are kept" if tuned.get("kept_parent") else ""))


def tuned_sections(candidates: list[Candidate]) -> list[str]:
    """For each tuned candidate, its constants against its parent's (`t2r tune`)."""
    lines: list[str] = []
    for c in candidates:
        if not c.get("parent"):
            continue
        tuned = c.get("tuned") or {}
        lines += ["", f"## Tuned constants: {c['id']} (from {c['parent']})", "",
                  f"{tuning_note(c)}; study: `{tuned.get('study', '?')}`.", "",
                  f"| constant | {c['parent']} | {c['id']} | ratio |", "| --- | --- | --- | --- |"]
        for change in tuned.get("constants_diff") or []:
            ratio = "-" if change["ratio"] is None else f"x{change['ratio']:.3g}"
            lines.append(f"| {change['name']} | {_number(change['parent'])} | {_number(change['tuned'])} | {ratio} |")
    return lines


def status_lines(store: RunStore, status: str, reason: str | None, final: FinalSummary) -> list[str]:
    """The run's status, and for one that did not end what is still pending and the command that finishes it."""
    lines = [f"- status: **{status.replace('_', ' ')}**" + (f": {reason}" if reason else "")]
    if status in ("interrupted", "incomplete", "running", "created", "waiting_for_replies"):
        config, candidates = store.config(), store.candidates()
        pending = [c["id"] for c in candidates if c["status"] in ("pending_training", "interrupted")]
        done = store.state().get("rounds_done", 0)
        todo = [f"rounds done {done} of {config.rounds}"]
        if pending:
            todo.append("training pending for " + ", ".join(pending))
        if not final:
            todo.append("the final comparison has not run")
        lines.append("- this report is **incomplete**: " + "; ".join(todo) + f". `t2r resume {store.run_id} --runs-dir "
                     f"{store.runs_dir}` finishes the run and rewrites it.")
    return lines


def write_report(store: RunStore, status: str | None = None, reason: str | None = None) -> Path:
    """`status`: what the run is ending with (the loop knows it before it records it); else its status now."""
    config = store.config()
    candidates = store.candidates()
    final = store.final_summary() or {}
    from text2reward.runs.ranking import best_candidate

    best = best_candidate(candidates)
    backend = HEURISTIC_LABEL if config.backend == "heuristic" else f"{config.backend} ({config.model or 'pasted replies'})"
    lines = [
        f"# text2reward run {store.run_id}",
        "",
        f"- task: `{config.task_id}`",
        f"- reward author: {backend}",
        f"- reward mode: {mode_report_text(config.reward_mode)}",
        f"- reward source: {reward_source_text(config.reward_source, config.keypoints)}",
        f"- rounds x samples: {config.rounds} x {config.samples}; training budget {config.steps or 'task default'} steps; workers {config.workers}",
        f"- tokens: {sum(c['tokens']['prompt'] for c in candidates)} prompt, {sum(c['tokens']['completion'] for c in candidates)} completion",
        *status_lines(store, status or store.status(), reason if status else store.state().get("reason"), final),
    ]
    used_images = image_rounds(store)
    if used_images:
        lines.append("- rounds whose feedback used images: " + ", ".join(used_images))
    keypoints = read_keypoint_record(store)
    if keypoints is not None:
        lines += keypoint_section(store, keypoints)
    lines += [
        "",
        "## Candidates",
        "",
        "| candidate | status | success | best success during training | note |",
        "| --- | --- | --- | --- | --- |",
    ]
    for c in candidates:
        training = c.get("training") or {}
        note = short_reason((c.get("reason") or "").splitlines()[0], 160) if c.get("reason") else ""
        if c.get("stopped_early"):
            note = short_reason(f"stopped at {c['stopped_early'].get('steps')} steps: {c['stopped_early'].get('reason', '')}", 160)
        if c.get("parent"):
            note = f"constants of {c['parent']} tuned: {tuning_note(c)}"
        lines.append(f"| {c['id']} | {c['status']} | {_fmt(training.get('success_rate'))} | {_fmt(training.get('best_success_rate'))} | {note} |")
    lines += tuned_sections(candidates)
    curves = _plot_curves(store, candidates, final)
    if curves:
        lines += ["", "## Learning curves", "", f"![success rate]({curves.name})"]
    if best:
        components = _plot_components(store, best)
        code = (store.root / best["code_file"]).read_text()
        lines += ["", f"## Best reward: {best['id']} (success {best['training']['success_rate']:.2f})", ""]
        if best.get("rule_based"):
            lines.append("*Composed by the rule-based heuristic backend, not by a language model.*\n")
        elif best.get("backend") == "keypoints":
            lines.append(f"*A {best.get('model') or 'program from keypoints'}, written by text2reward, not by a language model.*\n")
        lines += ["```python", code.rstrip(), "```"]
        if components:
            lines += ["", f"![reward components]({components.name})"]
        if best.get("video_file"):
            lines += ["", f"Rollout video: [{best['video_file']}]({best['video_file']})"]
        feedback_file = best.get("feedback_file")
        if feedback_file:
            lines += ["", "### What the trained policy did", "", (store.root / feedback_file).read_text().strip()]
        lines += vision_analysis_lines(store, best)
    if final.get("best_candidate"):
        lines += ["", "## Final comparison (re-trained from scratch on new seeds)", "", "| reward | success per seed | mean | std |", "| --- | --- | --- | --- |"]
        failures = []
        for kind in ("best", "expert"):
            entry = final.get(kind)
            if isinstance(entry, dict):
                rates = ", ".join(f"{r:.2f}" for r in entry["success_rates"]) or "-"
                lines.append(f"| {kind} | {rates} | {_fmt(entry['mean'])} | {_fmt(entry['std'])} |")
                failures += [(kind, failed) for failed in final_failures(entry)]
        if failures:
            lines += ["", "Seeds that did not finish training (each tried again when the cause was not the reward's own):", ""]
            lines += [f"- {kind} seed {f['seed']} ({f.get('attempts', 1)} attempt(s)): {' '.join(str(f['reason']).split())}" for kind, f in failures]
            lines += ["", f"`t2r resume {store.run_id} --runs-dir {store.runs_dir}` re-trains them."]
    elif final:
        lines += ["", f"No final comparison: {final.get('reason', '')}"]
    path = store.root / "report.md"
    store.write_text("report.md", "\n".join(lines) + "\n")
    return path
