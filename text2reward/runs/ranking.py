"""Which candidate is best: one ordering for the loop, the reports, the CLI and the dashboard.

A candidate's final success is a rate over its final evaluation's episodes, so it comes with a 95% Wilson interval
(`policies.stats`). Candidates are ordered by it, and the ones whose intervals overlap the leader's are **tied**
with it: the round summary and the next prompt say so, and say how the tie was broken (`TIE_BREAK`). The order
inside a tie is by the best guess still: the higher final success, then the score (policies.score: the success over
the whole training curve, every evaluation averaged, sooner and steadier, plus the final evaluation's progress toward
the task's own success rule, which still separates rewards when none succeeds), then the native return (what decides
between records from before progress was measured), then the earlier candidate (so the best so far keeps its place
against a later candidate that only equals it).

A candidate stopped early for trailing another is ranked on what it reached (its partial result), and never above
the candidate that stopped it: the stop was a judgement on several evaluations at the same step count, and a
ranking that reversed it would contradict the run's own record (`stopped_below_leader`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from policies.score import Score, score_of
from policies.stats import Rate
from text2reward.runs.records import DEFAULT_EVAL_EPISODES, Candidate

TIE_BREAK = ("the higher final success, then the higher score (success over the whole training curve plus progress "
             "toward the success rule), then the higher native return, then the earlier candidate")
"""How a tie is broken, as the round summary and the prompt state it."""


@dataclass(frozen=True)
class Standing:
    """A trained candidate's figures for ranking."""

    id: str
    success: Rate
    score: Score
    """policies.score's score: the mean success over the training curve's evaluations plus the final progress toward
    the success rule (the area alone in records from before progress was measured)."""
    native_return: float
    order: tuple[int, int, int]
    """(round, sample, tuned): earlier first."""

    @property
    def progress(self) -> float | None:
        """The final evaluation's mean progress toward the success rule; None in records from before it was measured."""
        return self.score.progress

    @property
    def key(self) -> tuple[float, float, float, int, int, int]:
        return (self.success.rate, self.score.value, self.native_return, -self.order[0], -self.order[1], -self.order[2])


def standing(candidate: Candidate) -> Standing:
    training = candidate.training
    progress = training.progress if training is not None else None
    return Standing(
        id=candidate.id,
        success=Rate.of(training.success_rate, training.episodes) if training is not None else Rate.of(0.0, DEFAULT_EVAL_EPISODES),
        score=score_of(training.curve if training is not None else [], *(progress or (None, None))),
        native_return=training.mean_native_return if training is not None else float("-inf"),
        order=(candidate.round, candidate.sample, 1 if candidate.parent else 0),
    )


def rank(candidates: list[Candidate]) -> list[Standing]:
    """The trained candidates, best first; a stopped candidate below the one that stopped it."""
    ordered = sorted((standing(c) for c in candidates if c.has_training), key=lambda s: s.key, reverse=True)
    leaders = {c.id: c.stopped_early.leader for c in candidates if c.stopped_early is not None and c.stopped_early.leader}
    return stopped_below_leader(ordered, leaders)


def stopped_below_leader(ordered: list[Standing], leaders: dict[str, str]) -> list[Standing]:
    """`ordered` with each stopped candidate moved to just below its leader when it stood above it (chains of stops
    followed until nothing moves; a leader not in the list leaves its candidate where it is)."""
    order = list(ordered)
    for _ in range(len(order)):
        moved = False
        for stopped, leader in leaders.items():
            ids = [s.id for s in order]
            if stopped in ids and leader in ids and ids.index(stopped) < ids.index(leader):
                entry = order.pop(ids.index(stopped))
                order.insert([s.id for s in order].index(leader) + 1, entry)
                moved = True
        if not moved:
            break
    return order


def tied_with_best(standings: list[Standing]) -> list[str]:
    """The ids (after the first) whose success is within the first's noise: the ties a prompt must call ties."""
    if not standings:
        return []
    best = standings[0]
    return [s.id for s in standings[1:] if s.success.ties(best.success)]


def best_candidate(candidates: list[Candidate]) -> Candidate | None:
    ranked = rank(candidates)
    if not ranked:
        return None
    return next(c for c in candidates if c.id == ranked[0].id and c.has_training)


def tie_summary(candidates: list[Candidate]) -> dict[str, Any]:
    """`{tied, tie_break}` for a round summary: who is within the best's noise, and how the best was chosen among
    them; `{}` when the best stands alone."""
    tied = tied_with_best(rank(candidates))
    return {"tied": tied, "tie_break": TIE_BREAK} if tied else {}
