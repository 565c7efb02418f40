"""Does the loop pick the better reward or the luckier seed? Its picks against a 5-seed re-training of every candidate.

Why: a round's pick and "best so far" decide what the next prompt builds on. If the pick follows one training seed's
luck, refinement is a random walk. For each task this benchmark takes rounds of rewards from two sources,

- **heuristic**: the heuristic backend's two rounds (`RewardSearch`, K candidates per round, early stopping on): the
  loop's own picks, as it made them, are read from the run (`runs.ranking`);
- **pairs**: a fixed round-0/round-1 pair that ships with the benchmark: a first draft
  (`benchmarks/refinement_drafts/`) and the expert rewrite of the same task (`prompts/examples/`); the loop's decision
  between them is its ranking statistic on S loop seeds (0..S-1), computed for S = 1..--max-seeds, and the rule from
  before seed-aware scores (one seed, final success then native return) on the same trainings;
- **mistakes**: the same decision where round 0 is the expert rewrite with one realistic mistake
  (`benchmarks/refinement_mistakes/`: reach, drawer-close, handle-press, push, pick-place): pairs that differ for a known reason, to ask
  whether the loop's picks follow a difference that exists (never recorded: `MISTAKES`);

then re-trains every candidate to the full budget on held-out seeds (100..104 by default; `--truth-seeds N` takes
100..100+N-1; never a loop seed) with
`t2r train` (the reward in the jail, as in the loop), and reads each seed's score (policies.score: success-curve area
plus final progress toward the task's own success rule). The truth is the held-out mean; two rewards differ "beyond
noise" when Welch's t-test on their per-seed scores gives p < 0.05. At p < 0.05 one decision in twenty between equal
rewards is called beyond noise, and a run counts many decisions: the summary states how many such calls chance
alone would make, and more held-out seeds (`--truth-seeds 10`) re-test the decisions five seeds called (for the pairs,
a table of each set of seeds: the first five, those beyond them, the loop's, and how often one seed of the draft
outscores one of its rewrite). Reported per decision: the pick, the truth's
best, agreement; per rule: agreement where the truth is beyond noise (target >= 90%); the round-1 minus round-0 gain
with its 95% interval over the held-out seeds; for the heuristic runs, each stopped candidate against its leader
(a stop is wrong when the stopped one's 5-seed mean is above its leader's) and the steps the stops saved.

Every training writes its folder under --out and is reused when its result.json exists, so an interrupted benchmark
resumes where it stopped. `--record` merges the loop statistic's agreement per task, budget and seed count into the
file the product cites in its reports (text2reward/runs/pick_agreement.json; text2reward/runs/pick_worth.py): a
(source, task, steps, seeds) measured again replaces the one before.

    python benchmarks/refinement_gain.py                                      # 6 tasks: hours on 2 cores
    python benchmarks/refinement_gain.py --tasks metaworld/drawer-close-v3 --sources pairs --steps 6000
    python benchmarks/refinement_gain.py --sources pairs --steps 5000 --record   # the product's cited figures
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from scipy import stats
from timing import parse_steps

from policies.checkpoint import checkpoint_path
from policies.score import score_of
from policies.stats import Rate
from sim_envs import codec
from text2reward.runs.pick_worth import SHIPPED, Agreement, AgreementFile
from text2reward.runs.records import ResultFile, read

ROOT = Path(__file__).resolve().parent.parent
DRAFTS = Path(__file__).resolve().parent / "refinement_drafts"
MISTAKES = Path(__file__).resolve().parent / "refinement_mistakes"
"""The `mistakes` source's round 0: the expert rewrite with one realistic mistake (the wrong object, a missing stage,
a sign read the wrong way round, a penalty that rivals the task's reward), so the pair's rewards differ for a known reason. Its decisions are reported, never
recorded: they are built to differ, so they would flatter the agreement that reports cite for the loop's real picks."""
DRAFT_SOURCES = {"pairs": DRAFTS, "mistakes": MISTAKES}
EXAMPLES = ROOT / "prompts" / "examples"
DEFAULT_TASKS = ["metaworld/reach-v3", "metaworld/drawer-close-v3", "metaworld/button-press-topdown-v3",
                 "metaworld/handle-press-v3", "metaworld/plate-slide-v3", "metaworld/window-open-v3"]
