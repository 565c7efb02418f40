"""Reward code for people to read: Pygments highlighting on the server, unified diffs with difflib.

Pygments escapes the source it tokenises, so model-written code (which may contain `</pre><script>`)
is safe to mark up as HTML; nothing else from a run is ever marked safe.
"""

from __future__ import annotations

import difflib
from functools import lru_cache

from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer, PythonLexer

CSS_CLASS = "hl"


@lru_cache(maxsize=1)
def _formatter() -> HtmlFormatter:
    return HtmlFormatter(cssclass=CSS_CLASS, linenos=False)


def highlight_python(code: str) -> Markup:
    return Markup(highlight(code, PythonLexer(), _formatter()))


def diff_lines(old: str, new: str, old_name: str, new_name: str) -> str:
    """A unified diff, or "" when the two programs are identical."""
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), old_name, new_name, n=2)
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def highlight_diff(diff: str) -> Markup:
    return Markup(highlight(diff, DiffLexer(), _formatter()))


def stylesheet() -> str:
    """The colours for highlighted code (served once, inlined into HTML exports)."""
    return _formatter().get_style_defs(f".{CSS_CLASS}")
