"""A self-contained HTML report of a run: `runs/<id>/report.html`, one file to mail or archive.

Why the dashboard's own templates: the report shows what the run page shows (code highlighted, diffs,
plots as inline SVG, prompts, the feedback timeline, the final comparison), minus the forms. CSS is
inlined; videos are embedded as data: URLs when small, otherwise linked relative to the run directory
(the report sits in it), so nothing is fetched from another site.
"""

from __future__ import annotations

import base64
import mimetypes
import time
from pathlib import Path
from urllib.parse import quote

from markupsafe import Markup

from text2reward.dashboard import code as codeview
from text2reward.dashboard.files import inside
from text2reward.dashboard.render import STATIC, make_templates
from text2reward.dashboard.runview import format_time, load_run
from text2reward.runs.store import RunStore

REPORT_FILE = "report.html"
MAX_EMBED_BYTES = 4 * 1024 * 1024  # per file
MAX_EMBED_TOTAL = 24 * 1024 * 1024  # per report


def export_html(store: RunStore, max_embed_bytes: int = MAX_EMBED_BYTES) -> Path:
    """Write `report.html` atomically into the run directory and return its path."""
    budget = [MAX_EMBED_TOTAL]

    def url_for(relative: str) -> str | None:
        path = inside(store.root, relative)
        if path is None:
            return None
        size = path.stat().st_size
        if size <= max_embed_bytes and size <= budget[0]:
            budget[0] -= size
            media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            return f"data:{media_type};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"
        return quote(relative)

    view = load_run(store, url_for)
    css = (STATIC / "dashboard.css").read_text() + "\n" + codeview.stylesheet()
    html = make_templates().get_template(REPORT_FILE).render(
        run=view, css=Markup(css.replace("</", "<\\/")), exported=format_time(time.time()),
        error=None, form=None, csrf_token="",
    )
    return store.write_text(REPORT_FILE, html)
