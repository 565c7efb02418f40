"""Records are strict JSON (issue 42): a reward's finite but extreme numbers overflow in sums (1e308 twice is inf), and
`json.dumps` wrote them as `Infinity`/`NaN`, which is not JSON (a strict reader, `jq`, a browser's JSON.parse refuse
the file). Now an overflow is stored as the largest finite float of its sign and NaN as null; records written before,
with `Infinity` in them, still read."""

from __future__ import annotations

import json
import math
import shutil
import sys

import numpy as np
import pytest
from fixture_runs import FINISHED_RUN as FIXTURE

from policies.io import write_json_atomic
from text2reward import train_reward
from text2reward.runs.report import write_report
from text2reward.runs.store import RunStore

HUGE = sys.float_info.max
OVERFLOWING_REWARD = """import numpy as np


def compute_dense_reward(self, action):
    return float(action[0]), {"huge": 1e308, "reach": float(action[0])}
"""


def strict_loads(text: str):
    def refuse(constant: str):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_are_written_as_strict_json(tmp_path):
    data = {"inf": 1e308 * 10, "-inf": -1e308 * 10, "nan": math.nan, "numpy": np.array([np.inf, 1.5]),
            "scalar": np.float32("-inf"), "nested": [{"x": (math.inf,)}], "fine": 0.25, "path": tmp_path}
    written = strict_loads(write_json_atomic(tmp_path / "record.json", data).read_text())
    assert written == {"inf": HUGE, "-inf": -HUGE, "nan": None, "numpy": [HUGE, 1.5], "scalar": -HUGE,
                       "nested": [{"x": [HUGE]}], "fine": 0.25, "path": str(tmp_path)}
    with pytest.raises(TypeError, match="cannot write object as JSON"):
        write_json_atomic(tmp_path / "bad.json", {"x": object()})


def test_a_reward_whose_components_overflow_leaves_a_strict_result_json(tmp_path):
    """The real path: `t2r train --reward` in the jail; the component's window mean overflows to inf in training."""
    reward = tmp_path / "reward.py"
    reward.write_text(OVERFLOWING_REWARD)
    train_reward(reward, "metaworld/reach-v3", steps=200, out_dir=tmp_path / "train", eval_freq=200, eval_episodes=1,
                 overrides={"learning_starts": 100, "final_eval_episodes": 1})
    text = (tmp_path / "train" / "result.json").read_text()
    result = strict_loads(text)  # raised "Infinity is not JSON" before
    assert "Infinity" not in text and "NaN" not in text
    assert HUGE in [entry["components"]["huge"]["mean"] for entry in result["components"]]


def test_records_written_before_with_infinity_still_read_and_report(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / FIXTURE.name)
    store = RunStore(tmp_path / FIXTURE.name)
    path = store.root / "rounds" / "r1" / "s0" / "candidate.json"
    record = json.loads(path.read_text())
    record["training_result"]["components"][0]["components"]["reach"]["mean"] = math.inf
    path.write_text(json.dumps(record))  # Python's default: `Infinity` in the file
    assert "Infinity" in path.read_text()
    [candidate] = [c for c in store.candidates() if c.id == "r1-s0"]
    assert candidate.training_result is not None and candidate.training_result.components[0].components["reach"].mean == HUGE  # read, clamped as strict records store it
    assert "## Best reward" in write_report(store).read_text()
    store.write_candidate(candidate)  # written again: strict
    assert strict_loads(path.read_text())["training_result"]["components"][0]["components"]["reach"]["mean"] == HUGE
