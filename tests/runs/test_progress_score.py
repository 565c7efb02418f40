"""The score that still separates rewards when success is rare (policies.score): the area under the success curve
plus the final progress toward the task's own success rule, with its noise; how ranking and early stopping use it,
and how records from before it rank as they did."""

from __future__ import annotations

import math

import numpy as np
import pytest

from policies.curve import CurvePoint
from policies.evaluate import evaluate
from policies.reward_program import SparseReward
from policies.score import curve_area, mean_and_se, progress_text, score_of
from policies.task_env import make_task_env
from sim_envs import codec, get_task
from text2reward.runs.ranking import TIE_BREAK, best_candidate, rank
from text2reward.runs.records import Candidate, TrainingSummary, read, read_result, write
from text2reward.training.early_stop import EarlyStopRule, judge_at_rung


def test_the_score_is_area_plus_progress_with_its_standard_error():
    assert mean_and_se([]) == (0.0, 0.0) and mean_and_se([0.4]) == (0.4, 0.0)
    mean, se = mean_and_se([0.2, 0.4, 0.6])
    assert mean == pytest.approx(0.4) and se == pytest.approx(0.2 / math.sqrt(3))
    curve = [CurvePoint(steps=1, success_rate=0.0, episodes=5), CurvePoint(steps=2, success_rate=0.4, episodes=5)]
    area, area_se = curve_area(curve)
    assert area == pytest.approx(0.2) and area_se == pytest.approx(math.sqrt(0.4 * 0.6 / 5) / 2)
    score = score_of(curve, 0.62, 0.05)
    assert score.value == pytest.approx(0.82) and score.se == pytest.approx(math.hypot(area_se, 0.05))
    assert score.text() == f"score 0.82 ± {score.se:.2f} (success-curve area 0.20, progress toward the success rule 0.62 ± 0.05)"
    assert progress_text(0.62, 0.05) == "progress toward the success rule 0.62 ± 0.05"
    old = score_of(curve, None)  # a result.json from before progress was measured
    assert old.progress is None and old.value == pytest.approx(0.2) and "no progress measured" in old.text()


def _evaluate(task_id: str, act) -> object:
    task = get_task(task_id)
    env = make_task_env(task, SparseReward(), seed=0)
    try:
        return evaluate(env, act, episodes=2, seed=0)
    finally:
        env.close()


def test_an_evaluation_states_progress_from_the_simulator():
    """MetaWorld reach: its scripted policy succeeds (progress 1), random actions come part of the way."""
    task = get_task("metaworld/reach-v3")
    scripted = _evaluate(task.id, task.scripted_policy())
    rng = np.random.default_rng(0)
    random = _evaluate(task.id, lambda obs: rng.uniform(-1, 1, size=4))
    assert scripted.success_rate == 1.0 and scripted.mean_progress == 1.0 and scripted.progress_se == 0.0
    assert random.success_rate == 0.0 and 0.0 < random.mean_progress < 1.0
    assert [e.progress for e in random.episodes] and random.progress_se == pytest.approx(mean_and_se([e.progress for e in random.episodes])[1])
    record = codec.write(random)
    assert record["mean_progress"] == random.mean_progress and record["episodes"][0]["progress"] == random.episodes[0].progress


def candidate(sample: int, success: float, native: float, progress: float | None = None, curve: tuple[float, ...] = (0.0,)) -> Candidate:
    training = {"success_rate": success, "episodes": 30, "mean_native_return": native,
                "curve": [{"steps": 100 * (i + 1), "success_rate": s, "episodes": 5} for i, s in enumerate(curve)]}
    if progress is not None:
        training |= {"mean_progress": progress, "progress_se": 0.03}
    return read(Candidate, {"id": f"r0-s{sample}", "round": 0, "sample": sample, "status": "trained", "training": training})


def test_when_nobody_succeeds_progress_ranks_before_native_return():
    """0 of 30 for all: the candidate nearer the success rule wins although the expert reward's return says otherwise."""
    far = candidate(0, 0.0, native=900.0, progress=0.20)
    near = candidate(1, 0.0, native=100.0, progress=0.62)
    assert [s.id for s in rank([far, near])] == ["r0-s1", "r0-s0"]
    assert rank([far, near])[0].progress == 0.62 and "progress toward the success rule" in TIE_BREAK
    # success still comes first, and the curve's area is part of the score
    assert best_candidate([near, candidate(2, 0.1, native=0.0, progress=0.3)]).id == "r0-s2"
    assert best_candidate([near, candidate(3, 0.0, native=0.0, progress=0.5, curve=(0.2, 0.2))]).id == "r0-s3"


def test_records_without_progress_rank_as_before():
    old = [candidate(0, 0.0, native=100.0), candidate(1, 0.0, native=900.0), candidate(2, 0.0, native=500.0, curve=(0.2,))]
    assert [s.id for s in rank(old)] == ["r0-s2", "r0-s1", "r0-s0"]
    assert all(s.progress is None for s in rank(old))


