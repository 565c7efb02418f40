"""The run dashboard over real runs: a real uvicorn server on 127.0.0.1 (port 0) in a thread, raw HTTP
requests (http.client sends paths exactly as written, so `..` reaches the server un-normalised), real
feedback through `submit_feedback`, a real background `t2r resume`, and the self-contained HTML export."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from html import unescape
from pathlib import Path
from urllib.parse import urlencode

import pytest
from dashboard_support import (
    CODELESS_REPLY,
    DashboardServer,
    copy_runs,
    form_of,
    hold_lock,
    run_id,
    visible_prose,
)

from text2reward.dashboard.export import export_html
from text2reward.inert import UNSAFE
from text2reward.runs.records import FeedbackEvent
from text2reward.runs.store import RunStore


@pytest.fixture(scope="module")
def pristine_server(pristine_runs):
    """A server over the pristine runs, for tests that only read."""
    with DashboardServer(pristine_runs) as server:
        yield server


@pytest.fixture
def copied(pristine_runs, tmp_path):
    runs = copy_runs(pristine_runs, tmp_path / "runs")
    with DashboardServer(runs) as server:
        yield runs, server


# --- pages ---------------------------------------------------------------------------------------------------------


def test_run_list_shows_runs_with_backend_and_status(pristine_runs, pristine_server):
    status, headers, body = pristine_server.get("/")
    html = body.decode()
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in headers["content-security-policy"]
    heuristic = run_id(pristine_runs, "heuristic")
    assert f'href="/runs/{heuristic}"' in html and "fetch/reach" in html
    assert "heuristic (rule-based, no language model)" in html
    assert "finished" in html
    listed = json.loads(pristine_server.get("/api/runs")[2])
    assert {r["run_id"] for r in listed["runs"]} == {heuristic, run_id(pristine_runs, "file")}


def test_run_page_shows_code_curves_video_prompt_and_final(pristine_runs, pristine_server):
    heuristic = run_id(pristine_runs, "heuristic")
    status, _, body = pristine_server.get(f"/runs/{heuristic}")
    html = body.decode()
    assert status == 200
    assert 'class="hl"' in html and "compute_dense_reward" in html  # highlighted code
    assert html.count('<svg class="chart"') >= 5  # overview, final, per candidate success + components
    assert f'src="/runs/{heuristic}/files/rounds/r0/s0/training/rollout.mp4"' in html
    assert "Prompt of round 0" in html and "Move the gripper to the goal" in html
    assert "expert reward (the task&#39;s own)" in html and "best reward (r0-s" in html
    assert "Validation: 8/8 checks passed" in html
    assert "How sure this pick is" in html and re.search(r"agreed with a \d+(- to \d+)?-seed re-training in", html)  # as report.md says it
    assert html.count('name="kind" value="critique"') == 2 and 'name="kind" value="preference"' in html
    live = json.loads(pristine_server.get(f"/runs/{heuristic}/status.json")[2])
    assert live["status"] == "finished" and not live["live"] and len(live["signature"]) == 16
    status, _, fragment = pristine_server.get(f"/runs/{heuristic}/fragment")
    assert status == 200 and fragment.decode().lstrip().startswith("<div id=\"live\"")


def test_unknown_run_is_404(pristine_server):
    status, _, body = pristine_server.get("/runs/no-such-run")
    assert status == 404 and "no run" in body.decode()
    assert pristine_server.get("/", Host="evil.example:80")[0] == 400  # DNS rebinding: foreign Host refused


def test_reply_with_script_is_shown_as_text(pristine_runs, pristine_server):
    hostile = run_id(pristine_runs, "file")
    status, _, body = pristine_server.get(f"/runs/{hostile}")
    html = body.decode()
    assert status == 200
    assert "&lt;script&gt;window.pwned = 1" in html
    assert "<script>window.pwned" not in html and "<img src=x" not in html
    assert re.findall(r"<script\b[^>]*>", html) == ['<script src="/static/dashboard.js" defer>']
    assert "pwned = 3" in html  # the code itself is shown (highlighted, escaped) though it was rejected
    assert "invalid" in html


def test_terminal_escapes_and_bidi_overrides_are_spelled_out_on_pages_and_in_the_export(copied):
    """The hostile reply's OSC/CSI/C1/bidi characters, in its text and in its code, are shown as their escapes on the
    run page, its live fragment and the exported report.html: nothing reaches a browser raw."""
    runs, server = copied
    hostile = run_id(runs, "file")
    spelled = "\\x1b]0;pwned\\x07 \\x1b[2J\\x1b[31m \\u202eevil\\u202c \\u2066iso\\u2069 \\x9b1m \\u200f"
    pages = [server.get(f"/runs/{hostile}")[2].decode(), server.get(f"/runs/{hostile}/fragment")[2].decode(),
             export_html(RunStore(runs / hostile)).read_text()]
    for html in pages:
        assert UNSAFE.search(html) is None, repr(UNSAFE.search(html))
        assert spelled in html  # the reply as text
        assert "\\u202eevil" in re.sub(r"<[^>]+>", "", html.split('class="hl"', 1)[1])  # and in the highlighted code


# --- files ---------------------------------------------------------------------------------------------------------


def test_video_is_served_with_range_support(pristine_runs, pristine_server):
    heuristic = run_id(pristine_runs, "heuristic")
    path = f"/runs/{heuristic}/files/rounds/r0/s0/training/rollout.mp4"
    size = (pristine_runs / heuristic / "rounds/r0/s0/training/rollout.mp4").stat().st_size
    status, headers, body = pristine_server.get(path, Range="bytes=0-99")
    assert status == 206 and headers["content-type"] == "video/mp4"
    assert headers["content-range"] == f"bytes 0-99/{size}" and len(body) == 100
    status, headers, body = pristine_server.get(path)
    assert status == 200 and headers.get("accept-ranges") == "bytes" and len(body) == size
    status, headers, _ = pristine_server.get(f"/runs/{heuristic}/files/rounds/r0/s0/reward_0.py")
    assert status == 200 and headers["content-type"].startswith("text/plain")


def test_only_files_inside_the_run_are_served(copied, tmp_path):
    runs, server = copied
    heuristic = run_id(runs, "heuristic")
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT")
    (runs / heuristic / "leak.txt").symlink_to(secret)
    (runs / heuristic / "leakdir").symlink_to(tmp_path)
    attempts = [
        f"/runs/{heuristic}/files/../../secret.txt",
        f"/runs/{heuristic}/files/rounds/../../../secret.txt",
        f"/runs/{heuristic}/files/%2e%2e/%2e%2e/secret.txt",
        f"/runs/{heuristic}/files/%2e%2e%2f%2e%2e%2fsecret.txt",
        f"/runs/{heuristic}/files/..%5c..%5csecret.txt",
        f"/runs/{heuristic}/files//etc/passwd",
        f"/runs/{heuristic}/files/%2fetc%2fpasswd",
        f"/runs/{heuristic}/files/{tmp_path}/secret.txt",  # files//tmp/...: an absolute path
        f"/runs/{heuristic}/files/leak.txt",
        f"/runs/{heuristic}/files/leakdir/secret.txt",
        f"/runs/..%2f{tmp_path.name}/files/secret.txt",
        "/runs/%2e%2e/files/secret.txt",
    ]
    for path in attempts:
        status, _, body = server.get(path)
        assert status in (403, 404), (path, status)
        assert b"TOP-SECRET" not in body and b"root:" not in body, path


# --- feedback ------------------------------------------------------------------------------------------------------


def critique(server: DashboardServer, run: str, text: str, candidate: str = "r0-s0", origin: str | None = "same", **extra: str):
    fields = {"kind": "critique", "candidate": candidate, "text": text, "csrf_token": server.token, **extra}
    return server.post_form(f"/runs/{run}/feedback", fields, origin=origin)


def test_empty_or_oversized_critique_is_refused_with_the_message(copied):
    runs, server = copied
    heuristic = run_id(runs, "heuristic")
    status, _, body = critique(server, heuristic, "   ")
    assert status == 400 and "the critique is empty" in body.decode()
    status, _, body = critique(server, heuristic, "x" * 4001)
    assert status == 400 and "keep it under 4000" in body.decode()
    status, _, body = critique(server, heuristic, "fine text", candidate="r7-s7")
    assert status == 400 and "has no candidate" in body.decode()
    status, _, body = server.post_form(f"/runs/{heuristic}/feedback", {"kind": "preference", "best": "r0-s0", "worst": "r0-s0",
                                                                        "csrf_token": server.token})
    assert status == 400 and "two different trained candidates" in body.decode()
    status, _, body = critique(server, heuristic, "y" * 70_000)
    assert status == 413 and "larger than 64 KB" in body.decode()
    assert RunStore(runs / heuristic).events() == []


def test_cross_origin_or_tokenless_posts_are_refused(copied):
    runs, server = copied
    heuristic = run_id(runs, "heuristic")
    status, _, body = critique(server, heuristic, "overshoots the goal", origin="http://evil.example")
    assert status == 403 and "cross-origin" in body.decode()
    fields = {"kind": "critique", "candidate": "r0-s0", "text": "overshoots the goal"}
    status, _, body = server.post_form(f"/runs/{heuristic}/feedback", fields)
    assert status == 403 and "token" in body.decode()
    status, _, _ = server.request("POST", f"/runs/{heuristic}/feedback", body=urlencode({**fields, "csrf_token": server.token}).encode(),
                                  headers={"Content-Type": "application/x-www-form-urlencoded", "Referer": "http://evil.example/page"})
    assert status == 403
    assert RunStore(runs / heuristic).events() == []


def test_critique_is_stored_and_the_next_round_is_launched(copied):
    runs, server = copied
    heuristic = run_id(runs, "heuristic")
    text = "it hovers 20 cm away <b>and</b> never closes in"
    status, headers, _ = critique(server, heuristic, text, author="ada")
    assert status == 303 and headers["location"] == f"/runs/{heuristic}#round-1"
    store = RunStore(runs / heuristic)
    [event] = store.events()
    assert event.type == "critique" and event.text == text and event.candidate == "r0-s0"
    assert event.author == "ada" and event.source == "dashboard" and event.for_round == 1
    record = store.read_json("dashboard-resume.json")
    assert record["command"][-4:] == ["resume", heuristic, "--runs-dir", str(runs.resolve())]
    log = (store.root / "dashboard-resume.log").read_text()
    assert f"text2reward.cli resume {heuristic}" in log
    html = server.get(f"/runs/{heuristic}")[2].decode()
    assert "it hovers 20 cm away &lt;b&gt;and&lt;/b&gt; never closes in" in html  # in the timeline, escaped
    assert "live · starting" in html or "live · running" in html
    # a second critique while the round is pending is refused, with the reason
    status, _, body = critique(server, heuristic, "another thought", candidate="r0-s1")
    assert status == 400 and ("still running" in body.decode() or "already waiting" in body.decode())
    server.launcher.stop_all()  # the full round is exercised by the browser test


def test_preference_is_stored(copied):
    runs, server = copied
    heuristic = run_id(runs, "heuristic")
    fields = {"kind": "preference", "best": "r0-s1", "worst": "r0-s0", "text": "", "round": "0", "csrf_token": server.token}
    status, _, _ = server.post_form(f"/runs/{heuristic}/feedback", fields)
    assert status == 303
    [event] = RunStore(runs / heuristic).events()
    assert (event.type, event.best, event.worst, event.for_round) == ("preference", "r0-s1", "r0-s0", 1)
    server.launcher.stop_all()


def test_live_signature_changes_when_the_run_changes(copied):
    runs, server = copied
    heuristic = run_id(runs, "heuristic")
    store = RunStore(runs / heuristic)
    before = json.loads(server.get(f"/runs/{heuristic}/status.json")[2])
    # a run caught early in a new round: bare state, a prompt written, no candidate yet, its process alive
    store.write_json("state.json", {"status": "running", "round": 1})
    hold_lock(store.root)
    store.write_json("rounds/r1/prompt.json", {"messages": [{"role": "user", "content": "do better <now>"}], "context": {"round": 1}})
    after = json.loads(server.get(f"/runs/{heuristic}/status.json")[2])
    assert after["signature"] != before["signature"] and after["live"] and after["status"] == "running"
    status, _, body = server.get(f"/runs/{heuristic}")
    html = body.decode()
    assert status == 200 and "The page refreshes by itself" in html and "<fieldset disabled" in html
    assert 'id="round-1"' in html and "Generating and validating candidates" in html and "do better &lt;now&gt;" in html
    rows = json.loads(server.get("/api/runs")[2])["runs"]
    assert next(r for r in rows if r["run_id"] == heuristic)["live"]


# --- HTML export -------------------------------------------------------------------------------------------------


def test_export_html_is_self_contained(copied):
    runs, server = copied
    for backend in ("heuristic", "file"):
        store = RunStore(runs / run_id(runs, backend))
        path = export_html(store)
        assert path == store.root / "report.html"
        html = path.read_text()
        external = re.findall(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, flags=re.I)
        assert external == [], external
        assert "<link" not in html and "<script" not in html and "<style>" in html
        assert not list(store.root.glob(".report.html.*"))  # written atomically, no temporary left
        if backend == "heuristic":
            assert "data:video/mp4;base64," in html and '<svg class="chart"' in html and 'class="hl"' in html
            assert "Critique r0-s0" not in html  # no forms in a report
        else:
            assert "&lt;script&gt;window.pwned = 1" in html
    heuristic = run_id(runs, "heuristic")
    html = server.get(f"/runs/{heuristic}")[2].decode()
    button = re.search(rf'<form method="post" action="/runs/{heuristic}/export".*?</form>', html, flags=re.S)
    assert button and f'name="csrf_token" value="{server.token}"' in button[0]  # the page's Export button posts the token
    status, headers, _ = server.post_form(f"/runs/{heuristic}/export", {"csrf_token": server.token})
    assert status == 303 and headers["location"] == f"/runs/{heuristic}/files/report.html"
    status, headers, body = server.get(headers["location"])
    assert status == 200 and headers["content-type"].startswith("text/html") and b"text2reward" in body


def test_export_writes_only_on_a_post_from_the_page(copied):
    """Export writes report.html, so it is a state-changing request: a GET (a link, an <img> on any site) writes
    nothing; a POST without the page's token, or from another origin, is refused and writes nothing."""
    runs, server = copied
    heuristic = run_id(runs, "heuristic")
    report = runs / heuristic / "report.html"
    report.unlink(missing_ok=True)
    status, _, _ = server.get(f"/runs/{heuristic}/export")
    assert status == 405 and not report.exists()
    for fields, origin in (({}, "same"), ({"csrf_token": "stale"}, "same"), ({"csrf_token": server.token}, "http://evil.example")):
        status, _, body = server.post_form(f"/runs/{heuristic}/export", fields, origin=origin)
        assert status == 403 and ("token" in body.decode() or "cross-origin" in body.decode()) and not report.exists()
    assert server.post_form(f"/runs/{heuristic}/export", {"csrf_token": server.token})[0] == 303 and report.is_file()


