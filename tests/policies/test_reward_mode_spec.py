"""A reward mode is one RewardModeSpec: a toy `cost` mode, defined and registered here alone, goes through the real
prompt, extraction, static check, jailed validation, screening and training, and comes out trained on minus its cost.
The registry refuses a name twice and names the registered modes for an unknown one."""

import csv
import dataclasses
import json
import math

import gymnasium as gym
import numpy as np
import pytest
from short_training import SHORT_HP

from policies.config import TrainConfig
from policies.reward_modes import (
    DENSE,
    REWARD_MODES,
    RewardModeSpec,
    ScreeningMeasure,
    check_mode,
    mode_help,
    register_reward_mode,
    require_program,
    reward_mode,
    runnable_source,
    unregister_reward_mode,
)
from sim_envs import get_task
from sim_envs.errors import ConfigError, DuplicateChoice
from text2reward.generation.extraction import extract_code
from text2reward.generation.llm.base import GenerationRequest
from text2reward.generation.llm.heuristic import HeuristicBackend
from text2reward.generation.prompting import build_initial_messages
from text2reward.sandbox import run_reward, static_check, validate
from text2reward.sandbox.states import collect_states
from text2reward.screening import screen_program, screening_trajectories
from text2reward.training.job import TrainJob, run_job

TASK = "metaworld/reach-v3"
"""A task with a scripted policy (screening needs one) and a short SBX SAC training."""

# ------------------------------------------------------------------ the toy mode, from this file alone

COST_ADAPTER = """

def compute_dense_reward(self, action):  # added by text2reward: the cost mode calls compute_cost(self, action)
    return compute_cost(self, action)
"""
"""The sandbox's one entry point returns the cost; the mode's wrapper makes it a reward."""

COST_CONTRACT = """{% extends "_contract.j2" %}
{% block function %}
## The cost function
Write `def compute_cost(self, action) -> tuple[float, dict[str, float]]` at module level.
- Return `(cost, components)`: `cost` is a non-negative float, what this step cost; the agent is trained on minus it.
{% endblock %}
{% block same %}cost{% endblock %}
{% block tips %}
- Make the cost 0 only where the task succeeds, and larger the further the robot is from succeeding.
{% endblock %}
"""
COST_SYSTEM = ("You write cost functions in Python with numpy: a function `compute_cost(self, action)` whose value, negated, "
               "is the reward an agent is trained on.")


class RecordedSteps(list):
    """Instrumentation, not the mode: what the cost mode's wrapper paid at each step of each env it wrapped."""


WRAPPED: list[RecordedSteps] = []


class NegatedCost(gym.Wrapper):
    """The cost mode's training reward: minus the program's cost (the inner TaskRewardWrapper's reward)."""

    def __init__(self, env: gym.Env, gamma: float):
        super().__init__(env)
        self.steps = RecordedSteps()
        WRAPPED.append(self.steps)

    def step(self, action):
        obs, cost, terminated, truncated, info = self.env.step(action)
        view = self.env.get_wrapper_attr("view")
        info["cost"] = float(cost)
        info["reward_components"] = {"cost": float(cost), **{f"cost.{k}": v for k, v in info["reward_components"].items()}}
        reward = -float(cost)
        # the action as SB3 gave it (float32), the dtype the program computes its effort in
        self.steps.append({"reward": reward, "action": np.array(action), "ee": np.array(view.robot.ee_position),
                           "goal": np.array(view.goal_position), "done": terminated or truncated})
        return obs, reward, terminated, truncated, info


def negated_total(values: np.ndarray) -> float:
    """Less cost over a rollout scores higher."""
    return -float(np.sum(values))


COST = RewardModeSpec(
    name="cost",
    function="compute_cost",
    parameters=("self", "action"),
    noun="cost function",
    value_noun="cost",
    value_range=(0.0, math.inf),
    adapter=COST_ADAPTER,
    wrap=NegatedCost,
    shapes_sparse_reward=False,
    screening=ScreeningMeasure("negated cost", "Negated costs (minus the sum of per-step costs over a rollout)",
                               "A useful cost is lower along successful rollouts than along failed ones.", negated_total),
    system_prompt=COST_SYSTEM,
    contract=COST_CONTRACT,
    summary="cost (compute_cost, the reward is minus it)",
    report_text="cost (compute_cost: the training reward is minus the cost)",
)

