"""Numbers as people read them: seconds as minutes and seconds, a success rate with its episodes and interval.

Why one place: a console line, `t2r runs show` and the Python result print the same figures, and a raw float
("0.26666666666666666") or a bare "240.31" reads as noise; `policies.stats.Rate.text` is the success rate's form.
"""

from __future__ import annotations

import math

from policies.stats import Rate


def format_seconds(seconds: float | None) -> str:
    """`42 s`, `4 min 0 s`, `1 h 03 min`; `-` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    whole = max(int(round(seconds)), 0)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def evaluations_of(count: int, episodes: int) -> str:
    """`3 evaluations of 5 episodes each`, `1 evaluation of 1 episode`: how many readings a curve had, and their size."""
    return (f"{count} evaluation{'s' if count != 1 else ''} of {episodes} episode{'s' if episodes != 1 else ''}"
            f"{' each' if count != 1 else ''}")


def format_success(rate: float | None, episodes: int | None = None) -> str:
    """A success rate in two decimals, with its episodes and 95% interval when they are known: `0.27 (8 of 30 episodes,
    95% interval 0.14-0.45)`; `-` when there is none."""
    if rate is None or not math.isfinite(rate):
        return "-"
    if not episodes:
        return f"{rate:.2f}"
    return Rate.of(rate, episodes).text()


def compact_success(rate: float, episodes: int | None) -> str:
    """A list's success cell: `0.07 (2/30, 0.02-0.21)`, its episodes and 95% interval in a narrow column; the rate
    alone for an index row from before episodes were kept."""
    if not episodes:
        return f"{rate:.2f}"
    counted = Rate.of(rate, episodes)
    low, high = counted.interval
    return f"{rate:.2f} ({counted.successes}/{counted.episodes}, {low:.2f}-{high:.2f})"
