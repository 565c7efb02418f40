"""Reward modes: potential-based shaping keeps the sparse task's returns up to gamma^T Phi(s_T) - Phi(s_0) along real
rollouts (terminal states at 0), the progress mode's count bonus fades as a cell is revisited, and every stage of
the loop (prompt, heuristic programs, extraction, validation in the jail, screening, training) works in each mode."""

import math

import numpy as np
import pytest
from short_training import SHORT_ALGO, SHORT_HP

from policies.reward_program import ProgramReward, runnable_source
from policies.shaping import COUNT_BONUS, PotentialShaping, ProgressBonus
from policies.task_env import make_task_env
from sim_envs import get_task
from sim_envs.errors import ConfigError, RewardProgramError
from text2reward.generation.extraction import extract_code
from text2reward.generation.llm.base import GenerationRequest
from text2reward.generation.llm.heuristic import HeuristicBackend
from text2reward.generation.prompting import build_initial_messages
from text2reward.runs.records import PromptContext
from text2reward.sandbox import static_check, validate
from text2reward.sandbox.states import collect_states

GAMMA = 0.97
EXACT = 1e-9
"""Relative tolerance of the telescoping identity: the sums are exact in real arithmetic, and T <= 1000
floating-point additions of terms of size ~1 stay far inside it."""

REACH_POTENTIAL = '''
import numpy as np

SCALE = 4.0  # range: 1..20

def compute_potential(self):
    distance = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    closeness = 1.0 - np.tanh(SCALE * distance)
    return float(closeness), {"closeness": float(closeness)}
'''

HOPPER_POTENTIAL = '''
def compute_potential(self):
    height = float(self.torso.position[2])
    return height, {"height": height}
'''

CONSTANT_PROGRESS = '''
def compute_progress(self):
    return 0.3
'''


def discounted(rewards, gamma):
    return sum(gamma**t * r for t, r in enumerate(rewards))


def rollout(env, seed, steps=None):
    """Random actions until the episode ends; returns (rewards, sparse rewards, infos, reset info, terminated)."""
    rng = np.random.default_rng(seed)
    _, reset_info = env.reset(seed=seed)
    rewards, sparse, infos = [], [], []
    terminated = truncated = False
    while not (terminated or truncated) and (steps is None or len(rewards) < steps):
        action = rng.uniform(env.action_space.low, env.action_space.high).astype(np.float32)
        _, reward, terminated, truncated, info = env.step(action)
        rewards.append(float(reward))
        sparse.append(1.0 if info["step_success"] else 0.0)
        infos.append(info)
    return rewards, sparse, infos, reset_info, terminated


@pytest.mark.parametrize("task_id", ["fetch/reach", "metaworld/reach-v3"])
def test_potential_shaping_differs_from_sparse_by_the_telescoped_potential(task_id):
    """A truncated episode: discounted shaped return - discounted sparse return == gamma^T Phi(s_T) - Phi(s_0)."""
    task = get_task(task_id)
    env = make_task_env(task, ProgramReward(REACH_POTENTIAL, mode="potential"), seed=3, reward_mode="potential", gamma=GAMMA)
    try:
        rewards, sparse, infos, reset_info, terminated = rollout(env, seed=3, steps=None if task.family == "fetch" else 120)
    finally:
        env.close()
    assert not terminated
    phi_0, phi_T, T = reset_info["potential"], infos[-1]["potential"], len(rewards)
    assert phi_0 != phi_T  # the arm moved: the identity below is not 0 == 0
    expected = GAMMA**T * phi_T - phi_0
    assert discounted(rewards, GAMMA) - discounted(sparse, GAMMA) == pytest.approx(expected, rel=EXACT, abs=EXACT)
    # the per-step pieces the feedback reads are there, and add up to the reward
    components = infos[5]["reward_components"]
    assert set(components) >= {"success", "shaping", "potential", "potential.closeness"}
    assert components["success"] + components["shaping"] == pytest.approx(rewards[5], abs=1e-12)


