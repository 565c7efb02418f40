"""Early stopping across a round's candidates: the rule on curves, and a real worker stopped at a rung."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from short_training import SHORT_HP

from policies.config import TrainConfig
from policies.curve import CurvePoint
from sim_envs import codec
from text2reward.runs.ranking import best_candidate, rank
from text2reward.runs.records import Candidate, read
from text2reward.runs.store import STOP_FILE
from text2reward.settings import RunConfig
from text2reward.training.early_stop import EarlyStopper, EarlyStopRule, judge_at_rung, rung_steps
from text2reward.training.job import TrainJob
from text2reward.training.pool import run_jobs

TWO_RUNGS = EarlyStopRule(rungs=(0.25, 0.5))
"""The default before early_stop_replay.py measured the 1/4 rung's wrong stops: two rungs, for the tests of a later rung."""


def curve(*points: tuple[int, float, float]) -> list[CurvePoint]:
    return [CurvePoint(steps=s, success_rate=rate, mean_native_return=native) for s, rate, native in points]


def test_rungs_fall_on_the_first_evaluation_at_or_after_each_fraction():
    assert rung_steps(8000, 1000, EarlyStopRule()) == [4000]  # the default: one rung, at half the budget
    assert rung_steps(8000, 1000, TWO_RUNGS) == [2000, 4000]
    assert rung_steps(1000, 300, TWO_RUNGS) == [300, 600]
    assert rung_steps(1000, 1000, EarlyStopRule()) == []  # one evaluation, at the end: nothing to compare early


def flat(steps: list[int], rate: float, native: float, episodes: int = 5) -> list[CurvePoint]:
    return [CurvePoint(steps=s, success_rate=rate, mean_native_return=native, episodes=episodes) for s in steps]


EVALS = [250, 500, 750]


@pytest.mark.parametrize("own, leader, stops", [
    ((0.0, 0.0), (0.8, 0.0), True),       # 0 of 15 against 12 of 15: beyond the margin and the intervals
    ((0.2, 0.0), (0.8, 0.0), False),      # it has succeeded: never stopped as behind
    ((0.0, 0.0), (0.2, 0.0), False),      # 0.2 behind: within the margin
    ((0.0, -20.0), (0.0, -5.0), True),    # nobody succeeds: native return 75% behind on every reading
    ((0.0, -6.0), (0.0, -5.0), False),    # 17% behind
    ((0.0, 300.0), (0.0, 800.0), True),   # MetaWorld-like positive returns, 62% behind
    ((0.0, 100.0), (0.1, 900.0), False),  # the leader succeeds a little: success decides, and 0.1 is not clearly ahead
])
def test_clearly_behind_is_on_success_first_then_native_return(own, leader, stops):
    curves = {"a": flat(EVALS, *own), "b": flat(EVALS, *leader)}
    behind = judge_at_rung("a", curves, 750, EarlyStopRule())
    assert (behind is not None) == stops, behind
    if behind is not None:
        assert behind.leader == "b" and "b's" in behind.reason and "750 steps" in behind.reason


def test_one_spike_in_the_leaders_readings_stops_nobody():
    """soccer-v3, measured: the leader read 9.7 / 120.7 / 6.3 native return at 6k / 8k / 10k, and a candidate at ~15
    was stopped at 8k on the spike. On the window's median, with every reading required below every one of the
    leader's, it goes on; before the change one reading at the rung decided."""
    curves = {"r0-s0": [CurvePoint(steps=s, success_rate=0.0, mean_native_return=v, episodes=5)
                        for s, v in ((6000, 9.7), (8000, 120.7), (10000, 6.3))],
              "r0-s1": flat([6000, 8000, 10000], 0.0, 15.0)}
    assert judge_at_rung("r0-s1", curves, 8000, EarlyStopRule()) is None
    assert judge_at_rung("r0-s1", curves, 10000, EarlyStopRule()) is None


def test_one_reading_decides_nothing():
    """A single 5-episode evaluation on either side is no ground for a stop, however far apart."""
    curves = {"a": flat([250], 0.0, -50.0), "b": flat([250], 1.0, -1.0)}
    assert judge_at_rung("a", curves, 250, EarlyStopRule()) is None
    curves = {"a": flat([250, 500], 0.0, -50.0), "b": flat([500], 1.0, -1.0)}
    assert judge_at_rung("a", curves, 500, EarlyStopRule()) is None


