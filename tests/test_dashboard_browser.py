"""The dashboard in a real browser (Debian's Chromium driven by Playwright), against a real server and a
real heuristic run: open the list, open the run, see curves and a playing video, send a critique, and
watch the next round (a real background `t2r resume`) appear without reloading, critique in its prompt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright
from test_dashboard import DashboardServer, copy_runs, pristine_runs, run_id  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow  # end-to-end: real training

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
CRITIQUE = "The gripper drifts away from the red goal dot; reward closing the last 5 cm more strongly."
RESUME_TIMEOUT_MS = 300_000


@pytest.fixture
def browser_page(tmp_path):
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium) to run the browser test")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000},
        )
        try:
            yield context.new_page()
        finally:
            context.close()


def tiny_resume(runs: Path, run: str) -> None:
    """Make the round the critique produces cheap: one candidate, no expert re-training."""
    config_path = runs / run / "config.json"
    config = json.loads(config_path.read_text())
    config.update(samples=1, compare_expert=False, final_seeds=1)
    config_path.write_text(json.dumps(config, indent=2))


def test_critique_in_the_browser_runs_the_next_round(pristine_runs, tmp_path, browser_page):  # noqa: F811
    page = browser_page
    runs = copy_runs(pristine_runs, tmp_path / "runs")
    heuristic, hostile = run_id(runs, "heuristic"), run_id(runs, "file")
    tiny_resume(runs, heuristic)
    with DashboardServer(runs) as server:
        # the list, then the run
        page.goto(server.url + "/")
        assert "heuristic (rule-based, no language model)" in page.inner_text("table.runs")
        page.click(f'a[href="/runs/{heuristic}"]')
        page.wait_for_url(f"**/runs/{heuristic}")
        assert page.locator("svg.chart").count() >= 5
        assert page.locator("svg.chart polyline").count() >= 5
        page.wait_for_function(
            "() => [...document.querySelectorAll('video')].length > 0 && "
            "[...document.querySelectorAll('video')].every(v => v.readyState >= 1 && v.duration > 0)", timeout=60_000)

        # critique r0-s0; the page comes back showing the next round starting
        page.fill("#critique-r0-s0", CRITIQUE)
        page.fill("form[data-key='critique-r0-s0'] input[name=author]", "browser test")
        page.click("form[data-key='critique-r0-s0'] button[type=submit]")
        page.wait_for_url(f"**/runs/{heuristic}#round-1")
        page.wait_for_selector("#round-1")
        assert page.locator(".alert.live").count() == 1
        page.evaluate("window.__noReload = true")

        # the background resume trains round 1; the page updates itself (no reload) until the run finishes
        page.wait_for_selector("#round-1 .candidate.cand-trained", timeout=RESUME_TIMEOUT_MS)
        page.wait_for_selector("#live[data-live='false']", timeout=RESUME_TIMEOUT_MS)
        assert page.evaluate("window.__noReload") is True
        assert CRITIQUE in page.text_content("#round-1 details.prompt")
        assert CRITIQUE in page.text_content("#round-1 .produced-by")
        assert page.locator(".timeline a[href='#round-1']").count() == 1
        assert page.locator("#live .badge.status-finished").count() >= 1
        page.click("#round-1 details.prompt > summary")
        page.evaluate("document.querySelectorAll('video').forEach(v => { v.currentTime = 1.0; })")
        page.wait_for_timeout(500)
        screenshot = tmp_path / "run-page.png"
        page.screenshot(path=str(screenshot), full_page=True)
        print(f"screenshot of the run page: {screenshot}")

        # a reply carrying <script> is shown as text and never runs
        page.goto(f"{server.url}/runs/{hostile}")
        page.click("#round-0 details.block:has(summary:text('reply')) > summary")
        assert "<script>window.pwned = 1" in page.inner_text("#round-0")
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert page.title() != "pwned"
