"""Would the early stopper have stopped the winner? Its rule replayed on full-budget training curves.

Why: a stop is a bet that a candidate behind at a rung stays behind; the bet is wrong when the stopped candidate
would have ranked above the one that stopped it at the full budget. Live runs cannot tell (a stopped candidate never
reaches the budget), but `benchmarks/refinement_gain.py` leaves full-budget `t2r train` trainings of several rewards
per task, each on several seeds (its `--out` folder). Every pairing of two trainings of different rewards of one task,
at one budget, is a round of two candidates whose whole future is known. For each pairing this script feeds both
curves to the loop's own `EarlyStopper` (training/early_stop.py, its default rule) point by point in step order, as
two workers in lockstep, until one of the two is stopped. Then, for each stop:

- **wrong (this round)**: at the full budget the stopped training ranks above the one that stopped it, by
  runs.ranking's order (final success over the final evaluation's episodes, then the score: success-curve area plus
  final progress, policies.score);
  **beyond noise** when its final success is above the leader's with the two 95% intervals apart;
- **wrong (the reward)**: the stopped reward's mean score over all its trainings at that budget is above the leader's
  (itself a noisy truth where the two rewards are close: **beyond noise** when Welch's test on the two rewards'
  scores gives p < 0.05);
- **saving**: the budget over the steps the stopped candidate trained (2x at the 1/2 rung, 4x at 1/4).

The issue's target: at most 1 in 20 stops wrong, at >= 2x savings. Read the counts as rough: a training is in many
pairings, so the number of distinct stopped trainings is printed beside them, and a wrong share is given with its
95% Wilson interval over the stops (which overstates its precision for the same reason).

    python benchmarks/early_stop_replay.py --out out/refinement_gain
    python benchmarks/early_stop_replay.py --out out/refinement_gain --steps 20000 --tasks metaworld/reach-v3
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from refinement_gain import welch_p

from policies.curve import CurvePoint
from policies.score import score_of
from policies.stats import Rate
from text2reward.runs.records import ResultFile, read
from text2reward.training.early_stop import EarlyStopper, EarlyStopRule, rung_steps


@dataclass(frozen=True)
class Training:
    """One full-budget training of one reward on one seed."""

    task: str
    reward: str
    """The reward's folder name (label and code digest)."""
    seed: int
    budget: int
    eval_freq: int
    curve: tuple[CurvePoint, ...]
    final: Rate
    score: float

    @property
    def name(self) -> str:
        return f"{self.reward} seed {self.seed}"

    @property
    def key(self) -> tuple[float, float]:
        """runs.ranking's order at the full budget: final success, then the score."""
        return (self.final.rate, self.score)


@dataclass(frozen=True)
class Stop:
    task: str
    budget: int
    stopped: Training
    leader: Training
    at: int
    """The rung's steps."""
    wrong_round: bool
    wrong_reward: bool
    reward_p: float
    """Welch's p between the two rewards' scores over all their trainings at this budget."""

    @property
    def wrong_beyond_noise(self) -> bool:
        """Wrong for the round, and its final success above the leader's beyond noise (95% intervals apart)."""
        return self.wrong_round and not self.stopped.final.ties(self.leader.final)

    @property
    def wrong_reward_beyond_noise(self) -> bool:
        """Wrong for the reward, with the two rewards' scores apart beyond noise (Welch p < 0.05)."""
        return self.wrong_reward and self.reward_p < 0.05

    @property
    def saving(self) -> float:
        return self.budget / self.at


def trainings(out: Path, tasks: set[str] | None, budgets: set[int] | None) -> list[Training]:
    """Every finished full-budget training under `out` (<task>/<reward>/seed<N>-<steps>/result.json)."""
    found = []
    for path in sorted(out.glob("*/*/seed*-*/result.json")):
        task = path.parents[2].name.replace("__", "/")
        seed, steps = (int(part) for part in path.parent.name.removeprefix("seed").split("-"))
        if (tasks and task not in tasks) or (budgets and steps not in budgets):
            continue
        raw = json.loads(path.read_text())
        if raw.get("interrupted"):
            continue
        result = read(ResultFile, raw, str(path))
        eval_freq = raw.get("eval_freq")  # result.json's own record of it (not a field ResultFile reads)
        if result.steps < steps or not result.curve or not isinstance(eval_freq, int) or eval_freq <= 0:
            continue
        found.append(Training(task, path.parents[1].name, seed, steps, eval_freq, tuple(result.curve),
                              Rate.of(result.success_rate or 0.0, result.final_episodes),
                              score_of(result.curve, result.mean_progress, result.progress_se).value))
    return found


def replay(a: Training, b: Training, rule: EarlyStopRule) -> tuple[str, int, str] | None:
    """(stopped name, rung steps, leader name) when the stopper stops one of the two, else None."""
    stopper = EarlyStopper(a.budget, a.eval_freq, rule)
    points = sorted(((p.steps, name, p) for name, t in (("a", a), ("b", b)) for p in t.curve), key=lambda item: (item[0], item[1]))
    for _, name, point in points:
        stopper.add_point(name, point)
        decisions = stopper.decide(["a", "b"])
        if decisions:  # a round of two has one stop at most: the other then trains alone
            stopped, decision = next(iter(decisions.items()))
            return stopped, decision.steps, decision.leader or ("b" if stopped == "a" else "a")
    return None


