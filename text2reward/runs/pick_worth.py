"""What a run's pick is worth: who is within the best's noise, and how often a pick on S training seeds agreed with a
held-out re-training (5 seeds, 10 where five were re-tested) when it was measured.

Why: a pick is one training seed's draw per candidate unless `--candidate-seeds` says more, and the same reward moves
by more between seeds than most differences the loop acts on (soccer-v3: 0.30, 0.00 and 0.03 on three seeds). A user
who reads "best: r1-s0" should also read whether it stood apart from the others, and what such a pick has been worth
on tasks where the truth was measured, before building on it or paying for more seeds.

The measured figures are `pick_agreement.json` beside this module, written by `benchmarks/refinement_gain.py
--record`: never edited by hand, and cited with their budget, task count and both denominators (every decision, and
those where the held-out difference was beyond noise).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path

from sim_envs import codec
from text2reward.runs.ranking import TIE_BREAK, rank, tied_with_best
from text2reward.runs.records import Candidate

SHIPPED = Path(__file__).with_name("pick_agreement.json")


@dataclass(frozen=True)
class Counts:
    """How many picks named the held-out truth's best: the figures that add up over tasks and sources."""

    decisions: int
    agreed: int
    beyond_noise: int
    """Decisions whose held-out difference was beyond noise (Welch p < 0.05): the only ones where a pick can be wrong
    for certain."""
    agreed_beyond_noise: int
    draws: int = 0
    """The same decision asked of every choice of `seeds` loop seeds per reward the trainings allow (the pairs source
    trains 3 loop seeds per reward, so 9 draws at 1 or 2 seeds): 0 where only one draw was made."""
    agreed_draws: int = 0
    draws_beyond_noise: int = 0
    agreed_draws_beyond_noise: int = 0


def summed(measurements: list[Agreement]) -> dict[str, int]:
    """Each count summed over `measurements`, by name."""
    return {spec.name: sum(getattr(m, spec.name) for m in measurements) for spec in fields(Counts)}


@dataclass(frozen=True, kw_only=True)
class Agreement(Counts):
    """One task's measured picks on `seeds` training seeds per candidate at a budget, against a held-out truth of
    `truth_seeds` seeds."""

    source: str
    """"pairs" (a shipped draft against its expert rewrite) or "heuristic" (the heuristic backend's rounds as run)."""
    task: str
    steps: int
    seeds: int
    recorded: str
    """The day the benchmark computed it (YYYY-MM-DD; its trainings may be older, and are reused when run again)."""
    truth_seeds: int = 5
    """The held-out seeds each reward was re-trained on (`--truth-seeds`): 10 where five seeds' verdicts were re-tested."""


@dataclass(frozen=True)
class AgreementFile:
    """pick_agreement.json."""

    measurements: list[Agreement] = field(default_factory=list)


@cache
def shipped_agreements() -> tuple[Agreement, ...]:
    """The shipped measurements (none when the file is missing: an install without package data)."""
    if not SHIPPED.is_file():
        return ()
    return tuple(codec.read(AgreementFile, json.loads(SHIPPED.read_text()), str(SHIPPED)).measurements)


