"""Issue 40, items 2-5: signed progress, the contrast in full, tips on like with like, and one voice.

The analysis runs on real MuJoCo rollouts (drawer-close's scripted policy, played forward and backward in time); the
reflection, the contrast and the report run on crafted records shaped as policies.train and the loop write them.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from policies.evaluate import run_episode
from policies.reward_program import SparseReward
from policies.stats import Rate
from policies.task_env import make_task_env
from sim_envs.registry import get_task
from text2reward.feedback import describe_behaviour, reflection_tips, reward_reflection, trajectory_analysis
from text2reward.feedback.compose import CandidateSummary, mean_facts, round_contrast

SUCCESS_FIGURE = re.compile(r"\b(?:success|succeeds in|reached|peaked at|ended at)(?: rate)?:? \(?(\d\.\d+)(?!\d)(?! \(\d+ of \d+ episodes, 95% interval)")
"""A success figure stated without its episode count and interval ("success 0.07", "best success 0.0666")."""


@pytest.fixture(scope="module")
def drawer():
    """drawer-close's scripted policy (the drawer pushed to its goal), the same rollout backward in time (the drawer
    pulled away from its goal), and a still robot."""
    task = get_task("metaworld/drawer-close-v3")
    env = make_task_env(task, SparseReward(), seed=0)
    closed = run_episode(env, task.scripted_policy(), seed=0, record_views=True)
    still = run_episode(env, lambda obs: np.zeros(4), seed=1, record_views=True)
    env.close()
    return task, closed, still


# --------------------------------------------------------------------------- item 2: signed progress


def test_the_analysis_says_toward_or_away_from_the_goal_with_start_and_end_distance(drawer):
    task, closed, still = drawer
    toward = trajectory_analysis(task, [closed.views], successes=[True])
    line = next(row for row in toward.splitlines() if row.startswith("progress toward the goal"))
    start, end = (float(x) for x in re.search(r"([\d.]+) -> ([\d.]+) m", line).groups())
    assert "toward the goal" in line and end < start and "(1 of 1 episode nearer)" in line
    away = trajectory_analysis(task, [closed.views[::-1], closed.views[::-1]], successes=[False, False])
    line = next(row for row in away.splitlines() if row.startswith("progress toward the goal"))
    assert f"away from the goal: {end:.3f} -> {start:.3f} m on average (2 of 2 episodes farther)" in line
    level = trajectory_analysis(task, [still.views], successes=[False])
    assert "left the object as far from the goal as it started" in level and "1 of 1 within 5 mm" in level
    assert "Progress toward the goal: moved the object" in describe_behaviour(task, [closed.views[::-1]], [False])


def test_an_object_with_no_goal_is_said_to_have_none(drawer):
    task, closed, _ = drawer

    @dataclasses.dataclass
    class NoGoal:  # the same real views, without the goal a task may not give
        view: object

        def __getattr__(self, name):
            if name == "goal_position":
                raise AttributeError(name)
            return getattr(self.view, name)

    text = trajectory_analysis(task, [[NoGoal(v) for v in closed.views]], successes=[True])
    assert "this task gives the object no goal position, so its displacement has no direction" in text
    assert " m toward the goal" not in text and " m away from the goal" not in text


def test_the_contrast_states_each_candidates_signed_progress(drawer):
    task, closed, _ = drawer
    backward = dataclasses.replace(closed, views=closed.views[::-1], success=False)
    best = CandidateSummary("r0-s0", "trained", "A = 1\n", Rate(2, 30), mean_facts(task, [closed]))
    away = CandidateSummary("r0-s1", "trained", "A = 2\n", Rate(0, 30), mean_facts(task, [backward] * 3))
    text = round_contrast(best, [away], [], "")
    assert re.search(r"Progress toward the goal: this candidate moved the object [\d.]+ m away from the goal: "
                     r"[\d.]+ -> [\d.]+ m on average \(3 of 3 episodes farther\); the best moved the object [\d.]+ m "
                     r"toward the goal: [\d.]+ -> [\d.]+ m \(1 of 1 episode nearer\)", text), text


# --------------------------------------------------------------------------- item 3: the contrast in full


LONG = "def compute_dense_reward(self, action):\n" + "".join(f"    term_{i} = {i} * 0.5\n" for i in range(60)) + "    return 0.0, {}\n"


def test_the_contrast_shows_the_whole_program_its_tips_and_its_early_stop():
    best = CandidateSummary("r0-s0", "trained", "def compute_dense_reward(self, action):\n    return 1.0, {}\n", Rate(2, 30),
                            steps=30000)
    tips = ["'reach' makes up 82% of the summed magnitude of the components: it drowns 'push'"]
    stopped = CandidateSummary("r0-s1", "trained", LONG, Rate(0, 30), steps=8000, stopped_early_at=8000,
                               stop_reason="it trailed r0-s0 at the rung", tips=tips,
                               facts={"object_grasped": 1.0, "object_lifted": 0.0, "object_max_rise": 0.008, "steps": 500})
    text = round_contrast(dataclasses.replace(best, facts={"object_grasped": 0.0, "object_lifted": 0.0, "object_max_rise": 0.001}),
                          [stopped], [], "")
    assert "more diff lines" not in text and "(59 more)" not in text
    assert LONG.rstrip() in text  # the whole function, every line
    assert "same budget" not in text.split("Not every candidate")[0]
    assert "Not every candidate trained on the same budget: the run's early stopping ended r0-s1 at step 8,000" in text
    assert "### r0-s1: success 0.00 (0 of 30 episodes, 95% interval 0.00-0.11): worse than the best beyond noise; stopped early at step 8,000" in text
    assert "- 'reach' makes up 82%" in text
    assert "object grasped" not in text and "gripper closed within 4 cm of the object (a grasp only where it was also lifted)" in text
    same = round_contrast(best, [dataclasses.replace(stopped, stopped_early_at=None, steps=30000, tips=[])], [], "")
    assert same.startswith("Each trained on the same budget (30,000 steps).") and "Its own tips: none fired" in same


# --------------------------------------------------------------------------- item 4: tips on like with like


def curve_result(points, final_rate, final_episodes=30, history=None):
    """A result.json: `points` as (steps, success, episodes, mean_return, std_return); the final evaluation's rate."""
    curve = [{"steps": s, "success_rate": r, "episodes": n, "mean_return": m, "std_return": sd} for s, r, n, m, sd in points]
    history = history or [{"steps": 1000 * (i + 1), "components": {"reach": {"mean": 1.0 + i, "min": 0.5 + i, "max": 1.5 + i},
                                                                   "push": {"mean": 0.5 + i, "min": 0.0 + i, "max": 1.0 + i}},
                           "native": 0.0, "step_success": 0.0} for i in range(30)]
    return {"task": "metaworld/push-v3", "steps": 30000, "components": history, "curve": curve, "success_rate": final_rate,
            "eval_episodes": 5, "final_eval_episodes": final_episodes}


