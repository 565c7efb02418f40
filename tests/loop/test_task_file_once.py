"""A user's task file runs once per process: the front door, the checks before a run, the loop and a resume all ask for
the run's task, and the file (which may be slow, print, or count, as this one does) must not run again for each."""

import collections
import os
import textwrap

import pytest
from short_training import SHORT_ALGO, SHORT_HP

from sim_envs import get_task, load_task_file
from text2reward import RewardSearch

TINY = dict(rounds=1, samples=1, steps=200, eval_freq=100, eval_episodes=1, final_seeds=0, video=False, workers=1,
            overrides=SHORT_HP, algo=SHORT_ALGO, success_threshold=1.01)


def counting_task_file(folder, task_id: str):
    """A task file that appends its process id to `runs.txt` beside it each time it runs."""
    path = folder / "counted_task.py"
    path.write_text(textwrap.dedent(f'''
        import os
        from pathlib import Path

        from sim_envs import derive_task

        with open(Path(__file__).with_name("runs.txt"), "a") as runs:
            runs.write(f"{{os.getpid()}}\\n")

        COUNTED = derive_task("fetch/reach", id="{task_id}", description="Reach the goal (a task file that counts its runs).",
                              is_success=lambda view, info: bool(info.get("is_success")), success_doc="the env's own is_success flag")
    '''))
    return path


def runs_by_process(folder) -> collections.Counter:
    return collections.Counter((folder / "runs.txt").read_text().split())


@pytest.mark.slow  # end-to-end: a real round trains
def test_a_task_file_runs_once_per_process_across_a_run_and_its_resume(tmp_path):
    path = counting_task_file(tmp_path, "counted/reach_run")
    search = RewardSearch("counted/reach_run", runs_dir=tmp_path / "runs", task_file=path, **TINY)
    result = search.run()
    assert result.succeeded, result.reason
    RewardSearch.resume(result.run_id, runs_dir=tmp_path / "runs", rounds=2)  # a second round, in this same process
    runs = runs_by_process(tmp_path)
    assert runs[str(os.getpid())] == 1, runs  # this process: the front door, the checks, the loop, tuning, the resume
    assert len(runs) >= 2 and set(runs.values()) == {1}, runs  # each training worker ran it once too


def test_a_task_file_changed_on_disk_runs_again(tmp_path):
    path = counting_task_file(tmp_path, "counted/reach_changed")
    (first,) = load_task_file(path)
    assert load_task_file(path) == [first] and get_task("counted/reach_changed") is first
    path.write_text(path.read_text().replace("counts its runs", "counts its runs, edited"))
    (edited,) = load_task_file(path)
    assert "edited" in edited.description and get_task("counted/reach_changed") is edited
    assert runs_by_process(tmp_path)[str(os.getpid())] == 2
