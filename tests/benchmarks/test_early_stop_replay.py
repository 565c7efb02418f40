"""benchmarks/early_stop_replay.py: the loop's early stopper replayed on full-budget curves, and a stop counted wrong
when the stopped training would have ranked above its leader at the full budget."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from policies.stats import Rate
from text2reward.training.early_stop import EarlyStopRule

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def replay():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("early_stop_replay")
    finally:
        sys.path.remove(str(BENCHMARKS))


def curve(rates: list[float]) -> list[dict]:
    return [{"steps": 2000 * (i + 1), "success_rate": r, "episodes": 5, "mean_native_return": 0.0, "mean_progress": r}
            for i, r in enumerate(rates)]


LATE = curve([0.0, 0.0, 0.0, 0.0, 0.8, 1.0, 1.0, 1.0, 1.0, 1.0])
"""Nothing for a quarter of the budget, then it learns: ends at 28 of 30."""
EARLY = curve([0.6, 0.8, 0.8, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6])
"""Succeeds at once, and stays at 0.6: ends at 18 of 30."""


def write(out: Path, reward: str, seed: int, points: list[dict], final: float) -> None:
    folder = out / "metaworld__reach-v3" / reward / f"seed{seed}-20000"
    folder.mkdir(parents=True)
    result = {"task": "metaworld/reach-v3", "success_rate": final, "steps": 20000, "curve": points, "eval_freq": 2000,
              "eval_episodes": 5, "final_eval_episodes": 30, "mean_native_return": 0.0, "mean_progress": final, "progress_se": 0.0}
    (folder / "result.json").write_text(json.dumps(result))


def test_a_late_starter_stopped_at_a_quarter_rung_is_a_wrong_stop_the_default_half_rung_avoids(replay, tmp_path):
    write(tmp_path, "late-00000000", 0, LATE, final=28 / 30)
    write(tmp_path, "early-11111111", 0, EARLY, final=18 / 30)
    write(tmp_path, "early-11111111", 1, EARLY, final=18 / 30)
    (tmp_path / "metaworld__reach-v3" / "late-00000000" / "seed1-20000").mkdir()  # unfinished: no result.json, ignored
    found = replay.trainings(tmp_path, None, None)
    assert sorted((t.reward, t.seed) for t in found) == [("early-11111111", 0), ("early-11111111", 1), ("late-00000000", 0)]
    assert all(t.budget == 20000 and t.eval_freq == 2000 and t.final.episodes == 30 for t in found)

    stops, pairings = replay.stops_of(found, replay.parse_rule("rungs=0.25,0.5"))  # the default before this measurement
    assert pairings == 2  # late against each early seed; the two early seeds are one reward, never paired
    assert len(stops) == 2 and all(s.stopped.reward == "late-00000000" and s.at == 6000 for s in stops)
    assert all(s.wrong_round and s.wrong_reward and s.saving == pytest.approx(20000 / 6000) for s in stops)
    assert all(s.wrong_beyond_noise for s in stops)  # 28 of 30 against 18 of 30: the 95% intervals are apart
    assert not any(s.wrong_reward_beyond_noise for s in stops)  # one training of the late reward: no test between rewards
    assert replay.welch_p([1.0, 1.1, 0.9], [0.1, 0.2, 0.0]) < 0.05 and replay.welch_p([1.0], [0.0, 0.1]) == 1.0
    # at the half rung the late starter has succeeded, and a candidate that succeeded is never stopped
    assert replay.stops_of(found, EarlyStopRule())[0] == [] and EarlyStopRule().rungs == (0.5,)


def test_a_right_stop_is_not_counted_wrong(replay, tmp_path):
    write(tmp_path, "bad-00000000", 0, curve([0.0] * 10), final=0.0)
    write(tmp_path, "good-11111111", 0, EARLY, final=18 / 30)
    [stop], _ = replay.stops_of(replay.trainings(tmp_path, None, None), EarlyStopRule())  # at 10,000: still nothing
    assert stop.stopped.reward == "bad-00000000" and not (stop.wrong_round or stop.wrong_reward or stop.wrong_beyond_noise)
    assert stop.stopped.final == Rate(0, 30)


def test_rules_are_read_by_their_fields(replay):
    assert replay.parse_rule("default") == EarlyStopRule()
    assert replay.parse_rule("rungs=0.5,0.75;success_margin=0.5;window=4") == EarlyStopRule(
        rungs=(0.5, 0.75), success_margin=0.5, window=4)
    with pytest.raises(SystemExit, match="unknown rule field 'patience'"):
        replay.parse_rule("patience=3")
