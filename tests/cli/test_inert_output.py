"""What the CLI prints of a model's text is text (issue 42): an OSC sequence (sets the terminal's title), CSI sequences
(clear the screen, colour), a C1 control and bidirectional overrides in a reply reach the terminal spelled out
(`\\x1b]0;...`, `\\u202e`), never raw; through `t2r run`'s own lines and `t2r prompt --run`, which prints the prompt
a run waits on (the reply's code and its error are in it)."""

from __future__ import annotations

import subprocess
import sys

from text2reward.inert import UNSAFE
from text2reward.runs.store import RunStore

ESCAPES = "\x1b]0;pwned\x07 \x1b[2J\x1b[31m red \u202eevil\u202c \u2066iso\u2069 \x9b1m \u200f"
HOSTILE_REPLY = f"""Here is the reward {ESCAPES}

```python
def compute_dense_reward(self, action):
    x = 1  \u202e {ESCAPES}
    return 0.0, {{}}
```
"""


def t2r(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "text2reward.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, check=False)


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
