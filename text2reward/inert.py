"""Text a model or a reward wrote, made inert before a person sees it or a document holds it.

Why one module: a reply, a reward's error or a component name reaches a person through the console, `t2r prompt`,
`report.md`, report.html and the dashboard. Each of those must show it as text and nothing more: no terminal escape
sequence (OSC sets a window title or a hyperlink, CSI moves the cursor or hides what follows), no bidirectional
override that makes code read differently from what runs ("Trojan Source"), no Markdown or HTML that renders as markup.
The character class and the two treatments live here, once:

- `visible`: every such character spelled out as its Python escape (`\\x1b`, `\\u202e`), so a person sees that it is
  there and where; newlines and tabs are kept (what the console, `t2r prompt`, the report's code and the dashboard use);
- `stripped`: escape sequences and such characters removed (what a reward's error becomes before it is stored or sent
  back to the model: `sandbox.untrusted.clean_text`).

Markdown needs more than that (`markdown_inline`, `markdown_block`): text in a line is escaped, text on several lines
is fenced with a fence longer than any run of backticks in it. Each function is one regular-expression pass, linear in
the text's length.
"""

from __future__ import annotations

import html
import re

__all__ = ["UNSAFE", "markdown_block", "markdown_inline", "stripped", "visible"]

UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 controls but tab and newline (ESC starts OSC/CSI), DEL, C1 controls (CSI as one byte)
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidirectional marks, embeddings, overrides and isolates
    "\ud800-\udfff]"  # lone surrogates (from a JSON escape): no encoding can write them, so a report would fail
)
"""A character that no person should receive raw from a model or a reward."""

_ESCAPE_SEQUENCES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
"""ESC-introduced sequences: CSI (`ESC [ ... final`), OSC (`ESC ] ... BEL` or `ESC ] ... ESC \\`), two-character ones."""

_MARKDOWN_SPECIAL = re.compile(r"[\\`*_\[\]!|~$]")
"""ASCII punctuation that starts Markdown (or GitHub's) syntax inside a line: emphasis, code, links and images, tables,
strikethrough, maths. CommonMark renders each escaped as itself. (`<`, `>`, `&` are escaped as HTML entities, which
also keeps an entity such as `&#8238;`, a bidi override, from being decoded.)"""

_BACKTICK_RUN = re.compile(r"`+")


def _spelled(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object) -> str:
    """`text` with every unsafe character spelled as its escape (`\\x1b[31m`, `\\u202e`); newlines and tabs kept, a
    Windows line end read as a newline."""
    return UNSAFE.sub(_spelled, str(text).replace("\r\n", "\n"))


def stripped(text: object) -> str:
    """`text` with escape sequences and unsafe characters removed (for text cut short and shown as a reason)."""
    return UNSAFE.sub("", _ESCAPE_SEQUENCES.sub("", str(text)))


def markdown_inline(text: object) -> str:
    """`text` as one line of Markdown that renders as exactly that text: controls spelled out, whitespace runs (line
    breaks included) one space, HTML escaped as entities (`&lt;script&gt;`) and Markdown's syntax with backslashes."""
    flat = html.escape(" ".join(visible(text).split()), quote=False)
    return _MARKDOWN_SPECIAL.sub(lambda m: "\\" + m.group(), flat)


def markdown_block(text: object, info: str = "text") -> list[str]:
    """`text` as a fenced code block (its lines): shown verbatim, controls spelled out; the fence is longer than any run
    of backticks inside, so nothing in the text can close it early."""
    body = visible(text).rstrip("\n")
    longest = max((len(run) for run in _BACKTICK_RUN.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + info, body, fence]