def test_a_candidate_that_has_succeeded_is_never_stopped_as_behind():
    curves = {"a": flat([250, 500], 0.0, -50.0) + flat([750], 0.2, -40.0), "b": flat(EVALS, 1.0, -1.0, episodes=30)}
    assert judge_at_rung("a", curves, 750, EarlyStopRule()) is None
    assert judge_at_rung("a", curves, 500, EarlyStopRule()) is not None  # at the earlier rung it had not yet


def test_a_candidate_is_compared_at_the_rung_whenever_its_peer_gets_there():
    """Asynchronous: the first to reach a rung is not judged alone; when a peer arrives both are compared at
    the rung's step count, each rung once."""
    stopper = EarlyStopper(budget=2000, eval_freq=250, rule=TWO_RUNGS)  # rungs 500, 1000
    for steps, native in ((250, -30.0), (500, -29.0)):
        stopper.add_point("a", CurvePoint(steps=steps, success_rate=0.0, mean_native_return=native))
    assert stopper.decide(["a", "b"]) == {}  # b has not reached the rung: nobody to compare with
    stopper.add_point("a", CurvePoint(steps=750, success_rate=0.0, mean_native_return=-28.0))
    for steps, native in ((250, -4.0), (500, -3.0)):
        stopper.add_point("b", CurvePoint(steps=steps, success_rate=0.0, mean_native_return=native))
    decisions = stopper.decide(["a", "b"])
    assert set(decisions) == {"a"} and decisions["a"].rung == 0 and decisions["a"].steps == 500
    assert decisions["a"].leader == "b" and codec.write(decisions["a"])["leader"] == "b"
    assert stopper.decide(["a", "b"]) == {}  # rung 0 judged once for each; b has not reached rung 1


def test_a_finished_peer_leads_a_queued_candidate():
    stopper = EarlyStopper(budget=1000, eval_freq=250)
    stopper.observe("done", curve((250, 0.9, -2.0), (500, 1.0, -1.0), (750, 1.0, -1.0), (1000, 1.0, -1.0)))
    stopper.add_point("late", CurvePoint(steps=250, success_rate=0.0, mean_native_return=-20.0))
    stopper.add_point("late", CurvePoint(steps=500, success_rate=0.0, mean_native_return=-20.0))
    (decision,) = stopper.decide(["late"]).values()
    assert "done's 0.90 (9 of 10 episodes" in decision.reason and decision.leader == "done"


def test_a_candidates_seeds_are_judged_pooled_and_stopped_together():
    """--candidate-seeds: a candidate's seeds are one curve (success over all their episodes) that reaches a rung when
    every seed has; behind, all its running seeds stop, naming the candidate (not a seed) it trailed. One seed of the
    leader that has not succeeded is not judged alone: its candidate's pooled curve has."""
    groups = {"a seed 0": "a", "a seed 1000": "a", "b seed 0": "b", "b seed 1000": "b"}
    stopper = EarlyStopper(budget=2000, eval_freq=250, rule=TWO_RUNGS, groups=groups)  # rungs 500, 1000
    for name, rate in (("b seed 0", 0.8), ("b seed 1000", 0.0), ("a seed 0", 0.0)):
        for steps in (250, 500):
            stopper.add_point(name, CurvePoint(steps=steps, success_rate=rate, mean_native_return=-1.0, episodes=5))
    assert stopper.decide(list(groups)) == {}  # a's second seed has not evaluated: a has not reached the rung
    for steps in (250, 500):
        stopper.add_point("a seed 1000", CurvePoint(steps=steps, success_rate=0.0, mean_native_return=-1.0, episodes=5))
    decisions = stopper.decide(list(groups))
    assert set(decisions) == {"a seed 0", "a seed 1000"}
    assert all(d.leader == "b" and "0.40 (8 of 20 episodes" in d.reason and "0.00 (0 of 20 episodes" in d.reason
               for d in decisions.values())
    # b's second seed alone (0 of 10) trails a's pooled readings by nothing: b has succeeded, and is never stopped
    assert stopper.decide(list(groups)) == {}


def test_run_settings_turn_early_stopping_on_for_candidates_only(tmp_path):
    config = RunConfig.of(task_id="fetch/reach", success_threshold=0.8)
    candidate = config.train_config("fetch/reach", tmp_path / "job" / "train", "code", 0, early_stop=True)
    assert candidate.stop_at_success == 0.8 and candidate.stop_file == str(tmp_path / "job" / STOP_FILE)
    final = config.train_config("fetch/reach", tmp_path / "final" / "train", "code", 0)
    assert final.stop_at_success is None and final.stop_file is None  # the final comparison trains every seed to the end
    off = RunConfig.of(task_id="fetch/reach", early_stop=False).train_config("fetch/reach", tmp_path / "j" / "train", "code", 0, early_stop=True)
    assert off.stop_at_success is None and off.stop_file is None


