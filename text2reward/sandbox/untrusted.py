"""Reading what a jailed process says: strict, bounded, and clean before it reaches a person or a prompt.

Why a module of its own: every byte from the worker may be forged by the reward code (it runs in
that process), so the parent parses replies with fixed bounds (no huge integers, no deep nesting,
no oversized frames) and turns every surprise into that candidate's error, never an exception of
its own. Text from the child (error messages, component names) is cut to a length and stripped of
control characters, terminal escape sequences and bidirectional overrides before it is printed,
stored, shown in the dashboard or sent back to the model.
"""

from __future__ import annotations

import json
import re
from typing import Any

from text2reward.inert import stripped

MAX_ERROR_CHARS = 4000
MAX_COMPONENTS = 64
"""Component names per call, and distinct names per candidate over a validation or a training (a reward has a
handful of terms; 64 is far beyond any the prompts ask for, and bounds every record, statistic and prompt that lists them)."""
MAX_NAME_CHARS = 64
NAME_PATTERN = re.compile(rf"[A-Za-z_][A-Za-z0-9_]{{0,{MAX_NAME_CHARS - 1}}}", re.ASCII)
"""A component name is identifier-like: ASCII letters, digits and underscores, not starting with a digit, at most
`MAX_NAME_CHARS`. Names are data (records keep them under a key of their own), so `_steps` is allowed; the pattern
keeps them printable and short everywhere they are shown, with no character Markdown, HTML or a terminal reads."""
FLOAT_TEXT_BYTES = 24
"""The longest JSON text of a double (`-2.2250738585072014e-308`; `-Infinity` and `NaN` are shorter)."""
COMPONENT_REPLY_BYTES = 64 + MAX_COMPONENTS * (MAX_NAME_CHARS + FLOAT_TEXT_BYTES + 8)
"""The longest JSON reply with components `[total, {"name": value, ...}]` can be (~6 KB): each component is its quoted
name, a colon, a number and a comma with spaces; the total and brackets fit in the constant."""
ERROR_REPLY_BYTES = 256 + 12 * MAX_ERROR_CHARS
"""The longest error reply `{"error": text, "kind": ...}` a worker sends (~48 KB): its text is cut to `MAX_ERROR_CHARS`
characters (jailed.format_error), each at most 12 bytes of JSON (a surrogate pair, `\\ud83d\\ude00`)."""
MAX_REPLY_BYTES = 64 * 1024
"""The parent reads no reply frame larger than this (the frame's header says its size, so a larger one is refused
before a byte of it is read): above every answer a worker can need (`ERROR_REPLY_BYTES`, `COMPONENT_REPLY_BYTES`),
far below the megabytes whose parsing would cost the parent's CPU."""
assert max(ERROR_REPLY_BYTES, COMPONENT_REPLY_BYTES) < MAX_REPLY_BYTES
MAX_INT_DIGITS = 18
"""Integers with more digits are read as floats (a 400-digit total becomes inf, then fails the finiteness check)."""


class Malformed(ValueError):
    """The child's bytes do not follow the protocol."""


def clean_text(text: object, limit: int = MAX_ERROR_CHARS) -> str:
    """Terminal- and prompt-safe text: escape sequences and control characters removed (`text2reward.inert`), then cut."""
    text = stripped(text)
    if len(text) > limit:
        return text[:limit] + f"... ({len(text):,} characters)"
    return text


def is_clean_name(name: object) -> bool:
    """A component name as `NAME_PATTERN` has it."""
    return isinstance(name, str) and NAME_PATTERN.fullmatch(name) is not None


def name_problem(name: str) -> str:
    """Why `name` is not a component name, in words the model can act on."""
    shown = clean_text(name, 40)
    if len(name) > MAX_NAME_CHARS:
        return f"component name {shown!r} is {len(name)} characters; use short names (at most {MAX_NAME_CHARS})"
    return (f"component name {shown!r} is not a plain name; use letters, digits and underscores, not starting with a digit "
            "(like 'reach' or 'grasp_bonus')")


def _bounded_int(text: str) -> int | float:
    return int(text) if len(text.lstrip("-")) <= MAX_INT_DIGITS else float(text)


def loads(data: bytes) -> Any:
    """JSON from the child, with huge integers read as floats; Malformed on anything else."""
    try:
        return json.loads(data, parse_int=_bounded_int)
    except (ValueError, RecursionError, UnicodeDecodeError, OverflowError):
        raise Malformed("the reward process sent a reply that is not JSON") from None


def number(value: Any) -> float:
    """A JSON number as a float (non-finite values pass: the caller's checks judge them)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Malformed("the reward process sent a malformed reply")
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def parse_output(item: Any) -> tuple[float, dict[str, float]]:
    """One (total, components) reply: exactly `[total, {name: number}]`, at most `MAX_COMPONENTS` names that match
    `NAME_PATTERN` (extra items are malformed: an answer needs none)."""
    if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], dict)):
        raise Malformed("the reward process sent a malformed reply")
    if len(item[1]) > MAX_COMPONENTS:
        raise Malformed(f"the reward returns {len(item[1])} components; return at most {MAX_COMPONENTS} named terms")
    total = number(item[0])
    components: dict[str, float] = {}
    for key, value in item[1].items():
        if not is_clean_name(key):
            raise Malformed(name_problem(key))
        components[key] = number(value)
    return total, components
