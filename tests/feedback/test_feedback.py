"""Feedback text: reward reflection on crafted training records, trajectory analysis on real rollouts."""

import re

import numpy as np
import pytest

from policies.evaluate import run_episode
from policies.reward_program import SparseReward
from policies.task_env import make_task_env
from sim_envs import codec
from sim_envs.registry import get_task
from text2reward.feedback import (
    build_feedback_text,
    component_stats,
    describe_behaviour,
    episode_facts,
    reflection_tips,
    reward_reflection,
    trajectory_analysis,
)

WINDOWS = 25


def train_result(components, success, returns, windows=WINDOWS, **fields):
    """A TrainResult dict as policies.train writes it: `components(i)` -> {name: mean} for window i; `fields` adds
    or replaces top-level fields (eval_episodes, final_eval_episodes, success_rate)."""
    history = []
    for i in range(windows):
        means = components(i)
        history.append({
            "steps": 1000 * (i + 1),
            "components": {k: {"mean": v, "min": v - 0.1 * abs(v), "max": v + 0.1 * abs(v)} for k, v in means.items()},
            "native": 0.0,
            "step_success": success(i) / 2,
        })
    curve = [{"steps": 2000 * (j + 1), "success_rate": success(2 * j), "mean_return": returns(2 * j),
              "mean_native_return": 0.0, "mean_length": 200} for j in range(windows // 2)]
    return {"task": "metaworld/reach-v3", "steps": 1000 * windows, "components": history, "curve": curve,
            "success_rate": curve[-1]["success_rate"], **fields}


def healthy():
    return train_result(
        lambda i: {"reach": -1.0 + i / WINDOWS, "grasp": 0.3 * i / WINDOWS},
        success=lambda i: min(1.0, i / 10),
        returns=lambda i: 10.0 + i,
    )


def test_reflection_lists_each_component_with_ten_samples_and_min_mean_max():
    data = healthy()
    text = reward_reflection(data)
    for name in ("reach", "grasp"):
        line = next(row for row in text.splitlines() if row.startswith(f"{name}: ["))
        samples = line[line.index("[") + 1 : line.index("]")].split(", ")
        assert len(samples) == 10
        assert float(samples[0]) < float(samples[-1])  # the trend is visible
        assert re.search(r"min -?[\d.]+.*mean -?[\d.]+.*max -?[\d.]+", line)
    assert "success rate: [" in text and "1.00]" in text
    assert "none of the usual problems" in text
    assert reflection_tips(data) == []


def test_component_stats_summarise_training():
    stats = component_stats(healthy())
    assert set(stats) == {"reach", "grasp"}
    assert stats["reach"]["first"] == -1.0 and stats["reach"]["last"] == pytest.approx(-1.0 + 24 / 25)
    assert stats["reach"]["min"] == pytest.approx(-1.1) and stats["grasp"]["max"] > stats["grasp"]["mean"]
    assert stats["reach"]["share"] + stats["grasp"]["share"] == pytest.approx(1.0)


def test_constant_component_is_flagged():
    data = train_result(lambda i: {"reach": -1.0 + i / WINDOWS, "bonus": 0.0}, lambda i: 0.5, lambda i: 5.0)
    tips = reflection_tips(data)
    assert len(tips) == 1 and "'bonus'" in tips[0] and "never met" in tips[0] and "remove" not in tips[0]
    assert "'bonus' was 0 at every training step" in reward_reflection(data)
    offset = train_result(lambda i: {"reach": -1.0 + i / WINDOWS}, lambda i: 0.5, lambda i: 5.0)
    for window in offset["components"]:
        window["components"]["offset"] = {"mean": 2.0, "min": 2.0, "max": 2.0}
    (tip,) = reflection_tips(offset)
    assert "'offset' was 2 at every training step (it never changed)" in tip and "remove it" in tip


def test_a_success_term_that_never_fired_gets_no_removal_advice():
    """The task was never solved in training, so a success bonus could not fire: the tip says keep it."""
    data = train_result(lambda i: {"reach": -1.0 + i / WINDOWS, "success": 0.0}, lambda i: 0.0, lambda i: 5.0)
    tips = reflection_tips(data)
    (about,) = [t for t in tips if "'success'" in t]
    assert "has not fired yet: keep it" in about and "remove" not in about
    assert not any("remove" in tip for tip in tips)
    assert "remove" not in reward_reflection(data).split("Tips:")[1].lower()


def test_dominating_component_is_flagged():
    data = train_result(lambda i: {"reach": 50.0 + i, "grasp": 0.5 + 0.01 * i, "place": 0.2 + 0.01 * i}, lambda i: 0.5, lambda i: 5.0)
    tips = reflection_tips(data)
    assert len(tips) == 1 and tips[0].startswith("'reach' makes up 9") and "drowns 'grasp', 'place'" in tips[0]


def test_zero_success_and_rising_returns_are_flagged():
    hacked = train_result(lambda i: {"reach": 0.1 * i, "grasp": 0.05 * i}, lambda i: 0.0, lambda i: 10.0 + 5 * i)
    tips = " ".join(reflection_tips(hacked))
    assert "success rate was 0 at every evaluation" in tips and "final stage was never reached" in tips
    assert "hacked" in tips and "rose from 10 (step 2,000) to a peak of 120 (step 24,000)" in tips
    flat = train_result(lambda i: {"reach": 0.1 * i, "grasp": 0.05 * i}, lambda i: 0.0, lambda i: 10.0)
    assert "hacked" not in " ".join(reflection_tips(flat))


def test_a_return_rise_within_the_evaluations_spread_is_not_called_hacking():
    """The issue's case: returns rose from 113 to 134 while 5 episodes' returns spanned 64-322 (std ~90)."""
    def with_spread(std):
        data = train_result(lambda i: {"reach": 0.1 * i, "grasp": 0.05 * i}, lambda i: 0.0, lambda i: 113.0 + 21.0 * i / 24,
                            eval_episodes=5, final_eval_episodes=5)
        for point in data["curve"]:
            point.update(std_return=std, episodes=5)
        return data
    noisy = " ".join(reflection_tips(with_spread(90.0)))
    assert "success rate was 0 at every evaluation" in noisy and "hacked" not in noisy
    steady = " ".join(reflection_tips(with_spread(5.0)))  # the same rise, 5 episodes agreeing within 5: beyond noise
    assert "hacked" in steady and "rose from 113 (step 2,000) to a peak of 13" in steady


def test_success_lost_at_the_end_is_flagged():
    data = train_result(lambda i: {"reach": 0.1 * i, "grasp": 0.05 * i}, lambda i: 1.0 if i < 20 else 0.2, lambda i: 10.0,
                        eval_episodes=10, final_eval_episodes=30)
    tip = " ".join(reflection_tips(data))
    assert "peaked at 1.00 (10 of 10 episodes, 95% interval 0.72-1.00)" in tip
    assert "ended at 0.20 (6 of 30 episodes, 95% interval 0.10-0.37)" in tip and "drifted" in tip


def test_drift_within_noise_stays_silent():
    """The issue's case: 5-episode evaluations peaked at 0.80 and ended at 0.40 (intervals 0.38-0.96 and 0.12-0.77)."""
    data = train_result(lambda i: {"reach": 0.1 * i, "grasp": 0.05 * i}, lambda i: 0.8 if 10 <= i < 14 else 0.4, lambda i: 10.0,
                        eval_episodes=5, final_eval_episodes=5)
    assert data["success_rate"] == 0.4 and max(p["success_rate"] for p in data["curve"]) == 0.8
    assert not any("drifted" in tip for tip in reflection_tips(data))
    text = reward_reflection(data)
    assert "final evaluation success: 0.40 (2 of 5 episodes, 95% interval 0.12-0.77)" in text
    assert "one success moves its rate by 0.20" in text
    # an older record that does not say how many episodes is read as 5 per evaluation: silent too
    assert not any("drifted" in tip for tip in reflection_tips({k: v for k, v in data.items() if "episodes" not in k}))


@pytest.fixture(scope="module")
def drawer_episodes():
    task = get_task("metaworld/drawer-close-v3")
    env = make_task_env(task, SparseReward(), seed=0)
    policy = task.scripted_policy()
    episodes = [run_episode(env, policy, seed=0, record_views=True)]
    still = run_episode(env, lambda obs: np.zeros(4), seed=1, record_views=True)
    env.close()
    return task, episodes, still


def test_analysis_of_a_scripted_metaworld_rollout(drawer_episodes):
    task, episodes, _ = drawer_episodes
    text = trajectory_analysis(task, episodes)
    assert "task success: 1 of 1 episodes (yes)" in text
    assert "object moved (> 2 cm): 1 of 1 episodes" in text
    assert "object lifted (> 1.5 cm above its start): 0 of 1" in text
    start = float(re.search(r"object-to-goal distance at the start \(m\): ([\d.]+)", text).group(1))
    end = float(re.search(r"object-to-goal distance at the end \(m\): ([\d.]+)", text).group(1))
    assert end < start - 0.05  # the drawer was pushed towards its closed position
    words = describe_behaviour(task, episodes)
    assert words.startswith("Over 1 episode the robot completed the task in 1 of them.") and "moved in 1 of 1" in words


def test_analysis_of_a_robot_that_did_nothing(drawer_episodes):
    task, _, still = drawer_episodes
    facts = episode_facts(still.views)
    assert facts["object_moved"] is False and facts["object_max_displacement"] < 0.005
    text = trajectory_analysis(task, [still.views], successes=[still.success])
    assert "task success: 0 of 1 episodes (no)" in text and "object moved (> 2 cm): 0 of 1" in text
    assert "task success: not recorded" in trajectory_analysis(task, [still.views])
    assert "ended before the time limit" not in text


def test_analysis_of_a_random_ant_rollout():
    task = get_task("ant/forward")
    env = make_task_env(task, SparseReward(), seed=0)
    env.action_space.seed(0)
    episode = run_episode(env, lambda obs: env.action_space.sample(), seed=0, record_views=True)
    env.close()
    views = episode.views
    text = trajectory_analysis(task, [episode])
    forward = views[-1].torso.position[0] - views[0].torso.position[0]
    assert f"distance travelled forward, +x (m): {forward:.3f}" in text
    heights = [v.torso.position[2] for v in views]
    assert f"lowest torso height (m): {min(heights):.3f}" in text and f"highest torso height (m): {max(heights):.3f}" in text
    assert "front-left foot max height (m):" in text and "uprightness" in text
    assert f"episode length (steps): {episode.length}" in text
    if episode.length < task.max_episode_steps:  # random Ant torques often bounce it out of its height band
        assert "ended before the time limit (the environment terminated it): 1 of 1" in text
    words = describe_behaviour(task, [episode])
    assert "m forward on average" in words and "torso stayed between" in words


def test_build_feedback_text_combines_reflection_and_analysis(drawer_episodes):
    task, episodes, _ = drawer_episodes
    text = build_feedback_text(task, healthy(), episodes)
    assert text.index("Reward reflection") < text.index("Trajectory analysis") < text.index("In words:")
    assert build_feedback_text(task, healthy(), []) == reward_reflection(healthy())


class GoalSidedPolicy:
    """A deterministic policy with SB3's `predict`: the task's scripted policy when the goal lies left of x = 0,
    standing still otherwise, so some episodes of an evaluation succeed and some fail."""

    def __init__(self, task):
        self.scripted = task.scripted_policy()

    def predict(self, obs, deterministic=True):
        return (self.scripted(obs) if obs[-3] < 0.0 else np.zeros(4)), None


def test_coffee_push_analysis_states_the_evaluations_success_on_the_same_episodes():
    """Issue 29: coffee-push's evaluation said 0.80 while the analysis, on other reset seeds, said 0 of 3. The analysis
    now replays the final evaluation's first episodes and states the evaluation's own count for them."""
    from policies.evaluate import evaluate, model_actor
    from policies.train import EVAL_SEED_OFFSET
    from text2reward.runs.records import read_result
    from text2reward.training.job import analyse

    task = get_task("metaworld/coffee-push-v3")
    model, seed = GoalSidedPolicy(task), 0
    env = make_task_env(task, SparseReward(), seed=seed + EVAL_SEED_OFFSET)
    final = evaluate(env, model_actor(model), 6, seed=seed + EVAL_SEED_OFFSET)  # as policies.train's final evaluation
    env.close()
    evaluation = [e.success for e in final.episodes]
    assert 0 < sum(evaluation[:5]) < 5, evaluation  # successes and failures among the analysed ones, or the test proves little
    result = {"task": task.id, "steps": 0, "curve": [], "components": [], "success_rate": final.success_rate,
              "eval_episodes": 5, "final_eval_episodes": 6, "final_eval": codec.write(final)}
    record = analyse(task, model, SparseReward(), seed, 5, read_result(result))
    text = record.feedback_text
    stated = int(re.search(r"task success: (\d) of 5 episodes", text).group(1))
    assert stated == sum(evaluation[:5])
    assert "the final evaluation's first 5 episodes of 6 (reset seeds 10000-10004)" in text
    assert f"The final evaluation as a whole: success {final.success_rate:.2f} ({sum(evaluation)} of 6 episodes" in text
    assert f"on these 5 episodes it recorded {stated} success" in text and "the same as the replays" in text
    assert record.facts["success"] == pytest.approx(stated / 5) and not record.warnings


def test_a_peak_that_fell_is_analysed_beside_the_final_policy(drawer_episodes):
    from policies.stats import Rate
    from text2reward.feedback.compose import PeakComparison, peak_section
    from text2reward.runs.records import read_result

    task, episodes, still = drawer_episodes
    assert read_result({"success_rate": 0.4, "peak": {"steps": 8000, "success_rate": 0.8, "model_path": "peak_model.zip"}}).peak_fell
    assert not read_result({"success_rate": 0.8, "peak": {"steps": 8000, "success_rate": 0.8, "model_path": "peak_model.zip"}}).peak_fell
    assert not read_result({"success_rate": 0.4, "peak": {"steps": 8000, "success_rate": 0.8}}).peak_fell  # no checkpoint saved
    real = PeakComparison(steps=8000, during_training=Rate(4, 5), peak=[True] * 25 + [False] * 5, final=[False] * 25 + [True] * 5,
                          peak_episodes=episodes, final_episodes=[still])
    text = peak_section(task, real)
    assert "peaked during training at step 8,000 (0.80 (4 of 5 episodes" in text
    assert "the peak checkpoint succeeds in 0.83 (25 of 30" in text and "the final policy in 0.17 (5 of 30" in text
    assert "the peak checkpoint is better beyond noise (McNemar's exact test on the same episodes, p = 0.000)" in text
    assert "is this candidate's delivered policy" in text and real.peak_delivered
    assert "where the final did not in 25 episodes, the reverse in 5" in text
    assert "object moved (> 2 cm): 100% of episodes | 0% of episodes" in text
    luck = PeakComparison(steps=8000, during_training=Rate(4, 5), peak=[True] * 14 + [False] * 16, final=[True] * 12 + [False] * 18)
    assert "not apart beyond noise" in peak_section(task, luck) and "the final policy is kept" in peak_section(task, luck)
    assert not luck.peak_delivered


def test_a_peak_better_on_the_same_episodes_is_delivered_though_the_intervals_overlap():
    """soccer-v3, measured: the peak checkpoint succeeded in 18 of 30, the final policy in 9 of 30 on the same episodes,
    12 discordant episodes against 3 (McNemar exact p = 0.035). Their Wilson intervals overlap, so the unpaired rule
    called it luck and kept the worse policy; the paired test delivers the peak."""
    from policies.stats import Rate, mcnemar_exact
    from text2reward.feedback.compose import PeakComparison

    peak = [True] * 12 + [False] * 3 + [True] * 6 + [False] * 9
    final = [False] * 12 + [True] * 3 + [True] * 6 + [False] * 9
    comparison = PeakComparison(steps=20000, during_training=Rate(4, 5), peak=peak, final=final)
    assert (sum(peak), sum(final)) == (18, 9) and Rate(18, 30).ties(Rate(9, 30))
    assert comparison.p_value == pytest.approx(0.03515625) == mcnemar_exact(12, 3) and comparison.peak_delivered
    worse = PeakComparison(steps=20000, during_training=Rate(4, 5), peak=final, final=peak)
    assert not worse.peak_delivered  # the final policy better: never swapped for the peak
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(5, 0) == pytest.approx(0.0625)  # 5 against 0 is not enough


def test_a_delivered_peak_becomes_the_model_file_and_the_result(tmp_path):
    """deliver_peak: model.zip becomes the peak's file (the final policy kept as final_model.zip), the result's success
    is the peak's on the final episodes, and the candidate's record says which policy it is."""
    from text2reward.runs.records import Delivered, PeakCheck, TrainingSummary, read, read_result, write
    from text2reward.training.job import FINAL_MODEL_FILE, deliver_peak

    (tmp_path / "model.zip").write_bytes(b"final policy")
    (tmp_path / "peak_model.zip").write_bytes(b"peak policy")
    result = {"success_rate": 0.3, "best_success_rate": 0.8, "mean_return": 1.0, "mean_native_return": 2.0, "steps": 30000,
              "wall_seconds": 10.0, "steps_per_second": 3000.0, "curve": [], "final_eval_episodes": 30,
              "model_path": str(tmp_path / "model.zip"),
              "peak": {"steps": 20000, "success_rate": 0.8, "episodes": 5, "model_path": str(tmp_path / "peak_model.zip")}}
    result = read_result(result)
    deliver_peak(result, PeakCheck(steps=20000, success_on_final_episodes=0.6, only_peak=12, only_final=3, p_value=0.035,
                                   delivered=True), tmp_path)
    assert (tmp_path / "model.zip").read_bytes() == b"peak policy"
    assert (tmp_path / FINAL_MODEL_FILE).read_bytes() == b"final policy"
    assert result.success_rate == 0.6 and result.final_policy.success_rate == 0.3 and result.final_policy.episodes == 30
    summary = read(TrainingSummary, write(TrainingSummary.of_result(read_result(write(result)))))
    assert summary.success_rate == 0.6 and summary.delivered_peak == Delivered(
        policy="peak", steps=20000, p_value=0.035, only_peak=12, only_final=3)


def test_the_contrast_shows_each_candidate_with_its_interval_diff_and_separating_facts():
    from policies.stats import Rate
    from text2reward.feedback.compose import CandidateSummary, round_contrast

    best = CandidateSummary("r0-s0", "trained", "A = 1\nB = 2\n", Rate(24, 30), {"object_moved": 1.0, "gripper_object_min": 0.01, "steps": 200})
    close = CandidateSummary("r0-s1", "trained", "A = 1\nB = 3\n", Rate(20, 30), {"object_moved": 1.0, "gripper_object_min": 0.012, "steps": 200})
    far = CandidateSummary("r0-s2", "trained", "A = 5\nB = 2\n", Rate(2, 30), {"object_moved": 0.0, "gripper_object_min": 0.15, "steps": 200})
    broken = CandidateSummary("r0-s3", "invalid", "A = (\n", reason="SyntaxError: '(' was never closed")
    text = round_contrast(best, [close, far, broken], ["r0-s1"], "the higher final success")
    assert "The best so far, r0-s0: success 0.80 (24 of 30 episodes, 95% interval 0.63-0.90)." in text
    assert "Tied with it within noise (95% intervals overlap): r0-s1; it is shown as the best by the tie-break: the higher final success" in text
    assert "### r0-s1: success 0.67 (20 of 30 episodes" in text and "tied with the best" in text
    assert "### r0-s2: success 0.07 (2 of 30 episodes" in text and "worse than the best beyond noise" in text
    assert "object moved (> 2 cm): 0% of episodes here, 100% of episodes for the best" in text
    assert "-B = 2\n+B = 3" in text and "-A = 1\n+A = 5" in text
    assert "### r0-s3: invalid (SyntaxError: '(' was never closed)" in text
    starved = CandidateSummary("r0-s4", "failed", "A = 1\n", reason="one reward call did not finish while its process was kept "
                               "from running", by_machine=True)
    text = round_contrast(best, [starved], [], "the higher final success")
    assert "### r0-s4: not trained to the end: the machine stopped its training, not its code" in text
    assert "kept from running" not in text  # the machine's doing is never the model's lesson


def test_ranking_calls_overlapping_intervals_ties_and_states_the_tie_break():
    from policies.stats import Rate, wilson_interval
    from text2reward.runs.ranking import TIE_BREAK, best_candidate, rank, tie_summary
    from text2reward.runs.records import Candidate, read

    assert wilson_interval(4, 5) == pytest.approx((0.3755, 0.9638), abs=1e-4) and wilson_interval(0, 5)[0] == 0.0
    assert Rate(4, 5).ties(Rate(2, 5)) and not Rate(24, 30).ties(Rate(6, 30))

    def candidate(sample, successes, episodes, curve=(0.0,), round_=0):
        return read(Candidate, {"id": f"r{round_}-s{sample}", "round": round_, "sample": sample, "status": "trained",
                                    "training": {"success_rate": successes / episodes, "episodes": episodes,
                                                 "mean_native_return": 0.0, "curve": [{"steps": 100 * (i + 1), "success_rate": s} for i, s in enumerate(curve)]}})

    five = [candidate(0, 2, 5, curve=(0.6, 0.8)), candidate(1, 4, 5), candidate(2, 0, 5)]
    assert [s.id for s in rank(five)] == ["r0-s1", "r0-s0", "r0-s2"]
    assert tie_summary(five) == {"tied": ["r0-s0", "r0-s2"], "tie_break": TIE_BREAK}  # 4 of 5 vs 0 of 5: 0.38-0.96 and 0-0.43
    thirty = [candidate(0, 24, 30), candidate(1, 12, 30)]
    assert tie_summary(thirty) == {} and best_candidate(thirty).id == "r0-s0"
    # an exact tie goes to the curve, then to the earlier candidate: a later round only equal to the best does not replace it
    same = [candidate(0, 3, 5, round_=0), candidate(0, 3, 5, round_=1)]
    assert best_candidate(same).id == "r0-s0" and best_candidate([*same, candidate(1, 3, 5, curve=(0.2,), round_=1)]).id == "r1-s1"