def test_progress_survives_the_records_round_trip():
    result = {"success_rate": 0.0, "best_success_rate": 0.0, "mean_return": 1.0, "mean_native_return": 2.0, "steps": 10,
              "wall_seconds": 1.0, "steps_per_second": 10.0, "curve": [], "mean_progress": 0.0, "progress_se": 0.0}
    summary = TrainingSummary.of_result(read_result(result))
    assert summary.progress == (0.0, 0.0)
    assert read(TrainingSummary, write(summary)).progress == (0.0, 0.0)
    del result["mean_progress"], result["progress_se"]
    assert TrainingSummary.of_result(read_result(result)).progress is None


def flat(rate: float, native: float, progress: float | None) -> list[CurvePoint]:
    return [CurvePoint(steps=s, success_rate=rate, mean_native_return=native, episodes=5, mean_progress=progress,
                       progress_se=0.02 if progress is not None else None) for s in (250, 500, 750)]


def test_early_stopping_without_success_compares_progress_when_every_evaluation_has_it():
    # the native return says "a" trails by 89%, progress says it leads: nobody is stopped on the expert's return
    curves = {"a": flat(0.0, 100.0, 0.6), "b": flat(0.0, 900.0, 0.3)}
    assert judge_at_rung("a", curves, 750, EarlyStopRule()) is None
    behind = judge_at_rung("b", curves, 750, EarlyStopRule())
    assert behind is not None and behind.leader == "a" and "progress toward the success rule" in behind.reason
    # a curve from before progress was measured: native return decides, as it did
    old = {"a": flat(0.0, 100.0, None), "b": flat(0.0, 900.0, 0.3)}
    behind = judge_at_rung("a", old, 750, EarlyStopRule())
    assert behind is not None and behind.leader == "b" and "native return" in behind.reason


def test_feedback_and_report_state_progress_with_its_noise():
    from text2reward.feedback.compose import candidate_summary, round_contrast
    from text2reward.feedback.reflection import reward_reflection
    from text2reward.runs.report import candidate_rows

    data = {"success_rate": 0.0, "final_eval_episodes": 30, "eval_episodes": 5, "mean_progress": 0.62, "progress_se": 0.05,
            "curve": [{"steps": 100, "success_rate": 0.0, "mean_return": 1.0, "episodes": 5}],
            "components": [{"steps": 100, "components": {"reach": {"mean": 1.0, "min": 0.0, "max": 2.0}}}]}
    assert "final evaluation success: 0.00 (0 of 30 episodes, 95% interval 0.00-0.11); progress toward the success rule 0.62 ± 0.05" \
        in reward_reflection(data)
    del data["mean_progress"]
    assert "final evaluation success: 0.00 (0 of 30 episodes, 95% interval 0.00-0.11)\n" in reward_reflection(data)
    near, far = candidate(1, 0.0, native=1.0, progress=0.62), candidate(0, 0.0, native=1.0, progress=0.20)
    text = round_contrast(candidate_summary(near, None), [candidate_summary(far, None)], [], TIE_BREAK)
    assert "The best so far, r0-s1: success 0.00 (0 of 30 episodes, 95% interval 0.00-0.11); progress toward the success rule 0.62 ± 0.03." in text
    assert "### r0-s0: success 0.00 (0 of 30 episodes, 95% interval 0.00-0.11); progress toward the success rule 0.20 ± 0.03:" in text
    rows = candidate_rows([near, candidate(2, 0.0, native=1.0)])
    assert "progress toward the success rule" in rows[3]
    cells = [[cell.strip() for cell in row.split("|")[1:-1]] for row in rows[5:7]]
    assert cells[0][:3] == ["r0-s1", "trained", "0.00 (0 of 30 episodes, 95% interval 0.00-0.11)"] and cells[0][4] == "0.62 ± 0.03"
    assert cells[1][:2] == ["r0-s2", "trained"] and cells[1][4] == "-"


def test_a_delivered_peak_carries_its_own_progress(tmp_path):
    """When the peak checkpoint becomes the candidate's policy, its progress on the final episodes is the one ranked;
    the final policy's is kept beside its success."""
    from text2reward.runs.records import PeakCheck
    from text2reward.training.job import deliver_peak

    (tmp_path / "model.zip").write_bytes(b"final policy")
    (tmp_path / "peak_model.zip").write_bytes(b"peak policy")
    result = {"success_rate": 0.3, "best_success_rate": 0.8, "mean_return": 1.0, "mean_native_return": 2.0, "steps": 30000,
              "wall_seconds": 10.0, "steps_per_second": 3000.0, "curve": [], "final_eval_episodes": 30,
              "model_path": str(tmp_path / "model.zip"), "mean_progress": 0.5, "progress_se": 0.04,
              "peak": {"steps": 20000, "success_rate": 0.8, "episodes": 5, "model_path": str(tmp_path / "peak_model.zip")}}
    result = read_result(result)
    deliver_peak(result, PeakCheck(steps=20000, success_on_final_episodes=0.6, only_peak=12, only_final=3, p_value=0.035,
                                   delivered=True, progress_on_final_episodes=(0.8, 0.03)), tmp_path)
    assert (result.mean_progress, result.progress_se) == (0.8, 0.03)
    assert result.final_policy.mean_progress == 0.5 and result.final_policy.progress_se == 0.04
    assert TrainingSummary.of_result(read_result(write(result))).progress == (0.8, 0.03)
