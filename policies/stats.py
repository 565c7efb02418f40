"""How sure a success rate is: the Wilson score interval, and when two rates are within each other's noise.

Why Wilson: evaluations are a handful of episodes (5 during training, `FINAL_EVAL_EPISODES` at the end), and at
0 or n successes the normal approximation's interval has width zero; Wilson's stays honest there and never leaves
[0, 1]. Why overlap for "within noise": it is one rule that a reader can check from the two intervals printed
side by side (the prompt, the report), and it errs towards calling a difference noise (two 95% intervals that
only just separate differ at about the 0.5% level), which is the safe side for tips and for "best".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

Z95 = 1.959963984540054
"""The two-sided 95% normal quantile."""


def wilson_interval(successes: int, episodes: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a success rate (95% by default); (0, 1) for no episodes."""
    if episodes <= 0:
        return 0.0, 1.0
    p = successes / episodes
    denominator = 1 + z * z / episodes
    centre = (p + z * z / (2 * episodes)) / denominator
    half = z * math.sqrt(p * (1 - p) / episodes + z * z / (4 * episodes * episodes)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Rate:
    """A success rate with its episode count: `successes` of `episodes`, and its 95% Wilson interval."""

    successes: int
    episodes: int

    @classmethod
    def of(cls, rate: float, episodes: int) -> Rate:
        """From a rate as records hold it (a mean over `episodes` booleans)."""
        episodes = max(int(episodes), 0)
        return cls(int(round(float(rate) * episodes)), episodes)

    @classmethod
    def pooled(cls, rates: Iterable[Rate]) -> Rate:
        """One rate over every episode of `rates` (several evaluations, or several training seeds, as one sample)."""
        rates = list(rates)
        return cls(sum(r.successes for r in rates), sum(r.episodes for r in rates))

    @property
    def rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.successes, self.episodes)

    def ties(self, other: Rate) -> bool:
        """Within each other's noise: the two 95% Wilson intervals overlap."""
        low, high = self.interval
        other_low, other_high = other.interval
        return low <= other_high and other_low <= high

    def text(self) -> str:
        """`0.80 (4 of 5 episodes, 95% interval 0.38-0.96)`."""
        low, high = self.interval
        return f"{self.rate:.2f} ({self.successes} of {self.episodes} episodes, 95% interval {low:.2f}-{high:.2f})"


def mcnemar_exact(only_first: int, only_second: int) -> float:
    """Two-sided exact McNemar p-value for two policies played on the same episodes: `only_first` episodes where only
    the first succeeded, `only_second` where only the second did. Why paired: the episodes (reset seeds) are shared, so
    only the discordant ones carry evidence, and the test is far sharper than comparing two independent intervals
    (12 against 3 discordant episodes: p = 0.035, while 18 of 30 and 9 of 30 have overlapping Wilson intervals)."""
    n = only_first + only_second
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(only_first, only_second) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


PAIRED_ALPHA = 0.05
"""A paired difference counts as beyond noise below this p-value."""
