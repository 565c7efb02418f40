"""Seed-aware scores (issue 38 item 1): a candidate trained on S seeds is recorded per seed and ranked on its success
pooled over every seed's final-evaluation episodes, with the spread between seeds stated; old records still read.

The per-seed outcomes are crafted (done.json records as a worker writes them) and go through the real record path
(`training.results.record_seed_outcomes`), ranking, feedback and report."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.config import TrainConfig
from policies.stats import Rate
from text2reward.feedback.compose import candidate_summary, round_contrast, seed_spread_section
from text2reward.runs.ranking import best_candidate, rank, tie_summary
from text2reward.runs.records import Candidate, CurvePoint, DoneRecord, FinalArm, read, read_result, write
from text2reward.runs.seed_scores import pooled_curve, seed_spread
from text2reward.runs.statuses import CandidateStatus, FailureCause, StopKind
from text2reward.runs.store import RunStore
from text2reward.settings import CANDIDATE_SEED_STRIDE, RunConfig
from text2reward.training.job import TRAIN_DIR, TrainJob
from text2reward.training.pool import JobOutcome
from text2reward.training.results import record_seed_outcomes

EPISODES = 30


def result(seed: int, successes: int, curve_rates: tuple[float, ...] = (0.0, 0.2), native: float = 10.0,
           stopped: dict | None = None) -> dict:
    curve = [{"steps": 100 * (i + 1), "success_rate": r, "mean_native_return": native, "episodes": 5} for i, r in enumerate(curve_rates)]
    data = {"seed": seed, "success_rate": successes / EPISODES, "best_success_rate": max(curve_rates), "mean_return": 1.0,
            "mean_native_return": native, "steps": 200, "wall_seconds": 10.0, "steps_per_second": 20.0, "curve": curve,
            "final_eval_episodes": EPISODES, "eval_episodes": 5}
    if stopped is not None:
        data["stopped_early"] = stopped
    return data


def outcome(store: RunStore, sample: int, seed: int, successes: int | None, **kwargs) -> JobOutcome:
    folder = store.paths.training_dir(0, sample, None if seed == 0 else seed)
    job = TrainJob(train=TrainConfig(task_id="fetch/reach", out_dir=folder / TRAIN_DIR, reward="code", seed=seed))
    if successes is None:
        return JobOutcome(job, False, None, "the reward raised ZeroDivisionError", cause=FailureCause.REWARD)
    return JobOutcome(job, True, read(DoneRecord, {"result": result(seed, successes, **kwargs), "behaviour_text": f"seed {seed}"}), None)


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    return RunStore.create(tmp_path, RunConfig.of(task_id="fetch/reach", candidate_seeds=3).to_record())


def seeded(store: RunStore, sample: int, successes: list[int | None], **kwargs) -> Candidate:
    seeds = [CANDIDATE_SEED_STRIDE * k for k in range(len(successes))]
    pending = Candidate(id=f"r0-s{sample}", round=0, sample=sample, backend="heuristic", model="")
    return record_seed_outcomes(pending, [(seed, outcome(store, sample, seed, n, **kwargs)) for seed, n in zip(seeds, successes)], store)


def test_a_candidate_on_three_seeds_keeps_each_seed_and_its_pooled_score(store):
    lucky = seeded(store, 0, [9, 0, 1])  # soccer-v3's pick, measured: 0.30 / 0.00 / 0.03
    assert lucky.status == CandidateStatus.TRAINED
    assert [(s.seed, s.training.success_rate, s.training.episodes) for s in lucky.seeds] == [
        (0, 0.3, 30), (1000, 0.0, 30), (2000, pytest.approx(1 / 30), 30)]
    assert [s.job for s in lucky.seeds] == ["rounds/r0/s0/training", "rounds/r0/s0/training-seed1000", "rounds/r0/s0/training-seed2000"]
    assert (lucky.training.success_rate, lucky.training.episodes) == (pytest.approx(10 / 90), 90)
    assert lucky.behaviour_text == "seed 0"  # the feedback describes the first seed's policy
    spread = seed_spread(lucky)
    assert spread is not None and spread.pooled == Rate(10, 90)
    assert (spread.low, spread.high) == (0.0, 0.3) and spread.std == pytest.approx(0.1343, abs=1e-3)
    assert spread.text().startswith("success per seed 0.30 / 0.00 / 0.03 (seeds 0, 1000, 2000), pooled 0.11 (10 of 90 episodes, "
                                    "95% interval 0.06-0.19); between seeds 0.00-0.30, standard deviation 0.13")
    # the record reads back as it was written
    again = read(Candidate, write(lucky))
    assert again.seeds == lucky.seeds and again.training.episodes == 90 and seed_spread(again) == spread


def test_ranking_picks_by_the_pooled_score_not_the_luckiest_seed(store):
    """The lucky reward's first seed (0.30) beats the steady one's (0.13) by far; pooled over three seeds it does not
    (10 of 90 against 12 of 90), and the two are within each other's noise, which the round summary says."""
    lucky = seeded(store, 0, [9, 0, 1])
    steady = seeded(store, 1, [4, 4, 4])
    assert lucky.seeds[0].training.success_rate > steady.seeds[0].training.success_rate
    assert [s.id for s in rank([lucky, steady])] == ["r0-s1", "r0-s0"]
    assert best_candidate([lucky, steady]) is steady and tie_summary([lucky, steady])["tied"] == ["r0-s0"]


