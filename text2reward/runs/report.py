"""A run's written report: `report.md` with the best code, per-round results, learning curves (PNG),
the final comparison with the expert reward, and links to rollout videos; with a keypoint reward source, the
keypoints (picture, table, files), and any vision model's reading of keyframes, labelled as a model's opinion.

Why markdown + PNG: readable in any editor, on GitHub, and convertible; the dashboard renders richer views.

Everything a model or a reward wrote (code, component names, errors, a vision model's reading) is inert here
(`text2reward.inert`): text in a line is escaped, text on several lines is fenced, and no control character or
bidirectional override reaches the file raw, so a rendered report shows what was written and runs nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from policies.formatting import evaluations_of, format_success
from policies.reward_modes import mode_report_text
from policies.stats import Rate
from text2reward.inert import markdown_block, markdown_inline, visible
from text2reward.runs import layout
from text2reward.runs.keypoint_record import (
    KEYPOINT_IMAGE,
    KEYPOINT_REWARD,
    KeypointRecord,
    format_metres,
    format_pixel,
    format_world,
    read_keypoint_record,
)
from text2reward.runs.pick_worth import pick_worth_lines
from text2reward.runs.ranking import best_candidate
from text2reward.runs.records import Candidate, FinalSummary, RoundPrompt, RunHeader, TrainingSummary, read, short_reason
from text2reward.runs.seed_scores import seed_spread
from text2reward.runs.statuses import RunStatus
from text2reward.runs.store import RunStore

VISION_NOTE = "*A model's reading of the rollout's keyframes, not a measurement: the numbers above are the measurements.*"


def _pyplot() -> Any:
    """matplotlib's pyplot on the file-only backend (reports are written on machines with no display)."""
    import matplotlib  # ~0.35 s with pyplot: this module loads with every `t2r` command; only drawing a plot pays it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after the backend is chosen

    return plt


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _plot_curves(store: RunStore, candidates: list[Candidate], final: FinalSummary | None) -> Path | None:
    trained = [c for c in candidates if c.has_training and c.training is not None]
    if not trained:
        return None
    plt = _pyplot()
    arms = final.arms() if final is not None else []
    panels = 2 if arms else 1
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4), squeeze=False)
    ax = axes[0][0]
    for c in trained:
        curve = c.training.curve if c.training is not None else []
        ax.plot([p.steps for p in curve], [p.success_rate for p in curve], marker="o", label=c.id)
    ax.set(title="candidates: success rate", xlabel="env steps", ylabel="success rate", ylim=(-0.05, 1.05))
    ax.legend(fontsize=8)
    if panels == 2:
        ax = axes[0][1]
        for kind, arm in arms:
            for i, curve in enumerate(arm.curves):
                ax.plot([p.steps for p in curve], [p.success_rate for p in curve], "-" if kind == "best" else "--",
                        color="tab:blue" if kind == "best" else "tab:gray", label=kind if i == 0 else None)
        ax.set(title="final: best reward vs expert, over seeds", xlabel="env steps", ylim=(-0.05, 1.05))
        ax.legend(fontsize=8)
    return _save(plt, fig, store.paths.curves_plot)


def _plot_components(store: RunStore, best: Candidate) -> Path | None:
    history = best.training_result.components if best.training_result is not None else []
    names = sorted({name for entry in history for name in entry.components})
    if not names:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in names:
        points = [(e.steps, e.components[name].mean) for e in history if name in e.components]
        ax.plot(*zip(*points), marker=".", label=_plain_label(name))
    ax.set(title=f"{best.id}: reward components (mean per window)", xlabel="env steps")
    ax.legend(fontsize=8)
    return _save(plt, fig, store.paths.components_plot)


def _plain_label(name: str) -> str:
    """A reward's name as matplotlib draws it: as text, never as maths (`$...$` would be parsed, and may not parse)."""
    return visible(name).replace("$", r"\$")


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell (and as HTML, where a renderer passes HTML through)."""
    return markdown_inline(text) or "-"


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
        lines += ["", f"Reason given: {markdown_inline(record.reason)}"]
    replies = [name for name in record.replies if (store.root / "keypoints" / name).is_file()]
    if replies:
        lines += ["", "Model replies (the last was used): " + ", ".join(f"[{name}](keypoints/{name})" for name in replies)]
    if (store.root / KEYPOINT_REWARD).is_file():
        lines += ["", f"Keypoint reward program: [{KEYPOINT_REWARD}]({KEYPOINT_REWARD})"]
    return lines


def vision_analysis_lines(store: RunStore, candidate: Candidate) -> list[str]:
    """A candidate's vision analysis, quoted and labelled as a model's opinion ([] when it has none)."""
    analysis = candidate.vision_analysis
    if analysis is None:
        return []
    path = store.root / analysis.file
    try:
        answer = path.read_text().strip() if path.is_file() and path.resolve().is_relative_to(store.root.resolve()) else ""
    except (OSError, ValueError):
        answer = ""
    if not answer:
        return []
    lines = ["", f"### What a vision model ({analysis.model or '?'}) saw in its keyframes", "",
             VISION_NOTE, "", *(f"> {markdown_inline(line)}".rstrip() for line in answer.splitlines())]
    if analysis.images:
        lines += ["", "Keyframes it was shown: " + ", ".join(f"[{i + 1}]({image})" for i, image in enumerate(analysis.images))]
    return lines


def image_rounds(store: RunStore) -> list[str]:
    """The rounds whose feedback used images, each with how: a vision model's reading, or keyframes shown to the author."""
    found = []
    for index in store.paths.rounds_with_prompts():
        path = store.paths.round_prompt(index)
        context = read(RoundPrompt, store.read_json(path), str(path)).context
        ways = []
        if context.vision_analysis is not None:
            analysis = context.vision_analysis
            ways.append(f"a vision model's reading of {len(analysis.images)} keyframes of {analysis.candidate or '?'}")
        if context.images:
            ways.append(f"{len(context.images)} keyframes shown to the reward author")
        if ways:
            found.append(f"round {index} ({'; '.join(ways)})")
    return found


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:g}"


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


