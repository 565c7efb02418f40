"""A reward program's tunable constants: found with `ast`, rewritten in place, compared with a parent's.

Why constants and not the code: the prompt asks the model to put weights, scales and thresholds in
module-level UPPER_CASE constants, so the numbers a reward's quality hinges on are named and separate
from its logic. Tuning changes only those literals; the program is otherwise the one that validated.

What counts as a constant: a module-level `NAME = <number>` (or `NAME: float = <number>`) whose name is
UPPER_CASE (`[A-Z][A-Z0-9_]*`) and whose value is an int or float literal, optionally signed
(`-0.5`, `+2`). Bools are not numbers here. A name assigned more than once at module level is skipped
(tuning one of its assignments would not be the value the program uses).

Search space, per constant:
- a comment on the assignment's line containing `range: LOW..HIGH` gives explicit bounds, anywhere in the
  comment: `W_REACH = 1.0  # weight of reach, range: 0.1..10`. LOW and HIGH are signed numbers
  (`range: -5..-0.5`, `range: 0..1`, `range: 1e-3..1e-1`). Bounds of one sign (both > 0, or both < 0) are
  searched log-uniformly (on the magnitude, the sign kept); bounds that include zero, uniformly.
  `range: X..X` pins the constant (not tuned). A range with LOW > HIGH is ignored with a warning.
- otherwise, log-uniform from value/10 to value*10 (for a negative value the same on its magnitude, the
  sign kept: a penalty stays a penalty). A zero has no scale to search around and is skipped (give it a
  range comment to tune it).
- ints stay ints (they may be counts or indices: `range(N_STEPS)` must still get an int), searched
  log-uniformly as ints from max(1, value/10) to value*10 (ranges: LOW rounded up, HIGH down).
"""

from __future__ import annotations

import ast
import io
import math
import re
import tokenize
from dataclasses import dataclass
from typing import Any

from text2reward.errors import ConfigError
from text2reward.runs.records import ConstantChange

NAME_PATTERN = re.compile(r"[A-Z][A-Z0-9_]*")
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
RANGE_PATTERN = re.compile(rf"range:\s*({_NUMBER})\s*\.\.\s*({_NUMBER})")
DEFAULT_SPREAD = 10.0
"""The default search space spans value/10 .. value*10: two orders of magnitude around what the model chose."""
SIGNIFICANT_DIGITS = 4
"""Tuned floats are written with this many significant digits: a readable program, and a diff a person can read."""


@dataclass(frozen=True)
class Constant:
    """One module-level numeric constant and where its literal sits in the source."""

    name: str
    value: float | int
    is_int: bool
    span: tuple[int, int, int, int]
    """(line, col, end_line, end_col) of the value expression, as `ast` gives them (lines from 1, byte columns)."""
    low: float | None = None
    high: float | None = None
    """The search bounds of the constant's value (signed); None when it is not tunable."""
    log: bool = True
    skip_reason: str | None = None
    """Why the constant is not tuned (zero, pinned, assigned twice); None when it is."""
    explicit: bool = False
    """Whether the bounds came from a `range:` comment."""

    @property
    def tunable(self) -> bool:
        return self.skip_reason is None


@dataclass
class Discovery:
    """Every UPPER_CASE numeric constant of a program, and what was said about ranges that could not be used."""

    constants: list[Constant]
    warnings: list[str]

    @property
    def tunable(self) -> list[Constant]:
        return [c for c in self.constants if c.tunable]

    def values(self) -> dict[str, float | int]:
        return {c.name: c.value for c in self.constants}


