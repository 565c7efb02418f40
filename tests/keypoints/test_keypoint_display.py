"""What the dashboard, the HTML export and report.md show of a keypoint reward source and of vision analysis, on a
real run: `--reward-source keypoints --keypoints oracle` on franka/push, one tiny round, trained offline. The vision
analysis (which needs a vision model) is added to a copy of the run by hand, written the way the loop writes it."""

from __future__ import annotations

import base64
import json
import re
import shutil
from html import unescape

import numpy as np
import pytest
from dashboard_support import DashboardServer
from short_training import SHORT_ALGO, SHORT_HP

from text2reward.dashboard.export import export_html
from text2reward.loop import start_run
from text2reward.runs.records import VisionAnalysis
from text2reward.runs.report import write_report
from text2reward.runs.store import RunStore
from text2reward.settings import RunConfig

VISION_MODEL = "openai:test-vision"
VISION_ANSWER = "<script>window.pwned = 1</script> The gripper closed 5 cm beside the block & never touched it."
HOSTILE_KEYPOINT_REPLY = '{"points": []} </pre><script>window.pwned = 2</script>'


@pytest.fixture(scope="module")
def keypoint_run(tmp_path_factory) -> RunStore:
    """A finished run whose one candidate is the program text2reward wrote from the oracle's keypoints."""
    config = RunConfig.of(task_id="franka/push", reward_source="keypoints", keypoints="oracle", rounds=1, samples=1, steps=200,
                          workers=1, final_seeds=0, compare_expert=False, eval_freq=200, eval_episodes=1,
                          overrides=SHORT_HP, algo=SHORT_ALGO, video=False)
    return start_run(config, tmp_path_factory.mktemp("keypoints") / "runs")


@pytest.fixture
def copied(keypoint_run, tmp_path) -> RunStore:
    """A copy of the run for a test that changes it."""
    runs = tmp_path / "runs"
    shutil.copytree(keypoint_run.root, runs / keypoint_run.run_id, ignore=shutil.ignore_patterns("tb", "model.zip"))
    return RunStore(runs / keypoint_run.run_id)


def page(store: RunStore) -> str:
    with DashboardServer(store.runs_dir) as server:
        status, _, body = server.get(f"/runs/{store.run_id}")
    assert status == 200
    return body.decode()


def section(html: str, start: str, end: str) -> str:
    """The HTML from `start` to the first `end` after it."""
    assert start in html, f"{start!r} is not on the page"
    part = html[html.index(start):]
    return part[:part.index(end)]


def keypoints_json(store: RunStore) -> dict:
    return json.loads((store.root / "keypoints" / "keypoints.json").read_text())


def expected_rows(store: RunStore) -> list[tuple[str, ...]]:
    """Each keypoint's table cells, computed here from keypoints.json (name, pixel, height, x, y, z, moves with)."""
    rows = []
    for p in keypoints_json(store)["keypoints"]["points"]:
        rows.append((p["name"], f"({p['pixel'][0]:.0f}, {p['pixel'][1]:.0f})", f"{p['height']:.3f}",
                     *(f"{v:.3f}" for v in p["world"]), p["anchor"] or "fixed (world point)"))
    return rows


def add_vision_analysis(store: RunStore, answer: str = VISION_ANSWER, frames: int = 3) -> list[str]:
    """What `analyse_failures` leaves: keyframes, the answer beside the candidate, its record; and the next round's
    prompt context naming it (as `round_prompt` writes it). Returns the keyframes' run-relative paths."""
    import imageio.v3 as iio

    candidate = store.read_candidate(0, 0)
    directory = store.candidate_dir(0, 0)
    keyframes = []
    for i in range(frames):
        path = directory / "training" / f"rollout_key{i}.png"
        iio.imwrite(path, np.full((16, 16, 3), 40 * i, dtype=np.uint8))
        keyframes.append(store.relative(path))
    answer_file = store.write_text(directory / "vision_analysis.md", answer)
    candidate.keyframes = keyframes
    candidate.vision_analysis = VisionAnalysis(file=store.relative(answer_file), images=keyframes, model=VISION_MODEL)
    store.write_candidate(candidate)
    store.write_json("rounds/r1/prompt.json", {
        "messages": [{"role": "user", "content": "improve the reward"}],
        "context": {"vision_analysis": {"candidate": "r0-s0", "images": keyframes, "model": VISION_MODEL}, "round": 1,
                    "reward_mode": "dense"},
    })
    return keyframes


# --- the run page ------------------------------------------------------------------------------------------------