"""Six MetaWorld tasks with an expert rewrite in prompts/examples that SAC solves within ~10-30k steps."""
MORE_PAIR_TASKS = ["metaworld/door-close-v3", "metaworld/drawer-open-v3", "metaworld/faucet-open-v3", "metaworld/push-v3",
                   "metaworld/pick-place-v3"]
"""Five more shipped pairs (every other MetaWorld task with an expert rewrite), for the pairs source: more decisions
per budget, where five held-out seeds leave most pairs within noise (`--tasks` names them)."""
TRUTH_SEEDS = (100, 101, 102, 103, 104)
"""The default held-out seeds; `--truth-seeds N` takes 100..100+N-1, so a longer truth extends the shorter one's
trainings (their folders are reused)."""
ALPHA = 0.05


def held_out_seeds(count: int) -> tuple[int, ...]:
    """The truth's held-out seeds: `count` of them from 100 up (a longer truth keeps the shorter one's seeds)."""
    if count < 2:
        raise SystemExit(f"--truth-seeds {count}: a truth with noise needs at least 2 held-out seeds")
    return tuple(range(TRUTH_SEEDS[0], TRUTH_SEEDS[0] + count))


@dataclass(frozen=True)
class Reward:
    task: str
    label: str
    """"draft", "expert rewrite", or the heuristic run's candidate id (r0-s1)."""
    round: int
    code: Path


@dataclass(frozen=True)
class SeedResult:
    seed: int
    score: float
    success: Rate
    native_return: float
    steps: int


@dataclass
class Decision:
    """One choice the loop makes among rewards, against the held-out truth."""

    task: str
    source: str
    what: str
    """"round 0", "round 1", "best so far" or "r1 vs r0"."""
    rule: str
    pick: str
    truth_best: str
    beyond_noise: bool
    p_value: float
    cost_seeds: int
    steps: int
    means: dict[str, float] = field(default_factory=dict)
    draws: tuple[int, int] | None = None
    """(picks naming the 5-seed best, picks) over every choice of `cost_seeds` loop seeds per reward: the same
    question asked of every seed draw the trainings allow, not only seeds 0..S-1 (pairs only)."""

    @property
    def agrees(self) -> bool:
        return self.pick == self.truth_best


def train_once(reward: Reward, seed: int, steps: int, out: Path, hp: Sequence[str]) -> SeedResult:
    """`t2r train` on one seed (the reward jailed, the full budget); an existing result.json is read, not retrained."""
    folder = out / reward.task.replace("/", "__") / f"{reward.label.replace(' ', '_')}-{_digest(reward.code)}" / f"seed{seed}-{steps}"
    result_file = folder / "result.json"
    interrupted = (json.loads(result_file.read_text()).get("interrupted") is True if result_file.exists()
                   else checkpoint_path(folder).is_file())  # stopped before it could write a result: its checkpoint
    if interrupted or not result_file.exists():
        command = [sys.executable, "-m", "text2reward.cli", "train", "--task", reward.task, "--reward", str(reward.code),
                   "--steps", str(steps), "--seed", str(seed), "--out", str(folder)]
        for item in hp:
            command += ["--hp", item]
        if interrupted:  # a Ctrl-C (or SIGTERM) stopped it: go on from its checkpoint with its own settings
            command = [sys.executable, "-m", "text2reward.cli", "train", "--resume", str(folder)]
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0 or not result_file.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise SystemExit(f"training {reward.task} {reward.label} seed {seed} failed: {tail[0]}")
    result = read(ResultFile, json.loads(result_file.read_text()), str(result_file))
    return SeedResult(seed=seed, score=score_of(result.curve, result.mean_progress, result.progress_se).value,
                      success=Rate.of(result.success_rate or 0.0, result.final_episodes),
                      native_return=result.mean_native_return, steps=result.steps)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:8]


