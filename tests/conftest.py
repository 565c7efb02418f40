"""Shared fixtures: real tasks and real environments, nothing mocked."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import pytest  # noqa: E402
from dashboard_support import codeless_run, pristine_runs  # noqa: E402, F401 - the dashboard's run fixtures, for every test folder


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


def _missing_tool(reason: str) -> str:
    """What a skip's reason says is missing, in a word ("bubblewrap", "chromium", ...), for the summary line."""
    for tool in ("bubblewrap", "landlock", "chromium"):
        if tool in reason.lower():
            return tool
    return reason.split(":")[0][:60]


def pytest_unconfigure(config):
    """One line at the very end (after pytest's own counts) naming what the skipped tests needed, so a missing tool is
    never silent: "skipped 99 tests that need bubblewrap (98), chromium (1): apt-get install -y bubblewrap chromium"."""
    terminalreporter = config.pluginmanager.get_plugin("terminalreporter")
    if terminalreporter is None or hasattr(config, "workerinput"):  # an xdist worker: the controller reports
        return
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    counts: dict[str, int] = {}
    for report in skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        tool = _missing_tool(str(reason))
        counts[tool] = counts.get(tool, 0) + 1
    needs = ", ".join(f"{tool} ({n})" for tool, n in sorted(counts.items(), key=lambda item: -item[1]))
    fix = " ".join(tool for tool in ("bubblewrap", "chromium") if tool in counts)
    terminalreporter.write_line(f"skipped {len(skipped)} tests that need {needs}" + (f": apt-get install -y {fix}" if fix else ""),
                                yellow=True)
