"""Screening on real MetaWorld rollouts: good rewards pass, bad ones fail, sets are cached."""

import numpy as np
import pytest

from policies.reward_program import ProgramReward
from sim_envs.errors import ConfigError, RewardProgramError
from sim_envs.registry import get_task
from text2reward.screening import clear_memory_cache, screen, screen_program, screening_trajectories

REACH = """
def compute_dense_reward(self, action):
    distance = np.linalg.norm(self.robot.ee_position - self.goal_position)
    reach = float(np.exp(-distance / 0.1))
    control = -0.01 * float(np.sum(np.square(action[:3])))
    return reach + control, {"reach": reach, "control": control}
"""
DRAWER = """
def compute_dense_reward(self, action):
    handle_to_goal = np.linalg.norm(self.obj.position - self.goal_position)
    hand_to_handle = np.linalg.norm(self.robot.ee_position - self.obj.position)
    return -handle_to_goal - 0.1 * hand_to_handle, {"close": -handle_to_goal, "approach": -0.1 * hand_to_handle}
"""
AWAY = """
def compute_dense_reward(self, action):
    distance = np.linalg.norm(self.robot.ee_position - self.goal_position)
    return distance, {"away": distance}
"""
CONSTANT = "def compute_dense_reward(self, action):\n    return 1.0, {'alive': 1.0}\n"


def in_process_returns(code, samples):
    """The sandbox runner's contract, run in this process for trusted test code."""
    reward = ProgramReward(code, name="screened")
    return [reward(view, action, 0.0, False)[0] for view, action in samples]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("screening-cache")


@pytest.fixture(scope="module")
def reach_set(cache_dir):
    return screening_trajectories(get_task("metaworld/reach-v3"), n_success=2, n_failure=4, seed=0, cache_dir=cache_dir)


@pytest.fixture(scope="module")
def drawer_set(cache_dir):
    return screening_trajectories(get_task("metaworld/drawer-close-v3"), n_success=2, n_failure=4, seed=0, cache_dir=cache_dir)


def test_reach_set_has_real_successes_and_failures(reach_set):
    assert reach_set.usable and len(reach_set.successes) == 2 and len(reach_set.failures) == 4
    assert {t.kind for t in reach_set.successes} == {"scripted"}
    assert {t.kind for t in reach_set.failures} <= {"freeze", "noise", "random"}
    for trajectory in reach_set.trajectories:
        assert trajectory.length == 200
        view, action = trajectory.steps[-1]
        assert action.shape == (4,) and np.all(np.abs(action) <= 1.0)
        closest = min(np.linalg.norm(v.robot.ee_position - v.goal_position) for v, _ in trajectory.steps)
        # MetaWorld's reach success is the gripper within 5 cm of the goal: check it independently
        assert (closest < 0.05) == trajectory.success
    failure_seeds = {t.seed for t in reach_set.failures}
    assert failure_seeds <= {t.seed for t in reach_set.successes}  # failures replay the same placements


def test_drawer_set_has_successes_and_failures(drawer_set):
    assert drawer_set.usable and len(drawer_set.successes) == 2 and len(drawer_set.failures) == 4
    for trajectory in drawer_set.successes:
        handle = [v.obj.position for v, _ in trajectory.steps]
        assert np.linalg.norm(handle[-1] - handle[0]) > 0.05  # the drawer really was pushed


def test_sets_are_cached_in_memory_and_on_disk(reach_set, cache_dir):
    task = get_task("metaworld/reach-v3")
    assert screening_trajectories(task, n_success=2, n_failure=4, seed=0, cache_dir=cache_dir) is reach_set
    assert len(list(cache_dir.glob("metaworld__reach-v3-2s4f-seed0-*.pkl"))) == 1
    clear_memory_cache()
    loaded = screening_trajectories(task, n_success=2, n_failure=4, seed=0, cache_dir=cache_dir)
    assert loaded is not reach_set
    assert [(t.kind, t.seed, t.success) for t in loaded.trajectories] == [(t.kind, t.seed, t.success) for t in reach_set.trajectories]
    view, action = loaded.trajectories[0].steps[5]
    assert np.array_equal(view.robot.ee_position, reach_set.trajectories[0].steps[5][0].robot.ee_position)
    assert not view.robot.ee_position.flags.writeable and not action.flags.writeable


def test_expert_style_reach_reward_passes(reach_set):
    result = screen_program(get_task("metaworld/reach-v3"), REACH, reach_set, in_process_returns)
    assert result.passed and result.score == 1.0
    assert len(result.returns_success) == 2 and len(result.returns_failure) == 4
    assert min(result.returns_success) > max(result.returns_failure)
    assert "8 of 8 pairs" in result.comparison_text and "passed" in result.comparison_text


def test_drawer_reward_passes_on_drawer_close(drawer_set):
    result = screen_program(get_task("metaworld/drawer-close-v3"), DRAWER, drawer_set, in_process_returns)
    assert result.passed and result.score >= 0.8


@pytest.mark.parametrize("code, note", [(AWAY, "FAILED"), (CONSTANT, "exactly the same return")])
def test_bad_rewards_fail(reach_set, code, note):
    result = screen_program(get_task("metaworld/reach-v3"), code, reach_set, in_process_returns)
    assert not result.passed and result.score < 0.5
    assert note in result.comparison_text and "Failed rollouts by kind" in result.comparison_text


def test_screen_scores_pairs():
    result = screen([3.0, 1.0], [2.0, 0.0, 1.0], threshold=0.6)
    assert result.score == pytest.approx(4 / 6) and result.passed  # ties do not count as wins
    assert "4 of 6 pairs" in result.comparison_text
    assert not screen([1.0], [1.0]).passed
    with pytest.raises(ConfigError, match="at least one successful and one failed"):
        screen([], [1.0])


def test_runner_contract_and_tasks_without_scripts(reach_set):
    task = get_task("metaworld/reach-v3")
    with pytest.raises(RewardProgramError, match="one total per step"):
        screen_program(task, REACH, reach_set, lambda code, samples: [0.0])
    with pytest.raises(ConfigError, match="not metaworld/push-v3"):
        screen_program(get_task("metaworld/push-v3"), REACH, reach_set, in_process_returns)
    with pytest.raises(ConfigError, match="has no scripted policy"):
        screening_trajectories(get_task("ant/forward"))