def test_a_curve_that_never_succeeded_says_how_many_evaluations_of_how_many_episodes():
    """`t2r train`'s line and the reflection tip read "2 evaluations of 1 episode each", never "2 of 1 episodes"."""
    from policies.formatting import evaluations_of
    from text2reward.cli.policy_commands import best_during_training

    assert evaluations_of(3, 5) == "3 evaluations of 5 episodes each" and evaluations_of(1, 1) == "1 evaluation of 1 episode"
    zeros = [(1000, 0.0, 1, 5.0, 0.0), (2000, 0.0, 1, 6.0, 0.0)]
    data = curve_result(zeros, 0.1)
    assert best_during_training(data["curve"], 1) == "no evaluation during training succeeded (2 evaluations of 1 episode each)"
    tip = next(t for t in reflection_tips(data | {"eval_episodes": 1}) if t.startswith("Success was 0 at every evaluation"))
    assert "(2 evaluations of 1 episode each) and only the final evaluation saw any (0.10 (3 of 30 episodes" in tip


def test_a_return_trend_compares_evaluations_of_equal_size_and_names_the_peak():
    """The issue's case: 104 at a 5-episode first evaluation, 236 at the 30-episode final one, a peak of 437 between."""
    points = [(5000, 0.0, 5, 104.0, 10.0), (15000, 0.0, 5, 437.0, 10.0), (25000, 0.0, 5, 300.0, 10.0), (30000, 0.0, 30, 236.0, 10.0)]
    tip = next(t for t in reflection_tips(curve_result(points, 0.0)) if "hacked" in t)
    assert "rose from 104 (step 5,000) to a peak of 437 (step 15,000) and ended at 300" in tip
    assert "the 3 evaluations of 5 episodes each" in tip and "236" not in tip
    # one lucky 5-episode success does not silence the same rise for another candidate
    lucky = [(5000, 0.0, 5, 104.0, 10.0), (15000, 0.2, 5, 437.0, 10.0), (25000, 0.0, 5, 300.0, 10.0)]
    assert any("hacked" in t for t in reflection_tips(curve_result(lucky, 0.0)))
    solved = [(5000, 0.0, 5, 104.0, 10.0), (15000, 0.8, 5, 437.0, 10.0), (25000, 1.0, 5, 500.0, 10.0)]
    assert not any("hacked" in t for t in reflection_tips(curve_result(solved, 0.9)))