W_DISTANCE, W_ACTION = 2.0, 0.01
COST_PROGRAM = f'''
W_DISTANCE = {W_DISTANCE}
W_ACTION = {W_ACTION}


def compute_cost(self, action):
    distance = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    effort = float(np.sum(np.square(action)))
    return W_DISTANCE * distance + W_ACTION * effort, {{"distance": distance, "effort": effort}}
'''
REPLY = f"A cost that falls as the gripper nears the goal, with a small effort term.\n\n```python\n{COST_PROGRAM}```\n"


def expected_cost(ee, goal, action) -> float:
    """The program's formula, computed here from the step's numbers."""
    return W_DISTANCE * float(np.linalg.norm(ee - goal)) + W_ACTION * float(np.sum(np.square(action)))


@pytest.fixture
def cost_mode():
    register_reward_mode(COST)
    WRAPPED.clear()
    try:
        yield COST
    finally:
        unregister_reward_mode("cost")
    assert "cost" not in REWARD_MODES


# ------------------------------------------------------------------ the registry


def test_an_unknown_mode_is_one_line_naming_the_registered_modes(cost_mode):
    with pytest.raises(ConfigError) as raised:
        reward_mode("shaped")
    message = str(raised.value)
    assert "\n" not in message
    assert message == "unknown reward mode 'shaped' (--reward-mode); use one of dense, potential, progress, cost"
    with pytest.raises(ConfigError, match="use one of dense, potential, progress, cost$"):
        check_mode("shaped")


def test_a_duplicate_registration_is_refused(cost_mode):
    with pytest.raises(DuplicateChoice, match="a reward mode named 'cost' is registered already"):
        register_reward_mode(COST)
    with pytest.raises(DuplicateChoice, match="a reward mode named 'dense' is registered already"):
        register_reward_mode(dataclasses.replace(COST, name="dense"))
    assert reward_mode("dense") is DENSE and reward_mode("cost") is COST
    with pytest.raises(TypeError):
        REWARD_MODES["other"] = COST  # type: ignore[index]  # the registry is read-only: register through the function


def test_a_mode_without_an_adapter_must_be_the_entry_point():
    with pytest.raises(ConfigError, match="has no adapter"):
        dataclasses.replace(COST, adapter=None)


def test_the_toy_mode_is_gone_after_its_test():
    assert list(REWARD_MODES) == ["dense", "potential", "progress"]
    with pytest.raises(ConfigError, match="use one of dense, potential, progress$"):
        reward_mode("cost")


# ------------------------------------------------------------------ the toy mode through the real paths


def test_the_cost_mode_is_prompted_extracted_checked_and_screened(cost_mode):
    task = get_task(TASK)
    system, user = build_initial_messages(task, reward_mode="cost")
    assert COST_SYSTEM in system["content"]
    assert "## The cost function\nWrite `def compute_cost(self, action)" in user["content"]
    assert "the `action` array; never write to them" in user["content"]  # the skeleton read the spec: it takes an action
    assert "the same state and action must always give the same cost." in user["content"]
    assert "- Imports: `np` (numpy)" in user["content"]  # the skeleton's shared rules are there too

    extraction = extract_code(REPLY, "cost")
    assert extraction.ok, extraction.error
    assert "def compute_cost(self, action):" in extraction.code
    refused = extract_code("```python\ndef compute_dense_reward(self, action):\n    return 0.0\n```", "cost")
    assert not refused.ok and "compute_cost(self, action)" in refused.error
    assert static_check(extraction.code, "cost") == []
    (problem,) = static_check("def compute_cost(self):\n    return 0.0\n", "cost")
    assert "compute_cost takes 1 parameters (self)" in problem and "compute_cost(self, action)" in problem

    report = validate(extraction.code, task, collect_states(task, n_random=10, n_scripted=0), mode="cost")
    assert report.ok, report.errors
    assert report.isolation.split()[0] in ("bubblewrap", "landlock"), report.isolation  # the jail ran it

    trajectories = screening_trajectories(task, n_success=2, n_failure=4, seed=0)
    costs: list[list[float]] = []

    def run_returns(code, samples):  # the loop's runner (text2reward.loop.Loop.screen): the program in the jail
        result = run_reward(runnable_source(code, "cost"), samples)
        assert result.error is None, result.error
        costs.append([total for total, _ in result.outputs])
        return costs[-1]

    screening = screen_program(task, extraction.code, trajectories, run_returns, mode="cost")
    assert screening.passed, screening.comparison_text
    assert "your cost gave the successful rollout the higher negated cost in 8 of 8 pairs" in screening.comparison_text
    assert screening.comparison_text.splitlines()[1].startswith("Negated costs (minus the sum of per-step costs over a rollout)")
    first = trajectories.successes[0]
    assert costs[0][0] == pytest.approx(expected_cost(np.asarray(first.steps[0][0].robot.ee_position),
                                                      np.asarray(first.steps[0][0].goal_position), first.steps[0][1]), rel=1e-12)
    assert screening.returns_success[0] == pytest.approx(-sum(costs[0][: first.length]), rel=1e-12)


