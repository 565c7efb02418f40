"""Validate a reward you wrote, then train a policy on it: both in the sandbox's jail, as `t2r validate` and
`t2r train --reward` do.

    python examples/validate_and_train.py                 # the reward below, on metaworld/reach-v3, 20,000 steps
    python examples/validate_and_train.py --steps 2000    # a smoke test
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from text2reward import train_reward, validate_reward

REWARD = '''import numpy as np


def compute_dense_reward(self, action):
    distance = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    reach = float(np.exp(-10.0 * distance))
    control = 0.01 * float(np.sum(np.square(action)))
    return reach - control, {"reach": reach, "control": -control}
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="metaworld/reach-v3")
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--out", default=None, help="where the training writes (default: a temporary folder)")
    args = parser.parse_args()

    report = validate_reward(REWARD, args.task)
    print(f"validation: {'ok' if report.ok else 'rejected'} ({report.isolation})")
    for name, check in report.checks.items():
        print(f"  {name}: {check.get('detail')}")
    if not report.ok:
        raise SystemExit("\n".join(report.errors))

    out = Path(args.out or tempfile.mkdtemp(prefix="t2r-train-"))
    reward_file = out / "reward.py"
    reward_file.parent.mkdir(parents=True, exist_ok=True)
    reward_file.write_text(REWARD)
    result = train_reward(reward_file, args.task, steps=args.steps, out_dir=out / "train")
    print(f"success {result.success_rate:.2f} after {result.steps} steps ({result.reward_isolation}); result in {out / 'train'}")


if __name__ == "__main__":
    main()
