"""Feedback fidelity (issue 29): is what the loop tells the model true, and does the loop pick the right candidate?

Two halves, each a function of its own (run both, or one with --part):
  facts            the share of stated facts in scale hints, scene features and trajectory analyses that match ground
                   truth: each scale hint bound and each fixed feature's stated size and place (seeds 0..7, first
                   observed state), each analysis fact (where the object ended relative to those features included) of a random
                   rollout and, where the task has one, a scripted rollout (full episodes), and per rollout the
                   first view's tracked points and each `init_position`, against a recomputation from the raw
                   MuJoCo state (sim_envs.ground_truth: fresh kinematics from qpos, points read off named
                   elements); target 100%. `--before OLD_HINTS.json` also scores an older hints file.
  rank_agreement   how often the loop's best-of-K choice, made on an n-episode final evaluation, agrees with a
                   50-episode re-evaluation of the same checkpoints (its own section below, `rank_agreement`);
                   for n = 5 to 50, which chose the final evaluation's 30 episodes (Hyperparams.final_eval_episodes)

    python benchmarks/feedback_fidelity.py --part facts [--tasks ID ...] [--random-steps 200]   # ~3 min on 2 cores
    python benchmarks/feedback_fidelity.py --part rank_agreement [--rank-task fetch/reach --rank-steps 6000]   # ~5 min
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from policies.reward_program import SparseReward  # noqa: E402
from policies.task_env import make_task_env  # noqa: E402
from sim_envs.ground_truth import Recomputer, Rollout, record, snapshot, tolerance, true_facts, true_points, true_scene  # noqa: E402
from sim_envs.object_facts import tracked_points  # noqa: E402
from sim_envs.registry import get_task, list_tasks  # noqa: E402
from sim_envs.scale_hints import RESETS, scale_hints  # noqa: E402
from sim_envs.scene_features import scene_facts  # noqa: E402
from sim_envs.task import Task  # noqa: E402
from text2reward.feedback.trajectory import FELL_M, LIFTED_M, MOVED_M, NEAR_M, PROGRESS_M, direction_facts, episode_facts  # noqa: E402

THRESHOLDS = {"MOVED_M": MOVED_M, "LIFTED_M": LIFTED_M, "NEAR_M": NEAR_M, "FELL_M": FELL_M, "PROGRESS_M": PROGRESS_M}
UNCHECKED_PREFIX = "foot_"
"""Ant's foot heights: the view's own capsule-tip geometry, which no recomputation here covers (counted apart)."""


@dataclass
class Score:
    """Stated facts of one task: how many, how many true, which were false, how many no check covers."""

    stated: int = 0
    true: int = 0
    unchecked: int = 0
    false: list[str] = field(default_factory=list)
    largest_gap_m: float = 0.0

    def add(self, ok: bool, what: str, gap: float = 0.0) -> None:
        self.stated += 1
        self.true += ok
        self.largest_gap_m = max(self.largest_gap_m, gap)
        if not ok:
            self.false.append(what)


def _path(view: object, dotted: str) -> object:
    for part in dotted.split("."):
        view = getattr(view, part)
    return view


def _env(task: Task):
    return make_task_env(task, SparseReward(), seed=0)


def first_state_distances(task: Task) -> dict[str, list[float]]:
    """{label: distances} in the first state of seeds 0..RESETS-1, recomputed from raw MuJoCo state where the
    label's points have a recomputation (else read through the view)."""
    env = _env(task)
    try:
        firsts = [record(env, lambda obs: None, seed=seed, steps=0) for seed in range(RESETS)]
    finally:
        env.close()
    recomputer = Recomputer(firsts[0].model)
    out: dict[str, list[float]] = {}
    for label, a, b in task.scale_points:
        for rollout in firsts:
            points, view = true_points(task, recomputer, rollout.states[0]), rollout.views[0]
            first, second = points.get(a, _path(view, a)), points.get(b, _path(view, b))
            out.setdefault(label, []).append(float(np.linalg.norm(np.asarray(first) - np.asarray(second))))
    return out


