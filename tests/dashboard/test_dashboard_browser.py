"""The dashboard in a real browser (Debian's Chromium driven by Playwright), against a real server and a
real heuristic run: open the list, open the run, see curves and a playing video, send a critique, and
watch the next round (a real background `t2r resume`) appear without reloading, critique in its prompt."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from dashboard_support import DashboardServer, copy_runs, run_id
from playwright.sync_api import sync_playwright

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
    """On a FINISHED run (its one round done, the final comparison written), a critique sent from the page starts
    round 1 in the background, and the page follows it live: round 1's section, then its candidate training,
    then trained, with no reload."""
    page = browser_page
    runs = copy_runs(pristine_runs, tmp_path / "runs")
    heuristic, hostile = run_id(runs, "heuristic"), run_id(runs, "file")
    assert json.loads((runs / heuristic / "state.json").read_text())["status"] == "finished"
    tiny_resume(runs, heuristic)
    with DashboardServer(runs) as server:
        # the list, then the run
        page.goto(server.url + "/")
        assert "heuristic (rule-based, no language model)" in page.inner_text("table.runs")
        page.click(f'a[href="/runs/{heuristic}"]')
        page.wait_for_url(f"**/runs/{heuristic}")
        assert page.locator("#live .run-head .badge.status-finished").count() == 1
        assert page.locator("#live[data-live='false']").count() == 1 and page.locator("#round-1").count() == 0
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
        assert page.locator("#round-1 .candidate.cand-trained").count() == 0
        # from here on, no navigation: count the live swaps of the page's #live part instead
        page.evaluate("""() => {
            window.__noReload = true; window.__swaps = 0;
            new MutationObserver(() => { window.__swaps += 1; }).observe(document.querySelector('main'), { childList: true });
        }""")

        # the background resume trains round 1; the page updates itself (no reload) until the run finishes
        page.wait_for_selector("#round-1 .candidate", timeout=RESUME_TIMEOUT_MS)
        page.wait_for_selector("#round-1 .candidate.cand-trained", timeout=RESUME_TIMEOUT_MS)
        page.wait_for_selector("#live[data-live='false']", timeout=RESUME_TIMEOUT_MS)
        assert page.evaluate("window.__noReload") is True
        assert page.evaluate("window.__swaps") >= 1  # the new round came in by the page's own polling
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


def test_a_killed_run_shows_interrupted_and_resumes_from_its_button(pristine_runs, tmp_path, browser_page):  # noqa: F811
    """What a killed process leaves behind: state `running` and a lock whose process is gone. The page must
    say `interrupted` (not live), offer Resume, and follow the resume it starts until the run finishes."""
    page = browser_page
    runs = copy_runs(pristine_runs, tmp_path / "runs")
    heuristic = run_id(runs, "heuristic")
    state_path = runs / heuristic / "state.json"
    state = json.loads(state_path.read_text())
    state_path.write_text(json.dumps({**state, "status": "running"}))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (runs / heuristic / "run.lock").write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "heartbeat": 0}))
    with DashboardServer(runs) as server:
        page.goto(f"{server.url}/runs/{heuristic}")
        assert page.locator("#live[data-live='false']").count() == 1 and page.locator(".alert.live").count() == 0
        assert page.locator("#live .badge.status-interrupted").count() >= 1
        assert f"t2r resume {heuristic} --runs-dir" in page.inner_text("#interrupted")
        page.evaluate("window.__noReload = true")
        page.click("#resume-button")
        page.wait_for_url(f"**/runs/{heuristic}")
        page.wait_for_selector("#live .badge.status-finished", timeout=RESUME_TIMEOUT_MS)
        assert page.locator("#interrupted").count() == 0
    assert json.loads(state_path.read_text())["status"] == "finished"
    assert not (runs / heuristic / "run.lock").exists()


def test_a_hostile_reply_reads_as_text_and_export_is_a_posted_form(pristine_runs, tmp_path, browser_page):  # noqa: F811
    """The hostile run in a browser: its reply's script never runs, its terminal escapes and bidi overrides are shown
    spelled out (`\\u202e`), not obeyed; the Export button posts the page's form and lands on a report.html that is
    as inert as the page, while a plain visit to /export writes nothing."""
    page = browser_page
    runs = copy_runs(pristine_runs, tmp_path / "runs")
    hostile = run_id(runs, "file")
    report = runs / hostile / "report.html"
    report.unlink(missing_ok=True)
    with DashboardServer(runs) as server:
        assert page.goto(f"{server.url}/runs/{hostile}/export").status == 405 and not report.exists()
        page.goto(f"{server.url}/runs/{hostile}")
        page.click("#round-0 details.block:has(summary:text('reply')) > summary")
        shown = page.inner_text("#round-0")
        assert "\\x1b]0;pwned\\x07" in shown and "\\u202eevil\\u202c" in shown and "\u202e" not in shown
        page.click("#export-button")
        page.wait_for_url(f"**/runs/{hostile}/files/report.html")
        assert report.is_file() and "\\u202eevil\\u202c" in page.inner_text("body") and "\u202e" not in page.content()
        assert page.evaluate("typeof window.pwned") == "undefined" and page.title() != "pwned"


LONG = "END-OF-LONG-LINE"
REACH_END = """([selector, marker]) => {
    // Scroll the block as far as it goes (if it can) and say whether the end of the long line is then inside it.
    const box = document.querySelector(selector);
    const walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
    let node = walker.nextNode();
    while (node && !node.data.includes(marker)) node = walker.nextNode();
    if (!node) return { error: "no long line in " + selector };
    const overflowed = box.scrollWidth > box.clientWidth;
    box.scrollLeft = box.scrollWidth;
    box.scrollTop = box.scrollHeight;
    const range = document.createRange();
    const at = node.data.indexOf(marker);
    range.setStart(node, at);
    range.setEnd(node, at + marker.length);
    const r = range.getBoundingClientRect(), b = box.getBoundingClientRect();
    return { overflowX: getComputedStyle(box).overflowX, overflowed, scrolled: box.scrollLeft,
             whiteSpace: getComputedStyle(node.parentElement.closest('pre')).whiteSpace,
             reachable: r.left >= b.left - 1 && r.right <= b.right + 1 && r.top >= b.top - 1 && r.bottom <= b.bottom + 1 };
}"""
EVERY_PRE = """() => [...document.querySelectorAll('#live pre')].map((pre) => {
    // A block of text either wraps, or scrolls sideways itself or inside its code box; none is hidden.
    const style = getComputedStyle(pre), box = pre.closest('.code');
    const wraps = ['pre-wrap', 'break-spaces', 'pre-line', 'normal'].includes(style.whiteSpace);
    const scrolls = ['auto', 'scroll'].includes(style.overflowX) || (box && ['auto', 'scroll'].includes(getComputedStyle(box).overflowX));
    return { cls: pre.className, ok: style.overflowX !== 'hidden' && (wraps || scrolls) };
})"""


def test_long_code_and_diff_lines_are_shown_whole_and_skipped_checks_are_grey(pristine_runs, tmp_path, browser_page):  # noqa: F811
    """A round-1 candidate (its folder copied from r0-s0) whose reward has a 700-character line and whose record
    marks a check skipped: the code and its diff against round 0's best wrap, so the line's end is in view with no
    scrolling, every <pre> wraps or scrolls, the page itself does not widen, and the skipped check is grey, not red."""
    page = browser_page
    runs = copy_runs(pristine_runs, tmp_path / "runs")
    heuristic = run_id(runs, "heuristic")
    rounds = runs / heuristic / "rounds"
    shutil.copytree(rounds / "r0" / "s0", rounds / "r1" / "s0")
    reward = rounds / "r1" / "s0" / "reward_0.py"
    reward.write_text(reward.read_text() + "\n# " + "a-very-long-comment " * 35 + LONG + "\n")
    record_path = rounds / "r1" / "s0" / "candidate.json"
    record = json.loads(record_path.read_text())
    record.update(id="r1-s0", round=1, code_file="rounds/r1/s0/reward_0.py")
    record["validation"]["checks"]["deterministic"] = {"ok": None, "detail": "skipped after an earlier failure"}
    record_path.write_text(json.dumps(record))
    with DashboardServer(runs) as server:
        page.goto(f"{server.url}/runs/{heuristic}")
        page.click("#cand-r1-s0 details[data-key='diff-r1-s0'] > summary")
        page.click("#cand-r1-s0 details[data-key='validation-r1-s0'] > summary")
        for selector in ("#cand-r1-s0 details[data-key='code-r1-s0'] .code", "#cand-r1-s0 .code.diff"):
            found = page.evaluate(REACH_END, [selector, LONG])
            assert found.get("error") is None, found
            assert found["whiteSpace"] == "pre-wrap" and not found["overflowed"], (selector, found)  # wrapped, nothing cut
            assert found["reachable"], (selector, found)
        blocks = page.evaluate(EVERY_PRE)
        assert blocks and all(b["ok"] for b in blocks), [b for b in blocks if not b["ok"]]
        assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
        skipped = page.locator("#cand-r1-s0 ul.checks li.skipped")
        assert skipped.count() == 1 and "deterministic" in skipped.inner_text()
        grey = "rgb(107, 114, 128)"  # --muted
        assert skipped.evaluate("li => getComputedStyle(li).color") == grey
        assert skipped.evaluate("li => getComputedStyle(li.querySelector('.mark')).color") == grey
        assert page.locator("#cand-r1-s0 ul.checks li.bad").count() == 0
        assert "1 skipped" in page.inner_text("#cand-r1-s0 details[data-key='validation-r1-s0'] > summary")
