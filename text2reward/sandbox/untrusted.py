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
from typing import Any

from text2reward.inert import stripped

MAX_ERROR_CHARS = 4000
MAX_COMPONENTS = 64
MAX_NAME_CHARS = 64
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
    return isinstance(name, str) and 0 < len(name) <= MAX_NAME_CHARS and clean_text(name) == name and "\n" not in name and "\t" not in name


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
    """One (total, components) reply: numbers, at most 64 components with short printable names."""
    if not (isinstance(item, list) and len(item) >= 2 and isinstance(item[1], dict)) or len(item[1]) > MAX_COMPONENTS:
        raise Malformed("the reward process sent a malformed reply")
    total = number(item[0])
    components: dict[str, float] = {}
    for key, value in item[1].items():
        if not is_clean_name(key):
            raise Malformed(f"component name {clean_text(key, 40)!r} is not a short printable name; use names like 'reach'")
        components[key] = number(value)
    return total, components