def test_a_stopped_candidate_still_ranks_on_its_partial_result():
    trained = read(Candidate, {"id": "r0-s0", "round": 0, "sample": 0, "status": "trained",
                                   "training": {"success_rate": 0.2, "curve": []}})
    stopped = read(Candidate, {"id": "r0-s1", "round": 0, "sample": 1, "status": "stopped_early",
                                   "training": {"success_rate": 0.0, "curve": []},
                                   "stopped_early": {"rung": 0, "steps": 250, "reason": "behind"}})
    assert best_candidate([stopped]).id == "r0-s1"
    assert best_candidate([trained, stopped]).id == "r0-s0"


def test_the_ranking_never_puts_a_stopped_candidate_above_the_one_that_stopped_it():
    """sweep-v3, measured: r0-s1 was stopped for trailing r0-s0, then ranked best of the round on its final return.
    It is ranked on what it reached, below its leader; others stay where their figures put them."""
    def trained(id: str, sample: int, native: float, **extra) -> Candidate:
        return read(Candidate, {"id": id, "round": 0, "sample": sample, "status": extra.pop("status", "trained"),
                                    "training": {"success_rate": 0.0, "mean_native_return": native, "curve": []}, **extra})

    leader = trained("r0-s0", 0, 32.8)
    stopped = trained("r0-s1", 1, 88.4, status="stopped_early",
                      stopped_early={"rung": 0, "steps": 8000, "reason": "behind", "leader": "r0-s0"})
    third = trained("r0-s2", 2, 50.0)
    assert [s.id for s in rank([leader, stopped, third])] == ["r0-s2", "r0-s0", "r0-s1"]
    assert best_candidate([leader, stopped, third]).id == "r0-s2"
    older = trained("r0-s1", 1, 88.4, status="stopped_early", stopped_early={"rung": 0, "steps": 8000, "reason": "behind"})
    assert rank([leader, older])[0].id == "r0-s1"  # a record from before the leader was kept: ranked as it was


@pytest.mark.slow
def test_a_real_worker_behind_a_finished_leader_stops_at_the_rung_and_keeps_its_partial_result(tmp_path):
    """Real SAC on fetch/reach in a worker process: the pool feeds its evaluations to the stopper, writes the
    stop file, and the worker stops within a few steps, with its curve, its result and no video."""
    # the mechanism, not the rule: one reading may decide here (the rule's noise has its own tests above)
    stopper = EarlyStopper(budget=800, eval_freq=200, rule=EarlyStopRule(rungs=(0.25, 0.5), min_evaluations=1))  # rungs at 200 and 400
    stopper.observe("r0-s0", [dataclasses.replace(p, episodes=30)
                              for p in curve((200, 1.0, -1.0), (400, 1.0, -1.0), (600, 1.0, -1.0), (800, 1.0, -1.0))])
    out = tmp_path / "r0-s1"
    job = TrainJob(
        train=TrainConfig(task_id="fetch/reach", out_dir=out / "train", reward="sparse", steps=800, eval_freq=200, eval_episodes=2,
                          overrides=SHORT_HP, stop_file=str(out / STOP_FILE)),
        analysis_episodes=1, video=True,
    )
    (outcome,) = run_jobs([job], workers=1, early_stopper=stopper, names=["r0-s1"])
    assert outcome.ok, outcome.reason
    result = outcome.record.result
    assert result.stopped_behind and result.stopped_early.rung == 0
    assert "r0-s0's 1.00" in result.stopped_early.reason
    assert result.steps < 400 and result.curve and result.extra["requested_steps"] == 800  # within steps of the request, before the next evaluation
    assert json.loads((out / STOP_FILE).read_text())["steps"] == 200
    assert not (out / "rollout.mp4").exists() and any("no rollout video" in w for w in outcome.record.warnings)
    assert (Path(out) / "feedback.md").is_file()  # the analysis still describes what it learned


def test_a_candidate_that_reaches_the_threshold_stops_there_and_says_so(tmp_path):
    """stop_at_success frees the worker at the first evaluation that reaches it (0.0: the very first)."""
    from policies.train import train

    result = train(TrainConfig(task_id="fetch/reach", out_dir=tmp_path, reward="sparse", steps=600, eval_freq=100, eval_episodes=1,
                               overrides=SHORT_HP, stop_at_success=0.0))
    assert result.steps == 100 and result.requested_steps == 600
    assert result.stopped_early is not None and result.stopped_early["kind"] == "success" and result.stopped_early["steps"] == 100