def score_hints(task: Task, hints: dict[str, list[float]], score: Score) -> None:
    """Each stated bound against the recomputed minimum or maximum (to the file's 1 mm rounding)."""
    if not hints:
        return
    truth = first_state_distances(task)
    for label, (low, high) in hints.items():
        if label not in truth:
            score.add(False, f"hint {label}: no such point pair")
            continue
        for bound, value in (("min", low), ("max", high)):
            true = min(truth[label]) if bound == "min" else max(truth[label])
            gap = abs(value - true)
            score.add(gap <= 0.0006 + tolerance(task), f"{task.id} hint {label} {bound}: stated {value}, true {true:.4f}", gap)


def score_rollout(task: Task, rollout: Rollout, score: Score) -> None:
    """Every analysis fact, the first view's tracked points and each `init_position` of one rollout."""
    stated, truth = episode_facts(rollout.views, rollout.scene), true_facts(task, rollout, THRESHOLDS)
    stated |= direction_facts(stated)  # the signs the contrast counts per episode
    for key, value in stated.items():
        if key.startswith(UNCHECKED_PREFIX):
            score.unchecked += 1
        elif key not in truth:
            score.add(False, f"{key}: not recomputed")
        elif isinstance(value, bool):
            score.add(value == truth[key], f"{key}: stated {value}, true {truth[key]}")
        else:
            gap = abs(value - float(truth[key]))
            score.add(gap <= tolerance(task), f"{key}: stated {value:.4f}, true {float(truth[key]):.4f}", gap if key != "steps" else 0.0)
    first = true_points(task, Recomputer(rollout.model), rollout.states[0])
    for path, true in first.items():
        if path.startswith("torso.") or path == "goal_position":
            continue
        gap = float(np.linalg.norm(np.asarray(_path(rollout.views[0], path)) - true))
        score.add(gap <= tolerance(task), f"first-state {path}: {gap:.4f} m off", gap)
    for field_name in tracked_points(task.id):
        init = np.asarray(_path(rollout.views[0], f"{field_name}.init_position"))
        gap = float(np.linalg.norm(init - first[f"{field_name}.position"]))
        score.add(gap <= tolerance(task), f"{field_name}.init_position: {gap:.4f} m from the tracked start", gap)


def score_scene(task: Task, score: Score) -> None:
    """Each fixed feature the prompt states (sim_envs.scene_features: half-sizes, a fixed centre, a centre at an
    offset from the goal or the object's start, or a range, and a walled feature's open sides) against the feature recomputed from the raw state of
    seeds 0..7's first state (fresh kinematics), to the stated 1 mm rounding."""
    stated = scene_facts(task)
    if not stated:
        return
    env = _env(task)
    try:
        firsts = []
        for seed in range(RESETS):
            env.reset(seed=seed)
            firsts.append((snapshot(env.unwrapped), env.get_wrapper_attr("view")))
    finally:
        env.close()
    recomputer = Recomputer(env.unwrapped.model)
    slack = 0.0006 + tolerance(task)
    for state, view in firsts:
        truth = {f.name: f for f in true_scene(task, recomputer, state)}
        for fact in stated:
            feature, placement = truth[fact["name"]], fact["placement"]
            centre = np.asarray(feature.centre)
            gap = float(np.abs(np.asarray(fact["half_size"]) - np.asarray(feature.half_size)).max())
            score.add(gap <= slack, f"{task.id} {fact['name']} half-sizes: stated {fact['half_size']}, true {feature.half_size}", gap)
            if "fixed" in placement:
                gap = float(np.abs(np.asarray(placement["fixed"]) - centre).max())
            elif "anchor" in placement:
                anchor = state.goal if placement["anchor"] == "goal_position" and state.goal is not None else _path(view, placement["anchor"])
                gap = float(np.abs(np.asarray(anchor) + np.asarray(placement["offset"]) - centre).max())
            else:
                gap = float(max(np.max(np.asarray(placement["low"]) - centre), np.max(centre - np.asarray(placement["high"])), 0.0))
            score.add(gap <= slack, f"{task.id} {fact['name']} centre: {gap:.4f} m from where the prompt puts it", gap)
            if "open" in fact:
                score.add(set(fact["open"]) == set(feature.open_sides),
                          f"{task.id} {fact['name']} open sides: stated {fact['open']}, true {list(feature.open_sides)}")