# --- dashboard details: what a page says about a run is what the run is ---------------------------------------------


def test_disabled_feedback_forms_say_why_beside_them(copied, codeless_run):
    runs, server = copied
    heuristic, hostile = run_id(runs, "heuristic"), run_id(runs, "file")
    # a finished run with trained candidates: every form open, nothing to explain
    html = server.get(f"/runs/{heuristic}")[2].decode()
    assert "form-closed" not in html and "<fieldset disabled" not in html

    # a candidate that did not train: its critique form is there, disabled, and says why right inside it
    form = form_of(server.get(f"/runs/{hostile}")[2].decode(), "critique-r0-s0")
    assert '<fieldset disabled aria-describedby="critique-closed-r0-s0">' in form
    assert re.search(r'<p class="form-closed" id="critique-closed-r0-s0">r0-s0 did not train \(invalid\), so it has no '
                     r"behaviour to critique", form)

    # a live run: every feedback form is disabled, each with the reason beside it
    hold_lock(runs / heuristic)
    html = server.get(f"/runs/{heuristic}")[2].decode()
    forms = [form_of(html, key) for key in ("critique-r0-s0", "critique-r0-s1", "preference-0")]
    for form in forms:
        assert "<fieldset disabled aria-describedby=" in form
        assert "Closed while the run is in progress: feedback opens when it has finished." in form
    assert "title=" not in "".join(forms)  # said in words on the page, not only in a tooltip

    # feedback already waiting for the next round: closed, and the page says which feedback and what to run
    (runs / heuristic / "run.lock").unlink()
    store = RunStore(runs / heuristic)
    store.add_event(FeedbackEvent(type="critique", candidate="r0-s0", text="closer", author="ada", source="cli", for_round=1))
    store.set_state(status="feedback_pending")
    form = form_of(server.get(f"/runs/{heuristic}")[2].decode(), "critique-r0-s1")
    assert "<fieldset disabled" in form
    assert f"Closed: feedback #0 is already waiting for the next round; run it first (`t2r resume {heuristic}`)" in unescape(form)


