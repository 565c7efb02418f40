"""One round of four candidates with and without early stopping: wall time per round, and the same best?

Why: early stopping (text2reward/training/early_stop.py) is only worth having if it cuts a round's cost
without changing which reward wins. The four candidates are fixed programs, so both arms train exactly the
same rewards on the same seed: the expert reward's rewrite, two weak variants of it (its reach term only;
its in-place term only, the drawer's progress without the reach term), and the rule-based heuristic backend's program. Each arm is a
real `t2r run` round (`--llm file`, screening off, no video, no final stage); arms alternate (off, on, off,
on, ...) so that load on a shared machine falls on both.

    python benchmarks/round_cost.py                                  # drawer-close, 8k steps, W=2, 1 repeat: ~25 min on 2 cores
    python benchmarks/round_cost.py --steps 4000 --repeats 2
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

from policies.hyperparams import load_hyperparams
from sim_envs import get_task
from text2reward import RewardSearch
from text2reward.generation.llm.heuristic import compose
from text2reward.runs.ranking import best_candidate
from text2reward.runs.records import PromptContext
from text2reward.runs.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
TASK = "metaworld/drawer-close-v3"


def expert_program() -> str:
    return (ROOT / "prompts" / "examples" / "metaworld__drawer-close-v3.py").read_text()


def weakened(program: str, keep: str) -> str:
    """The expert rewrite with its total replaced by one of its terms (`keep`: a local name in the function)."""
    body, count = re.subn(r"\n    return (?!.*\n    return )(.*)$", f"\n    return float({keep}), {{\"{keep}\": float({keep})}}\n",
                          program.rstrip(), flags=re.S)
    if count != 1:
        raise SystemExit("the drawer-close expert rewrite changed shape: update weakened()")
    return body


def candidate_replies(directory: Path) -> list[Path]:
    """Four replies as a person would paste them: expert, reach-only, in-place-only, heuristic."""
    expert = expert_program()
    heuristic, _ = compose(get_task(TASK), seed=0, round_index=0, index=0, n=1, temperature=0.0, context=PromptContext())
    programs = {"expert": expert, "reach_only": weakened(expert, "reach"), "in_place_only": weakened(expert, "in_place"), "heuristic": heuristic}
    paths = []
    for name, program in programs.items():
        path = directory / f"{name}.md"
        path.write_text(f"Candidate `{name}`.\n\n```python\n{program}\n```\n")
        paths.append(path)
    return paths


def run_arm(early_stop: bool, replies: list[Path], steps: int, workers: int, runs_dir: Path, threshold: float) -> tuple[RunStore, float]:
    search = RewardSearch(TASK, backend="file", reply_files=[str(p) for p in replies], rounds=1, samples=len(replies),
                          steps=steps, workers=workers, screen=False, fix_attempts=0, video=False, final_seeds=0,
                          compare_expert=False, early_stop=early_stop, success_threshold=threshold, runs_dir=runs_dir,
                          callbacks=[lambda event: print(f"  [early_stop={early_stop}] {event.text}", flush=True) if event.text else None])
    start = time.perf_counter()
    result = search.run()
    return RunStore(result.run_dir), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=8000, help="training steps per candidate (default 8000)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1, help="pairs of arms (off, on), alternating")
    parser.add_argument("--success-threshold", type=float, default=0.9,
                        help="the run's threshold: with early stopping a candidate stops on reaching it (default 0.9, "
                             "as `t2r run`; above 1 leaves only the rung rule)")
    parser.add_argument("--runs-dir", default=None, help="where the runs go (default: a temporary folder)")
    args = parser.parse_args()
    runs_dir = Path(args.runs_dir or tempfile.mkdtemp(prefix="round_cost_"))
    replies = candidate_replies(Path(tempfile.mkdtemp(prefix="round_cost_replies_")))
    print(f"{TASK}: 4 candidates x {args.steps} steps, W={args.workers}, "
          f"eval every {load_hyperparams('metaworld').eval_freq} steps; runs in {runs_dir}")
    rows = []
    for repeat in range(args.repeats):
        for early_stop in (False, True):
            store, wall = run_arm(early_stop, replies, args.steps, args.workers, runs_dir, args.success_threshold)
            candidates = store.candidates()
            best = best_candidate(candidates)
            stopped = [f"{c.id}@{c.stopped_early.steps}" for c in candidates if c.stopped_early is not None]
            steps = sum(c.training.steps for c in candidates if c.training is not None)
            rows.append((repeat, early_stop, wall, steps, best.id if best else "-",
                         ", ".join(f"{c.id} {c.success:.1f}" for c in candidates if c.training is not None),
                         ", ".join(stopped) or "-"))
    print("\n| repeat | early stopping | wall s | env steps trained | best | final success per candidate | stopped |")
    print("| ---: | --- | ---: | ---: | --- | --- | --- |")
    for repeat, early_stop, wall, steps, best, successes, stopped in rows:
        print(f"| {repeat} | {'on' if early_stop else 'off'} | {wall:.0f} | {steps:,} | {best} | {successes} | {stopped} |")
    for repeat in range(args.repeats):
        off, on = rows[2 * repeat], rows[2 * repeat + 1]
        print(f"repeat {repeat}: wall off/on = {off[2] / max(on[2], 1e-9):.2f}x, same best: {off[4] == on[4]}")


if __name__ == "__main__":
    main()
