"""Search for a reward from Python: the front door `t2r run` uses, with a callback that watches the run.

    python examples/search_reward.py                              # fetch/reach, the rule-based heuristic backend, offline
    python examples/search_reward.py --task metaworld/drawer-open-v3 --backend openai --model gpt-4o --steps 20000

Every `RunConfig` setting is a keyword of `RewardSearch` (rounds, samples, steps, workers, model, base_url, few_shot,
reward_mode, executor, ...); each is checked before a run folder exists.
"""

from __future__ import annotations

import argparse

from text2reward import RewardSearch, SearchCallback
from text2reward.runs.run_events import CandidateStoppedEarly, CandidateTrained, Evaluation, RoundDone


class Watch(SearchCallback):
    """Prints what a program watching a run would read: evaluations as they come, each candidate's outcome, rounds."""

    def on_evaluation(self, event: Evaluation) -> None:
        print(f"  {event.job}: {event.steps} steps, success {event.success_rate:.2f} over {event.episodes} episodes")

    def on_candidate_trained(self, event: CandidateTrained) -> None:
        candidate = event.candidate
        print(f"  {candidate.id} {candidate.status.value}: success {candidate.success:.2f}")

    def on_stopped_early(self, event: CandidateStoppedEarly) -> None:
        print(f"  {event.candidate.id} stopped early: {event.candidate.stopped_early}")

    def on_round_done(self, event: RoundDone) -> None:
        success = "-" if event.summary.best_success is None else f"{event.summary.best_success:.2f}"
        print(f"round {event.summary.round}: best {event.summary.best} (success {success})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="fetch/reach")
    parser.add_argument("--backend", default="heuristic", help="heuristic (rule-based, offline), openai or file")
    parser.add_argument("--model", default=None)
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8000, help="training steps per candidate")
    parser.add_argument("--final-seeds", type=int, default=1)
    parser.add_argument("--runs-dir", default="runs")
    args = parser.parse_args()

    search = RewardSearch(args.task, backend=args.backend, model=args.model, base_url=args.base_url, rounds=args.rounds,
                          samples=args.samples, steps=args.steps, final_seeds=args.final_seeds, runs_dir=args.runs_dir,
                          callbacks=[Watch()])
    result = search.run()
    print(f"run {result.run_id}: {result.status.value} in {result.run_dir}")
    if result.best is None:
        print(f"no reward trained: {result.reason}")
        raise SystemExit(1)
    low, high = result.best.interval
    print(f"best reward {result.best.id} by {result.best.author}: success {result.best.success_rate:.2f} "
          f"({round(result.best.success_rate * result.best.episodes)} of {result.best.episodes} episodes, 95% interval "
          f"{low:.2f}-{high:.2f}), code in {result.best.file}")
    for kind, arm in result.comparison.arms() if result.comparison else []:
        mean = "-" if arm.mean is None else f"{arm.mean:.2f} +/- {arm.std or 0:.2f}"
        print(f"final comparison, {kind} reward: mean success {mean} over seeds {arm.seeds}")


if __name__ == "__main__":
    main()
