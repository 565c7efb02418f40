"""`t2r runs show` gives every success with its episode count and 95% interval (issue 40, "Around it"): never a bare
rate such as "best success 0.06666666666666667" or "0.07" that hides how many episodes it rests on."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).parents[1] / "fixtures" / "runs_v1"
RUN_ID = "20261123-133612-fetch-reach-e552a4"


def _edit(path: Path, change) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def test_runs_show_states_success_with_episodes_and_interval(tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURE, runs)
    root = runs / RUN_ID

    def two_of_thirty(record):
        record["training"].update(success_rate=2 / 30, episodes=30)

    def final_two_of_thirty(record):
        record["best"].update(success_rates=[2 / 30], episodes=[30], mean=2 / 30)

    _edit(root / "rounds/r0/s0/candidate.json", two_of_thirty)
    _edit(root / "final/summary.json", final_two_of_thirty)
    shown = subprocess.run([sys.executable, "-m", "text2reward.cli", "runs", "show", RUN_ID, "--runs-dir", str(runs)],
                           capture_output=True, text=True, timeout=300, env={"COLUMNS": "250", **_environ()})
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "0.07 (2 of 30 episodes, 95% interval 0.02-0.21)" in text, text  # the round's best, in the table
    assert "final best: success 0.07 (2 of 30 episodes, 95% interval 0.02-0.21) pooled over seeds [1]" in text, text
    assert "0.0666" not in text


def _environ() -> dict[str, str]:
    import os

    return dict(os.environ)


def test_the_runs_list_states_success_with_episodes_and_interval():
    from policies.formatting import compact_success

    assert compact_success(2 / 30, 30) == "0.07 (2/30, 0.02-0.21)"
    assert compact_success(0.5, None) == "0.50"  # an index row from before episodes were kept
