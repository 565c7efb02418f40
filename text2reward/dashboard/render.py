"""The Jinja2 environment shared by the dashboard pages and the HTML export.

Autoescape is on for every template: run artefacts (code, replies, prompts, critiques) are untrusted
text. Only Pygments output and our own SVG charts are marked safe, and both escape what they contain.
Every value a template prints passes `text2reward.inert.visible` first (the environment's `finalize`), so a
control character or a bidirectional override in a reply shows as its escape (`\u202e`) on every page and export.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from text2reward.dashboard.runview import format_duration, format_time
from text2reward.inert import visible

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"


def make_templates() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, finalize=_inert,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["pct"] = lambda v: "-" if v is None else f"{v:.2f}"
    env.filters["duration"] = format_duration
    env.filters["when"] = format_time
    env.filters["urlpart"] = lambda v: quote(str(v), safe="")
    return env


def _inert(value: Any) -> Any:
    """What a template prints, with unsafe characters spelled out (autoescape comes after); markup we made stays markup
    (a spelled escape holds no HTML); numbers and None are left to Jinja."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if hasattr(value, "__html__"):
        return Markup(visible(value.__html__()))
    return visible(value)