def test_consumers_read_the_spec_not_the_name(cost_mode, tmp_path):
    from text2reward.runs.records import PromptContext
    from text2reward.runs.report import write_report
    from text2reward.runs.store import RunStore
    from text2reward.settings import RunConfig

    assert mode_help() == ("dense (the program is the reward), potential (compute_potential shapes the sparse success reward), "
                           "progress (compute_progress, with a count bonus) or cost (compute_cost, the reward is minus it)")
    store = RunStore.create(tmp_path, RunConfig.of(task_id=TASK, reward_mode="cost").to_record())
    assert "- reward mode: cost (compute_cost: the training reward is minus the cost)\n" in write_report(store).read_text()
    with pytest.raises(ConfigError, match="--reward-source keypoints writes a dense reward"):  # a keypoint program is no cost
        RunConfig.of(task_id=TASK, reward_source="keypoints", reward_mode="cost").validate()
    with pytest.raises(ConfigError, match=r"^--reward-mode cost needs a reward program; pass --reward PATH.py defining "
                                          r"compute_cost\(self, action\), or drop --reward-mode$"):
        require_program("cost", "expert")
    with pytest.raises(ConfigError, match="the heuristic backend cannot write --reward-mode cost programs"):
        HeuristicBackend(seed=0).generate(GenerationRequest(messages=[], n=1, task_id=TASK, round=0, context=PromptContext(reward_mode="cost")))
    from policies.her import her_refusal

    assert "cannot relabel a reward program" in her_refusal(get_task("fetch/reach"), "sbx-sac", False, "cost")  # no shaping
    assert runnable_source(COST_PROGRAM, "cost").endswith(COST_ADAPTER)


@pytest.mark.slow
def test_a_job_trains_on_minus_the_cost_at_every_real_step(cost_mode, tmp_path):
    """The training worker's own code (run_job, in this process, where the toy mode is registered), a few hundred
    SBX SAC steps with the program in the jail: every reward SB3 received is minus the program's cost of that step."""
    steps = 400
    code = tmp_path / "cost.py"
    code.write_text(extract_code(REPLY, "cost").code)
    config = TrainConfig(task_id=TASK, out_dir=tmp_path / "job" / "train", reward="code", reward_mode="cost", steps=steps, seed=0,
                         eval_freq=200, eval_episodes=1, n_envs=1,
                         overrides={**SHORT_HP, "final_eval_episodes": 1})
    record = run_job(TrainJob(train=config, code_path=str(code), analysis_episodes=1))
    result = json.loads((tmp_path / "job" / "done.json").read_text())["result"]  # the file the loop reads
    assert record.result.steps == steps
    assert result["reward_mode"] == "cost" and result["steps"] == steps
    assert result["reward_isolation"].split()[0] in ("bubblewrap", "landlock"), result["reward_isolation"]
    assert {"cost", "cost.distance", "cost.effort"} <= {c for point in result["components"] for c in point["components"]}

    training = WRAPPED[0]  # the training env is built first (policies.train.train), then the evaluation env
    assert len(training) == steps
    for step in training:
        assert step["reward"] == pytest.approx(-expected_cost(step["ee"], step["goal"], step["action"]), rel=1e-9, abs=1e-12)
    assert len({round(step["reward"], 6) for step in training}) > 100  # real, varied steps, not one repeated value

    # what SB3 was given: the Monitor around the training env logs each episode's return, the sum of those rewards
    with open(tmp_path / "job" / "train" / "monitor" / "0.monitor.csv") as handle:
        episodes = list(csv.DictReader(line for line in handle if not line.startswith("#")))
    sums, total = [], 0.0
    for step in training:
        total += step["reward"]
        if step["done"]:
            sums.append(total)
            total = 0.0
    assert len(episodes) == len(sums) == steps // get_task(TASK).max_episode_steps
    assert [float(e["r"]) for e in episodes] == pytest.approx(sums, abs=1e-5)
