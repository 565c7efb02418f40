"""Shared fixtures: real tasks and real environments, nothing mocked."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def all_tasks():
    from sim_envs import list_tasks

    return list_tasks()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI (`T2R_FORBID_SKIPS=1`, set by .ci/run) a skipped test is a failure: a missing jail, browser or
    tool must not let the suite pass without running what depends on it."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("T2R_FORBID_SKIPS") == "1" and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.longrepr = f"skipped in CI, where nothing may skip: {reason}"
