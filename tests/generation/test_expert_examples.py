"""The few-shot expert examples (prompts/examples/*.py) against the environments' own rewards.

Why: these programs teach the model what a good reward looks like. Most claim to be the
environment's dense reward rewritten against the state view; here every claim is checked on real
MuJoCo rollouts: an "exact" example must match `info["native_reward"]` step by step; a documented
simplification must stay highly correlated with it. A "hand-written" example (a task with no
environment reward, or one whose native reward teaches too little) has no such reference: it is
checked by what it must prefer, on real states of its task edited one field at a time.

Every example, whatever its kind, must pass the sandbox's validation on its task's real states (what
a model-written reward must pass), and where the task has a scripted policy, screening: its return
must rank the scripted successes above the perturbed failures.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from policies.reward_program import ProgramReward
from policies.task_env import make_task_env
from sim_envs.registry import get_task, list_tasks
from sim_envs.view_base import frozen, view_field_paths
from text2reward.generation.retrieval import attributes_read, compatible, load_examples, reads_only_view_fields
from text2reward.sandbox import run_reward
from text2reward.sandbox.states import collect_states
from text2reward.sandbox.validation import validate
from text2reward.screening import screen_program, screening_trajectories

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "prompts" / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.py"))
EXACT_TOLERANCE = 1e-6
MIN_EPISODE_CORRELATION = 0.95
"""A simplification may change a per-episode constant (a margin, a scale) or slightly reshape one
term, never the ordering of states: within every episode its reward must correlate with the native
one at 0.95 or more, or it would teach a materially different reward than the one it stands for.
Judged per episode, not pooled: a reward ranks states within an episode, and a changed per-episode
constant (the point of such a simplification) shifts whole episodes against each other."""
SCRIPTED_STEPS_AFTER_SUCCESS = 20
RANDOM_STEPS = 100
NOISE = 0.3
ALLOWED_IMPORTS = {("numpy", "np"), ("math", None)}


def example_task_id(path: Path) -> str:
    """The file naming rule of prompts/__init__.py: the task id with '/' written as '__'."""
    return path.stem.replace("__", "/")


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def _kind(path: Path) -> str:
    doc = _docstring(path).lower()
    if "hand-written" in doc:
        return "hand-written"
    if "simplification" in doc:
        return "simplification"
    if "exact" in doc:
        return "exact"
    return "undeclared"


def _ids(paths: list[Path]) -> list[str]:
    return [example_task_id(p) for p in paths]


REWRITES = [p for p in EXAMPLES if _kind(p) != "hand-written"]
HAND_WRITTEN = [p for p in EXAMPLES if _kind(p) == "hand-written"]
SCREENABLE = [p for p in EXAMPLES if get_task(example_task_id(p)).has_scripted_policy]


def test_examples_cover_the_required_tasks() -> None:
    ids = set(_ids(EXAMPLES))
    metaworld = {i for i in ids if i.startswith("metaworld/")}
    assert len(metaworld) >= 8, f"only {len(metaworld)} MetaWorld examples: {sorted(metaworld)}"
    assert {"metaworld/push-v3", "metaworld/pick-place-v3"} & ids, "add a grasp-based MetaWorld example"
    assert {"fetch/reach", "fetch/push", "fetch/slide", "halfcheetah/forward"} <= ids
    assert {"hopper/forward", "hopper/front_flip", "ant/forward", "ant/wave_leg"} <= ids
    assert {"adroit/door", "adroit/hammer", "adroit/pen", "adroit/relocate"} <= ids
    assert {"shadow/reach", "shadow/block", "shadow/egg", "shadow/pen"} <= ids


def test_every_task_has_two_compatible_examples_besides_its_own() -> None:
    """Every family (and, within locomotion, each robot's view) has close examples to retrieve."""
    examples = load_examples(EXAMPLES_DIR)
    for task in list_tasks():
        if task.source != "builtin":
            continue
        close = [e.task_id for e in examples if compatible(e, task)]
        assert len(close) >= 2, f"{task.id} has only {close} to learn from"
        readable = [e.task_id for e in examples if compatible(e, task) and reads_only_view_fields(e, task)]
        # the reach tasks of Fetch, Franka and Shadow have views without an object, and their neighbours read the object
        if task.id not in ("fetch/reach", "franka/reach", "shadow/reach"):
            assert len(readable) >= 2, f"{task.id} has only {readable} that read nothing but its own view's attributes"


@pytest.mark.parametrize("path", EXAMPLES, ids=_ids(EXAMPLES))
def test_example_is_well_formed(path: Path) -> None:
    task = get_task(example_task_id(path))  # raises UnknownTaskError for a misnamed file
    ProgramReward.from_file(path)  # compiles and defines compute_dense_reward(self, action)

    doc = _docstring(path)
    assert doc.splitlines()[0] == f"Expert reward for {task.id}: {task.description}"
    assert _kind(path) != "undeclared", "the docstring must say whether the rewrite is exact or a simplification"

    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            pytest.fail(f"line {node.lineno}: use `import numpy as np` / `import math` only")
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert (alias.name, alias.asname) in ALLOWED_IMPORTS, f"line {node.lineno}: import {alias.name}"

    documented = set(view_field_paths(task.view_class))
    read = attributes_read(path.read_text())  # `self.a.b`, and `t.b` after `t = self.a`
    assert read, "an example that reads nothing of the view teaches nothing"
    assert read <= documented, f"not documented view attributes: {sorted(read - documented)}"


@dataclass
class Episode:
    """One rollout segment: the program's reward and the env's own, step by step."""

    ours: list[float] = field(default_factory=list)
    native: list[float] = field(default_factory=list)
    successes: int = 0


def _run(env, policy, steps: int, seed: int, stop_after_success: int | None = None) -> list[Episode]:
    """Step `policy(obs)` from a seeded reset for up to `steps` steps, one Episode per env episode."""
    obs, _ = env.reset(seed=seed)
    episodes = [Episode()]
    since_success = None
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        episode = episodes[-1]
        episode.ours.append(reward)
        episode.native.append(info["native_reward"])
        episode.successes += int(info["step_success"])
        if since_success is not None:
            since_success += 1
        elif info["step_success"]:
            since_success = 0
        if stop_after_success is not None and since_success is not None and since_success >= stop_after_success:
            break
        if terminated or truncated:
            obs, _ = env.reset()
            episodes.append(Episode())
    return [e for e in episodes if e.ours]


def _random_policy(env, seed: int):
    rng = np.random.default_rng(seed)
    low, high = env.action_space.low, env.action_space.high
    return lambda obs: rng.uniform(low, high).astype(np.float32)


def _noisy(policy, seed: int, scale: float):
    """The scripted policy with Gaussian noise: near-miss states the clean expert never visits."""
    rng = np.random.default_rng(seed)

    def act(obs):
        action = np.asarray(policy(obs))
        return np.clip(action + rng.normal(0.0, scale, size=action.shape), -1.0, 1.0).astype(np.float32)

    return act


def _rollouts(task, env) -> list[Episode]:
    if not task.has_scripted_policy:
        return _run(env, _random_policy(env, seed=2), 2 * RANDOM_STEPS, seed=2)
    # The expert's rollout reaches every stage of a staged reward, success bonus included.
    clean = _run(env, task.scripted_policy(), task.max_episode_steps, seed=1, stop_after_success=SCRIPTED_STEPS_AFTER_SUCCESS)
    assert sum(e.successes for e in clean) > 0, "the scripted policy never succeeded, so the success branch went untested"
    noisy = _run(env, _noisy(task.scripted_policy(), seed=3, scale=NOISE), task.max_episode_steps, seed=3,
                 stop_after_success=SCRIPTED_STEPS_AFTER_SUCCESS)
    return clean + noisy + _run(env, _random_policy(env, seed=2), RANDOM_STEPS, seed=2)


@pytest.mark.parametrize("path", REWRITES, ids=_ids(REWRITES))
def test_example_matches_native_reward(path: Path, record_property) -> None:
    task = get_task(example_task_id(path))
    env = make_task_env(task, ProgramReward.from_file(path), seed=0)
    try:
        episodes = _rollouts(task, env)
    finally:
        env.close()

    ours = np.concatenate([e.ours for e in episodes])
    native = np.concatenate([e.native for e in episodes])
    assert np.all(np.isfinite(ours))
    assert np.ptp(native) > 0, "the rollouts never changed the native reward; they test nothing"
    max_error = float(np.max(np.abs(ours - native)))
    pooled = float(np.corrcoef(ours, native)[0, 1])
    per_episode = [float(np.corrcoef(e.ours, e.native)[0, 1]) for e in episodes if np.ptp(e.native) > 0]
    kind = _kind(path)
    for name, value in [("kind", kind), ("steps", len(ours)), ("max_abs_error", max_error),
                        ("pearson_pooled", pooled), ("pearson_min_episode", min(per_episode))]:
        record_property(name, value)
    print(f"\n{task.id}: {kind}, {len(ours)} steps, max |error| {max_error:.2e}, "
          f"pearson pooled {pooled:.4f}, lowest per episode {min(per_episode):.4f}")
    if kind == "exact":
        assert max_error <= EXACT_TOLERANCE, f"claims exact but differs by up to {max_error:.3g}"
    else:
        assert min(per_episode) >= MIN_EPISODE_CORRELATION, (
            f"simplification correlates only {min(per_episode):.3f} with the native reward within an episode"
        )


# --- every example passes what a model-written reward must pass ---------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=_ids(EXAMPLES))
def test_example_validates_in_the_sandbox(path: Path) -> None:
    task = get_task(example_task_id(path))
    report = validate(path.read_text(), task, collect_states(task, n_random=60, n_scripted=60))
    assert report.ok, f"{task.id}: {report.errors}"


def _sandbox_returns(code: str, samples: list) -> list[float]:
    result = run_reward(code, samples)
    assert not result.error, result.error
    return [total for total, _ in result.outputs]


@pytest.mark.parametrize("path", SCREENABLE, ids=_ids(SCREENABLE))
def test_example_ranks_scripted_successes_above_failures(path: Path) -> None:
    """Screening as the loop runs it (sandboxed), on a small set: 2 successes against 3 failures."""
    task = get_task(example_task_id(path))
    trajectories = screening_trajectories(task, n_success=2, n_failure=3, seed=0)
    assert trajectories.usable, f"{task.id}'s scripted policy gave no success/failure pair to compare"
    result = screen_program(task, path.read_text(), trajectories, _sandbox_returns)
    assert result.passed, result.comparison_text


# --- hand-written examples: what each must prefer, on real states --------------------------------

STATES_PER_CHECK = 8


def _edit(view: Any, **changes: Any) -> Any:
    """`view` with fields replaced; `part__field=value` edits a nested part (`torso__pitch=1.0`)."""
    nested: dict[str, dict[str, Any]] = {}
    flat = {}
    for name, value in changes.items():
        if "__" in name:
            part, attribute = name.split("__", 1)
            nested.setdefault(part, {})[attribute] = value
        else:
            flat[name] = value
    for part, edits in nested.items():
        flat[part] = replace(getattr(view, part), **edits)
    return replace(view, **flat)


def _total(reward: ProgramReward, view: Any, action: np.ndarray) -> float:
    return reward(view, action, 0.0, False)[0]


def _check_front_flip(reward: ProgramReward, view: Any, action: np.ndarray) -> None:
    score = lambda **changes: _total(reward, _edit(view, **changes), action)  # noqa: E731
    turns = [score(torso__pitch=p, torso__pitch_velocity=0.0) for p in (-1.5, 0.0, 1.5, 3.0, 6.0)]
    assert turns == sorted(turns) and turns[0] < turns[-1], f"forward rotation must pay more: {turns}"
    assert score(torso__pitch=2 * np.pi) > score(torso__pitch=2 * np.pi - 0.05) + 5.0, "a finished flip earns its bonus"
    spins = [score(torso__pitch_velocity=w) for w in (-6.0, 0.0, 6.0)]
    assert spins[0] < spins[1] < spins[2], f"spinning forward beats still beats spinning backward: {spins}"
    low, high = (score(torso__position=frozen(view.torso.position + [0.0, 0.0, dz])) for dz in (0.0, 0.3))
    assert high > low, "a higher torso (more air time) pays more"


def _check_wave_leg(reward: ProgramReward, view: Any, action: np.ndarray) -> None:
    def score(foot_z: float, hip_speed: float, up_z: float) -> float:
        feet = np.array(view.foot_positions)
        feet[0, 2] = foot_z
        velocities = np.array(view.joint_velocities)
        velocities[0] = hip_speed
        up = np.array([np.sqrt(max(0.0, 1.0 - up_z**2)), 0.0, up_z])
        edited = _edit(view, foot_positions=frozen(feet), joint_velocities=frozen(velocities), torso__up_vector=frozen(up))
        return _total(reward, edited, action)

    waving = score(0.35, 2.0, 1.0)
    assert waving > score(0.35, 0.0, 1.0) > score(0.05, 0.0, 1.0), "raised beats lowered, swinging beats still"
    assert waving > score(0.05, 2.0, 1.0), "swinging a foot on the floor is no wave"
    assert score(0.35, 2.0, 1.0) > score(0.35, 2.0, 0.3), "a tipped-over body must not pay as well"
    assert waving > score(0.29, 2.0, 1.0) + 4.0, "a success step earns its bonus"


def _check_lie_down(reward: ProgramReward, view: Any, action: np.ndarray) -> None:
    def score(z: float, up_z: float = 1.0, speed: float = 0.0, foot_z: float = 0.05) -> float:
        position = np.array(view.torso.position)
        position[2] = z
        up = np.array([np.sqrt(max(0.0, 1.0 - up_z**2)), 0.0, up_z])
        feet = np.array(view.foot_positions)
        feet[:, 2] = foot_z
        edited = _edit(view, torso__position=frozen(position), torso__up_vector=frozen(up),
                       torso__velocity=frozen([speed, 0.0, 0.0]), foot_positions=frozen(feet))
        return _total(reward, edited, action)

    heights = [score(z) for z in (0.75, 0.55, 0.45, 0.38)]
    assert heights == sorted(heights) and heights[0] < heights[-1], f"lower must pay more: {heights}"
    assert score(0.38) > score(0.38, up_z=0.5), "lying on its back or side is not lying on its belly"
    assert score(0.38) > score(0.38, speed=0.5), "staying still pays more than sliding"
    assert score(0.38) > score(0.38, foot_z=0.3), "feet must rest on the floor"


def _check_slide(reward: ProgramReward, view: Any, action: np.ndarray) -> None:
    goal, puck, start = view.goal_position, view.obj.position, view.obj.init_position
    still = frozen(np.zeros(3))

    def score(puck_at: np.ndarray, grip_at: np.ndarray | None = None, velocity: np.ndarray = still) -> float:
        changes: dict[str, Any] = {"obj__position": frozen(puck_at), "obj__velocity": frozen(velocity)}
        if grip_at is not None:
            changes["robot__ee_position"] = frozen(grip_at)
        return _total(reward, _edit(view, **changes), action)

    # The puck resting on the goal beats the puck halfway there beats the puck where it started.
    halfway = start + 0.5 * (goal - start)
    assert score(goal) > score(halfway) > score(start)
    # Before the strike: a gripper behind the puck (away from the goal) beats one beyond it.
    direction = (goal - start) / np.linalg.norm(goal - start)
    assert score(start, start - 0.05 * direction) > score(start, start + 0.15 * direction)
    # A puck sliding towards the goal from afar (30 cm) beats the same puck sliding away.
    far = goal - 0.3 * direction
    assert score(far, velocity=0.5 * direction) > score(far, velocity=-0.5 * direction)
    # On the goal, stopped beats still moving.
    assert score(goal) > score(goal, velocity=0.5 * direction)
    assert np.isfinite(score(puck))


HAND_WRITTEN_CHECKS: dict[str, Callable[[ProgramReward, Any, np.ndarray], None]] = {
    "hopper/front_flip": _check_front_flip,
    "ant/wave_leg": _check_wave_leg,
    "ant/lie_down": _check_lie_down,
    "fetch/slide": _check_slide,
}


@pytest.mark.parametrize("path", HAND_WRITTEN, ids=_ids(HAND_WRITTEN))
def test_hand_written_example_prefers_progress_on_real_states(path: Path) -> None:
    task = get_task(example_task_id(path))
    assert task.id in HAND_WRITTEN_CHECKS, f"add a check of what {task.id}'s hand-written reward must prefer"
    reward = ProgramReward.from_file(path)
    states = collect_states(task, n_random=60, n_scripted=0)
    for view, action in states[:: max(1, len(states) // STATES_PER_CHECK)]:
        HAND_WRITTEN_CHECKS[task.id](reward, view, action)
