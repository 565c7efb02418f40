"""Shared fixtures: real tasks and real environments, nothing mocked."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def all_tasks():
    from sim_envs import list_tasks

    return list_tasks()
