"""The automatic feedback for the next round: reward reflection, then trajectory analysis; and the round's contrast.

Which episodes each part describes is said in the text: the evaluation's success rate is over the final
evaluation's episodes (with its interval), and the trajectory analysis replays the first of those same episodes
(same reset seeds, same deterministic policy), so the success it states is the evaluation's on those episodes, and
a replay that did not repeat the evaluation is said to differ. A candidate whose success peaked and fell gets its
peak checkpoint analysed beside the final policy, on the same episodes. The contrast shows every candidate of the
round beside the one shown as best: success with intervals, ties, the code as a diff, and the facts that differ most.
"""

from __future__ import annotations

import difflib
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from policies.score import progress_clause
from policies.stats import PAIRED_ALPHA, Rate, mcnemar_exact
from sim_envs.task import Task
from text2reward.feedback.reflection import reflection_tips, reward_reflection
from text2reward.feedback.trajectory import (
    _label,
    describe_behaviour,
    direction_facts,
    episode_facts,
    episode_scene,
    is_scene_flag,
    progress_words,
    trajectory_analysis,
)
from text2reward.runs.records import Candidate
from text2reward.runs.seed_scores import seed_spread
from text2reward.runs.statuses import FailureCause

DIFF_LINES = 40
"""A loser's diff against the winner is cut after this many lines (the prompt stays readable)."""
SEPARATING_FACTS = 2
"""How many facts the contrast names per candidate: the ones that differ most from the winner's."""


@dataclass(frozen=True)
class AnalysedEpisodes:
    """Which episodes the trajectory analysis describes: the first `len(replayed)` of the final evaluation."""

    seeds: list[int]
    """The reset seeds of the analysed episodes (the final evaluation's first ones)."""
    evaluation: list[bool]
    """Per-episode success of the whole final evaluation (result.json's `final_eval`)."""
    replayed: list[bool]
    """The success of each analysed replay."""

    @property
    def agrees(self) -> bool:
        return self.replayed == self.evaluation[: len(self.replayed)]


@dataclass(frozen=True)
class PeakComparison:
    """A candidate whose success fell after a peak: its peak checkpoint and its final policy on the same episodes."""

    steps: int
    """The training step of the peak evaluation."""
    during_training: Rate
    """The peak as the evaluation during training measured it."""
    peak: list[bool]
    """The peak checkpoint's success on each of the final evaluation's episodes."""
    final: list[bool]
    """The final policy's success on the same episodes."""
    peak_episodes: list[Any] = field(default_factory=list)
    """The peak checkpoint's recorded rollouts of the analysed episodes (`EpisodeStats` with views)."""
    final_episodes: list[Any] = field(default_factory=list)

    @property
    def only_peak(self) -> int:
        """Episodes the peak checkpoint succeeded in and the final policy did not."""
        return sum(p and not f for p, f in zip(self.peak, self.final))

    @property
    def only_final(self) -> int:
        return sum(f and not p for p, f in zip(self.peak, self.final))

    @property
    def p_value(self) -> float:
        """McNemar's exact test on the discordant episodes (the two policies played the same reset seeds)."""
        return mcnemar_exact(self.only_peak, self.only_final)

    @property
    def peak_delivered(self) -> bool:
        """The peak checkpoint is better beyond noise: it becomes the candidate's policy (ranked, filmed, delivered)."""
        return self.only_peak > self.only_final and self.p_value < PAIRED_ALPHA


def _seed_range(seeds: Sequence[int]) -> str:
    if not seeds:
        return "none"
    return str(seeds[0]) if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"


def analysis_title(task: Task, analysed: AnalysedEpisodes) -> str:
    k, n = len(analysed.replayed), len(analysed.evaluation)
    return (f"Trajectory analysis of {task.id}: the final evaluation's first {k} episode{'s' if k != 1 else ''} of {n} "
            f"(reset seeds {_seed_range(analysed.seeds)}), replayed with the same deterministic policy:")


def agreement_line(analysed: AnalysedEpisodes) -> str:
    """What the final evaluation said about the analysed episodes, and whether the replay repeated it."""
    k = len(analysed.replayed)
    whole = Rate(sum(analysed.evaluation), len(analysed.evaluation))
    recorded = sum(analysed.evaluation[:k])
    line = f"The final evaluation as a whole: success {whole.text()}; on these {k} episodes it recorded {recorded} success{'es' if recorded != 1 else ''}"
    if analysed.agrees:
        return line + ", the same as the replays."
    return (line + f", the replays {sum(analysed.replayed)} (the simulation did not repeat itself exactly): the facts "
            "above describe the replays.")