def test_potential_of_a_terminal_state_is_zero():
    """hopper/forward ends when the hopper falls: there Phi(s_T) counts as 0, so the difference is -Phi(s_0)."""
    task = get_task("hopper/forward")
    env = make_task_env(task, ProgramReward(HOPPER_POTENTIAL, mode="potential"), seed=0, reward_mode="potential", gamma=GAMMA)
    try:
        rewards, sparse, infos, reset_info, terminated = rollout(env, seed=0)
    finally:
        env.close()
    assert terminated and len(rewards) < task.max_episode_steps
    assert infos[-1]["potential"] > 0.5  # the torso still has a height: the zero is the rule, not the state
    expected = -reset_info["potential"]
    assert discounted(rewards, GAMMA) - discounted(sparse, GAMMA) == pytest.approx(expected, rel=EXACT, abs=EXACT)


def test_progress_count_bonus_falls_as_a_cell_is_revisited():
    task = get_task("fetch/reach")  # no object: the cell is the progress level alone
    env = make_task_env(task, ProgramReward(CONSTANT_PROGRESS, mode="progress"), seed=0, reward_mode="progress", gamma=GAMMA)
    try:
        _, _, infos, _, _ = rollout(env, seed=0, steps=30)
        _, _, later, _, _ = rollout(env, seed=1, steps=5)  # counts carry over episodes
    finally:
        env.close()
    bonuses = [info["reward_components"]["count_bonus"] for info in infos + later]
    assert bonuses == pytest.approx([COUNT_BONUS / math.sqrt(n) for n in range(1, 36)], rel=1e-12)
    assert all(info["reward_components"]["progress"] == 0.3 for info in infos)
    # constant progress: the gain is the potential form's (gamma - 1) * p on every step after the first
    assert infos[3]["reward_components"]["progress_gain"] == pytest.approx((GAMMA - 1) * 0.3, abs=1e-12)


def test_a_progress_program_never_stands_in_for_the_rules_progress():
    """The progress mode's own value (`info["progress"]`, the program's) and the task's progress toward its success rule
    (`info["rule_progress"]`, from the simulator: what ranking and early stopping read) are separate keys: a program
    claiming 1.0 everywhere leaves an episode's rule progress what the state says. They shared one key before."""
    from policies.evaluate import run_episode

    claims_done = "def compute_progress(self):\n    return 1.0\n"
    task = get_task("metaworld/pick-place-v3")  # random actions never place the puck
    env = make_task_env(task, ProgramReward(claims_done, mode="progress"), seed=0, reward_mode="progress", gamma=GAMMA)
    rng = np.random.default_rng(0)
    try:
        stats = run_episode(env, lambda obs: rng.uniform(-1, 1, size=4), seed=0)
        _, _, _, _, info = env.step(rng.uniform(-1, 1, size=4))
    finally:
        env.close()
    assert info["progress"] == 1.0 and info["rule_progress"] < 1.0
    assert stats.progress is not None and stats.progress < 1.0 and not stats.success


def test_progress_cells_split_by_level_and_object_position():
    task = get_task("fetch/push")
    env = ProgressBonus(make_task_env(task, ProgramReward(CONSTANT_PROGRESS, mode="progress"), seed=0, flatten=False), GAMMA)
    try:
        env.reset(seed=0)
        view = env.get_wrapper_attr("view")
        here = env.cell_of(0.3, view)
        assert here[0] == 6 and len(here) == 4  # level 6 of 20, then the block's 5 cm cell
        assert env.cell_of(0.999, view)[0] == 19 and env.cell_of(1.0, view)[0] == 19
        assert env.count_bonus(here) == COUNT_BONUS and env.count_bonus(here) < COUNT_BONUS
        assert env.count_bonus(env.cell_of(0.9, view)) == COUNT_BONUS  # a new level pays in full
    finally:
        env.close()


def test_shaping_wrappers_refuse_a_discount_out_of_range():
    task = get_task("fetch/reach")
    inner = make_task_env(task, ProgramReward(REACH_POTENTIAL, mode="potential"), seed=0, flatten=False)
    with pytest.raises(ConfigError, match="discount"):
        PotentialShaping(inner, 1.5)
    inner.close()