def loop_key(results: Sequence[SeedResult]) -> tuple[float, float, float]:
    """The loop's ranking statistic over its seeds, in runs.ranking's order: pooled final success, then the mean
    score, then the mean native return."""
    return (Rate.pooled(r.success for r in results).rate, sum(r.score for r in results) / len(results),
            sum(r.native_return for r in results) / len(results))


def before_key(results: Sequence[SeedResult]) -> tuple[float, float]:
    """The rule before seed-aware scores: seed 0's final success, then its native return."""
    return (results[0].success.rate, results[0].native_return)


def truth_decision(truth: dict[str, list[float]]) -> tuple[str, bool, float]:
    """(the best by held-out mean score, whether it beats the runner-up beyond noise, Welch's p)."""
    ordered = sorted(truth, key=lambda label: sum(truth[label]) / len(truth[label]), reverse=True)
    best, second = ordered[0], ordered[1]
    p = welch_p(truth[best], truth[second])
    return best, p < ALPHA, p


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Welch's two-sided p between two samples of scores (1 when either has fewer than two; two constant samples are
    1 when equal and 0 when not: as far apart as can be)."""
    if len(a) < 2 or len(b) < 2:
        return 1.0
    if max(a) == min(a) and max(b) == min(b):
        return 1.0 if a[0] == b[0] else 0.0
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def gain_interval(later: Sequence[float], earlier: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high) of the round-1 minus round-0 score over the held-out seeds, paired by seed, 95% t-interval."""
    diffs = [a - b for a, b in zip(later, earlier)]
    mean = sum(diffs) / len(diffs)
    if len(diffs) < 2:
        return mean, mean, mean
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1))
    half = float(stats.t.ppf(0.975, len(diffs) - 1)) * sd / math.sqrt(len(diffs))
    return mean, mean - half, mean + half


def draw_agreement(seeds_of: dict[str, list[SeedResult]], truth_best: str, size: int) -> tuple[int, int]:
    """Over every choice of `size` of each reward's loop seeds (chosen for each reward independently): how many of
    the loop statistic's picks name `truth_best`, and how many picks there were."""
    subsets = {label: list(itertools.combinations(results, size)) for label, results in seeds_of.items()}
    agreed = total = 0
    for combination in itertools.product(*subsets.values()):
        chosen = dict(zip(subsets, combination))
        agreed += max(chosen, key=lambda label: loop_key(chosen[label])) == truth_best
        total += 1
    return agreed, total


def one_seed_win_share(first: Sequence[float], second: Sequence[float]) -> float:
    """Of every pairing of one seed of each reward, the share where `first` scores higher (ties count half): how often
    a pick on one seed per candidate names `first`, seeds drawn from all trained."""
    wins = sum((a > b) + 0.5 * (a == b) for a in first for b in second)
    return wins / (len(first) * len(second))


def seed_sets_row(task: str, scores: dict[str, dict[int, float]], loop_seeds: Sequence[int], held_out: Sequence[int]) -> str:
    """One table row per pair: the two rewards' mean scores and Welch p on each set of seeds (the default five held-out
    seeds, the ones beyond them, all held-out, the loop's, everything), then the one-seed win share over everything.
    Where a longer truth re-tests the five, the middle column is the independent re-test."""
    draft, expert = scores["draft"], scores["expert rewrite"]
    sets = [list(held_out[:len(TRUTH_SEEDS)]), list(held_out[len(TRUTH_SEEDS):]), list(held_out), list(loop_seeds),
            [*loop_seeds, *held_out]]
    cells = []
    for seeds in sets:
        a, b = [draft[s] for s in seeds], [expert[s] for s in seeds]
        cells.append(f"{sum(a) / len(a):.3f} / {sum(b) / len(b):.3f}, p {welch_p(a, b):.3f}" if len(a) >= 2 else "-")
    everything = sets[-1]
    share = one_seed_win_share([draft[s] for s in everything], [expert[s] for s in everything])
    return f"| {task} | " + " | ".join(cells) + f" | {share:.2f} |"


