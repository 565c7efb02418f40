"""report.md shows what a model or a reward wrote as text, and nothing more (issue 42): no control character, escape
sequence or bidirectional override raw in the file; no HTML or Markdown from a reply, an error or a component name
that renders as markup (checked by rendering the report with markdown-it, a CommonMark renderer that passes raw
HTML through, as many do); a fence in the code cannot close the report's own."""

from __future__ import annotations

import json
import re
import shutil

from fixture_runs import FINISHED_RUN as FIXTURE
from markdown_it import MarkdownIt

from text2reward.inert import UNSAFE
from text2reward.loop import start_run
from text2reward.runs.ranking import best_candidate
from text2reward.runs.report import write_report
from text2reward.runs.store import RunStore
from text2reward.settings import RunConfig

SCRIPT = '</script><script>document.title="pwned"</script>'
ESCAPES = "\x1b]0;pwned\x07 \x1b[2J\x1b[31m red \u202eevil\u202c \u2066iso\u2069 \x9b1m \u200f"
HOSTILE_REPLY = f"""Here is the reward {ESCAPES} and ![beacon](http://example.invalid/b.png) {SCRIPT}

```python
def compute_dense_reward(self, action):
    x = `{SCRIPT}` \u202e \x1b]0;pwned\x07
    return 0.0, {{}}
```
"""
HOSTILE_CODE = f'''import numpy as np

NOTE = """
```
{SCRIPT}
<img src=x onerror="document.title='pwned'">
"""  # {ESCAPES}


def compute_dense_reward(self, action):
    return 0.0, {{"reach": 0.0}}
'''


def rendered(markdown: str) -> str:
    return MarkdownIt("commonmark").render(markdown)


def assert_inert(report: str) -> None:
    assert UNSAFE.search(report) is None, repr(UNSAFE.search(report))
    html = rendered(report)
    assert "<script" not in html, html
    assert set(re.findall(r'<img src="([^"]*)"', html)) <= {"curves.png", "components.png"}  # our plots, no beacon


def test_a_hostile_reply_and_its_error_are_text_in_report_md(tmp_path):
    """The real path: a file-backend run whose reply carries escapes, bidi overrides, an image and a script in its text
    and in the code; the code does not parse, so its error (quoting the line) is the candidate's reason in the table."""
    reply = tmp_path / "reply.md"
    reply.write_text(HOSTILE_REPLY)
    store = start_run(RunConfig.of(task_id="fetch/reach", backend="file", reply_files=[str(reply)], rounds=1, samples=1,
                                   fix_attempts=0, screen=False, steps=200, final_seeds=1, workers=1), tmp_path / "runs")
    report = (store.root / "report.md").read_text()
    candidate = store.candidates()[0]
    assert "syntax error" in candidate.reason and f"`{SCRIPT}`" in candidate.reason  # the model's own line, in its error
    assert "\x1b]0;pwned\x07" in candidate.reason  # as the record holds it, raw
    assert_inert(report)
    assert "&lt;/script&gt;&lt;script&gt;document.title=&quot;pwned&quot;&lt;/script&gt;" in rendered(report)


def test_code_feedback_and_component_names_are_fenced_or_escaped(tmp_path):
    """A finished run whose best candidate's code closes a ``` fence inside a string, whose feedback and component
    names carry a script, escapes and a name matplotlib would read as maths (`$\\frac$`: it failed to draw)."""
    shutil.copytree(FIXTURE, tmp_path / FIXTURE.name)
    store = RunStore(tmp_path / FIXTURE.name)
    best = best_candidate(store.candidates())
    assert best is not None and best.code_file and best.feedback_file
    (store.root / best.code_file).write_text(HOSTILE_CODE)
    feedback = store.root / best.feedback_file
    feedback.write_text(f"{SCRIPT}: [0.5]  min 0\n{ESCAPES}\n" + feedback.read_text())
    record_path = store.candidate_file(best)
    record = json.loads(record_path.read_text())
    record["reason"] = f"\ud800 a lone surrogate (JSON can hold one; no file encoding can) {SCRIPT}"
    for entry in record["training_result"]["components"]:
        entry["components"][f"a$\\frac$ {SCRIPT[:20]}"] = entry["components"].pop("reach")
    record_path.write_text(json.dumps(record))

    report = write_report(store).read_text()
    assert_inert(report)
    html = rendered(report)
    best_code = html[html.index('<code class="language-python">'):]
    best_code = best_code[: best_code.index("</code>")]
    assert "def compute_dense_reward" in best_code and "```" in best_code  # the whole program inside one block
    assert "\\u202eevil\\u202c" in best_code and "\\x1b]0;pwned\\x07" in best_code  # spelled out, where they were
    assert "&lt;/script&gt;&lt;script&gt;document.title=&quot;pwned&quot;&lt;/script&gt;: [0.5]" in html
    assert "\\ud800 a lone surrogate" in report  # the table's note: written, spelled out
    assert (store.root / "components.png").stat().st_size > 1000
