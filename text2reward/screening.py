"""Screening: does a candidate reward rank successful rollouts above failed ones, before any RL?

Why: training costs minutes to hours; replaying a reward over a dozen recorded rollouts costs
milliseconds. A reward that gives a random-action or frozen rollout a higher return than the
scripted policy's successful one will not teach success, and the comparison tells the model why.

Successes come from the task's scripted policy; failures from the same policy perturbed (frozen
after a few steps, heavy action noise, random actions) on the same placements, kept only when
the task's own success test says the episode failed. Each step is stored as (view after the step,
action taken): exactly what the training wrapper hands to the reward.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from policies.evaluate import run_episode
from policies.reward_modes import reward_mode
from policies.reward_program import SparseReward
from policies.task_env import make_task_env
from sim_envs.errors import ConfigError, RewardProgramError
from sim_envs.task import Task

Sample = tuple[Any, np.ndarray]
"""(state view after a step, the action that led to it)."""
RunReturns = Callable[[str, list[Sample]], Sequence[float]]
"""`run_returns(code, samples)`: the per-step reward totals of `code` on `samples`, in order."""

SCREENING_VERSION = 1
"""Bump when the rollout recipe changes, so stale disk caches are not reused."""
FAILURE_KINDS = ("freeze", "noise", "random")
NOISE_STD = 0.5
NOISE_BIAS = 0.8
"""Norm of a constant per-episode action offset: unbiased noise averages out and the scripted policy
still succeeds, while a bias makes near misses (measured: MetaWorld reach, push, pick-place fail)."""
FREEZE_FRACTION = 0.125
"""A frozen rollout follows the scripted policy for fewer than this fraction of the episode."""
ATTEMPTS_PER_TRAJECTORY = 4

KIND_TEXT = {
    "scripted": "the scripted policy",
    "freeze": "the scripted policy frozen (zero actions) after a few steps",
    "noise": f"the scripted policy with heavy action noise (a constant offset of norm {NOISE_BIAS} plus Gaussian noise of std {NOISE_STD})",
    "random": "uniformly random actions",
}


@dataclass
class ScreeningTrajectory:
    steps: list[Sample] = field(repr=False)
    success: bool
    kind: str
    """'scripted' for successes; 'freeze', 'noise' or 'random' for perturbed failures."""
    seed: int
    detail: str = ""

    @property
    def length(self) -> int:
        return len(self.steps)


@dataclass
class ScreeningSet:
    task_id: str
    seed: int
    trajectories: list[ScreeningTrajectory]

    @property
    def successes(self) -> list[ScreeningTrajectory]:
        return [t for t in self.trajectories if t.success]

    @property
    def failures(self) -> list[ScreeningTrajectory]:
        return [t for t in self.trajectories if not t.success]

    @property
    def usable(self) -> bool:
        """Screening needs at least one successful and one failed rollout to compare."""
        return bool(self.successes) and bool(self.failures)

    def samples(self) -> list[Sample]:
        """Every (view, action) step of every trajectory, successes first, in one flat list."""
        return [step for t in self.successes + self.failures for step in t.steps]


@dataclass
class ScreeningResult:
    score: float
    """Fraction of (success, failure) pairs in which the successful rollout had the higher return."""
    passed: bool
    threshold: float
    returns_success: list[float]
    returns_failure: list[float]
    comparison_text: str
    failure_kinds: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- rollouts


def _actor(kind: str, policy: Callable[[np.ndarray], np.ndarray], space: Any, rng: np.random.Generator, freeze_at: int, record: list[np.ndarray]) -> Callable[[Any], np.ndarray]:
    low, high = np.asarray(space.low, dtype=float), np.asarray(space.high, dtype=float)
    step = [0]
    bias = rng.normal(size=low.shape)
    bias *= NOISE_BIAS / max(float(np.linalg.norm(bias)), 1e-9)

    def act(obs: Any) -> np.ndarray:
        if kind == "random":
            action = rng.uniform(low, high)
        elif kind == "freeze" and step[0] >= freeze_at:
            action = np.zeros_like(low)
        else:
            action = np.asarray(policy(obs), dtype=float)
            if kind == "noise":
                action = action + bias + rng.normal(0.0, NOISE_STD, size=action.shape)
        step[0] += 1
        action = np.clip(action, low, high)
        action.flags.writeable = False
        record.append(action)
        return action

    return act


def _rollout(task: Task, env: Any, kind: str, seed: int, rng: np.random.Generator) -> ScreeningTrajectory:
    freeze_at = int(rng.integers(0, max(1, int(task.max_episode_steps * FREEZE_FRACTION))))
    actions: list[np.ndarray] = []
    act = _actor(kind, task.scripted_policy(), env.action_space, rng, freeze_at, actions)
    stats = run_episode(env, act, seed=seed, record_views=True)
    detail = {"freeze": f"frozen after {freeze_at} steps", "noise": "heavy action noise", "random": "random actions"}.get(kind, "scripted policy")
    return ScreeningTrajectory(list(zip(stats.views[1:], actions)), bool(stats.success), kind, seed, detail)


def _generate(task: Task, n_success: int, n_failure: int, seed: int) -> ScreeningSet:
    if not task.has_scripted_policy:
        raise ConfigError(f"task {task.id} has no scripted policy, so it cannot be screened; run without screening for it")
    env = make_task_env(task, SparseReward(), seed=seed)
    rng = np.random.default_rng(seed)
    trajectories: list[ScreeningTrajectory] = []
    try:
        success_seeds: list[int] = []
        for attempt in range(ATTEMPTS_PER_TRAJECTORY * n_success):
            if len(success_seeds) >= n_success:
                break
            trajectory = _rollout(task, env, "scripted", seed + attempt, rng)
            if trajectory.success:
                trajectories.append(trajectory)
                success_seeds.append(trajectory.seed)
        placements = success_seeds or [seed + i for i in range(n_failure)]
        failures = 0
        for attempt in range(ATTEMPTS_PER_TRAJECTORY * n_failure):
            if failures >= n_failure:
                break
            kind = FAILURE_KINDS[attempt % len(FAILURE_KINDS)]
            trajectory = _rollout(task, env, kind, placements[attempt % len(placements)], rng)
            if not trajectory.success:
                trajectories.append(trajectory)
                failures += 1
    finally:
        env.close()
    return ScreeningSet(task.id, seed, trajectories)


# --------------------------------------------------------------------------- caching


_MEMORY: dict[str, ScreeningSet] = {}


def _cache_key(task: Task, n_success: int, n_failure: int, seed: int) -> str:
    """Task id plus what decides success, so an edited user task never reuses stale rollouts."""
    identity = repr((SCREENING_VERSION, task.id, task.success_doc, task.success_mode, task.max_episode_steps, sorted(task.env_kwargs.items())))
    digest = hashlib.sha256(identity.encode()).hexdigest()[:10]
    return f"{task.id.replace('/', '__')}-{n_success}s{n_failure}f-seed{seed}-{digest}"


def _freeze(value: Any) -> None:
    """Unpickled arrays come back writeable: make views read-only again, as the simulator hands them out."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _freeze(getattr(value, f.name))


