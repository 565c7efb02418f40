"""Hints the parent adds to a reward's error, from what it knows and the child does not report.

Why: a reward written for another task's view (a Sawyer arm's `self.robot` on a hopper) fails with
"'PlanarWalkerView' object has no attribute 'robot'"; the fix is in the view's real attributes, which
the parent holds (the view object itself), so the person or model gets them in the same message.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from typing import Any

MISSING_ATTRIBUTE = re.compile(r"'(?P<cls>\w+)' object has no attribute '(?P<attr>\w+)'")


def attribute_hint(error_text: str, view: Any) -> str:
    """"" or one line naming the object's real attributes (and the closest one) for a missing-attribute error
    on the view or on one of its parts."""
    match = MISSING_ATTRIBUTE.search(error_text or "")
    if match is None:
        return ""
    owner = _find_part(view, match["cls"])
    if owner is None:
        return ""
    names = [f.name for f in dataclasses.fields(owner)]
    close = difflib.get_close_matches(match["attr"], names, n=1, cutoff=0.5)
    guess = f" (did you mean {close[0]}?)" if close else ""
    return (f"hint: {match['cls']} has no '{match['attr']}'{guess}; its attributes are {', '.join(names)} "
            f"(`t2r tasks --show TASK` prints the state view with every field)")


def _find_part(view: Any, class_name: str, depth: int = 0) -> Any:
    """The view, or a dataclass inside it, whose class is `class_name`."""
    if not (dataclasses.is_dataclass(view) and not isinstance(view, type)) or depth > 3:
        return None
    if type(view).__name__ == class_name:
        return view
    for field in dataclasses.fields(view):
        found = _find_part(getattr(view, field.name, None), class_name, depth + 1)
        if found is not None:
            return found
    return None