def build_feedback_text(task: Task, train_result: Any, episodes: Sequence[Any] | None = None, successes: Sequence[bool] | None = None,
                        analysed: AnalysedEpisodes | None = None, peak: PeakComparison | None = None) -> str:
    """The whole automatic feedback: reward reflection, then trajectory analysis (of which episodes: `analysed`) and
    a summary, then a peak checkpoint beside the final policy when success fell after a peak (`peak`)."""
    parts = [reward_reflection(train_result)]
    if episodes:
        title = analysis_title(task, analysed) if analysed is not None else None
        analysis = trajectory_analysis(task, episodes, successes, title=title)
        if analysed is not None:
            analysis += "\n" + agreement_line(analysed)
        parts.append(analysis)
        parts.append("In words: " + describe_behaviour(task, episodes, successes))
    if peak is not None:
        parts.append(peak_section(task, peak))
    return "\n\n".join(parts)


# --------------------------------------------------------------------------- facts, averaged


def mean_facts(task: Task, episodes: Sequence[Any]) -> dict[str, float]:
    """Each fact of `episode_facts` averaged over episodes (a yes/no fact as the share of episodes that say yes),
    plus `success`: what the records keep of an analysis, and what the contrast compares."""
    values: dict[str, list[float]] = {}
    for episode in episodes:
        views = list(getattr(episode, "views", episode))
        facts = episode_facts(views, episode_scene(episode))
        facts |= direction_facts(facts)  # signed progress per episode: the contrast says how many ended nearer
        for key, value in facts.items():
            values.setdefault(key, []).append(float(value))
        if hasattr(episode, "success"):
            values.setdefault("success", []).append(float(bool(episode.success)))
    averaged = {key: float(np.mean(v)) for key, v in values.items()}
    if episodes:
        averaged["episodes"] = float(len(episodes))
    return averaged


def _fact_label(key: str) -> str:
    return "task success (share of analysed episodes)" if key == "success" else _label(key)


def _fact_value(key: str, value: float, booleans: set[str]) -> str:
    if key in booleans or key == "success":
        return f"{value:.0%} of episodes"
    return f"{value:.3f}"


YES_NO_FACTS = ("fell", "upside_down_at_end", "ended_early", "success")
YES_NO_SUFFIXES = ("_moved", "_lifted", "_grasped", "_fell", "_closer", "_farther")
NOT_COMPARED = ("steps", "success", "episodes")
"""Facts the contrast states on their own lines (or not at all), never among the separating ones."""


def _boolean_keys(*fact_sets: dict[str, float]) -> set[str]:
    """The yes/no facts of `episode_facts` (averaged: shares of episodes)."""
    keys = set().union(*fact_sets)
    return {k for k in keys if k in YES_NO_FACTS or k.endswith(YES_NO_SUFFIXES) or is_scene_flag(k)}


def separating_facts(winner: dict[str, float], other: dict[str, float], count: int = SEPARATING_FACTS) -> list[str]:
    """The facts that differ most between two candidates' analyses (relative difference; yes/no facts by share)."""
    booleans = _boolean_keys(winner, other)
    scored = []
    for key in sorted(set(winner) & set(other)):
        if key in NOT_COMPARED or key.endswith(("_goal_closer", "_goal_farther")):
            continue
        a, b = winner[key], other[key]
        scale = 1.0 if key in booleans else max(abs(a), abs(b), 0.02)
        difference = abs(a - b) / scale
        if difference > 0.1:
            scored.append((difference, key))
    scored.sort(reverse=True)
    return [f"{_fact_label(key)}: {_fact_value(key, other[key], booleans)} here, {_fact_value(key, winner[key], booleans)} for the best"
            for _, key in scored[:count]]


# --------------------------------------------------------------------------- peak vs final