def stops_of(group: Sequence[Training], rule: EarlyStopRule) -> tuple[list[Stop], int]:
    """Every pairing of trainings of two different rewards in `group` (one task, one budget): its stop, if any; and
    the number of pairings."""
    scores = {reward: [t.score for t in group if t.reward == reward] for reward in {t.reward for t in group}}
    means = {reward: statistics.mean(values) for reward, values in scores.items()}
    stops, pairings = [], 0
    for a, b in itertools.combinations(group, 2):
        if a.reward == b.reward:
            continue
        pairings += 1
        found = replay(a, b, rule)
        if found is None:
            continue
        stopped, at, leader = found
        s, lead = (a, b) if stopped == "a" else (b, a)
        stops.append(Stop(s.task, s.budget, s, lead, at, wrong_round=s.key > lead.key, wrong_reward=means[s.reward] > means[lead.reward],
                          reward_p=welch_p(scores[s.reward], scores[lead.reward])))
    return stops, pairings


def share(part: int, whole: int) -> str:
    if not whole:
        return "-"
    low, high = Rate(part, whole).interval
    return f"{part} of {whole} ({part / whole:.0%}, 95% interval {low:.0%}-{high:.0%})"


def parse_rule(text: str) -> EarlyStopRule:
    """`default`, or `rungs=0.5,0.75;success_margin=0.5;window=4`: EarlyStopRule's fields, the rest its defaults."""
    if text == "default":
        return EarlyStopRule()
    fields: dict[str, object] = {}
    for item in text.split(";"):
        key, _, value = item.partition("=")
        if key == "rungs":
            fields[key] = tuple(float(v) for v in value.split(","))
        elif key in ("window", "min_evaluations"):
            fields[key] = int(value)
        elif key in ("success_margin", "native_margin"):
            fields[key] = float(value)
        else:
            raise SystemExit(f"unknown rule field {key!r}: rungs, success_margin, native_margin, window, min_evaluations")
    return EarlyStopRule(**fields)  # type: ignore[arg-type]


def per_task(groups: dict[tuple[str, int], list[Training]], rule: EarlyStopRule) -> dict[tuple[str, int], tuple[list[Stop], int]]:
    return {key: stops_of(group, rule) for key, group in sorted(groups.items()) if len({t.reward for t in group}) >= 2}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/refinement_gain"), help="refinement_gain.py's --out folder")
    parser.add_argument("--tasks", nargs="*", default=None)
    parser.add_argument("--steps", nargs="*", type=int, default=None, help="budgets to replay (default: every one found)")
    parser.add_argument("--rules", nargs="*", default=["default"], metavar="RULE",
                        help="rules side by side: default, or e.g. 'rungs=0.5;success_margin=0.5' (EarlyStopRule's fields)")
    args = parser.parse_args(argv)
    found = trainings(args.out, set(args.tasks) if args.tasks else None, set(args.steps) if args.steps else None)
    groups: dict[tuple[str, int], list[Training]] = defaultdict(list)
    for t in found:
        groups[t.task, t.budget].append(t)
    print(f"# {len(found)} full-budget trainings in {args.out}, {len(groups)} (task, budget) groups")
    rules = {text: parse_rule(text) for text in args.rules}
    results = {text: per_task(groups, rule) for text, rule in rules.items()}
    for text, by_task in results.items():
        rule = rules[text]
        print(f"\n## rule {text}: {rule}\n")
        print("| task | budget | rewards | trainings | pairings | stops per rung | wrong (round) | wrong (reward) | "
              "distinct stopped trainings |")
        print("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
        for (task, budget), (stops, pairings) in by_task.items():
            group = groups[task, budget]
            rungs = rung_steps(budget, group[0].eval_freq, rule)
            per_rung = " / ".join(f"{sum(s.at == r for s in stops)} at {r:,}" for r in rungs)
            print(f"| {task} | {budget:,} | {len({t.reward for t in group})} | {len(group)} | {pairings} | {per_rung} | "
                  f"{sum(s.wrong_round for s in stops)} | {sum(s.wrong_reward for s in stops)} | {len({s.stopped.name for s in stops})} |")
    print("\n## side by side\n")
    print("| rule | budget | pairings | stops | wrong (round) | of them beyond noise | wrong (reward) | of them beyond noise | "
          "saving on the stopped | saving on every pairing |")
    print("| --- | ---: | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: |")
    for text, by_task in results.items():
        for budget in sorted({b for _, b in by_task}):
            stops = [s for (_, b), (found_stops, _) in by_task.items() if b == budget for s in found_stops]
            pairings = sum(p for (_, b), (_, p) in by_task.items() if b == budget)
            trained, saved = sum(s.at for s in stops), sum(s.budget - s.at for s in stops)
            on_stopped = f"{(trained + saved) / trained:.2f}x" if stops else "-"
            every = 2 * budget * pairings
            print(f"| {text} | {budget:,} | {pairings} | {len(stops)} | {share(sum(s.wrong_round for s in stops), len(stops))} | "
                  f"{sum(s.wrong_beyond_noise for s in stops)} | {share(sum(s.wrong_reward for s in stops), len(stops))} | "
                  f"{sum(s.wrong_reward_beyond_noise for s in stops)} | {on_stopped} | {every / (every - saved):.3f}x |")
    first = next(iter(results.values()))
    wrong = [s for stops, _ in first.values() for s in stops if s.wrong_round or s.wrong_reward]
    if wrong:
        print(f"\nWrong stops under {args.rules[0]}:")
    for s in wrong:
        print(f"- {s.task}: {s.stopped.name} stopped at {s.at:,} behind {s.leader.name}; at {s.budget:,}: "
              f"{s.stopped.final.text()} vs {s.leader.final.text()}, score {s.stopped.score:.2f} vs {s.leader.score:.2f}"
              f"{' (wrong for the round)' if s.wrong_round else ''}"
              f"{f' (wrong for the reward, Welch p {s.reward_p:.2f})' if s.wrong_reward else ''}")


if __name__ == "__main__":
    main()
