"""policies.io: atomic writes leave files with the permissions a plain open() would give them."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

import policies.io as io_module
from policies.io import current_umask, write_json_atomic, write_text_atomic


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o022, 0o027, 0o002, 0o077])
def umask(request: pytest.FixtureRequest):
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def test_atomic_writes_get_the_mode_of_a_plain_open(tmp_path: Path, umask: int) -> None:
    plain = tmp_path / "neighbour.json"
    with open(plain, "w") as handle:
        handle.write("{}\n")
    json_file = write_json_atomic(tmp_path / "result.json", {"a": 1})
    text_file = write_text_atomic(tmp_path / "sub" / "report.md", "# report\n")
    assert _mode(json_file) == _mode(plain) == 0o666 & ~umask
    assert _mode(text_file) == _mode(plain)
    assert json_file.read_text() == '{\n  "a": 1\n}\n'
    assert not [p for p in tmp_path.rglob("*.tmp")], "no temporary file is left behind"


def test_rewriting_a_file_gives_it_the_umask_mode(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "state.json"
    path.write_text("old")
    path.chmod(0o600)  # e.g. written by an older version through mkstemp
    write_json_atomic(path, [1, 2])
    assert _mode(path) == 0o666 & ~umask


def test_umask_is_read_without_changing_it(umask: int) -> None:
    assert current_umask() == umask
    assert os.umask(umask) == umask  # still in force


def test_umask_fallback_where_proc_is_missing(tmp_path: Path, umask: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without /proc/self/status, the set-and-restore fallback gives the same answer and restores it."""

    calls: list[str] = []

    def no_proc(path, *args, **kwargs):
        calls.append(str(path))
        raise FileNotFoundError(path)

    monkeypatch.setattr(io_module, "open", no_proc, raising=False)
    assert current_umask() == umask
    assert calls == ["/proc/self/status"], "the fallback was not taken"
    assert os.umask(umask) == umask
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(current_umask())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [umask] * 8 and os.umask(umask) == umask
    monkeypatch.undo()
    path = write_text_atomic(tmp_path / "x.txt", "x")
    assert _mode(path) == 0o666 & ~umask