@pytest.mark.parametrize("mode", ["potential", "progress"])
@pytest.mark.parametrize("task_id", ["metaworld/drawer-open-v3", "hopper/back_flip"])
def test_heuristic_writes_each_mode_and_it_passes_validation_in_the_jail(task_id, mode):
    task = get_task(task_id)
    messages = build_initial_messages(task, reward_mode=mode)
    assert f"def compute_{mode}(self)" in messages[1]["content"]
    (reply,) = HeuristicBackend(seed=0).generate(GenerationRequest(messages=messages, n=1, task_id=task_id, round=0,
                                                                  context=PromptContext(reward_mode=mode)))
    assert reply.rule_based and "no language model" in reply.text
    extraction = extract_code(reply.text, mode)
    assert extraction.ok, extraction.error
    assert f"def compute_{mode}(self):" in extraction.code and "action" not in extraction.code.split(f"def compute_{mode}")[1]
    report = validate(extraction.code, task, collect_states(task, n_random=20, n_scripted=0), mode=mode)
    assert report.ok, report.errors
    if mode == "progress":  # the weighted share of the stages: inside [0, 1] on real states
        function = ProgramReward(extraction.code, mode=mode)
        for view, action in collect_states(task, n_random=20, n_scripted=0):
            value, _ = function(view, action, 0.0, False)
            assert 0.0 <= value <= 1.0


def test_a_program_for_another_mode_is_refused_with_the_mode_named():
    dense_reply = "```python\ndef compute_dense_reward(self, action):\n    return 0.0\n```"
    extraction = extract_code(dense_reply, "potential")
    assert not extraction.ok and "compute_potential(self)" in extraction.error
    (problem,) = static_check("def compute_dense_reward(self, action):\n    return 0.0\n", "progress")
    assert "defines no compute_progress(self)" in problem and "another reward mode" in problem
    (problem,) = static_check("def compute_potential(self, action):\n    return 0.0\n", "potential")
    assert "requires 2 positional parameters" in problem
    with pytest.raises(RewardProgramError, match="unknown reward mode"):
        runnable_source("", "shaped")


def test_train_refuses_a_mode_without_a_program(tmp_path):
    from policies.train import TrainConfig, train

    with pytest.raises(ConfigError, match="--reward-mode potential shapes a reward program"):
        train(TrainConfig("fetch/reach", tmp_path, reward="expert", reward_mode="potential", steps=10))


@pytest.mark.slow
def test_a_run_in_potential_mode_screens_trains_and_feeds_back(tmp_path):
    from text2reward.loop import start_run
    from text2reward.settings import RunConfig

    config = RunConfig.of(task_id="metaworld/reach-v3", backend="heuristic", rounds=1, samples=1, steps=300, workers=1, final_seeds=0,
                          eval_freq=150, eval_episodes=2, overrides=SHORT_HP, algo=SHORT_ALGO,
                          success_threshold=1.01, reward_mode="potential", video=False)
    store = start_run(config, tmp_path)
    (candidate,) = store.candidates()
    assert candidate.status == "trained", candidate.reason
    code = (store.root / candidate.code_file).read_text()
    assert "def compute_potential(self):" in code and "def compute_dense_reward" not in code  # the adapter is never stored
    assert "rise of the potential" in candidate.screening["comparison_text"]
    result = store.read_json("rounds/r0/s0/training/train/result.json")
    assert result["reward_mode"] == "potential"
    assert {"success", "shaping", "potential"} <= {c for point in result["components"] for c in point["components"]}
    prompt = store.read_json("rounds/r0/prompt.json")
    assert "def compute_potential(self)" in prompt["messages"][1]["content"] and prompt["context"]["reward_mode"] == "potential"


@pytest.mark.slow
def test_t2r_train_with_a_progress_file_runs_it_in_the_jail(tmp_path):
    import subprocess
    import sys

    reward = tmp_path / "progress.py"
    reward.write_text(CONSTANT_PROGRESS.replace("return 0.3", "return float(1.0 - np.tanh(4.0 * np.linalg.norm(self.robot.ee_position - self.goal_position)))"))
    out = tmp_path / "train"
    done = subprocess.run([sys.executable, "-m", "text2reward.cli", "train", "--task", "fetch/reach", "--reward", str(reward),
                           "--reward-mode", "progress", "--steps", "200", "--eval-freq", "100", "--eval-episodes", "1",
                           "--algo", SHORT_ALGO, "--hp", "learning_starts=50", "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    import json

    result = json.loads((out / "result.json").read_text())
    assert result["reward_mode"] == "progress"
    assert result["reward_isolation"].split()[0] in ("bubblewrap", "landlock"), result["reward_isolation"]  # jailed, not trusted
    refused = subprocess.run([sys.executable, "-m", "text2reward.cli", "train", "--task", "fetch/reach", "--reward-mode", "progress",
                              "--steps", "10", "--out", str(tmp_path / "x")], capture_output=True, text=True)
    assert refused.returncode != 0 and "shapes a reward program" in refused.stderr
