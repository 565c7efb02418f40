"""A reply cannot make the parent pay (issue 42): extraction reads it in time linear in its length, before any jail.

Each input here once cost the parent minutes of CPU (a backtracking pattern: cubic on a fence line of spaces, quadratic
on unclosed thinking tags or on blank lines); now each is read in well under a second of this process's own CPU time
(`time.thread_time`: neither a busy machine nor another thread of this process counts), with a generous bound, since the point is the complexity class.
"""

from __future__ import annotations

import time

import pytest

from text2reward.generation.extraction import MAX_ANSWER_CHARS, MAX_REPLY_CHARS, extract_code

CPU_BOUND_S = 1.0
PROGRAM = "def compute_dense_reward(self, action):\n    return 0.0, {}\n"


def cpu_seconds(reply: str) -> tuple[float, object]:
    start = time.thread_time()
    result = extract_code(reply)
    return time.thread_time() - start, result


@pytest.mark.parametrize(("reply", "code"), [
    ("```" + " " * 12_000 + "`", None),  # 1,600 spaces took 2.7 s; 12,000 about 20 minutes
    ("```" + " " * 12_000 + "x`\n" + f"```python\n{PROGRAM}```\n", PROGRAM),  # not a fence (a backtick in it), then one
    ("~~~" + "\t " * 6_000 + "`", None),
], ids=["backticks", "backticks-then-code", "tildes"])
def test_a_fence_line_of_spaces_is_read_in_linear_time(reply, code):
    seconds, result = cpu_seconds(reply)
    assert seconds < CPU_BOUND_S, f"{seconds:.2f} s of CPU"
    assert result.code == code and (code is not None or "no Python code" in result.error)


def test_unclosed_thinking_tags_are_read_in_linear_time():
    reply = "<think>" * 200_000  # 1.4 MB: 20,000 tags took 6.9 s, this about twelve minutes
    seconds, result = cpu_seconds(reply)
    assert seconds < CPU_BOUND_S, f"{seconds:.2f} s of CPU"
    assert result.code is None and f"over the {MAX_ANSWER_CHARS:,} read" in result.error
    many_blocks = "<THINKING>hmm</think>" * 50_000 + f"```python\n{PROGRAM}```"  # 1 MB of closed blocks, all removed
    seconds, result = cpu_seconds(many_blocks)
    assert seconds < CPU_BOUND_S and result.code == PROGRAM


def test_thinking_blocks_are_removed_as_before():
    assert extract_code(f"<think>```python\ndef compute_dense_reward(self, action):\n    return 1.0, {{}}\n```</think>"
                        f"```python\n{PROGRAM}```").code == PROGRAM
    nested = f"<thinking>a <think> b</thinking>```python\n{PROGRAM}```"  # a block ends at the first closing tag
    assert extract_code(nested).code == PROGRAM
    unclosed = f"<think>\n```python\n{PROGRAM}```"  # an opening tag never closed is kept, with what follows it
    assert extract_code(unclosed).code == PROGRAM


def test_blank_lines_and_deep_nesting_cost_little_and_say_why():
    seconds, result = cpu_seconds("x\n" + "\n" * 90_000 + "y")  # 20,000 blank lines took 2.6 s, 90,000 about a minute
    assert seconds < CPU_BOUND_S and "no Python code" in result.error
    deep = f"```python\ndef compute_dense_reward(self, action):\n    return {'-' * 90_000}1, {{}}\n```"  # MemoryError in ast
    seconds, result = cpu_seconds(deep)
    assert seconds < CPU_BOUND_S and result.function_found and "nests too deeply" in result.error


def test_replies_over_the_bounds_are_refused_with_the_reason():
    result = extract_code("x" * (MAX_REPLY_CHARS + 1))
    assert result.code is None and f"the reply is {MAX_REPLY_CHARS + 1:,} characters" in result.error
    answer = f"<think>{'x' * 100}</think>" + "# padding\n" * (MAX_ANSWER_CHARS // 10) + f"```python\n{PROGRAM}```"
    result = extract_code(answer)
    assert result.code is None and "its thinking left out" in result.error and "keep the rest short" in result.error