def _load(path: Path) -> ScreeningSet | None:
    try:
        with path.open("rb") as handle:
            loaded = pickle.load(handle)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError):
        return None  # missing or unreadable: regenerate
    if not isinstance(loaded, ScreeningSet):
        return None
    for trajectory in loaded.trajectories:
        for view, action in trajectory.steps:
            _freeze(view)
            _freeze(action)
    return loaded


def _save(path: Path, screening_set: ScreeningSet) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            pickle.dump(screening_set, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def clear_memory_cache() -> None:
    _MEMORY.clear()


def screening_trajectories(task: Task, n_success: int = 4, n_failure: int = 8, seed: int = 0, cache_dir: str | Path | None = None) -> ScreeningSet:
    """Successful scripted rollouts and perturbed failed ones, cached in memory and (optionally) on disk."""
    if n_success < 1 or n_failure < 1:
        raise ConfigError(f"screening needs at least one success and one failure, got n_success={n_success}, n_failure={n_failure}")
    key = _cache_key(task, n_success, n_failure, seed)
    if key in _MEMORY:
        return _MEMORY[key]
    path = Path(cache_dir) / f"{key}.pkl" if cache_dir is not None else None
    screening_set = _load(path) if path is not None and path.is_file() else None
    if screening_set is None:
        screening_set = _generate(task, n_success, n_failure, seed)
        if path is not None:
            _save(path, screening_set)
    _MEMORY[key] = screening_set
    return screening_set


# --------------------------------------------------------------------------- scoring


def _summary(values: np.ndarray) -> str:
    return f"mean {np.mean(values):.4g} (min {min(values):.4g}, max {max(values):.4g})"


def screen(returns_success: Sequence[float], returns_failure: Sequence[float], threshold: float = 0.8,
           failure_kinds: Sequence[str] | None = None, mode: str = "dense") -> ScreeningResult:
    """Score = fraction of (success, failure) pairs where the success return (or rise) is strictly higher. The mode's
    spec names the measure and gives the advice (a dense reward's rollouts are compared by return; a potential's or a
    progress's by how much the value rose, which is what the shaped training reward pays over an episode)."""
    spec = reward_mode(mode)
    measure, measure_text, advice = spec.screening.name, spec.screening.description, spec.screening.advice
    if not returns_success or not returns_failure:
        raise ConfigError(
            "screening needs at least one successful and one failed rollout; this task's scripted policy "
            "produced none of one kind, so train without screening"
        )
    succ = np.asarray(returns_success, dtype=float)
    fail = np.asarray(returns_failure, dtype=float)
    wins = int(np.sum(succ[:, None] > fail[None, :]))
    pairs = succ.size * fail.size
    score = wins / pairs
    passed = score >= threshold
    kinds = list(failure_kinds) if failure_kinds is not None else []
    lines = [
        f"Screening before training: over {succ.size} successful and {fail.size} failed rollouts of this task, "
        f"your {spec.value_noun} gave the successful rollout the higher {measure} in {wins} of {pairs} pairs "
        f"(score {score:.2f}, needed {threshold:.2f}): {'passed' if passed else 'FAILED'}.",
        f"{measure_text}: successful {_summary(succ)}; failed {_summary(fail)}.",
    ]
    if not (np.all(np.isfinite(succ)) and np.all(np.isfinite(fail))):
        lines.append(f"Some {measure}s are not finite (nan or inf): every per-step value must be a finite number.")
    if np.ptp(np.concatenate([succ, fail])) == 0:
        lines.append(f"Every rollout got exactly the same {measure}: the {spec.value_noun} does not depend on what the robot does.")
    if kinds and len(kinds) == fail.size:
        by_kind = []
        for kind in dict.fromkeys(kinds):
            values = fail[[k == kind for k in kinds]]
            beaten = int(np.sum(succ[:, None] > values[None, :]))
            by_kind.append(f"{KIND_TEXT.get(kind, kind)}: {_summary(values)}, below the successes in {beaten} of {succ.size * values.size} pairs")
        lines.append("Failed rollouts by kind: " + "; ".join(by_kind) + ".")
    if not passed:
        lines.append(advice)
    return ScreeningResult(score, passed, threshold, succ.tolist(), fail.tolist(), "\n".join(lines), kinds)


def screen_program(task: Task, code: str, screening_set: ScreeningSet, run_returns: RunReturns, threshold: float = 0.8,
                   mode: str = "dense") -> ScreeningResult:
    """Run `code` over every screening step (one `run_returns` call) and compare each rollout's score under the mode's
    measure: the return of a dense reward, the rise of a potential or progress (its value at the last step minus at the first)."""
    score = reward_mode(mode).screening.score
    if screening_set.task_id != task.id:
        raise ConfigError(f"screening set is for {screening_set.task_id}, not {task.id}; build one with screening_trajectories(task)")
    successes, failures = screening_set.successes, screening_set.failures
    if not screening_set.usable:
        raise ConfigError(
            f"the screening set for {task.id} has {len(successes)} successful and {len(failures)} failed rollouts; "
            "screening needs both, so train this task without screening"
        )
    totals = list(run_returns(code, screening_set.samples()))
    expected = sum(t.length for t in successes + failures)
    if len(totals) != expected:
        raise RewardProgramError(f"the reward runner returned {len(totals)} totals for {expected} steps; it must return one total per step")
    returns, start = [], 0
    for trajectory in successes + failures:
        values = np.asarray(totals[start : start + trajectory.length], dtype=float)
        returns.append(score(values))
        start += trajectory.length
    return screen(returns[: len(successes)], returns[len(successes) :], threshold, [t.kind for t in failures], mode)