def test_a_finished_run_without_a_trained_candidate_says_so_and_never_yet(copied, codeless_run):
    runs, server = copied
    hostile = run_id(runs, "file")
    html = server.get(f"/runs/{hostile}")[2].decode()
    prose = " ".join(visible_prose(html).split())
    assert "No candidate trained: r0-s0 invalid (the total is 0.0 on all 100 states" in prose
    assert "none: no candidate trained" in prose  # the header's "best"
    assert "No human feedback: feedback is given on a trained candidate, and this run has none." in prose
    assert not re.search(r"\byet\b", prose, flags=re.I), re.findall(r".{60}\byet\b.{20}", prose, flags=re.I)

    codeless_runs, codeless = codeless_run
    with DashboardServer(codeless_runs) as other:
        prose = " ".join(visible_prose(other.get(f"/runs/{codeless}")[2].decode()).split())
    assert re.search(r"No candidate trained: r0-s0 no.code \(.*; r0-s1 invalid \(", prose)
    assert not re.search(r"\byet\b", prose, flags=re.I), re.findall(r".{60}\byet\b.{20}", prose, flags=re.I)

    # a run whose process died in a new round: its round is `interrupted`, not "in progress" or "generating"
    heuristic = run_id(runs, "heuristic")
    store = RunStore(runs / heuristic)
    store.write_json("rounds/r1/prompt.json", {"messages": [{"role": "user", "content": "again"}], "context": {"round": 1}})
    store.set_state(status="running")  # and no live lock: the process is gone
    html = server.get(f"/runs/{heuristic}")[2].decode()
    round_1 = html[html.index('id="round-1"'):]
    assert 'status-interrupted">interrupted</span>' in round_1[:400]
    assert "in progress" not in round_1 and "Generating" not in round_1
    assert "No candidate: the run stopped (interrupted) before this round produced one." in round_1