def test_the_feedback_states_each_rewards_spread_between_seeds(store):
    lucky, steady = seeded(store, 0, [9, 0, 1]), seeded(store, 1, [3, 3, 3])
    section = seed_spread_section(lucky)
    assert "trained on 3 seeds" in section and "success per seed 0.30 / 0.00 / 0.03" in section and "10 of 90 episodes" in section
    text = round_contrast(candidate_summary(lucky, "A = 1\n"), [candidate_summary(steady, "A = 2\n")], [], "")
    assert "The best so far, r0-s0: success per seed 0.30 / 0.00 / 0.03 (seeds 0, 1000, 2000), pooled 0.11" in text
    assert "### r0-s1: success per seed 0.10 / 0.10 / 0.10 (seeds 0, 1000, 2000), pooled 0.10 (9 of 90 episodes" in text
    assert "standard deviation 0.00" in text


def test_a_seed_that_failed_is_a_warning_and_the_score_pools_the_others(store):
    candidate = seeded(store, 0, [6, None, 3])
    assert candidate.status == CandidateStatus.TRAINED and candidate.training.episodes == 60
    assert candidate.seeds[1].training is None and "ZeroDivisionError" in candidate.seeds[1].reason
    assert any("seed 1000 did not train" in w for w in candidate.warnings)
    failed = seeded(store, 1, [None, None])
    assert failed.status == CandidateStatus.FAILED and failed.failure_cause == FailureCause.REWARD and not failed.has_training


def test_a_seed_stopped_behind_makes_the_candidate_stopped_early_naming_its_leader(store):
    stop = {"kind": StopKind.BEHIND.value, "rung": 0, "steps": 100, "reason": "behind r0-s1", "leader": "r0-s1"}
    candidate = seeded(store, 0, [0, 0], stopped=stop)
    assert candidate.status == CandidateStatus.STOPPED_EARLY and candidate.stopped_early.leader == "r0-s1"
    assert all(s.stopped_early for s in candidate.seeds)


def test_seed_curves_pool_where_every_seed_has_evaluated():
    a = [CurvePoint(steps=100, success_rate=0.2, episodes=5, mean_native_return=1.0),
         CurvePoint(steps=200, success_rate=0.4, episodes=5, mean_native_return=3.0)]
    b = [CurvePoint(steps=100, success_rate=0.0, episodes=5, mean_native_return=3.0)]
    assert pooled_curve([a, b]) == [CurvePoint(steps=100, success_rate=0.1, episodes=10, seeds=2, mean_native_return=2.0)]
    assert pooled_curve([a]) == a


def test_old_records_without_seeds_read_as_one_seed():
    old = read(Candidate, {"id": "r0-s0", "round": 0, "sample": 0, "status": "trained",
                               "training": {"success_rate": 0.4, "episodes": 5, "curve": []}})
    assert old.seeds == [] and seed_spread(old) is None and seed_spread_section(old) == ""
    assert "seeds" not in write(old) and candidate_summary(old, "").spread == ""


def test_the_final_comparison_pools_its_seeds_episodes_as_candidates_do():
    results = [{"seed": 1, "success_rate": 0.5, "curve": [], "final_eval_episodes": 30},
               {"seed": 2, "success_rate": 0.0, "curve": [], "final_eval_episodes": 10}]
    arm = FinalArm.of([read_result(r) for r in results], [])
    assert arm.pooled == Rate(15, 40) and arm.mean == pytest.approx(15 / 40) and arm.std == pytest.approx(0.25)
    assert read(FinalArm, write(arm)).pooled == Rate(15, 40)
    older = read(FinalArm, {"success_rates": [0.5, 0.0], "seeds": [1, 2], "mean": 0.25, "std": 0.25})
    assert older.pooled is None and older.mean == 0.25  # a summary that kept no episode counts reads as it was
