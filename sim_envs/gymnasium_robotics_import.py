"""Gymnasium-Robotics for every family built on it (Fetch, Adroit, Shadow hand): a quiet import and one env factory.

Why a module of its own: on import, gymnasium-robotics 1.4.2 prints a notice to stderr (its Adroit v1 dense
rewards changed in 1.2.1 without a version bump). Every family that makes its envs needs the same quiet
import, and the notice is answered where it matters (adroit_tasks.py states which rewards we reproduce).
"""

from __future__ import annotations

from typing import Any


def import_gymnasium_robotics() -> Any:
    """The `gymnasium_robotics` package, imported without its start-up notice on stderr."""
    import contextlib
    import io

    with contextlib.redirect_stderr(io.StringIO()):
        import gymnasium_robotics
    return gymnasium_robotics


def register_gymnasium_robotics() -> None:
    """Register Gymnasium-Robotics' env ids with Gymnasium (idempotent)."""
    import gymnasium as gym

    gym.register_envs(import_gymnasium_robotics())


def make_gymnasium_robotics_env(
    gym_id: str, render_mode: str | None = None, seed: int | None = None, size: int = 480, max_episode_steps: int | None = None
) -> Any:
    """Gymnasium-Robotics' env `gym_id`, the factory of every family wrapping it (`Task.env_factory` with the id bound);
    `max_episode_steps` replaces its registered time limit (Fetch and Shadow reach 50 steps, Shadow manipulation 100,
    Adroit 200 (pen 100))."""
    import gymnasium as gym

    register_gymnasium_robotics()
    kwargs: dict[str, Any] = {"render_mode": render_mode}
    if render_mode is not None:
        kwargs.update(width=size, height=size)
    if max_episode_steps is not None:
        kwargs["max_episode_steps"] = max_episode_steps
    env = gym.make(gym_id, **kwargs)
    if seed is not None:
        env.action_space.seed(seed)
    return env


def rotations() -> Any:
    """`gymnasium_robotics.utils.rotations` (the quaternion and Euler helpers its envs judge success with)."""
    import_gymnasium_robotics()
    from gymnasium_robotics.utils import rotations as module

    return module