def _final_success(training: Any) -> str:
    """The final evaluation's success with its episode count and interval."""
    return "-" if training is None else format_success(training.success_rate, training.episodes)


def _best_during(training: TrainingSummary | None) -> str:
    """The best evaluation during training, with its episodes and interval; an all-zero curve has no peak to name."""
    if training is None:
        return "-"
    curve = [p for p in training.curve if (p.episodes or training.eval_episodes) == training.eval_episodes]
    if not curve:
        return "-"
    top = max(curve, key=lambda p: p.success_rate)
    if top.success_rate <= 0:
        return f"never above 0 ({evaluations_of(len(curve), training.eval_episodes)})"
    rate = Rate.of(top.success_rate, top.episodes or training.eval_episodes)
    return f"{rate.text()} at step {top.steps:,}"


def tuning_note(candidate: Candidate) -> str:
    """One line on how a tuned candidate was found."""
    tuned = candidate.tuned
    if tuned is None:
        return ""
    return (f"trial {tuned.trial} of {tuned.trials} ({tuned.complete} complete, {tuned.pruned} pruned, "
            f"{tuned.failed} failed), {tuned.steps or 'default'} steps each"
            + ("; no trial beat the parent's constants by the margin, so they are kept" if tuned.kept_parent else ""))


def tuned_sections(candidates: list[Candidate]) -> list[str]:
    """For each tuned candidate, its constants against its parent's (`t2r tune`)."""
    lines: list[str] = []
    for c in candidates:
        if not c.parent or c.tuned is None:
            continue
        lines += ["", f"## Tuned constants: {c.id} (from {c.parent})", "",
                  f"{tuning_note(c)}; study: `{c.tuned.study or '?'}`.", "",
                  f"| constant | {c.parent} | {c.id} | ratio |", "| --- | --- | --- | --- |"]
        for change in c.tuned.constants_diff:
            ratio = "-" if change.ratio is None else f"x{change.ratio:.3g}"
            lines.append(f"| {change.name} | {_number(change.parent)} | {_number(change.tuned)} | {ratio} |")
    return lines


UNFINISHED = (RunStatus.INTERRUPTED, RunStatus.INCOMPLETE, RunStatus.RUNNING, RunStatus.CREATED, RunStatus.WAITING_FOR_REPLIES)
"""A report written in these states says what is still pending and how to finish."""


def status_lines(store: RunStore, header: RunHeader, status: RunStatus, reason: str | None, final: FinalSummary | None) -> list[str]:
    """The run's status, and for one that did not end what is still pending and the command that finishes it."""
    lines = [f"- status: **{status.words}**" + (f": {markdown_inline(reason)}" if reason else "")]
    if status in UNFINISHED:
        pending = [c.id for c in store.candidates() if c.status.needs_training]
        todo = [f"rounds done {store.state().rounds_done} of {header.rounds}"]
        if pending:
            todo.append("training pending for " + ", ".join(pending))
        if final is None:
            todo.append("the final comparison has not run")
        lines.append("- this report is **incomplete**: " + "; ".join(todo) + f". `t2r resume {store.run_id} --runs-dir "
                     f"{store.runs_dir}` finishes the run and rewrites it.")
    return lines


