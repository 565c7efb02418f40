"""Validation's time check on a busy machine: the rule it uses against the mean it used before, on the same runs.

Why: a trivial reward (~40 µs a call) once failed the 2 ms check in CI. Blocked time is what is left of a call's
wall clock once the kernel's CPU and run-queue times are taken out. Validation pipelines its calls. When this
process reads replies late (a collection of a big heap, a virtual CPU the host took away), the reward waits idle on
its pipe, and the wait lands on one call. This script validates a trivial reward with this process on time and then
paused while decoding a few replies. For each run it prints both rules: the old mean of CPU + blocked, and the
current mean CPU + median blocked (`validation.smoke_checks`). Then a scipy reward on a few states, timed on the
first pass over them (cold: scipy builds what it needs on the first call) and on the second (warm, what validation
judges since a CI run failed this reward at 2,565 µs a call on 12 states).

    python benchmarks/validation_time_check.py                      # ~10 s
    python benchmarks/validation_time_check.py --pauses 3 --pause-seconds 0.2 --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import time

from sim_envs import get_task
from text2reward.sandbox import Limits, collect_states, run_reward
from text2reward.sandbox.process import ReplyDecoder
from text2reward.sandbox.validation import smoke_checks

TRIVIAL = "def compute_dense_reward(self, action):\n    return float(self.robot.ee_position[0])\n"
SCIPY = """
import numpy as np
from scipy.spatial import distance
from scipy.spatial.transform import Rotation
from scipy.special import expit

def compute_dense_reward(self, action):
    d = float(distance.euclidean(self.robot.ee_position, self.goal_position))
    turned = Rotation.from_euler("z", 90, degrees=True).apply(np.array(self.robot.ee_position))
    return -d, {"d": d, "turned_y": float(turned[1]), "squashed": float(expit(-d))}
"""


def paused_decoder(pauses: int, seconds: float, calls: int) -> type[ReplyDecoder]:
    """A reply decoder that sleeps `seconds` before `pauses` evenly spaced replies of each pass of `calls`."""
    every = calls // (pauses + 1)
    decode = ReplyDecoder.decode

    class Paused(ReplyDecoder):
        replies = 0

        def decode(self, raw: bytes):  # type: ignore[no-untyped-def]
            Paused.replies += 1
            if pauses and Paused.replies % calls in {every * (k + 1) for k in range(pauses)}:
                time.sleep(seconds)
            return decode(self, raw)

    return Paused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="metaworld/reach-v3")
    parser.add_argument("--pauses", type=int, default=3, help="late replies per pass")
    parser.add_argument("--pause-seconds", type=float, default=0.2)
    parser.add_argument("--runs", type=int, default=3, help="validations per row")
    args = parser.parse_args()
    from text2reward.sandbox import runner

    states = collect_states(get_task(args.task))
    limits = Limits()
    print("| parent | before: mean CPU + blocked, µs | now: mean CPU + median blocked, µs (CPU + blocked) | verdict now |")
    print("| --- | ---: | ---: | --- |")
    for label, pauses in (("on time", 0), (f"paused {args.pause_seconds:g} s on {args.pauses} of {len(states)} replies", args.pauses)):
        before, now, verdicts = [], [], []
        original = runner.ReplyDecoder
        runner.ReplyDecoder = paused_decoder(pauses, args.pause_seconds, len(states))  # type: ignore[misc]
        try:
            for _ in range(args.runs):
                result = run_reward(TRIVIAL, states, limits, repeats=2)
                assert result.ok, result.error
                check = smoke_checks(result, limits)["time_per_call"]
                before.append(f"{statistics.fmean(c.cpu + c.blocked for c in result.seconds) * 1e6:,.0f}")
                now.append(f"{check['us_per_call']:,.0f} ({check['cpu_mean_us']:.0f} + {check['blocked_median_us']:.0f})")
                verdicts.append("pass" if check["ok"] else "FAIL")
        finally:
            runner.ReplyDecoder = original  # type: ignore[misc]
        print(f"| {label} | {' / '.join(before)} | {' / '.join(now)} | {' / '.join(verdicts)} |")
    first_call(states[:12], limits, args.runs)


def first_call(states: list, limits: Limits, runs: int) -> None:
    """The scipy reward's time per call judged on the first pass (repeats=1) and on the second (validation's)."""
    print(f"\n| scipy reward, {len(states)} states | first pass (cold), µs per call | second pass (judged), µs per call |")
    print("| --- | ---: | ---: |")
    for _ in range(runs):
        cold_run = run_reward(SCIPY, states, limits, repeats=1)
        cold = smoke_checks(cold_run, limits)["time_per_call"]
        warm = smoke_checks(run_reward(SCIPY, states, limits, repeats=2), limits)["time_per_call"]
        print(f"| run | {cold['us_per_call']:,.0f} (its first call: {cold_run.seconds[0].cpu * 1e6:,.0f} CPU) | "
              f"{warm['us_per_call']:,.0f} |")


if __name__ == "__main__":
    main()
