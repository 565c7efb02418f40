"""`t2r --help` (and every `t2r` start) loads only what lists the commands and their options: no numpy, gymnasium,
MuJoCo, torch or SB3, which cost most of the start-up (0.52-0.60 s with them, under 0.4 s without, on the 2-core
development machine). Checked by what the process imported, never by a wall-clock time a busy machine would break."""

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("numpy", "gymnasium", "mujoco", "torch", "stable_baselines3", "sim_envs.registry", "sim_envs.task",
         "text2reward.training.job", "text2reward.preflight", "policies.shaping")

LOADED = """
import json, sys
from text2reward.cli import main
sys.argv = ["t2r", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def stderr_and_modules(*args: str) -> tuple[str, set[str]]:
    """What a `t2r` command wrote to stderr, and the modules it had imported when it ended."""
    done = subprocess.run([sys.executable, "-c", LOADED, *args], capture_output=True, text=True, timeout=120)
    *said, modules = done.stderr.strip().splitlines()
    return "\n".join(said), set(json.loads(modules))


def modules_loaded_by(*args: str) -> set[str]:
    return stderr_and_modules(*args)[1]


@pytest.mark.parametrize("args", [("--help",), ("run", "--help"), ("train", "--help")])
def test_the_help_loads_no_numerics_nor_training(args):
    loaded = modules_loaded_by(*args)
    assert "typer" in loaded and "text2reward.settings" in loaded  # the options were built from the settings' declarations
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


@pytest.mark.parametrize("args", [("train", "--task", "metaworld/nope-v3"), ("train", "--task", "fetch/reach", "--reward", "Expert"),
                                  ("train", "--task", "fetch/reach", "--reward", "no/such/reward.py"),
                                  ("evaluate", "--model", "no/such/dir"), ("video", "--model", "no/such/dir")])
def test_a_mistake_is_answered_before_the_training_libraries_load(args):
    """`t2r train` checks its task, reward and settings first, `t2r evaluate` and `t2r video` their --model folder: a
    mistake costs ~1 s, not the ~2.7 s of importing PyTorch and SB3 that only a training or a loaded policy needs."""
    said, loaded = stderr_and_modules(*args)
    assert said.splitlines()[-1].startswith("error: "), said  # the check answered, with its one line
    assert not loaded & {"torch", "stable_baselines3", "policies.train"}, sorted(loaded & {"torch", "stable_baselines3", "policies.train"})


def test_the_registries_that_the_help_lists_are_complete_without_their_implementations():
    """The help names every backend, executor, reward source and mode although their modules' heavy parts stay unloaded."""
    done = subprocess.run([sys.executable, "-m", "text2reward.cli", "run", "--help"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "400"})
    assert done.returncode == 0, done.stderr
    for name in ("heuristic", "openai", "file", "local", "ray", "keypoints", "potential", "progress"):
        assert name in done.stdout, name


def test_importing_torch_after_the_commands_leaves_the_model_sdk_unloaded():
    """PyTorch asks every module in `sys.modules` for its `__file__` as it imports (`inspect.getmodule`): a lazily
    loaded OpenAI SDK registered there was loaded by it, ~1 s in every `t2r train`, `t2r evaluate` and fork server that
    never asks a model. The SDK loads when a model is asked (the tests against the local OpenAI-protocol server)."""
    code = "import sys, text2reward.cli, torch; print('openai' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_the_quick_exit_still_runs_the_finalizers_of_cyclic_garbage(tmp_path):
    """`t2r` freezes its objects at exit (the shut-down's collections over torch's and JAX's objects cost ~1 s), after
    one collection of its own: an object left in a reference cycle is still finalized, as in a normal exit."""
    marker = tmp_path / "finalized"
    code = f"""
import gc
gc.disable()  # no collection before the exit's own
from text2reward.process_exit import collect_once_at_exit
collect_once_at_exit()

class Flushes:
    def __del__(self):
        open({str(marker)!r}, "w").write("done")

cycle = Flushes()
cycle.me = cycle
del cycle
import atexit
atexit.register(lambda: print(gc.get_freeze_count() == 0))  # runs before the quick exit's handler
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
    assert marker.read_text() == "done"