def test_the_success_fraction_reports_every_window_where_the_test_held():
    """The samples at 10 points can miss a short window: the line says where the test held, over every window."""
    result = curve_result([(5000, 0.0, 5, 1.0, 0.1), (30000, 0.0, 5, 1.0, 0.1)], 0.0)
    result["components"][24]["step_success"] = 0.06
    text = reward_reflection(result)
    line = next(row for row in text.splitlines() if row.startswith("fraction of training steps meeting the success test"))
    assert "0.06" not in line.split("]")[0]  # the evenly spaced samples miss it...
    assert "over all 30 windows of training it held in 1 (the window ending at step 25,000), at most in 0.06" in line  # ...not the line
    assert "evenly spaced" not in text


# --------------------------------------------------------------------------- item 5: one voice


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.:;])\s+|\n", text) if s.strip()]


def assert_one_voice(text: str, final: Rate) -> None:
    """No statement that the policy never succeeded beside a final success; no peak of 0; tips for a 0 of N."""
    if final.successes > 0:
        assert "never completed" not in text and "was 0 at every evaluation:" not in text
        assert "success test was never met" not in text
    if final.successes == 0:
        assert "none of the usual problems" not in text
    assert not re.search(r"peak\w*[^.\n]{0,30}\b0\.00 \(0 of", text)
    for figure in SUCCESS_FIGURE.finditer(text):
        raise AssertionError(f"a success figure without its episodes and interval: {figure.group(0)!r}")


@pytest.mark.parametrize("case", ["all-zero", "success only at the final evaluation", "zero at the end after a success"])
def test_the_reflection_never_contradicts_itself(case):
    points = [(10000, 0.0, 5, 5.0, 1.0), (20000, 0.0, 5, 5.0, 1.0), (30000, 0.0, 5, 5.0, 1.0)]
    final = {"all-zero": 0.0, "success only at the final evaluation": 2 / 30, "zero at the end after a success": 0.0}[case]
    if case == "zero at the end after a success":
        points[1] = (20000, 0.2, 5, 5.0, 1.0)
    if final:  # policies.train appends the final evaluation to the curve: it is not an evaluation during training
        points.append((30000, final, 30, 5.0, 1.0))
    result = curve_result(points, final)
    for i, window in enumerate(result["components"]):  # the push term's mean about 0, beside two balanced ones
        window["components"] = {"reach": {"mean": 0.1 + 0.001 * i, "min": 0.0, "max": 0.2},
                                "grasp": {"mean": 0.1 - 0.001 * i, "min": 0.0, "max": 0.2},
                                "push": {"mean": 0.0005, "min": 0.0, "max": 0.001}}
    text = reward_reflection(result)
    assert_one_voice(text, Rate.of(final, 30))
    assert "final evaluation success: " + Rate.of(final, 30).text() in text
    assert "'push' averaged 0.0005 per step" in text


def test_the_report_of_an_early_stopped_best_and_a_skipped_final_stage(tmp_path: Path):
    from text2reward.runs.records import Candidate, FinalSummary, read
    from text2reward.runs.report import write_report
    from text2reward.runs.store import RunStore

    store = RunStore.create(tmp_path, {"task_id": "metaworld/push-v3", "backend": "file", "rounds": 1, "samples": 2})
    zero = [{"steps": s, "success_rate": 0.0, "episodes": 5, "mean_return": 1.0} for s in (4000, 8000)]
    for sample, (rate, stop) in enumerate([(2 / 30, {"steps": 8000, "reason": "it led the rung"}), (0.0, None)]):
        store.write_candidate(read(Candidate, {
            "id": f"r0-s{sample}", "round": 0, "sample": sample, "backend": "file", "model": "file", "status": "trained",
            "training": {"success_rate": rate, "best_success_rate": 0.0, "episodes": 30, "eval_episodes": 5, "steps": 8000,
                         "mean_return": 1.0, "mean_native_return": 0.0, "curve": zero},
            "stopped_early": stop}))
    store.write_final_summary(FinalSummary(best_candidate="r0-s0", seeds=[]))
    report = write_report(store).read_text()
    assert "## Final comparison (re-trained from scratch on new seeds)" not in report
    assert "No final comparison: the stage was skipped" in report
    assert "| r0-s0 | trained | 0.07 (2 of 30 episodes, 95% interval 0.02-0.21) | never above 0 (2 evaluations of 5 episodes each) | - | stopped early at step 8,000" in report
    assert "## Best reward: r0-s0 (success 0.07 (2 of 30 episodes, 95% interval 0.02-0.21))" in report
    assert_one_voice(report, Rate(2, 30))


def test_the_waiting_message_names_one_reply_file_per_reply():
    from text2reward.cli.shared import reply_file_flags

    assert reply_file_flags(1) == "--reply-file REPLY.md"
    assert reply_file_flags(2).startswith("--reply-file REPLY1.md --reply-file REPLY2.md") and "one --reply-file per reply" in reply_file_flags(2)
