"""The rule-based `heuristic` backend on real MuJoCo states.

Every registered task gets programs that compile and return finite floats on states from real
rollouts; on MetaWorld (scripted policies exist) the programs rank scripted successful episodes
above random-action episodes of the same length; samples differ, seeds reproduce, feedback changes
the program by rules that the program names, and every reply says it is rule-based.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

from policies.reward_program import ProgramReward
from policies.task_env import TaskRewardWrapper, make_task_env
from sim_envs.errors import UnknownTaskError
from sim_envs.registry import derive_task, get_task, list_tasks
from text2reward.generation.llm.base import GenerationRequest
from text2reward.generation.llm.heuristic import HEADER, HeuristicBackend, compose, parse_constants
from text2reward.runs.records import PromptContext

K = 3
RANDOM_EPISODES = 2
SCRIPTED_MAX_STEPS = 200
SHORT_ROLLOUT = 40
AFTER_SUCCESS = 10
RANK_THRESHOLD = 0.9
"""Measured on this machine: 1.00 (all 50 MetaWorld tasks, each of 3 samples; 4 samples at 150 steps too)."""


def program_of(text: str) -> str:
    match = re.search(r"```python\n(.*?)```", text, re.S)
    assert match, "a reply must hold one ```python block"
    return match.group(1)


def generate(task_id: str, n: int = K, seed: int = 0, round: int = 0, context: PromptContext | None = None,
             temperature: float = 1.0) -> list[str]:
    request = GenerationRequest(messages=[], n=n, task_id=task_id, round=round, context=context or PromptContext(),
                                temperature=temperature)
    return [program_of(r.text) for r in HeuristicBackend(seed=seed).generate(request)]


def reward_wrapper(env) -> TaskRewardWrapper:
    while not isinstance(env, TaskRewardWrapper):
        env = env.env
    return env


def rollout(env, act, seed: int, steps: int, after_success: int | None = None) -> tuple[list[tuple[object, np.ndarray]], bool]:
    """(view, action) pairs of one episode of at most `steps` steps, and whether it succeeded.

    With `after_success`, the episode ends that many steps after the first success: what a
    scripted policy does once it has finished (often letting go) is not what it is judged on.
    """
    wrapper = reward_wrapper(env)
    obs, _ = env.reset(seed=seed)
    pairs, success, left = [], False, steps
    while left > 0:
        action = np.asarray(act(obs), dtype=np.float64)
        obs, reward, terminated, truncated, info = env.step(action)
        assert math.isfinite(reward)
        pairs.append((wrapper.view, action))
        if info["is_success"] and not success and after_success is not None:
            left = min(left, after_success + 1)
        success = success or bool(info["is_success"])
        left -= 1
        if terminated or truncated:
            break
    return pairs, success


@dataclasses.dataclass
class TaskRollouts:
    programs: list[ProgramReward]
    random: list[list[tuple[object, np.ndarray]]]
    scripted: list[tuple[object, np.ndarray]] | None = None
    scripted_success: bool = False


@pytest.fixture(scope="module")
def rollouts() -> dict[str, TaskRollouts]:
    """For every registered task: K programs and real episodes (random; scripted where one exists).

    The env is built once per task with the first program as its reward; the other samples are
    scored on the same recorded states, which keeps the module fast.
    """
    out: dict[str, TaskRollouts] = {}
    for task in list_tasks():
        programs = [ProgramReward(code, name=f"sample{i}") for i, code in enumerate(generate(task.id))]
        env = make_task_env(task, programs[0], seed=0)
        try:
            space = env.action_space
            rng = np.random.default_rng(0)
            act = lambda obs, rng=rng, space=space: rng.uniform(space.low, space.high)
            if task.has_scripted_policy:
                policy = task.scripted_policy()
                for seed in range(3):  # a few placements defeat a scripted policy inside 200 steps
                    scripted, ok = rollout(env, policy, seed, SCRIPTED_MAX_STEPS, after_success=AFTER_SUCCESS)
                    if ok:
                        break
                random = [rollout(env, act, 100 + i, len(scripted))[0] for i in range(RANDOM_EPISODES)]
                out[task.id] = TaskRollouts(programs, random, scripted, ok)
            else:
                out[task.id] = TaskRollouts(programs, [rollout(env, act, 100, SHORT_ROLLOUT)[0]])
        finally:
            env.close()
    return out


def episode_return(program: ProgramReward, pairs) -> float:
    return sum(program(view, action, 0.0, False)[0] for view, action in pairs)


def test_every_task_gets_programs_that_run_on_real_states(rollouts):
    assert len(rollouts) == len(list_tasks()) >= 62
    for task_id, data in rollouts.items():
        for program in data.programs:
            totals = []
            for pairs in data.random + ([data.scripted] if data.scripted else []):
                for view, action in pairs:
                    total, components = program(view, action, 0.0, False)
                    assert math.isfinite(total), task_id
                    assert components and all(isinstance(v, float) and math.isfinite(v) for v in components.values()), task_id
                    assert total == pytest.approx(sum(components.values())), task_id
                    totals.append(total)
            assert max(totals) > min(totals), f"{task_id}: {program.name} is constant on a real rollout"


def test_metaworld_programs_rank_scripted_successes_above_random_actions(rollouts):
    wins, failures = 0, []
    metaworld = {k: v for k, v in rollouts.items() if k.startswith("metaworld/")}
    assert len(metaworld) == 50
    for task_id, data in metaworld.items():
        assert data.scripted is not None
        for i, program in enumerate(data.programs):
            scripted = episode_return(program, data.scripted)
            random = max(episode_return(program, pairs) for pairs in data.random)
            if scripted > random:
                wins += 1
            else:
                failures.append(f"{task_id} sample {i}: scripted {scripted:.1f} <= random {random:.1f}")
    successful = sum(d.scripted_success for d in metaworld.values())
    fraction = wins / (len(metaworld) * K)
    print(f"\nranking: {fraction:.2f} of {len(metaworld)} tasks x {K} samples; scripted succeeded on {successful}/50")
    for line in failures:
        print("  ranking failure:", line)
    assert successful >= 48
    assert fraction >= RANK_THRESHOLD, failures


def with_torso(view, **changes):
    return dataclasses.replace(view, torso=dataclasses.replace(view.torso, **changes))


def test_locomotion_and_fetch_rewards_point_the_right_way(rollouts):
    """Change one thing the task asks for in a real state: every sample must pay more for it."""
    upright = np.array([0.0, 0.0, 1.0])
    for task_id, data in rollouts.items():
        view, action = data.random[0][-1]
        better = worse = None
        if task_id.endswith("/forward"):
            better, worse = with_torso(view, x_velocity=1.0), with_torso(view, x_velocity=-1.0)
        elif task_id.endswith("_flip"):
            sign = 1.0 if "front" in task_id else -1.0
            better, worse = with_torso(view, pitch_velocity=5.0 * sign), with_torso(view, pitch_velocity=-5.0 * sign)
        elif task_id == "ant/wave_leg":
            level = with_torso(view, up_vector=upright)
            feet_up, feet_down = np.array(view.foot_positions), np.array(view.foot_positions)
            feet_up[0, 2], feet_down[0, 2] = 0.35, 0.0
            better, worse = dataclasses.replace(level, foot_positions=feet_up), dataclasses.replace(level, foot_positions=feet_down)
        elif task_id == "ant/lie_down":
            low, high = np.array(view.torso.position), np.array(view.torso.position)
            low[2], high[2] = 0.3, 0.7
            better, worse = with_torso(view, position=low, up_vector=upright), with_torso(view, position=high, up_vector=upright)
        elif task_id == "fetch/reach":
            robot = dataclasses.replace(view.robot, ee_position=view.goal_position)
            better, worse = dataclasses.replace(view, robot=robot), view
        elif task_id.startswith("fetch/"):
            at_goal = dataclasses.replace(view.obj, position=view.goal_position, velocity=np.zeros(3))
            better, worse = dataclasses.replace(view, obj=at_goal), view
        if better is None:
            continue
        for program in data.programs:
            assert program(better, action, 0.0, False)[0] > program(worse, action, 0.0, False)[0], f"{task_id} {program.name}"


def test_replies_are_labelled_rule_based():
    request = GenerationRequest(messages=[{"role": "user", "content": "ignored"}], n=4, task_id="metaworld/drawer-open-v3")
    backend = HeuristicBackend()
    assert (backend.name, backend.model, backend.rule_based) == ("heuristic", "rule-based-v1", True)
    replies = backend.generate(request)
    assert len(replies) == 4
    for reply in replies:
        assert (reply.backend, reply.model, reply.rule_based) == ("heuristic", "rule-based-v1", True)
        assert (reply.prompt_tokens, reply.completion_tokens, reply.error) == (0, 0, None)
        assert "no language model" in reply.text
        code = program_of(reply.text)
        assert code.splitlines()[0] == "# " + HEADER.format(task_id="metaworld/drawer-open-v3")
        assert "not by a language model" in code
    assert backend.generate(GenerationRequest(messages=[], n=0, task_id="metaworld/drawer-open-v3")) == []
    with pytest.raises(UnknownTaskError):
        backend.generate(GenerationRequest(messages=[], n=1, task_id="metaworld/no-such-task"))


def test_samples_differ_and_seeds_reproduce():
    task_id = "metaworld/pick-place-v3"
    first, again = generate(task_id, n=5), generate(task_id, n=5)
    assert first == again
    assert len(set(first)) == 5
    other_seed = generate(task_id, n=5, seed=1)
    assert other_seed[0] == first[0]  # sample 0 is the rules' base program, whatever the seed
    assert all(a != b for a, b in zip(first[1:], other_seed[1:]))
    next_round = generate(task_id, n=5, round=1)
    assert all(a != b for a, b in zip(first[1:], next_round[1:]))
    weights = [parse_constants(code)["W_PLACE"] for code in first]
    assert len(set(weights)) == 5
    calm = generate(task_id, n=5, temperature=0.2)
    spread = lambda codes: np.std([math.log(parse_constants(c)["W_PLACE"]) for c in codes])  # noqa: E731
    assert spread(calm) < spread(first)


def run_on(task_id: str, code: str, rollouts) -> dict[str, float]:
    view, action = rollouts[task_id].random[0][-1]
    total, components = ProgramReward(code)(view, action, 0.0, False)
    assert math.isfinite(total)
    return components


def test_component_stats_and_success_rate_change_the_program_by_named_rules(rollouts):
    task_id = "metaworld/pick-place-v3"
    base = parse_constants(generate(task_id, n=1)[0])
    stats = {
        "reach": {"mean": 0.9, "min": 0.1, "max": 1.0, "first": 0.1, "last": 0.9},
        "grasp": {"mean": 0.0, "min": 0.0, "max": 0.0, "first": 0.0, "last": 0.0},
        "place": {"mean": 0.0, "min": 0.0, "max": 0.0, "first": 0.0, "last": 0.0},
    }
    code = generate(task_id, n=2, context=PromptContext(component_stats=stats, success_rate=0.1))[0]
    new = parse_constants(code)
    assert "rule constant: component 'grasp' was always 0" in code
    assert new["GRASP_RADIUS"] == pytest.approx(base["GRASP_RADIUS"] * 1.5)
    assert new["K_PLACE"] == pytest.approx(base["K_PLACE"] * 0.5)
    assert "rule dominating: component 'reach'" in code
    assert new["W_REACH"] == pytest.approx(base["W_REACH"] * 0.6)
    assert "rule low-success" in code
    assert new["W_PLACE"] == pytest.approx(base["W_PLACE"] * 1.5)
    assert new["W_SUCCESS"] == pytest.approx(base["W_SUCCESS"] * 1.5)
    run_on(task_id, code, rollouts)


def test_critique_rules_fire_and_are_named(rollouts):
    base = parse_constants(generate("hopper/forward", n=1)[0])
    code = generate("hopper/forward", n=1, context=PromptContext(critique="It falls over after a few hops and is far too slow."))[0]
    new = parse_constants(code)
    assert 'rule critique-upright: the critique says "falls"' in code
    assert 'rule critique-speed: the critique says "slow"' in code
    assert new["W_HEALTHY"] == pytest.approx(2 * base["W_HEALTHY"])
    assert new["W_FORWARD"] == pytest.approx(1.5 * base["W_FORWARD"])
    run_on("hopper/forward", code, rollouts)

    slide = parse_constants(generate("fetch/slide", n=1)[0])
    code = generate("fetch/slide", n=1, context=PromptContext(critique="The puck overshoots and ends past the goal."))[0]
    assert "rule critique-overshoot" in code
    assert parse_constants(code)["W_SETTLE"] == pytest.approx(2 * slide["W_SETTLE"])

    assert "W_SETTLE" not in parse_constants(generate("metaworld/push-v3", n=1)[0])
    code = generate("metaworld/push-v3", n=1, context=PromptContext(critique="it pushes the puck past the goal"))[0]
    assert "W_SETTLE" in parse_constants(code) and "settle term added" in code
    assert "settle" in run_on("metaworld/push-v3", code, rollouts)

    code = generate("metaworld/push-v3", n=1, context=PromptContext(critique="nice colours\nimport os"))[0]
    assert "matched no rule" in code
    assert not any(line.startswith("import os") for line in code.splitlines())
    run_on("metaworld/push-v3", code, rollouts)


def test_previous_best_program_is_the_base_of_the_next_round(rollouts):
    task_id = "metaworld/door-open-v3"
    best = generate(task_id, n=3)[2]
    refined = generate(task_id, n=2, round=1, context=PromptContext(previous_best_code=best))
    assert "rule previous-best" in refined[0]
    best_constants, refined_constants = parse_constants(best), parse_constants(refined[0])
    assert refined_constants == pytest.approx(best_constants)
    assert re.search(r"^# kernel: \w+$", best, re.M).group(0) in refined[0]
    assert refined[1] != refined[0]
    foreign = generate(task_id, n=1, round=1, context=PromptContext(previous_best_code="def compute_dense_reward(self, action):\n    return 0.0\n"))[0]
    assert "not composed by this backend" in foreign
    run_on(task_id, refined[1], rollouts)


def test_rules_read_the_task_text(rollouts):
    vague = derive_task("metaworld/pick-place-v3", id="custom/vague", description="Do something nice.", is_success=lambda v, i: False, success_doc="never")
    code, plan = compose(vague, 0, 0, 0, 1, 1.0, PromptContext())
    assert plan.archetype == "fallback_reach" and "Fallback: no rule matched" in code
    run_on("metaworld/pick-place-v3", code, rollouts)

    still = derive_task("hopper/forward", id="custom/still", description="Do something nice.", is_success=lambda v, i: False, success_doc="never")
    code, plan = compose(still, 0, 0, 0, 1, 1.0, PromptContext())
    assert plan.archetype == "fallback_forward" and "Fallback: no rule matched" in code
    run_on("hopper/forward", code, rollouts)

    back_right = derive_task("ant/wave_leg", id="custom/wave_back_right", description="Make the ant wave its back right leg in the air.",
                             is_success=lambda v, i: False, success_doc="never")
    code, _ = compose(back_right, 0, 0, 0, 1, 1.0, PromptContext())
    assert "self.foot_positions[2, 2]" in code and "self.joint_velocities[4]" in code  # order: front_left, back_left, back_right, ...
    run_on("ant/wave_leg", code, rollouts)

    expected = {"metaworld/reach-v3": "reach", "metaworld/pick-place-v3": "pick_place", "metaworld/push-v3": "push",
                "metaworld/door-open-v3": "articulate", "metaworld/stick-push-v3": "tool", "fetch/slide": "push",
                "hopper/back_flip": "flip", "ant/lie_down": "lie_down", "ant/wave_leg": "leg_raise", "halfcheetah/forward": "forward"}
    for task_id, archetype in expected.items():
        assert compose(get_task(task_id), 0, 0, 0, 1, 1.0, PromptContext())[1].archetype == archetype, task_id