def test_run_page_shows_the_keypoints_card(keypoint_run):
    store = keypoint_run
    with DashboardServer(store.runs_dir) as server:
        status, _, body = server.get(f"/runs/{store.run_id}")
        html = body.decode()
        image_url = f"/runs/{store.run_id}/files/keypoints/annotated.png"
        image_status, image_headers, image = server.get(image_url)
    assert status == 200
    card = section(html, '<section class="card keypoints" id="keypoints">', "</section>")
    assert f'<img src="{image_url}"' in card
    assert image_status == 200 and image_headers["content-type"] == "image/png"
    assert image == (store.root / "keypoints" / "annotated.png").read_bytes() and image.startswith(b"\x89PNG")

    rows = re.findall(r"<tr>((?:<td[^>]*>[^<]*</td>)+)</tr>", card)
    shown = [tuple(unescape(cell) for cell in re.findall(r"<td[^>]*>([^<]*)</td>", row)) for row in rows]
    assert shown == expected_rows(store)
    assert [row[0] for row in shown] == ["grasp", "target"] and shown[0][6] == "obj" and shown[1][6] == "goal"

    record = keypoints_json(store)["keypoints"]
    assert record["source"] == "oracle" and record["camera"]["name"] == "front"
    prose = " ".join(unescape(re.sub(r"<[^>]+>", " ", card)).split())
    assert "source oracle (the simulator's true positions projected into the image)" in prose
    assert "camera front · 480×480 px · field of view 45°" in prose
    assert f"Reason given: {record['reason']}" in prose
    assert f'<a href="/runs/{store.run_id}/files/keypoints/reward.py">keypoints/reward.py</a>' in card
    assert "Model reply" not in card  # the oracle has no replies

    head = section(html, '<section class="card run-head">', "</section>")
    assert '<dt>reward source</dt><dd><a href="#keypoints">keypoints · points from oracle</a></dd>' in head


def test_the_keypoint_candidate_is_not_called_a_model_reply(keypoint_run):
    html = page(keypoint_run)
    card = section(html, 'id="cand-r0-s0"', "</article>")
    assert "keypoints (rule-based, no language model)" in card
    assert "<summary>Rule-based reply (reply_0.md)</summary>" in card and "Model reply" not in card
    round_0 = section(html, 'id="round-0"', 'id="cand-r0-s0"')
    assert "This round's reward was written by text2reward from the run's <a href=\"#keypoints\">keypoints</a>" in round_0
    assert "vision-note" not in html  # no vision analysis in this run


# --- report.md and the HTML export ------------------------------------------------------------------------------------


def test_report_md_has_the_keypoints_section(keypoint_run):
    store = keypoint_run
    report = (store.root / "report.md").read_text()
    keypoints = report[report.index("\n## Keypoints\n"):report.index("\n## Candidates\n")]
    assert "- source: oracle (the simulator's true positions projected into the image)" in keypoints
    assert "- camera: front, 480x480 px, vertical field of view 45°, at (1.900, 0.000, 1.200) m; reset seed 0" in keypoints
    assert "![keypoints](keypoints/annotated.png)" in keypoints
    assert (store.root / "keypoints" / "annotated.png").read_bytes().startswith(b"\x89PNG")
    for row in expected_rows(store):
        assert "| " + " | ".join(row) + " |" in keypoints
    assert f"Reason given: {keypoints_json(store)['keypoints']['reason']}" in keypoints
    assert "Keypoint reward program: [keypoints/reward.py](keypoints/reward.py)" in keypoints
    assert "Model replies" not in keypoints  # the oracle has none
    assert "- reward source: keypoints (round 0's reward is written by text2reward from oracle keypoints" in report
    assert "*Written by keypoints (rule-based, no language model).*" in report
    assert "used images" not in report


def test_html_export_embeds_the_keypoint_image(copied):
    html = export_html(copied).read_text()
    image = base64.b64encode((copied.root / "keypoints" / "annotated.png").read_bytes()).decode("ascii")
    card = section(html, 'id="keypoints"', "</section>")
    assert f'<img src="data:image/png;base64,{image}"' in card
    assert "/runs/" not in card and "open image" not in card  # nothing served: the report stands alone
    assert '<a href="keypoints/reward.py">' in card  # linked beside the report (it sits in the run folder)


# --- vision analysis ------------------------------------------------------------------------------------------------


