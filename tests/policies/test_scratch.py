"""Scratch folders: a process killed outright leaves its folder to the next maker of the same prefix, who removes it;
nothing of a live process, of another PID namespace, of another user or outside the pattern is touched."""

import os
import signal
import subprocess
import sys
import textwrap

from policies.scratch import process_identity, scratch_dir, scratch_folder, sweep_orphans

PREFIX = "t2r-test-scratch-"

MAKER = textwrap.dedent("""
    import sys, time
    from policies.scratch import scratch_folder
    folder = scratch_folder(sys.argv[1], sys.argv[2])
    (folder / "reward.py").write_text("secret")
    print(folder, flush=True)
    time.sleep(600)
""")


def start_maker(parent):
    maker = subprocess.Popen([sys.executable, "-c", MAKER, PREFIX, str(parent)], stdout=subprocess.PIPE, text=True)
    folder = maker.stdout.readline().strip()
    assert folder, "the maker printed no folder"
    return maker, folder


def test_a_killed_makers_folder_is_removed_by_the_next_and_a_live_ones_is_kept(tmp_path):
    killed, killed_folder = start_maker(tmp_path)
    live, live_folder = start_maker(tmp_path)
    try:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        assert os.path.isdir(killed_folder)  # nothing ran on its way out
        mine = scratch_folder(PREFIX, tmp_path)
        assert not os.path.exists(killed_folder)
        assert os.path.isdir(live_folder) and (mine.stat().st_mode & 0o777) == 0o700
        assert mine.name.startswith(f"{PREFIX}{process_identity()[0]}-{os.getpid()}-")
    finally:
        live.kill()
        live.wait()
    assert sweep_orphans(PREFIX, tmp_path) == [tmp_path / os.path.basename(live_folder)]  # gone once its maker is
    assert mine.is_dir()  # this process still runs


def test_a_reused_pid_another_namespace_and_other_names_are_left_alone(tmp_path):
    namespace, start = process_identity()
    me = os.getpid()
    reused = tmp_path / f"{PREFIX}{namespace}-{me}-{int(start) + 1}-abc"  # this pid, another process's start time: gone
    elsewhere = tmp_path / f"{PREFIX}{int(namespace) + 1}-999999-1-abc"  # another PID namespace: its pids mean nothing here
    unnamed = tmp_path / f"{PREFIX}abc"  # made without an identity
    other_prefix = tmp_path / f"t2r-other-{namespace}-999999-1-abc"
    for folder in (reused, elsewhere, unnamed, other_prefix):
        folder.mkdir()
    target = tmp_path / "kept"
    target.mkdir()
    (target / "file").write_text("x")
    link = tmp_path / f"{PREFIX}{namespace}-999999-1-link"
    link.symlink_to(target)  # a link is never followed or removed
    assert sweep_orphans(PREFIX, tmp_path) == [reused]
    assert all(p.is_dir() for p in (elsewhere, unnamed, other_prefix)) and link.is_symlink() and (target / "file").is_file()


def test_scratch_dir_removes_its_folder_on_the_way_out(tmp_path):
    with scratch_dir(PREFIX, tmp_path) as folder:
        (folder / "x").write_text("x")
    assert not folder.exists()


def test_the_jails_self_test_removes_what_a_killed_self_test_left(tmp_path):
    """The jail's self-test writes a secret into the temporary folder (and /var/tmp) for the jail to fail to read; a
    process killed during it (a job killed as it starts) left them behind for good. The next self-test removes them."""
    sleeper = subprocess.Popen(["sleep", "60"])
    namespace, start = process_identity(sleeper.pid)
    sleeper.kill()
    sleeper.wait()
    orphan = tmp_path / f"t2r-selftest-{namespace}-{sleeper.pid}-{start}-abcd"  # as a self-test killed midway leaves it
    orphan.mkdir()
    (orphan / "secret.txt").write_text("token")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    code = "from text2reward.sandbox.isolation import check; print(type(check('landlock')).__name__)"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "Isolation", done.stdout + done.stderr
    assert not orphan.exists() and not list(tmp_path.iterdir())  # the orphan swept, its own folder removed