def score_task(task: Task, random_steps: int, hints: dict[str, list[float]]) -> Score:
    score = Score()
    score_hints(task, hints, score)
    score_scene(task, score)
    env = _env(task)
    env.action_space.seed(0)
    try:
        rollouts = [record(env, lambda obs: env.action_space.sample(), seed=100, steps=random_steps)]
        if task.has_scripted_policy:
            rollouts.append(record(env, task.scripted_policy(), seed=101, steps=task.max_episode_steps))
    finally:
        env.close()
    for rollout in rollouts:
        score_rollout(task, rollout, score)
    return score


# --------------------------------------------------------------------------- rank agreement (the other half)
#
# How often the loop's best-of-K choice, made on an n-episode final evaluation, agrees with a 50-episode
# re-evaluation of the same checkpoints on other reset seeds; for n = 5 (the old final evaluation) up to 50, which
# chose Hyperparams.final_eval_episodes. The pool: SBX-SAC trained with the task's expert reward on a few seeds
# for a tiny budget, a checkpoint every `--rank-checkpoint-freq` steps; each checkpoint is a candidate policy
# (successes spread from 0 to 1, as a round's candidates are). Each checkpoint plays 50 episodes on the loop's
# evaluation seeds (seed + 10,000 + i, where policies.train evaluates) and 50 on others (the truth: 50,000 + i).
# A round is K checkpoints (up to `ROUNDS` random K-subsets of the pool); the loop's choice is
# text2reward.runs.ranking.rank on n of the loop's episodes (random n-subsets, `RESAMPLES` per round), the truth
# is the 50-episode re-evaluation's best. Reported per n and K:
#   strict   the choice is a 50-episode best (a tie at the top of the re-evaluation counts for each tied one)
#   noise    the choice ties with the 50-episode best (95% Wilson intervals overlap at 50 episodes): the
#            re-evaluation itself cannot tell them apart
#   regret   the 50-episode best's success minus the choice's, averaged
# Cost: n episodes' wall time as a share of a default-budget training run's, both measured on this pool.
#
#   python benchmarks/feedback_fidelity.py --part rank_agreement --rank-task fetch/reach --rank-steps 6000   # minutes

LOOP_SEED = 10_000
TRUTH_SEED = 50_000
TRUTH_EPISODES = 50
BUDGETS = (5, 10, 20, 30, 50)
KS = (2, 3, 4)
RESAMPLES = 50
ROUNDS = 300


def _train_pool_member(task_id: str, seed: int, steps: int, checkpoint_freq: int, out: str) -> dict:
    from policies.config import TrainConfig
    from policies.train import train

    result = train(TrainConfig(task_id=task_id, out_dir=Path(out), reward="expert", seed=seed, steps=steps, eval_freq=steps,
                               eval_episodes=1, overrides={"checkpoint_freq": checkpoint_freq, "final_eval_episodes": 1}))
    return {"seed": seed, "wall_seconds": result.wall_seconds, "steps": result.steps, "algo": result.algo}


def _evaluate_checkpoint(task_id: str, algo: str, path: str, loop_episodes: int) -> dict:
    from policies.algorithms import algorithm_class
    from policies.evaluate import evaluate, model_actor
    from policies.reward_program import reward_from_spec

    task = get_task(task_id)
    model = algorithm_class(algo).load(path, device="cpu")
    env = make_task_env(task, reward_from_spec("expert"), seed=LOOP_SEED)  # as training's evaluations: the sandbox's cost aside
    start = time.perf_counter()
    loop = evaluate(env, model_actor(model), loop_episodes, seed=LOOP_SEED)
    truth = evaluate(env, model_actor(model), TRUTH_EPISODES, seed=TRUTH_SEED)
    wall = time.perf_counter() - start
    env.close()
    return {"path": path, "loop": [e.success for e in loop.episodes], "loop_native": [e.native_return for e in loop.episodes],
            "truth": [e.success for e in truth.episodes], "seconds_per_episode": wall / (loop_episodes + TRUTH_EPISODES)}


def _candidate_record(i: int, successes: list[bool], native: list[float]) -> dict:
    """A trained candidate record as the loop writes it, for runs.ranking (no curve: a checkpoint has none)."""
    n = len(successes)
    return {"id": f"c{i}", "round": 0, "sample": i, "status": "trained",
            "training": {"success_rate": sum(successes) / n, "episodes": n, "mean_native_return": sum(native) / n, "curve": []}}


