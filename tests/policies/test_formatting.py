"""Numbers as people read them: seconds as minutes and seconds, a success rate with its episodes and interval (never
"0.26666666666666666"), in the lines the CLI prints for a candidate."""

from __future__ import annotations

import math

import pytest

from policies.formatting import format_seconds, format_success
from text2reward.runs.records import Candidate, read
from text2reward.runs.run_events import describe


@pytest.mark.parametrize("seconds, text", [(0.4, "0 s"), (42.6, "43 s"), (240.31, "4 min 0 s"), (599.5, "10 min 0 s"),
                                           (3725, "1 h 02 min"), (None, "-"), (math.nan, "-")])
def test_seconds_read_as_minutes_and_seconds(seconds, text):
    assert format_seconds(seconds) == text


def test_a_success_rate_shows_its_episodes_and_interval():
    assert format_success(8 / 30, 30) == "0.27 (8 of 30 episodes, 95% interval 0.14-0.44)"
    assert format_success(0.26666666666666666) == "0.27"
    assert format_success(None) == "-"


def test_a_trained_candidates_line_has_no_raw_float():
    candidate = read(Candidate, {"id": "r0-s0", "round": 0, "sample": 0, "status": "trained",
                                     "training": {"success_rate": 4 / 15, "best_success_rate": 0.4, "steps": 300, "episodes": 30,
                                                  "curve": []}})
    line = describe(candidate)
    assert line == "success 0.27 (8 of 30 episodes, 95% interval 0.14-0.44)" and "0.2666" not in line