def test_vision_analysis_is_shown_escaped_with_its_keyframes(copied):
    store = copied
    keyframes = add_vision_analysis(store)
    with DashboardServer(store.runs_dir) as server:
        html = server.get(f"/runs/{store.run_id}")[2].decode()
        frame_status, frame_headers, frame = server.get(f"/runs/{store.run_id}/files/{keyframes[2]}")
    card = section(html, 'id="cand-r0-s0"', "</article>")
    vision = section(card, '<section class="vision"', "</section>")
    assert f"What a vision model ({VISION_MODEL}) saw in 3 keyframes of this rollout</h4>" in vision
    assert "not a measurement" in vision
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt; The gripper closed 5 cm beside the block &amp; never touched it." in vision
    assert "<script>window.pwned" not in html
    thumbs = re.findall(r'<img class="thumb" src="([^"]+)"', vision)
    assert thumbs == [f"/runs/{store.run_id}/files/{k}" for k in keyframes]
    assert frame_status == 200 and frame_headers["content-type"] == "image/png" and frame == (store.root / keyframes[2]).read_bytes()

    round_1 = section(html, 'id="round-1"', "</section>")
    note = " ".join(unescape(re.sub(r"<[^>]+>", "", section(round_1, 'class="round-note vision-note"', "</p>"))).split())
    assert note.endswith(f"This round's feedback included a vision model's reading ({VISION_MODEL}) of 3 keyframes of candidate "
                         "r0-s0: its opinion, beside the measurements.")
    assert '<a href="#cand-r0-s0">r0-s0</a>' in round_1
    assert "vision-note" not in section(html, 'id="round-0"', "</section>")

    exported = export_html(store).read_text()
    frame_data = base64.b64encode((store.root / keyframes[0]).read_bytes()).decode("ascii")
    assert f'<img class="thumb" src="data:image/png;base64,{frame_data}"' in exported
    assert "<script>window.pwned" not in exported


def test_report_md_quotes_the_vision_analysis_and_lists_rounds_with_images(copied):
    store = copied
    keyframes = add_vision_analysis(store)
    report = write_report(store).read_text()
    best = report[report.index("## Best reward: r0-s0"):]
    vision = best[best.index(f"### What a vision model ({VISION_MODEL}) saw in its keyframes"):]
    assert "*A model's reading of the rollout's keyframes, not a measurement" in vision
    assert "> &lt;script&gt;window.pwned = 1&lt;/script&gt; The gripper closed 5 cm beside the block &amp; never touched it." in vision
    assert "<script>" not in report
    assert f"Keyframes it was shown: [1]({keyframes[0]}), [2]({keyframes[1]}), [3]({keyframes[2]})" in vision
    assert "- rounds whose feedback used images: round 1 (a vision model's reading of 3 keyframes of r0-s0)" in report


# --- what a page shows of odd or hostile files ---------------------------------------------------------------------


def test_keypoint_replies_are_shown_escaped_in_order(copied):
    store = copied
    folder = store.root / "keypoints"
    (folder / "reply_1.md").write_text(HOSTILE_KEYPOINT_REPLY)
    (folder / "reply_2.md").write_text('{"points": [{"name": "grasp", "x": 213, "y": 293}]}')
    data = keypoints_json(store)
    data["keypoints"]["source"] = "openai:test-vision"
    data["replies"] = ["reply_1.md", "reply_2.md", "../config.json"]  # a name leading out of the folder is never read
    (folder / "keypoints.json").write_text(json.dumps(data))
    html = page(store)
    card = section(html, 'id="keypoints"', "</section>")
    summaries = re.findall(r"<summary>([^<]*)</summary>", card)
    assert summaries == ["Model reply (reply_1.md): not usable, so the model was asked again", "Model reply (reply_2.md): the one used"]
    assert "&lt;/pre&gt;&lt;script&gt;window.pwned = 2&lt;/script&gt;" in card and "<script>window.pwned" not in html
    assert "openai:test-vision (a vision model pointed at the image)" in card
    assert "keypoints · points from openai:test-vision" in html
    assert '"task_id"' not in card  # config.json was not shown as a reply
    report = write_report(store).read_text()
    assert "Model replies (the last was used): [reply_1.md](keypoints/reply_1.md), [reply_2.md](keypoints/reply_2.md)" in report


@pytest.mark.parametrize("content", ["{not json", json.dumps({"keypoints": {"source": "oracle", "points": [{"name": "grasp"}]}}),
                                     json.dumps(["a list"])])
def test_a_malformed_keypoint_record_shows_nothing_rather_than_failing(copied, content):
    (copied.root / "keypoints" / "keypoints.json").write_text(content)
    html = page(copied)
    assert 'id="keypoints"' not in html and "<h1>franka/push</h1>" in html
    assert "keypoints · points from oracle" in html  # the config still says where the rewards come from
    report = write_report(copied).read_text()
    assert "## Keypoints" not in report and "## Best reward: r0-s0" in report


def test_a_vision_analysis_naming_a_file_outside_the_run_is_not_read(copied, tmp_path):
    store = copied
    add_vision_analysis(store)
    secret = tmp_path / "secret.md"
    secret.write_text("TOP-SECRET-ANSWER")
    candidate = store.read_candidate(0, 0)
    candidate.vision_analysis.file = f"../../{secret.name}"  # from runs/<id>/ to tmp_path: the file exists
    assert (store.root / candidate.vision_analysis.file).resolve() == secret.resolve()
    store.write_candidate(candidate)
    html = page(store)
    assert "TOP-SECRET" not in html and '<section class="vision"' not in html
    assert "TOP-SECRET" not in write_report(store).read_text()