def test_skipped_validation_checks_are_neutral_not_failed(codeless_run):
    runs, run = codeless_run
    record = RunStore(runs / run).read_candidate(0, 1)
    checks = record.attempts[-1].validation.checks
    assert checks["runs"].ok is False and [n for n, c in checks.items() if c.ok is None]  # the real record
    skipped = [n for n, c in checks.items() if c.ok is None]
    with DashboardServer(runs) as server:
        html = server.get(f"/runs/{run}")[2].decode()
    card = html[html.index('id="cand-r0-s1"'):]
    card = card[:card.index("</article>")]
    failed = sum(1 for c in checks.values() if c.ok is False)
    assert f"checks passed, {failed} failed, {len(skipped)} skipped</summary>" in card
    items = re.findall(r'<li class="(\w+)"[^>]*><span class="mark">(.)</span> <b>([^<]+)</b>', card)
    by_name = {name: (cls, mark) for cls, mark, name in items}
    for name in skipped:
        assert by_name[name.replace("_", " ")] == ("skipped", "–")
    assert by_name["runs"] == ("bad", "✗")
    css = (Path(__file__).parents[2] / "text2reward/dashboard/static/dashboard.css").read_text()
    assert "ul.checks li.skipped, ul.checks .skipped .mark { color: var(--muted); }" in css