def choice_agreement(checkpoints: list[dict], k: int, n: int, rng: random.Random) -> dict[str, float]:
    """strict / noise agreement and mean regret of the n-episode best-of-k choice against the 50-episode truth."""
    from policies.stats import Rate
    from text2reward.runs.ranking import rank

    truth = [sum(c["truth"]) / len(c["truth"]) for c in checkpoints]
    groups = list(itertools.combinations(range(len(checkpoints)), k))
    rng.shuffle(groups)
    strict = noise = total = 0
    regret = 0.0
    for group in groups[:ROUNDS]:
        top = max(truth[i] for i in group)
        for _ in range(1 if n == len(checkpoints[0]["loop"]) else RESAMPLES):
            records = []
            for i in group:
                picks = rng.sample(range(len(checkpoints[i]["loop"])), n)
                records.append(_candidate_record(i, [checkpoints[i]["loop"][j] for j in picks],
                                                 [checkpoints[i]["loop_native"][j] for j in picks]))
            chosen = int(rank(records)[0].id[1:])
            total += 1
            strict += truth[chosen] == top
            noise += Rate.of(truth[chosen], TRUTH_EPISODES).ties(Rate.of(top, TRUTH_EPISODES))
            regret += top - truth[chosen]
    return {"strict": strict / total, "noise": noise / total, "regret": regret / total, "trials": total}


def measure_rank_agreement(task_id: str, seeds: int, steps: int, checkpoint_freq: int, jobs: int, out: Path) -> dict:
    """Train the pool (or read it from `out`), evaluate every checkpoint, measure agreement per budget and K."""
    out.mkdir(parents=True, exist_ok=True)
    cache = out / f"rank_{task_id.replace('/', '_')}_{seeds}x{steps}_every{checkpoint_freq}.json"
    if cache.is_file():
        data = json.loads(cache.read_text())
    else:
        dirs = [out / f"{task_id.replace('/', '_')}_seed{s}" for s in range(seeds)]
        with ProcessPoolExecutor(jobs) as pool:
            runs = list(pool.map(_train_pool_member, [task_id] * seeds, range(seeds), [steps] * seeds,
                                 [checkpoint_freq] * seeds, [str(d) for d in dirs]))
            paths = sorted(str(p) for d in dirs for p in (d / "checkpoints").glob("*.zip"))
            checkpoints = list(pool.map(_evaluate_checkpoint, [task_id] * len(paths), [runs[0]["algo"]] * len(paths), paths,
                                        [max(BUDGETS)] * len(paths)))
        data = {"task": task_id, "runs": runs, "checkpoints": checkpoints}
        cache.write_text(json.dumps(data))
    checkpoints = data["checkpoints"]
    rng = random.Random(0)
    return {
        "task": task_id, "checkpoints": len(checkpoints), "pool": f"{seeds} seeds x {steps} steps, a checkpoint every {checkpoint_freq}",
        "truth_success": sorted(round(sum(c["truth"]) / TRUTH_EPISODES, 2) for c in checkpoints),
        "seconds_per_episode": sum(c["seconds_per_episode"] for c in checkpoints) / len(checkpoints),
        "train_seconds_per_step": sum(r["wall_seconds"] for r in data["runs"]) / sum(r["steps"] for r in data["runs"]),
        "agreement": {str(k): {str(n): choice_agreement(checkpoints, k, n, rng) for n in BUDGETS} for k in KS},
    }


