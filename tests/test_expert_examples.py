"""The few-shot expert examples (prompts/examples/*.py) against the environments' own rewards.

Why: these programs teach the model what a good reward looks like, and each one claims to be the
environment's dense reward rewritten against the state view. Here every claim is checked on real
MuJoCo rollouts: an "exact" example must match `info["native_reward"]` step by step; a documented
simplification must stay highly correlated with it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from policies.reward_program import ProgramReward
from policies.task_env import make_task_env
from sim_envs.registry import get_task
from sim_envs.view_base import view_field_paths

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "prompts" / "examples"
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
    if "simplification" in doc:
        return "simplification"
    if "exact" in doc:
        return "exact"
    return "undeclared"


def _ids(paths: list[Path]) -> list[str]:
    return [example_task_id(p) for p in paths]


def test_examples_cover_the_required_tasks() -> None:
    ids = set(_ids(EXAMPLES))
    metaworld = {i for i in ids if i.startswith("metaworld/")}
    assert len(metaworld) >= 8, f"only {len(metaworld)} MetaWorld examples: {sorted(metaworld)}"
    assert {"metaworld/push-v3", "metaworld/pick-place-v3"} & ids, "add a grasp-based MetaWorld example"
    assert {"fetch/reach", "fetch/push", "halfcheetah/forward"} <= ids


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
    for node in ast.walk(tree):
        chain = _self_attribute_chain(node)
        if chain is not None:
            assert chain in documented, f"line {node.lineno}: {chain} is not a documented view attribute"


def _self_attribute_chain(node: ast.AST) -> str | None:
    """`self.robot.ee_position` for an attribute chain rooted at `self`, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not parts or not (isinstance(node, ast.Name) and node.id == "self"):
        return None
    return ".".join(["self", *reversed(parts)])


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
    return lambda obs: np.clip(policy(obs) + rng.normal(0.0, scale, size=4), -1.0, 1.0).astype(np.float32)


def _rollouts(task, env) -> list[Episode]:
    if not task.has_scripted_policy:
        return _run(env, _random_policy(env, seed=2), 2 * RANDOM_STEPS, seed=2)
    # The expert's rollout reaches every stage of a staged reward, success bonus included.
    clean = _run(env, task.scripted_policy(), task.max_episode_steps, seed=1, stop_after_success=SCRIPTED_STEPS_AFTER_SUCCESS)
    assert sum(e.successes for e in clean) > 0, "the scripted policy never succeeded, so the success branch went untested"
    noisy = _run(env, _noisy(task.scripted_policy(), seed=3, scale=NOISE), task.max_episode_steps, seed=3,
                 stop_after_success=SCRIPTED_STEPS_AFTER_SUCCESS)
    return clean + noisy + _run(env, _random_policy(env, seed=2), RANDOM_STEPS, seed=2)


@pytest.mark.parametrize("path", EXAMPLES, ids=_ids(EXAMPLES))
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
