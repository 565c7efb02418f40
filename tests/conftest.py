"""Shared fixtures: real tasks and real environments, nothing mocked."""

import os
import shutil
import tempfile

os.environ.setdefault("MUJOCO_GL", "egl")

import pytest  # noqa: E402


def _compile_each_model_file_once() -> None:
    """The test processes compile each shipped model file once, as training jobs and `t2r` commands do
    (sim_envs.model_cache): the suite makes thousands of envs. Files under pytest's temporary root (tests' own robots,
    rewritten between compilations; tests/compile_cache.py) are compiled every time; `T2R_TEST_COMPILE_CACHE=0` compiles
    everything every time.
    The price is memory: a test process that has made all 74 tasks' envs holds ~1.2 GB instead of ~0.3 GB (the Shadow
    hand's and Adroit's meshes are the large models)."""
    if os.environ.get("T2R_TEST_COMPILE_CACHE", "1") == "0":
        return
    from compile_cache import pytest_temp_root

    from sim_envs.model_cache import compile_each_file_once

    compile_each_file_once(recompile_under=pytest_temp_root())


_compile_each_model_file_once()
from dashboard_support import codeless_run, pristine_runs  # noqa: E402, F401 - the dashboard's run fixtures, for every test folder


@pytest.fixture(scope="session", autouse=True)
def shared_fork_server():
    """One training fork server per test process, shared through T2R_FORKSERVER_SOCKET with every driver its tests
    start (`t2r run`, `t2r demo`, `t2r tune`... in subprocesses, and `run_jobs` here): each of those would otherwise
    import PyTorch, JAX, SBX and MetaWorld again in a server of its own (~5 s of CPU each; benchmarks/RESULTS.md,
    "test suite time"). It imports in the background while the first tests run. A driver started with other
    import-time settings or in another session (`start_new_session=True`) starts its own, as do the tests of the
    driver's own server (tests/training/test_preloaded_launcher.py); `T2R_FORKSERVER=0` switches both off. It yields the
    server and its socket's path (None where switched off), which the shared server's own tests use."""
    from text2reward.training.preloaded import SOCKET_VARIABLE, enabled, start_shared_server

    if not enabled() or SOCKET_VARIABLE in os.environ:
        yield None
        return
    folder = tempfile.mkdtemp(prefix="t2r-fs-")  # short: a socket's path has at most 107 bytes
    server, path = start_shared_server(folder)
    os.environ[SOCKET_VARIABLE] = path
    try:
        yield server, path
    finally:
        os.environ.pop(SOCKET_VARIABLE, None)
        server.close()
        shutil.rmtree(folder, ignore_errors=True)


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