def _literal(node: ast.expr) -> float | int | None:
    """The number of a (signed) int or float literal; None for anything else (bools included)."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign = -1 if isinstance(node.op, ast.USub) else 1
        node = node.operand
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        if isinstance(node.value, float) and not math.isfinite(node.value):
            return None
        return sign * node.value
    return None


def _comments(source: str) -> dict[int, str]:
    """Comment text by line number (a program that does not tokenize has none we can read)."""
    comments: dict[int, str] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = token.string
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return comments
    return comments


def _assigned_names(tree: ast.Module) -> dict[str, int]:
    """How many module-level statements bind each name."""
    counts: dict[str, int] = {}
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    counts[name.id] = counts.get(name.id, 0) + 1
    return counts


def _bounds(name: str, value: float | int, is_int: bool, comment: str, warnings: list[str]) -> dict[str, Any]:
    """The search space of one constant (see the module docstring)."""
    match = RANGE_PATTERN.search(comment)
    if match:
        low, high = float(match[1]), float(match[2])
        if is_int:
            low, high = float(math.ceil(low)), float(math.floor(high))
        if low == high:
            return {"skip_reason": f"pinned by its comment (range: {match[1]}..{match[2]})"}
        if low > high:
            warnings.append(f"{name}: ignored `range: {match[1]}..{match[2]}` (LOW must be below HIGH); searched around its value instead")
        else:
            return {"low": low, "high": high, "log": low > 0 or high < 0, "explicit": True}
    if value == 0:
        return {"skip_reason": "zero: no scale to search around (add `# range: LOW..HIGH` to tune it)"}
    magnitude = abs(value)
    low, high = magnitude / DEFAULT_SPREAD, magnitude * DEFAULT_SPREAD
    if is_int:
        low, high = float(max(1, math.ceil(low))), float(math.floor(high))
    if value < 0:
        low, high = -high, -low
    return {"low": low, "high": high, "log": True}


def find_constants(source: str) -> Discovery:
    """The program's module-level UPPER_CASE numeric constants, each with its search space."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ConfigError(f"the reward program does not parse ({exc.msg}, line {exc.lineno}); only a valid program can be tuned") from None
    comments = _comments(source)
    counts = _assigned_names(tree)
    warnings: list[str] = []
    constants: list[Constant] = []
    seen: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value_node = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.simple and node.value is not None:
            target, value_node = node.target, node.value
        else:
            continue
        if not isinstance(target, ast.Name) or not NAME_PATTERN.fullmatch(target.id) or target.id in seen:
            continue
        value = _literal(value_node)
        if value is None:
            continue
        seen.add(target.id)
        assert value_node.end_lineno is not None and value_node.end_col_offset is not None  # parsed from source
        span = (value_node.lineno, value_node.col_offset, value_node.end_lineno, value_node.end_col_offset)
        is_int = isinstance(value, int)
        comment = " ".join(comments.get(line, "") for line in range(node.lineno, (node.end_lineno or node.lineno) + 1))
        if counts.get(target.id, 0) > 1:
            space: dict[str, Any] = {"skip_reason": "assigned more than once at module level"}
        else:
            space = _bounds(target.id, value, is_int, comment, warnings)
        constants.append(Constant(name=target.id, value=value, is_int=is_int, span=span, **space))
    return Discovery(constants, warnings)


def require_tunable(source: str, candidate_id: str) -> Discovery:
    """The program's constants, or one line saying why there is nothing to tune and what to write instead."""
    found = find_constants(source)
    if found.tunable:
        return found
    if not found.constants:
        raise ConfigError(
            f"candidate {candidate_id}'s reward has no UPPER_CASE numeric constants to tune; put weights, scales and "
            "thresholds in module-level constants like W_REACH = 1.0 (a comment `# range: 0.1..10` bounds one)"
        )
    reasons = "; ".join(f"{c.name} is {c.skip_reason}" for c in found.constants)
    raise ConfigError(f"candidate {candidate_id}'s reward has no tunable constants ({reasons}); give one a nonzero value "
                      "or a comment `# range: LOW..HIGH`")


def format_value(value: float | int, is_int: bool) -> str:
    """A literal for the value: ints as ints, floats rounded to SIGNIFICANT_DIGITS and always reading as floats."""
    if is_int:
        return str(int(round(value)))
    return repr(round_significant(float(value)))


def round_significant(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def rewrite(source: str, values: dict[str, float | int]) -> str:
    """The source with the named constants' literals replaced; every other character (comments, spacing,
    the rest of the line) is kept. Names not in the program are an error (a search space from another program)."""
    by_name = {c.name: c for c in find_constants(source).constants}
    unknown = sorted(set(values) - set(by_name))
    if unknown:
        raise ConfigError(f"the reward program has no constant(s) {', '.join(unknown)} to set")
    starts = [0]
    for text_line in source.encode().splitlines(keepends=True):
        starts.append(starts[-1] + len(text_line))
    data = source.encode()
    edits = []
    for name, value in values.items():
        constant = by_name[name]
        line, col, end_line, end_col = constant.span
        edits.append((starts[line - 1] + col, starts[end_line - 1] + end_col, format_value(value, constant.is_int)))
    for begin, end, text in sorted(edits, reverse=True):  # from the end: earlier offsets stay valid
        data = data[:begin] + text.encode() + data[end:]
    return data.decode()


def constants_diff(parent: dict[str, float | int], tuned: dict[str, float | int]) -> list[ConstantChange]:
    """One entry per constant in `tuned`, in its order: {name, parent, tuned, ratio} (ratio tuned/parent; None
    where the parent's value is zero, which only an explicit range tunes)."""
    diff: list[ConstantChange] = []
    for name, value in tuned.items():
        before = parent.get(name)
        ratio = round(float(value) / float(before), 6) if before else None
        diff.append(ConstantChange(name=name, parent=None if before is None else float(before), tuned=float(value), ratio=ratio))
    return diff