@dataclass(frozen=True, kw_only=True)
class Pooled(Counts):
    """The measurements at one budget and seed count, summed over their tasks and sources."""

    steps: int
    seeds: int
    tasks: tuple[str, ...]
    truth_seeds: tuple[int, ...] = (5,)
    """The held-out seed counts of the summed measurements."""

    @property
    def truth(self) -> str:
        """`5-seed`, or `5- to 10-seed` where the summed measurements' truths differ."""
        low, high = min(self.truth_seeds), max(self.truth_seeds)
        return f"{low}-seed" if low == high else f"{low}- to {high}-seed"

    def text(self) -> str:
        """The counts in words, naming the truth they were measured against."""
        beyond = (f"{self.agreed_beyond_noise} of {self.beyond_noise} where the {self.truth} difference was beyond noise"
                  if self.beyond_noise else "none of them beyond noise")
        text = f"{self.agreed} of {self.decisions} decisions ({beyond})"
        if self.draws:
            text += (f"; asked of every draw of seeds the trainings allow, {self.agreed_draws / self.draws:.0%} of "
                     f"{self.draws} picks" + (f" ({self.agreed_draws_beyond_noise / self.draws_beyond_noise:.0%} of "
                                              f"{self.draws_beyond_noise} beyond noise)" if self.draws_beyond_noise else ""))
        return text

    @property
    def where(self) -> str:
        """`6 tasks (metaworld) at 5,000 steps`."""
        families = sorted({task.split("/")[0] for task in self.tasks})
        return f"{len(self.tasks)} task{'s' if len(self.tasks) != 1 else ''} ({', '.join(families)}) at {self.steps:,} steps"


def measured(seeds: int, steps: int | None, agreements: tuple[Agreement, ...] | None = None) -> Pooled | None:
    """The measurements for picks on `seeds` seeds at the budget nearest `steps` (by ratio; the largest when the run's
    budget is unknown), summed over tasks and sources; None when that seed count was never measured."""
    found = [a for a in (shipped_agreements() if agreements is None else agreements) if a.seeds == seeds]
    if not found:
        return None
    budgets = {a.steps for a in found}
    budget = max(budgets) if not steps else min(budgets, key=lambda b: (abs(math.log(b / steps)), -b))
    chosen = [a for a in found if a.steps == budget]
    return Pooled(steps=budget, seeds=seeds, tasks=tuple(sorted({a.task for a in chosen})),
                  truth_seeds=tuple(sorted({a.truth_seeds for a in chosen})), **summed(chosen))


def seeds_of(candidate: Candidate) -> int:
    """The training seeds a candidate's figures pool (1 unless `--candidate-seeds` trained more)."""
    return max(1, sum(s.training is not None for s in candidate.seeds))


def pick_worth_lines(best: Candidate, candidates: list[Candidate], steps: int | None,
                     agreements: tuple[Agreement, ...] | None = None) -> list[str]:
    """The report's lines under the best reward: the candidates within its noise and how it was chosen among them,
    then what a pick on this many seeds agreed with when measured (and what one more seed bought). `steps`: the run's
    budget (None for the task's default: then the steps the best trained). Empty when the best had no other trained
    candidate to be picked against."""
    steps = steps or (best.training.steps if best.training is not None else None)
    ranked = rank(candidates)
    if len(ranked) < 2 or ranked[0].id != best.id:
        return []
    seeds = seeds_of(best)
    rates = {s.id: s.success for s in ranked}
    tied = tied_with_best(ranked)
    on = f"on {seeds} training seed{'s' if seeds > 1 else ''} per candidate"
    if tied:
        shown = "; ".join(f"{cid} {rates[cid].text()}" for cid in tied)
        lines = [f"- Within its noise (95% intervals of final success overlap, {on}): {shown}. It is first among them "
                 f"by the tie-break ({TIE_BREAK}); no difference between them stands out of its evaluations' noise."]
    else:
        lines = [f"- Ahead of every other trained candidate beyond noise (95% intervals of final success apart, {on})."]
    here = measured(seeds, steps, agreements)
    if here is None:
        lines.append(f"- A pick {on} has not been measured against a held-out re-training (benchmarks/refinement_gain.py).")
        return lines
    lines.append(f"- Measured (benchmarks/refinement_gain.py, {here.where}): a pick {on} agreed with a {here.truth} "
                 f"re-training in {here.text()}.")
    more = measured(seeds + 1, here.steps, agreements)
    if more is not None and more.steps == here.steps:
        lines.append(f"- With `--candidate-seeds {seeds + 1}` ({(seeds + 1) / seeds:.3g}x the training): {more.text()}.")
    return lines