def test_a_no_code_candidate_shows_its_reply_as_text(codeless_run):
    runs, run = codeless_run
    assert RunStore(runs / run).read_candidate(0, 0).status == "no_code"
    with DashboardServer(runs) as server:
        html = server.get(f"/runs/{run}")[2].decode()
    card = html[html.index('id="cand-r0-s0"'):]
    card = card[:card.index("</article>")]
    assert 'class="code' not in card  # no (empty) code block
    reply = re.search(r'<details class="block reply codeless" data-key="reply-r0-s0-reply_0.md" open>\s*<summary>Model reply '
                      r"\(reply_0.md\): it holds no reward code, so here is what it said</summary>\s*<pre class=\"text\">(.*?)</pre>",
                      card, flags=re.S)
    assert reply, card
    assert unescape(reply[1]) == CODELESS_REPLY  # the whole reply, as text
    assert "&lt;/pre&gt;&lt;script&gt;window.pwned = 4" in reply[1] and "<script>window.pwned" not in html


def test_code_blocks_wrap_or_scroll_rather_than_clip():
    css = (Path(__file__).parents[2] / "text2reward/dashboard/static/dashboard.css").read_text()
    assert "pre { max-width: 100%; overflow-x: auto; }" in css
    assert ".code pre { white-space: pre-wrap; overflow-wrap: anywhere;" in css  # highlighted code and diffs wrap: shown whole
    assert "pre.text { white-space: pre-wrap; overflow-wrap: anywhere;" in css  # replies and prompts wrap
    assert "hidden" not in re.sub(r"table\.runs \{[^}]*\}", "", css)  # nothing clips (the browser test scrolls one)


