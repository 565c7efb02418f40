"""What the CLI prints of a model's text is text (issue 42): an OSC sequence (sets the terminal's title), CSI sequences
(clear the screen, colour), a C1 control and bidirectional overrides in a reply reach the terminal spelled out
(`\\x1b]0;...`, `\\u202e`), never raw; through `t2r run`'s own lines and `t2r prompt --run`, which prints the prompt
a run waits on (the reply's code and its error are in it); and, on both jails, a reward's own error through
`t2r validate` and `t2r train --reward`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from openai_server import OpenAITestServer, Say

from text2reward.inert import UNSAFE
from text2reward.runs.store import RunStore
from text2reward.sandbox.isolation import check

ESCAPES = "\x1b]0;pwned\x07 \x1b[2J\x1b[31m red \u202eevil\u202c \u2066iso\u2069 \x9b1m \u200f"
HOSTILE_REPLY = f"""Here is the reward {ESCAPES}

```python
def compute_dense_reward(self, action):
    x = 1  \u202e {ESCAPES}
    return 0.0, {{}}
```
"""


def t2r(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "text2reward.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, check=False, env={**os.environ, **(env or {})})


def test_a_hostile_reply_is_printed_inert_by_t2r_run_and_t2r_prompt(tmp_path):
    reply, runs = tmp_path / "reply.md", tmp_path / "runs"
    reply.write_text(HOSTILE_REPLY)
    ran = t2r("run", "--task", "fetch/reach", "--llm", "file", "--reply-file", reply, "--rounds", "1", "--samples", "1",
              "--fix-attempts", "1", "--no-screen", "--runs-dir", runs)
    assert ran.returncode == 0, ran.stderr
    [config] = list(runs.glob("*/config.json"))
    store = RunStore(config.parent)
    state = store.state()
    assert state.status == "waiting_for_replies" and state.pending_prompt  # the fix prompt, for a person to paste
    assert "\x1b]0;pwned\x07" in store.read_text(state.pending_prompt)  # the file keeps what the model wrote

    pending = t2r("prompt", "--run", store.run_id, "--runs-dir", runs)
    assert pending.returncode == 0, pending.stderr
    for shown in (ran.stdout, ran.stderr, pending.stdout):
        assert UNSAFE.search(shown) is None, repr(UNSAFE.search(shown))
    assert "\\u202e" in ran.stdout + ran.stderr  # the candidate's error names the character, spelled out
    assert "\\x1b]0;pwned\\x07 \\x1b[2J\\x1b[31m red \\u202eevil\\u202c \\u2066iso\\u2069 \\x9b1m \\u200f" in pending.stdout
    assert "def compute_dense_reward(self, action):\n    x = 1  \\u202e" in pending.stdout  # the rest as it was


MECHANISMS = [
    pytest.param(m, marks=pytest.mark.skipif(isinstance(check(m), str), reason=f"{m} unavailable here: {check(m)}"))
    for m in ("bubblewrap", "landlock")
]
OTHER = {"bubblewrap": "landlock", "landlock": "bubblewrap"}
RAISING_REWARD = f'''import numpy as np


def compute_dense_reward(self, action):
    raise ValueError("{ESCAPES}")
'''


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_rewards_error_is_printed_inert_by_t2r_validate_and_t2r_train(mechanism, tmp_path):
    """The child's side of the same attack, on both jails: a reward whose error (and the source line its traceback
    quotes) carries the escapes. What reaches the terminal holds none of them raw, on every path that prints it."""
    reward = tmp_path / "reward.py"
    reward.write_text(RAISING_REWARD)
    env = {"T2R_SANDBOX_HIDE": OTHER[mechanism]}
    validated = t2r("validate", "--task", "metaworld/reach-v3", "--code", reward, env=env)
    trained = t2r("train", "--task", "metaworld/reach-v3", "--reward", reward, "--steps", "200", "--eval-episodes", "1", "--out", tmp_path / "out",
                  env=env)
    assert validated.returncode == 1 and mechanism in validated.stdout and "ValueError" in validated.stdout
    assert trained.returncode == 1 and "failed at call 1" in trained.stderr and "ValueError" in trained.stderr
    for shown in (validated.stdout, validated.stderr, trained.stdout, trained.stderr):
        assert UNSAFE.search(shown) is None, repr(UNSAFE.search(shown))


def test_a_huge_hostile_reply_from_a_model_server_costs_the_run_little_and_prints_inert(tmp_path):
    """The whole path from a real OpenAI-protocol server: a 1.4 MB reply of unclosed thinking tags and escapes (twelve
    minutes of the parent's CPU in extraction before) ends the round in seconds with the reason, printed inert."""
    reply = ESCAPES + "<think>" * 200_000
    with OpenAITestServer(default=Say(reply)) as server:
        ran = t2r("run", "--task", "fetch/reach", "--llm", "openai", "--model", "m", "--base-url", server.base_url,
                  "--samples", "1", "--rounds", "1", "--fix-attempts", "0", "--no-cache", "--runs-dir", tmp_path / "runs",
                  env={"OPENAI_API_KEY": "test-key"})
    assert ran.returncode == 1 and "over the 100,000 read" in ran.stdout + ran.stderr, ran.stderr
    for shown in (ran.stdout, ran.stderr):
        assert UNSAFE.search(shown) is None, repr(UNSAFE.search(shown))
