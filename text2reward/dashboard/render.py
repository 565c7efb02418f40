"""The Jinja2 environment shared by the dashboard pages and the HTML export.

Autoescape is on for every template: run artefacts (code, replies, prompts, critiques) are untrusted
text. Only Pygments output and our own SVG charts are marked safe, and both escape what they contain.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import jinja2

from text2reward.dashboard.runview import format_duration, format_time

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"


def make_templates() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["pct"] = lambda v: "-" if v is None else f"{v:.2f}"
    env.filters["duration"] = format_duration
    env.filters["when"] = format_time
    env.filters["urlpart"] = lambda v: quote(str(v), safe="")
    return env