def test_export_of_a_live_run_is_a_snapshot_without_live_parts(copied):
    runs, server = copied
    heuristic = run_id(runs, "heuristic")
    hold_lock(runs / heuristic)
    live_page = server.get(f"/runs/{heuristic}")[2].decode()
    assert "The page refreshes by itself" in live_page and "data-status-url" in live_page  # the live page polls
    html = export_html(RunStore(runs / heuristic)).read_text()
    for live_part in ("refreshes by itself", "data-status-url", "data-fragment-url", "data-signature", "data-live",
                      'class="pulse"', "live ·", 'class="alert live"'):
        assert live_part not in html, live_part
    assert "This report is a snapshot: the run was running when it was exported" in html
    assert "running (when exported)" in html


def test_the_run_shows_when_it_was_started_in_local_time_with_the_zone(copied):
    runs, server = copied
    heuristic = run_id(runs, "heuristic")
    store = RunStore(runs / heuristic)
    created = 1_700_000_123.0
    store.set_state(created=created)
    moment = datetime.fromtimestamp(created).astimezone()
    shown = moment.strftime("%Y-%m-%d %H:%M:%S %Z")
    assert moment.strftime("%Z")  # the zone is named
    html = server.get(f"/runs/{heuristic}")[2].decode()
    assert f'<dt>started</dt><dd><time class="run-created" datetime="{moment.isoformat(timespec="seconds")}">{shown}</time></dd>' in html
    assert f"<td>{shown}</td>" in server.get("/")[2].decode()

    # a run whose state has no `created` (its loop never started): the stamp its folder was named with, not a file's mtime
    state = store.read_json("state.json")
    state.pop("created")
    store.write_json("state.json", state)
    os.utime(store.root / "config.json", (0, 0))
    named = datetime.strptime(heuristic[:15], "%Y%m%d-%H%M%S").astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    assert f">{named}</time>" in server.get(f"/runs/{heuristic}")[2].decode()