def peak_section(task: Task, comparison: PeakComparison) -> str:
    n = len(comparison.final)
    peak, final = Rate(sum(comparison.peak), n), Rate(sum(comparison.final), n)
    only_peak, only_final = comparison.only_peak, comparison.only_final
    test = f"McNemar's exact test on the same episodes, p = {comparison.p_value:.3f}"
    verdict = (f"the peak checkpoint is better beyond noise ({test}): training lost what the peak had, and the peak "
               "checkpoint is this candidate's delivered policy (its success, video and model file)"
               if comparison.peak_delivered else
               f"not apart beyond noise ({test}): the final policy is kept as this candidate's policy")
    lines = [
        f"Peak checkpoint vs final policy: success peaked during training at step {comparison.steps:,} "
        f"({comparison.during_training.text()}). On the final evaluation's {n} episodes the peak checkpoint succeeds in "
        f"{peak.text()} and the final policy in {final.text()}: {verdict}. The peak succeeded where the final did not "
        f"in {only_peak} episode{'s' if only_peak != 1 else ''}, the reverse in {only_final}.",
    ]
    if comparison.peak_episodes and comparison.final_episodes:
        at_peak, at_end = mean_facts(task, comparison.peak_episodes), mean_facts(task, comparison.final_episodes)
        booleans = _boolean_keys(at_peak, at_end)
        k = len(comparison.peak_episodes)
        lines.append(f"The same {k} analysed episode{'s' if k != 1 else ''}, averaged (peak checkpoint | final policy):")
        for key in [k for k in at_peak if k in at_end and k not in ("steps", "episodes")]:
            lines.append(f"{_fact_label(key)}: {_fact_value(key, at_peak[key], booleans)} | {_fact_value(key, at_end[key], booleans)}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the round's contrast


@dataclass(frozen=True)
class CandidateSummary:
    """What the contrast shows of one candidate (built by the loop from its record)."""

    id: str
    status: str
    code: str | None
    success: Rate | None = None
    """The final evaluation's success, for a trained candidate."""
    facts: dict[str, float] = field(default_factory=dict)
    """`mean_facts` of its analysed episodes (empty when not analysed)."""
    reason: str = ""
    """Why it did not train."""
    progress: tuple[float, float] | None = None
    """Its final progress toward the success rule (mean, standard error), when measured (policies.score)."""
    by_machine: bool = False
    """Its training was ended by the machine (its process stopped or killed from outside), not by its code."""
    steps: int | None = None
    """The environment steps it trained for."""
    stopped_early_at: int | None = None
    """The step at which the run's early stopping ended its training (None: it trained its whole budget)."""
    stop_reason: str = ""
    tips: list[str] = field(default_factory=list)
    """Its own reflection tips (`reflection_tips` of its training record)."""
    spread: str = ""
    """Trained on several seeds: its per-seed success, pooled, and the spread between seeds (`seed_spread_text`)."""

    def success_text(self) -> str:
        assert self.success is not None
        return self.spread or self.success.text()


def seed_spread_text(candidate: Candidate) -> str:
    """A candidate trained on several seeds, as the feedback states it: "success per seed 0.30 / 0.00 / 0.03 (seeds
    ...), pooled 0.11 (10 of 90 episodes, 95% interval ...); between seeds 0.00-0.30, standard deviation 0.14"; "" for
    one seed."""
    spread = seed_spread(candidate)
    return spread.text() if spread is not None else ""


def seed_spread_section(candidate: Candidate) -> str:
    """The feedback's opening lines on a reward trained on several seeds (what its score is, how much luck is in it);
    "" for one seed."""
    text = seed_spread_text(candidate)
    if not text:
        return ""
    return (f"Seeds: this reward was trained on {len(candidate.seeds)} seeds, and its score pools them: {text}. The same "
            "reward differs this much between training seeds alone; the analysis below describes its first seed's policy.")


def candidate_summary(candidate: Candidate, code: str | None) -> CandidateSummary:
    """What the contrast shows of a candidate record (its code read by the caller, from the run folder)."""
    training = candidate.training if candidate.has_training else None
    stop = candidate.stopped_early
    return CandidateSummary(
        id=candidate.id, status=candidate.status.value, code=code,
        success=Rate.of(training.success_rate, training.episodes) if training is not None else None,
        facts=dict(candidate.facts), reason=candidate.reason or "",
        by_machine=candidate.failure_cause in (FailureCause.MACHINE, FailureCause.INTERRUPTED),
        steps=training.steps if training is not None else None,
        stopped_early_at=(stop.steps or (training.steps if training is not None else None)) if stop is not None else None,
        stop_reason=stop.reason if stop is not None else "",
        tips=reflection_tips(candidate.training_result) if training is not None and candidate.training_result else [],
        spread=seed_spread_text(candidate) if training is not None else "",
        progress=training.progress if training is not None else None)


def _code_shown(winner: str, other: str) -> str:
    """The other candidate's code, never cut: a diff against the best's when it is short, else the whole program."""
    diff = list(difflib.unified_diff(winner.splitlines(), other.splitlines(), "best", "this candidate", lineterm="", n=1))
    if not diff:
        return "(the same code as the best)"
    if len(diff) <= DIFF_LINES:
        return "Its code as a diff against the best's:\n```diff\n" + "\n".join(diff) + "\n```"
    return "Its whole program (it differs from the best's in many lines):\n```python\n" + other.rstrip("\n") + "\n```"


def budget_line(winner: CandidateSummary, others: Sequence[CandidateSummary]) -> str:
    """Whether the round's trained candidates had the same budget; an early stop is named with its step."""
    trained = [c for c in (winner, *others) if c.success is not None]
    stopped = [c for c in trained if c.stopped_early_at is not None]
    steps = {c.steps for c in trained if c.steps is not None}
    if not stopped and len(steps) <= 1:
        return "Each trained on the same budget" + (f" ({steps.pop():,} steps)" if steps else "") + "."
    parts = [f"{c.id} at step {c.stopped_early_at:,}" for c in stopped]
    if stopped:
        return (f"Not every candidate trained on the same budget: the run's early stopping ended "
                f"{'; '.join(parts)}; compare its figures with that in mind.")
    return "Not every candidate trained on the same budget: " + ", ".join(f"{c.id} {c.steps:,} steps" for c in trained if c.steps is not None) + "."


def progress_from_facts(facts: dict[str, float]) -> str | None:
    """Signed progress from averaged facts (`mean_facts`): toward or away from the goal, start and end distance, and
    how many analysed episodes ended nearer or farther."""
    if "object_goal_start" not in facts or "object_goal_final" not in facts:
        return None
    n = int(facts.get("episodes", 0))
    start, final = facts["object_goal_start"], facts["object_goal_final"]
    if n <= 0 or "object_goal_closer" not in facts:  # an older record: the averages only
        return progress_words(start, final, 0, 0, 1).split(" (")[0]
    return progress_words(start, final, round(facts["object_goal_closer"] * n), round(facts.get("object_goal_farther", 0.0) * n), n)


def _lines_of(candidate: CandidateSummary, winner: CandidateSummary) -> list[str]:
    """A trained candidate's facts beside the best's: its signed progress, the facts that differ most, its own tips."""
    lines = []
    progress, best_progress = progress_from_facts(candidate.facts), progress_from_facts(winner.facts)
    if progress is not None:
        lines.append(f"Progress toward the goal: this candidate {progress}" + (f"; the best {best_progress}." if best_progress else "."))
    elif candidate.facts and any(k.startswith("object_") for k in candidate.facts):
        lines.append("Progress toward the goal: this task gives the object no goal position, so displacements have no direction.")
    separating = separating_facts(winner.facts, candidate.facts)
    if separating:
        lines.append("What differed most from the best's rollouts: " + "; ".join(separating) + ".")
    if candidate.tips:
        lines.append("Its own tips (from its training record):")
        lines.extend(f"- {tip}" for tip in candidate.tips)
    else:
        lines.append("Its own tips: none fired on its training record.")
    return lines


def round_contrast(winner: CandidateSummary, others: Sequence[CandidateSummary], tied: Sequence[str], tie_break: str) -> str:
    """Every other candidate of the round beside the best: its budget, success with intervals, whether it ties with the
    best, its signed progress and the facts that differ most, its own tips, and its code, never cut."""
    if not others:
        return ""
    assert winner.success is not None  # the best is a trained candidate
    lines = [budget_line(winner, others)]
    best = f"The best so far, {winner.id}: {'' if winner.spread else 'success '}{winner.success_text()}{progress_clause(winner.progress)}"
    if winner.stopped_early_at is not None:
        best += f"; stopped early at step {winner.stopped_early_at:,}" + (f" ({winner.stop_reason})" if winner.stop_reason else "")
    lines.append(best + ".")
    progress = progress_from_facts(winner.facts)
    if progress is not None:
        lines.append(f"Progress toward the goal of the best: it {progress}.")
    if tied:
        lines.append(f"Tied with it within noise (95% intervals overlap): {', '.join(tied)}; it is shown as the best by "
                     f"the tie-break: {tie_break}.")
    for other in others:
        lines.append("")
        if other.success is None and other.by_machine:  # the machine's doing says nothing about the code: no blame
            lines.append(f"### {other.id}: not trained to the end: the machine stopped its training, not its code (nothing to learn "
                         "from its result)")
        elif other.success is None:
            lines.append(f"### {other.id}: {other.status}" + (f" ({textwrap.shorten(' '.join(other.reason.split()), 300, placeholder=' ...')})" if other.reason else ""))
        else:
            relation = "tied with the best" if other.id in tied else (
                "worse than the best beyond noise" if other.success.rate < winner.success.rate else "not behind the best")
            header = f"### {other.id}: {'' if other.spread else 'success '}{other.success_text()}{progress_clause(other.progress)}: {relation}"
            if other.stopped_early_at is not None:
                header += f"; stopped early at step {other.stopped_early_at:,}" + (f" ({other.stop_reason})" if other.stop_reason else "")
            lines.append(header)
            lines.extend(_lines_of(other, winner))
        if other.code is not None:
            lines.append(_code_shown(winner.code or "", other.code))
    return "\n".join(lines)
