"""The finished runs checked in under tests/fixtures, for the tests that read, list, resume or repair a run without
training one."""

from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
FINISHED_RUN = FIXTURES / "runs_head" / "20261125-213341-fetch-reach-4ed575"
"""A finished one-round fetch/reach run of the heuristic backend, in the current layout."""