def pair_rewards(task: str, source: str = "pairs") -> list[Reward]:
    name = task.replace("/", "__") + ".py"
    folder = DRAFT_SOURCES[source]
    draft, expert = folder / name, EXAMPLES / name
    if not draft.exists() or not expert.exists():
        shipped = sorted(path.stem.replace("__", "/") for path in folder.glob("*.py"))
        raise SystemExit(f"{task}: the {source} source ships no pair for it ({draft.relative_to(ROOT)} and {expert.relative_to(ROOT)}); "
                         f"choose among {', '.join(shipped)}")
    return [Reward(task, "draft", 0, draft), Reward(task, "expert rewrite", 1, expert)]


def pair_decisions(task: str, steps: int, args: argparse.Namespace, pool: ThreadPoolExecutor,
                   source: str = "pairs") -> tuple[list[Decision], tuple, str]:
    rewards = pair_rewards(task, source)
    loop_seeds = list(range(args.max_seeds))
    held_out = held_out_seeds(args.truth_seeds)
    jobs = {(r.label, s): pool.submit(train_once, r, s, steps, args.out, args.hp) for r in rewards for s in [*loop_seeds, *held_out]}
    results = {key: job.result() for key, job in jobs.items()}
    truth = {r.label: [results[r.label, s].score for s in held_out] for r in rewards}
    best, beyond, p = truth_decision(truth)
    means = {label: sum(v) / len(v) for label, v in truth.items()}
    decisions = []
    seeds_of = {r.label: [results[r.label, s] for s in loop_seeds] for r in rewards}
    pick = max(seeds_of, key=lambda label: before_key(seeds_of[label]))
    decisions.append(Decision(task, source, "r1 vs r0", "before: 1 seed, success then return", pick, best, beyond, p, 1, steps, means))
    for s in range(1, args.max_seeds + 1):
        pick = max(seeds_of, key=lambda label: loop_key(seeds_of[label][:s]))
        decisions.append(Decision(task, source, "r1 vs r0", f"after: {s} seed(s), loop statistic", pick, best, beyond, p, s, steps,
                                  means, draw_agreement(seeds_of, best, s)))
    gain = gain_interval(truth["expert rewrite"], truth["draft"])
    scores = {r.label: {s: results[r.label, s].score for s in [*loop_seeds, *held_out]} for r in rewards}
    every_seed = {r.label: [results[r.label, s] for s in [*loop_seeds, *held_out]] for r in rewards}
    return decisions, gain, seed_sets_row(f"{task} ({source})", scores, loop_seeds, held_out) + f" {all_seed_draws(every_seed, best)} |"


def all_seed_draws(seeds_of: dict[str, list[SeedResult]], best: str, most: int = 3) -> str:
    """How often the loop's statistic on S seeds per reward names the truth's best, over every draw of S seeds from all
    those trained (loop and held-out), S = 1..`most`: what S seeds buy on this pair. The draws share seeds, and the
    held-out ones are also the truth's, so it describes these seeds rather than giving independent trials."""
    shares = []
    for size in range(1, most + 1):
        agreed, total = draw_agreement(seeds_of, best, size)
        shares.append(f"{agreed / total:.0%}")
    return " / ".join(shares)


