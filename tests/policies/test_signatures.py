"""The algorithms' constructor arguments come from the library once per version, then from the cache file, so that a
`t2r run` driver checks its settings and `--hp` without importing the training libraries it never uses itself."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from policies.algorithms import ALGORITHMS, algorithm_class
from policies.signatures import CACHE_FILE, constructor_arguments, policy_arguments

TRAINING_LIBRARIES = ("torch", "stable_baselines3", "jax", "sbx")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "text2reward" / CACHE_FILE


@pytest.mark.parametrize("algo", sorted(ALGORITHMS))
def test_the_arguments_are_the_libraries_and_are_kept_by_version(cache, algo):
    expected = list(inspect.signature(algorithm_class(algo).__init__).parameters)
    assert constructor_arguments(algo) == expected
    (key,) = [key for key in json.loads(cache.read_text()) if key.split()[0] == algo]
    assert "stable-baselines3=" in key and (("sbx-rl=" in key) == algo.startswith("sbx"))
    assert constructor_arguments(algo) == expected  # read back from the file


@pytest.mark.parametrize("algo", sorted(ALGORITHMS))
def test_a_policys_arguments_are_the_libraries_and_are_kept_beside_its_algorithms(cache, algo):
    expected = list(inspect.signature(algorithm_class(algo).policy_aliases["MlpPolicy"].__init__).parameters)
    assert policy_arguments(algo, "MlpPolicy") == expected
    assert constructor_arguments(algo) != expected  # its own entry, not the algorithm's
    keys = [key for key in json.loads(cache.read_text()) if key.split()[0] == algo]
    assert sorted(key.endswith(" policy=MlpPolicy") for key in keys) == [False, True]
    assert policy_arguments(algo, "MlpPolicy") == expected


def test_a_garbled_file_or_an_entry_of_other_versions_is_read_again_from_the_library(cache):
    expected = list(inspect.signature(algorithm_class("sac").__init__).parameters)
    cache.parent.mkdir(parents=True)
    cache.write_text("{not json")
    assert constructor_arguments("sac") == expected
    entries = json.loads(cache.read_text())
    (key,) = entries
    entries = {key.replace("stable-baselines3=", "stable-baselines3=0.0.0+"): ["self", "made_up"]}
    cache.write_text(json.dumps(entries))
    assert constructor_arguments("sac") == expected
    assert key in json.loads(cache.read_text())
    cache.write_text(json.dumps({key: [1, 2]}))  # not names: read again
    assert constructor_arguments("sac") == expected


CHECK_A_RUNS_SETTINGS = """
import json, sys
from pathlib import Path
from policies.config import TrainConfig
from text2reward.preflight import check_train_config
check_train_config(TrainConfig(task_id="fetch/reach", out_dir=Path(sys.argv[1]), algo=sys.argv[2] or None,
                               overrides={"learning_starts": 50, "batch_size": 32, "train_freq": 4, "eval_episodes": 1}))
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("algo", ["", "sac"])
def test_a_drivers_settings_check_imports_no_training_library_once_the_cache_is_warm(tmp_path, algo):
    """What `t2r run` checks before its first line (the family's settings, the device, `--hp` sizes an off-policy
    constructor only stores, or only pairs with a unit, as a whole-number `train_freq`) costs its driver no import of
    torch, SB3, JAX or SBX (~3-4 s) once the cache holds the constructor: the first driver on a machine fills it. Also
    with `--algo sac`, where the family's SBX settings are carried to SB3's SAC by the arguments its constructor and
    its policy's take."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}

    def loaded() -> set[str]:
        done = subprocess.run([sys.executable, "-c", CHECK_A_RUNS_SETTINGS, str(tmp_path), algo], capture_output=True,
                              text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stderr
        return set(json.loads(done.stdout.strip().splitlines()[-1]))

    assert "sbx" in loaded()  # the first reads the library (fetch trains with SBX's SAC)
    heavy = loaded() & set(TRAINING_LIBRARIES)
    assert not heavy, sorted(heavy)


@pytest.mark.parametrize(("train_freq", "refused"), [(4, None), ([4, "episode"], None), (0, "must be a positive whole number"),
                                                     ([4, "sideways"], "is refused by SAC")])
def test_train_freq_is_checked_as_a_number_or_by_the_constructor_as_a_pair(train_freq, refused):
    from policies.hyperparam_values import check_override_values
    from policies.hyperparams import load_hyperparams
    from sim_envs import get_task
    from sim_envs.errors import ConfigError

    task = get_task("fetch/reach")
    params = load_hyperparams(task.family, "sac", {"train_freq": train_freq})
    if refused is None:
        check_override_values(task, params, {"train_freq": train_freq})
    else:
        with pytest.raises(ConfigError, match=refused):
            check_override_values(task, params, {"train_freq": train_freq})
