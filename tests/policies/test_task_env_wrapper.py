"""The reward wrapper: rewards, components and success reporting on a real MetaWorld env."""

import numpy as np
import pytest

from policies.reward_program import ExpertReward, ProgramReward, SparseReward, normalise_output
from policies.task_env import make_task_env
from sim_envs import get_task
from sim_envs.errors import RewardProgramError

REACH = '''
import numpy as np

def compute_dense_reward(self, action):
    distance = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    return -distance, {"distance": distance, "effort": float(np.sum(np.square(action)))}
'''


def _rollout(env, steps, policy=None):
    obs, _ = env.reset(seed=0)
    records = []
    for _ in range(steps):
        action = policy(obs) if policy else env.action_space.sample()
        obs, reward, terminated, truncated, info = env.step(action)
        records.append((reward, info, env.get_wrapper_attr("view"), action))
        if terminated or truncated:
            break
    return records


def test_expert_reward_is_the_native_reward():
    env = make_task_env(get_task("metaworld/reach-v3"), ExpertReward(), seed=0)
    for reward, info, _, _ in _rollout(env, 30):
        assert reward == info["native_reward"]
        assert info["reward_components"] == {"expert": reward}


def test_program_reward_and_components_are_computed_from_the_view():
    env = make_task_env(get_task("metaworld/reach-v3"), ProgramReward(REACH), seed=0)
    for reward, info, view, action in _rollout(env, 30):
        distance = np.linalg.norm(view.robot.ee_position - view.goal_position)
        assert reward == pytest.approx(-distance)
        assert info["reward_components"]["distance"] == pytest.approx(distance)
        assert info["reward_components"]["effort"] == pytest.approx(np.sum(np.square(action)))
        assert info["native_reward"] != reward


def test_success_mode_any_latches_and_sparse_pays_only_on_success():
    task = get_task("metaworld/reach-v3")
    env = make_task_env(task, SparseReward(), seed=0)
    records = _rollout(env, 200, policy=task.scripted_policy())
    first = next(i for i, (_, info, _, _) in enumerate(records) if info["step_success"])
    assert all(info["is_success"] for _, info, _, _ in records[first:])
    assert all(reward == float(info["step_success"]) for reward, info, _, _ in records)


def test_success_mode_final_reports_the_current_step():
    env = make_task_env(get_task("fetch/reach"), SparseReward(), seed=0)
    for _, info, _, _ in _rollout(env, 50):
        assert info["is_success"] == info["step_success"]


@pytest.mark.parametrize(
    "value, expected",
    [(1.5, (1.5, {"reward": 1.5})), ((2, {"a": np.float32(1)}), (2.0, {"a": 1.0})), (np.array([3.0]), (3.0, {"reward": 3.0}))],
)
def test_output_normalisation(value, expected):
    assert normalise_output(value) == expected


@pytest.mark.parametrize("bad", ["text", None, (1.0, {"a": "x"}), [1.0, 2.0], (1.0, {3: 1.0})])
def test_bad_outputs_raise_a_contract_error(bad):
    with pytest.raises(RewardProgramError, match="must be|names must"):
        normalise_output(bad)


@pytest.mark.parametrize(
    "source, message",
    [
        ("def reward(self, action):\n    return 0.0\n", "defines no compute_dense_reward"),
        ("def compute_dense_reward(self):\n    return 0.0\n", "must be compute_dense_reward\\(self, action\\)"),
        ("def compute_dense_reward(self, action)\n    return 0.0\n", "syntax error on line 1"),
    ],
)
def test_programs_breaking_the_contract_are_refused(source, message):
    with pytest.raises(RewardProgramError, match=message):
        ProgramReward(source)