def heuristic_decisions(task: str, steps: int, args: argparse.Namespace, pool: ThreadPoolExecutor) -> tuple[list[Decision], tuple, list[Stop], int]:
    """The heuristic's two rounds as the loop ran them, each candidate re-trained on the held-out seeds."""
    from text2reward import RewardSearch  # noqa: PLC0415 - the loop only for this source
    from text2reward.runs.ranking import best_candidate  # noqa: PLC0415
    from text2reward.runs.store import RunStore  # noqa: PLC0415

    run_dir = args.out / "runs" / task.replace("/", "__")
    marker = run_dir / "run_id"
    if marker.exists():
        store = RunStore.open(run_dir, marker.read_text().strip())
    else:
        search = RewardSearch(task, backend="heuristic", rounds=2, samples=args.samples, steps=steps, workers=args.workers,
                              seed=0, candidate_seeds=args.candidate_seeds, final_seeds=0, video=False, runs_dir=run_dir)
        store = RunStore(search.run().run_dir)
        marker.write_text(store.run_id)
    candidates = [c for c in store.candidates() if c.has_training and c.code_file]
    rewards = {c.id: Reward(task, c.id, c.round, store.root / str(c.code_file)) for c in candidates}
    held_out = held_out_seeds(args.truth_seeds)
    jobs = {(cid, s): pool.submit(train_once, r, s, steps, args.out, args.hp) for cid, r in rewards.items() for s in held_out}
    truth = {cid: [jobs[cid, s].result().score for s in held_out] for cid in rewards}
    means = {cid: sum(v) / len(v) for cid, v in truth.items()}
    decisions = []
    picks: dict[str, str] = {}
    for what, members in (("round 0", [c for c in candidates if c.round == 0]), ("round 1", [c for c in candidates if c.round == 1]),
                          ("best so far", candidates)):
        if len(members) < 2:
            continue
        chosen = best_candidate(members)
        best, beyond, p = truth_decision({c.id: truth[c.id] for c in members})
        picks[what] = chosen.id if chosen else "-"
        decisions.append(Decision(task, "heuristic", what, f"loop as run, {args.candidate_seeds} seed(s)", picks[what], best, beyond, p,
                                  args.candidate_seeds, steps, {c.id: means[c.id] for c in members}))
    gain = (gain_interval(truth[picks["best so far"]], truth[picks["round 0"]])
            if "best so far" in picks and "round 0" in picks else (float("nan"),) * 3)
    stops = []
    for c in candidates:
        if c.stopped_early is not None and c.stopped_early.leader in truth:
            leader = c.stopped_early.leader
            wrong = means[c.id] > means[leader]
            stops.append(Stop(task, c.id, leader, means[c.id], means[leader], wrong, c.stopped_early.steps or steps, steps))
    return decisions, gain, stops, len(candidates) * steps * args.candidate_seeds


@dataclass(frozen=True)
class Stop:
    """An early stop in a heuristic run, against the held-out truth of the stopped candidate and its leader."""

    task: str
    stopped: str
    leader: str
    stopped_mean: float
    leader_mean: float
    wrong: bool
    """The stopped candidate's 5-seed mean is above its leader's: at the full budget it would have won."""
    trained: int
    budget: int

    def text(self) -> str:
        return (f"{self.task} {self.stopped} stopped at {self.trained:,} of {self.budget:,} steps below {self.leader}: "
                f"held-out means {self.stopped_mean:.2f} vs {self.leader_mean:.2f} ({'WRONG' if self.wrong else 'right'})")


def agreement(decisions: Sequence[Decision], rule: str) -> str:
    mine = [d for d in decisions if d.rule == rule]
    beyond = [d for d in mine if d.beyond_noise]
    agree_beyond = sum(d.agrees for d in beyond)
    text = (f"{agree_beyond}/{len(beyond)} beyond noise"
            + (f" ({agree_beyond / len(beyond):.0%})" if beyond else "") + f"; {sum(d.agrees for d in mine)}/{len(mine)} in all")
    drawn = [d for d in mine if d.draws is not None]
    if drawn:
        def rate(found: Sequence[Decision]) -> str:
            agreed, total = (sum(d.draws[i] for d in found if d.draws) for i in (0, 1))
            return f"{agreed}/{total}" + (f" ({agreed / total:.0%})" if total else "")
        text += f"; over every draw of seeds: {rate([d for d in drawn if d.beyond_noise])} beyond noise, {rate(drawn)} in all"
    return text


