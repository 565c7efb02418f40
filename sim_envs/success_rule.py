"""A task's success test on one state, written once as a predicate over its view with named constants.

Why: a reward designer needs the rule, with its numbers, in the view's own terms ("`obj.position` within
0.03 m of `goal_position`"), not "the simulator's flag". The prompt's sentence is rendered from the
predicate's docstring and its constants, and tests run the same predicate against the simulator's own
flag, so the stated rule and the judged rule cannot drift apart.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from sim_envs.success_progress import BELOW_ONE, clip, companion

SUCCESS_WHEN = {"any": "at any step of the episode", "final": "at the episode's last step"}


@dataclass(frozen=True)
class SuccessRule:
    """`test(view, **constants)`; its docstring, formatted with the constants, is the rule's sentence."""

    test: Callable[..., Any] = field(repr=False)
    constants: Mapping[str, float] = field(default_factory=dict)
    notes: str = ""
    """Where this predicate and the simulator's own flag may disagree, and why (empty: they agree)."""

    def __call__(self, view: Any) -> bool:
        return bool(self.test(view, **self.constants))

    def judge(self, view: Any, info: dict[str, Any]) -> bool:
        """The rule as a task's `is_success(view, info)`, for tasks whose simulator has no flag of its own."""
        return bool(self.test(view, **self.constants))

    def progress(self, view: Any) -> float:
        """How far `view` is from meeting the rule, in [0, 1]: exactly 1 when the rule holds (the predicate decides),
        else its companion's grade kept below 1 (sim_envs.success_progress; a rule without one: 0)."""
        if self(view):
            return 1.0
        grade = companion(self.test)
        return min(clip(grade(view, **self.constants)), BELOW_ONE) if grade is not None else 0.0

    @property
    def statement(self) -> str:
        """The rule in words, with its numbers: the docstring's `{NAME}` fields filled from the constants."""
        doc = inspect.getdoc(self.test)
        if not doc:
            raise ValueError(f"success test {self.test.__name__} needs a docstring stating the rule")
        return " ".join(doc.split()).format(**{name: format_number(value) for name, value in self.constants.items()})

    def describe(self, mode: str) -> str:
        """The sentence a prompt and `t2r tasks --show` give: the rule and when it is judged."""
        return f"{self.statement}, {SUCCESS_WHEN[mode]}"


def rule(test: Callable[..., Any], notes: str = "", **constants: float) -> SuccessRule:
    """`rule(within, DISTANCE=0.05)`: a rule from a test and its constants."""
    return SuccessRule(test=test, constants=constants, notes=notes)


def format_number(value: float) -> str:
    """0.03 -> "0.03", pi/24 -> "0.1309 (pi/24)", 2*pi -> "6.2832 (2*pi)"; whole numbers without a decimal point."""
    value = float(value)
    if value.is_integer():
        return str(int(value))
    ratio = Fraction(value / math.pi).limit_denominator(48)
    if ratio and math.isclose(value, math.pi * ratio, rel_tol=1e-12):
        top = "pi" if ratio.numerator == 1 else f"{ratio.numerator}*pi"
        return f"{value:.4f} ({top})" if ratio.denominator == 1 else f"{value:.4f} ({top}/{ratio.denominator})"
    return f"{value:.6g}"


def distance(a: np.ndarray, b: np.ndarray) -> float:
    """Euclidean distance, computed as MetaWorld and Gymnasium-Robotics compute theirs (np.linalg.norm)."""
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)))
