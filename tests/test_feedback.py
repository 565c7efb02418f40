"""Feedback text: reward reflection on crafted training records, trajectory analysis on real rollouts."""

import re

import numpy as np
import pytest

from policies.evaluate import run_episode
from policies.reward_program import SparseReward
from policies.task_env import make_task_env
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


def train_result(components, success, returns, windows=WINDOWS):
    """A TrainResult dict as policies.train writes it: `components(i)` -> {name: mean} for window i."""
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
            "success_rate": curve[-1]["success_rate"]}


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
    assert len(tips) == 1 and "'bonus'" in tips[0] and "constant" in tips[0] and "never met" in tips[0]
    assert "'bonus' was 0 at every training step" in reward_reflection(data)


def test_dominating_component_is_flagged():
    data = train_result(lambda i: {"reach": 50.0 + i, "grasp": 0.5 + 0.01 * i, "place": 0.2 + 0.01 * i}, lambda i: 0.5, lambda i: 5.0)
    tips = reflection_tips(data)
    assert len(tips) == 1 and tips[0].startswith("'reach' makes up 9") and "drowns 'grasp', 'place'" in tips[0]


def test_zero_success_and_rising_returns_are_flagged():
    hacked = train_result(lambda i: {"reach": 0.1 * i, "grasp": 0.05 * i}, lambda i: 0.0, lambda i: 10.0 + 5 * i)
    tips = " ".join(reflection_tips(hacked))
    assert "success rate was 0 at every evaluation" in tips and "final stage was never reached" in tips
    assert "hacked" in tips and "rose from 10 to 120" in tips
    flat = train_result(lambda i: {"reach": 0.1 * i, "grasp": 0.05 * i}, lambda i: 0.0, lambda i: 10.0)
    assert "hacked" not in " ".join(reflection_tips(flat))


def test_success_lost_at_the_end_is_flagged():
    data = train_result(lambda i: {"reach": 0.1 * i, "grasp": 0.05 * i}, lambda i: 1.0 if i < 20 else 0.2, lambda i: 10.0)
    assert "peaked at 1.00 but ended at 0.20" in " ".join(reflection_tips(data))


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