def record(decisions: Sequence[Decision], path: Path, truth_seeds: int = len(TRUTH_SEEDS), max_seeds: int | None = None) -> None:
    """Merge the loop statistic's agreement (not the old rule's) per (source, task, steps, seeds) into `path`, with the
    held-out seed count of its truth; picks on more than `max_seeds` seeds are left out (a report compares S with S + 1
    seeds, so each seed count it cites should come from the same tasks)."""
    current = [d for d in decisions if not d.rule.startswith("before") and d.source != "mistakes"
               and (max_seeds is None or d.cost_seeds <= max_seeds)]
    keys = dict.fromkeys((d.source, d.task, d.steps, d.cost_seeds) for d in current)
    today = time.strftime("%Y-%m-%d", time.gmtime())
    fresh = []
    for source, task, steps, seeds in keys:
        mine = [d for d in current if (d.source, d.task, d.steps, d.cost_seeds) == (source, task, steps, seeds)]
        beyond = [d for d in mine if d.beyond_noise]
        drawn = [d.draws for d in mine if d.draws is not None]
        drawn_beyond = [d.draws for d in beyond if d.draws is not None]
        fresh.append(Agreement(source=source, task=task, steps=steps, seeds=seeds, decisions=len(mine),
                               agreed=sum(d.agrees for d in mine), beyond_noise=len(beyond),
                               agreed_beyond_noise=sum(d.agrees for d in beyond), recorded=today,
                               draws=sum(n for _, n in drawn), agreed_draws=sum(a for a, _ in drawn),
                               draws_beyond_noise=sum(n for _, n in drawn_beyond),
                               agreed_draws_beyond_noise=sum(a for a, _ in drawn_beyond), truth_seeds=truth_seeds))
    old = codec.read(AgreementFile, json.loads(path.read_text()), str(path)).measurements if path.is_file() else []
    kept = [a for a in old if (a.source, a.task, a.steps, a.seeds) not in keys]
    merged = sorted([*kept, *fresh], key=lambda a: (a.steps, a.seeds, a.source, a.task))
    entries = codec.write(AgreementFile(merged))["measurements"]  # one measurement per line: a diff shows what moved
    path.write_text('{"measurements": [\n' + ",\n".join(json.dumps(e) for e in entries) + "\n]}\n")
    print(f"\nrecorded {len(fresh)} measurement(s) in {path} ({len(merged)} in all)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=DEFAULT_TASKS)
    parser.add_argument("--sources", nargs="+", default=["pairs", "heuristic"], choices=["pairs", "mistakes", "heuristic"])
    parser.add_argument("--steps", nargs="*", default=["20000"], metavar="N|TASK=N", help="training steps per job (default 20000)")
    parser.add_argument("--max-seeds", type=int, default=3, help="loop seeds S tried for the pairs' decision (1..S; default 3)")
    parser.add_argument("--candidate-seeds", type=int, default=1, help="--candidate-seeds of the heuristic runs (default 1)")
    parser.add_argument("--samples", type=int, default=2, help="candidates per round of the heuristic runs (default 2)")
    parser.add_argument("--truth-seeds", type=int, default=len(TRUTH_SEEDS),
                        help=f"held-out seeds of the truth, from {TRUTH_SEEDS[0]} up (default {len(TRUTH_SEEDS)})")
    parser.add_argument("--workers", type=int, default=2, help="trainings at a time (default 2)")
    parser.add_argument("--hp", nargs="*", default=[], metavar="KEY=VALUE", help="hyper-parameter overrides for every training")
    parser.add_argument("--out", type=Path, default=Path("out/refinement_gain"))
    parser.add_argument("--record", nargs="?", type=Path, const=SHIPPED, default=None, metavar="FILE",
                        help="merge the agreement into FILE (default: text2reward/runs/pick_agreement.json, what reports cite)")
    parser.add_argument("--record-seeds", type=int, default=None, metavar="S",
                        help="with --record: picks on at most S seeds per candidate (default: every S measured)")
    args = parser.parse_args(argv)
    held_out = held_out_seeds(args.truth_seeds)  # a truth too short is refused before any training
    budgets = parse_steps(args.steps, dict.fromkeys(args.tasks, 20_000))
    print(f"# {len(budgets)} task(s), sources {', '.join(args.sources)}; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}", flush=True)
    started = time.perf_counter()
    decisions: list[Decision] = []
    gains: list[str] = []
    seed_rows: list[str] = []
    stops: list[Stop] = []
    budgeted = 0
    with ThreadPoolExecutor(args.workers) as pool:
        for task, steps in budgets.items():
            for source in ("pairs", "mistakes"):
                if source in args.sources:
                    found, gain, row = pair_decisions(task, steps, args, pool, source)
                    seed_rows.append(row)
                    decisions += found
                    gains.append(f"| {task} | {source}: expert rewrite - draft | {gain[0]:+.2f} [{gain[1]:+.2f}, {gain[2]:+.2f}] |")
            if "heuristic" in args.sources:
                found, gain, task_stops, task_budget = heuristic_decisions(task, steps, args, pool)
                decisions += found
                stops += task_stops
                budgeted += task_budget
                gains.append(f"| {task} | heuristic: best so far - round-0 pick | {gain[0]:+.2f} [{gain[1]:+.2f}, {gain[2]:+.2f}] |")
            print(f"# {task} done, {time.perf_counter() - started:.0f} s; load {os.getloadavg()[0]:.2f}", flush=True)
    print(f"\nbudget per training {', '.join(f'{t} {s:,}' for t, s in budgets.items())}; truth: seeds {held_out[0]}-{held_out[-1]}, "
          f"score = success-curve area + final progress (policies.score), Welch p < {ALPHA} = beyond noise\n")
    print(f"| task | source | decision | rule | pick | {len(held_out)}-seed best | held-out means | Welch p | agrees |")
    print("| --- | --- | --- | --- | --- | --- | --- | ---: | --- |")
    for d in decisions:
        means = ", ".join(f"{k} {v:.2f}" for k, v in d.means.items())
        print(f"| {d.task} | {d.source} | {d.what} | {d.rule} | {d.pick} | {d.truth_best} | {means} | {d.p_value:.3f} "
              f"| {'yes' if d.agrees else 'NO'}{'' if d.beyond_noise else ' (within noise)'} |")
    tested = {(d.task, d.source, d.what, d.steps): d for d in decisions}.values()  # one truth per decision, whatever the rule
    print(f"\n{sum(d.beyond_noise for d in tested)} of {len(tested)} decisions beyond noise; between equal rewards chance alone "
          f"calls {ALPHA * len(tested):.1f} of {len(tested)} beyond noise at p < {ALPHA}")
    print(f"\n| source | rule | seeds per candidate | agreement with the {len(held_out)}-seed ranking |")
    print("| --- | --- | ---: | --- |")
    for source in dict.fromkeys(d.source for d in decisions):  # never pooled: the mistakes are built to differ
        mine = [d for d in decisions if d.source == source]
        for rule in dict.fromkeys(d.rule for d in mine):
            print(f"| {source} | {rule} | {next(d.cost_seeds for d in mine if d.rule == rule)} | {agreement(mine, rule)} |")
    print("\n| task | gain | mean [95% interval over held-out seeds] |\n| --- | --- | --- |")
    print("\n".join(gains))
    if seed_rows:
        print("\nPairs, draft / expert rewrite mean score and Welch p on each set of seeds; then the share of pairings of one "
              "seed of each in which the draft scores higher, and how often the loop's statistic on S seeds per reward names "
              "the truth's best, both over every seed trained (the draws share seeds: a description of them)\n")
        print(f"| task | held-out {TRUTH_SEEDS[0]}-{TRUTH_SEEDS[-1]} | held-out beyond them | all held-out | loop seeds | "
              "all seeds | draft higher, one seed each | picks the truth's best, S = 1 / 2 / 3 seeds drawn from all |")
        print("| --- | --- | --- | --- | --- | --- | ---: | --- |")
        print("\n".join(seed_rows))
    if stops:
        wrong = sum(s.wrong for s in stops)
        print(f"\nEarly stops against their leaders: {wrong} of {len(stops)} wrong; they saved "
              f"{sum(s.budget - s.trained for s in stops):,} of the heuristic rounds' {budgeted:,} budgeted steps\n"
              + "\n".join(f"- {s.text()}" for s in stops))
    if args.record is not None:
        if "mistakes" in args.sources:
            print("\nthe mistakes source is not recorded: its pairs are built to differ (MISTAKES)")
        record(decisions, args.record, args.truth_seeds, args.record_seeds)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