def rank_agreement(args: argparse.Namespace) -> None:
    """The second half (issue 29, item 5): agreement of the loop's n-episode best-of-K choice with a 50-episode
    re-evaluation of the same checkpoints; a table per n and K, the cost of n episodes against a training run."""
    report = measure_rank_agreement(args.rank_task, args.rank_seeds, args.rank_steps, args.rank_checkpoint_freq, args.jobs, args.out)
    (args.out / "rank_agreement.json").write_text(json.dumps(report, indent=1))
    default_steps = get_task(args.rank_task).default_steps
    per_run = report["train_seconds_per_step"] * default_steps
    print(f"\nrank agreement, {report['task']}: {report['checkpoints']} checkpoints ({report['pool']}), 50-episode success "
          f"{report['truth_success']}")
    print(f"one evaluation episode {report['seconds_per_episode']:.3f} s; a {default_steps:,}-step training run {per_run:.0f} s")
    print("| K | n | strict | within noise | mean regret | n episodes / a training run |")
    print("| --- | --- | --- | --- | --- | --- |")
    for k, row in report["agreement"].items():
        for n, v in row.items():
            print(f"| {k} | {n} | {v['strict']:.2f} | {v['noise']:.2f} | {v['regret']:.3f} | "
                  f"{int(n) * report['seconds_per_episode'] / per_run:.1%} |")


# --------------------------------------------------------------------------- main


def _table(scores: dict[str, Score]) -> list[str]:
    lines = ["| family | tasks | stated facts | true | share | unchecked | largest gap (m) |", "| --- | --- | --- | --- | --- | --- | --- |"]
    families: dict[str, list[str]] = {}
    for task_id in scores:
        families.setdefault(task_id.split("/")[0] if not task_id.startswith(("hopper", "halfcheetah", "walker2d", "ant"))
                            else "locomotion", []).append(task_id)
    total = Score()
    for family, ids in families.items():
        stated = sum(scores[i].stated for i in ids)
        true = sum(scores[i].true for i in ids)
        unchecked = sum(scores[i].unchecked for i in ids)
        gap = max(scores[i].largest_gap_m for i in ids)
        total.stated, total.true, total.unchecked = total.stated + stated, total.true + true, total.unchecked + unchecked
        total.largest_gap_m = max(total.largest_gap_m, gap)
        lines.append(f"| {family} | {len(ids)} | {stated} | {true} | {100 * true / max(stated, 1):.1f}% | {unchecked} | {gap:.4f} |")
    lines.append(f"| all | {len(scores)} | {total.stated} | {total.true} | {100 * total.true / max(total.stated, 1):.1f}% | "
                 f"{total.unchecked} | {total.largest_gap_m:.4f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--part", choices=("facts", "rank_agreement", "all"), default="all")
    parser.add_argument("--tasks", nargs="*", help="task ids (default: every built-in task)")
    parser.add_argument("--random-steps", type=int, default=200, help="steps of the random rollout (capped by the episode)")
    parser.add_argument("--before", type=Path, help="an older scale_hints.json to score beside the shipped one")
    parser.add_argument("--rank-task", default="fetch/reach", help="rank agreement: the task of the checkpoint pool")
    parser.add_argument("--rank-seeds", type=int, default=3, help="rank agreement: training seeds in the pool")
    parser.add_argument("--rank-steps", type=int, default=6000, help="rank agreement: steps per pool training")
    parser.add_argument("--rank-checkpoint-freq", type=int, default=1000, help="rank agreement: steps between checkpoints")
    parser.add_argument("--jobs", type=int, default=2, help="rank agreement: worker processes")
    parser.add_argument("--out", type=Path, default=Path("out/feedback_fidelity"), help="rank agreement: pool and results")
    args = parser.parse_args()
    if args.part in ("facts", "all"):
        facts(args)
    if args.part in ("rank_agreement", "all"):
        rank_agreement(args)


def facts(args: argparse.Namespace) -> None:
    """The facts half: a table per family, each false fact, and (with --before) an older hints file's score."""
    tasks = [get_task(t) for t in args.tasks] if args.tasks else list_tasks()
    started = time.perf_counter()
    scores = {task.id: score_task(task, args.random_steps, scale_hints(task)) for task in tasks}
    print("\n".join(_table(scores)))
    for task_id, score in scores.items():
        for what in score.false:
            print(f"FALSE {task_id}: {what}")
    if args.before is not None:
        old = json.loads(args.before.read_text())
        before = Score()
        for task in tasks:
            if task.id in old:
                score_hints(task, old[task.id], before)
        print(f"\nscale hints in {args.before}: {before.true} of {before.stated} bounds true "
              f"({100 * before.true / max(before.stated, 1):.1f}%)")
        for what in before.false:
            print(f"  was false: {what}")
    print(f"\n{len(tasks)} tasks in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