def candidate_rows(candidates: list[Candidate]) -> list[str]:
    lines = ["", "## Candidates", "", "| candidate | status | success | best success during training | "
             "progress toward the success rule | note |", "| --- | --- | --- | --- | --- | --- |"]
    for c in candidates:
        note = short_reason(c.reason.splitlines()[0], 160) if c.reason else ""
        if c.stopped_early is not None:
            at = f"{c.stopped_early.steps:,}" if c.stopped_early.steps is not None else "an early"
            note = short_reason(f"stopped early at step {at}: {c.stopped_early.reason}", 160)
        if c.parent:
            note = f"constants of {c.parent} tuned: {tuning_note(c)}"
        training = c.training
        if training is not None and (peak := training.delivered_peak) is not None:
            note = (note + "; " if note else "") + (
                f"delivered policy: the peak checkpoint at step {peak.steps:,} (better than the final policy on the "
                f"same episodes, {peak.only_peak} against {peak.only_final}, McNemar p = {peak.p_value:.3f})")
        spread = seed_spread(c) if training is not None else None
        if spread is not None:
            note = (note + "; " if note else "") + spread.text()
        progress = training.progress if training is not None else None
        lines.append(f"| {c.id} | {c.status.value} | {_final_success(training)} | {_best_during(training)} | "
                     f"{f'{progress[0]:.2f} ± {progress[1]:.2f}' if progress is not None else '-'} | {markdown_inline(note)} |")
    return lines


def best_section(store: RunStore, best: Candidate, candidates: list[Candidate], steps: int | None) -> list[str]:
    """The best reward: its code, who wrote it, how sure the pick is, its components, video, what the policy did, a
    vision model's reading."""
    components = _plot_components(store, best)
    code = store.read_text(best.code_file) if best.code_file else ""
    success = _final_success(best.training) if best.training is not None else f"{best.success:.2f}"
    lines = ["", f"## Best reward: {best.id} (success {success})", ""]
    if best.rule_based:
        lines.append(f"*Written by {best.author}.*\n")
    spread = seed_spread(best)
    if spread is not None:
        lines.append(f"Over {len(best.seeds)} training seeds: {spread.text()}.\n")
    worth = pick_worth_lines(best, candidates, steps)
    if worth:
        lines += ["How sure this pick is:", "", *worth, ""]
    lines += markdown_block(code, "python")
    if components:
        lines += ["", f"![reward components]({components.name})"]
    if best.video_file:
        lines += ["", f"Rollout video: [{best.video_file}]({best.video_file})"]
    if best.feedback_file:
        lines += ["", "### What the trained policy did", "", *markdown_block(store.read_text(best.feedback_file).strip())]
    return lines + vision_analysis_lines(store, best)


def final_section(store: RunStore, final: FinalSummary | None) -> list[str]:
    if final is None:
        return []
    if final.best_candidate is None:
        return ["", f"No final comparison: {final.reason or ''}"]
    if not final.arms() and not final.interrupted:
        return ["", "No final comparison: the stage was skipped (no seeds to re-train on: `--final-seeds 0`)."]
    lines = ["", "## Final comparison (re-trained from scratch on new seeds)", "",
             "| reward | success per seed | pooled over the seeds' episodes | std between seeds |", "| --- | --- | --- | --- |"]
    failures = []
    for kind, arm in final.arms():
        rates = ", ".join(f"{r:.2f}" for r in arm.success_rates) or "-"
        pooled = arm.pooled
        lines.append(f"| {kind} | {rates} | {pooled.text() if pooled is not None else _fmt(arm.mean)} | {_fmt(arm.std)} |")
        failures += [(kind, failed) for failed in arm.failed_seeds]
    if failures:
        lines += ["", "Seeds that did not finish training (each tried again when the cause was not the reward's own):", ""]
        lines += [f"- {kind} seed {f.seed} ({f.attempts} attempt(s)): {markdown_inline(f.reason)}" for kind, f in failures]
        lines += ["", f"`t2r resume {store.run_id} --runs-dir {store.runs_dir}` re-trains them."]
    return lines


def write_report(store: RunStore, status: RunStatus | None = None, reason: str | None = None) -> Path:
    """`status`: what the run is ending with (the loop knows it before it records it); else its status now."""
    header, candidates, final = store.header(), store.candidates(), store.final_summary()
    best = best_candidate(candidates)
    lines = [
        f"# text2reward run {store.run_id}",
        "",
        f"- task: `{header.task_id}`",
        f"- reward author: {header.author}",
        f"- reward mode: {mode_report_text(header.reward_mode)}",
        f"- reward source: {header.source_text}",
        f"- rounds x samples: {header.rounds} x {header.samples}; training budget {header.steps or 'task default'} steps; workers {header.workers}",
        f"- tokens: {sum(c.tokens.prompt for c in candidates)} prompt, {sum(c.tokens.completion for c in candidates)} completion",
        *status_lines(store, header, status or store.status(), reason if status else store.state().reason, final),
    ]
    used_images = image_rounds(store)
    if used_images:
        lines.append("- rounds whose feedback used images: " + ", ".join(used_images))
    keypoints = read_keypoint_record(store)
    if keypoints is not None:
        lines += keypoint_section(store, keypoints)
    lines += candidate_rows(candidates) + tuned_sections(candidates)
    curves = _plot_curves(store, candidates, final)
    if curves:
        lines += ["", "## Learning curves", "", f"![success rate]({curves.name})"]
    if best is not None:
        lines += best_section(store, best, candidates, header.steps)
    lines += final_section(store, final)
    store.write_text(layout.REPORT, visible("\n".join(lines)) + "\n")  # no control character raw, whatever a line holds
    return store.paths.report
