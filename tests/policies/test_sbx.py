"""SBX (SB3's algorithms in JAX) behind `--algo sbx-sac` / `sbx-ppo`: tiny real runs, saved and evaluated."""

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from policies.algorithms import jax_gpu_count, jax_kept_to_cpu
from policies.hyperparams import load_hyperparams
from policies.train import RESULT_FILE, TrainConfig, load_policy, resolve_device, train
from sim_envs.errors import ConfigError
from text2reward.cli import app


def test_sbx_sac_trains_and_its_saved_policy_is_evaluated(tmp_path):
    out = tmp_path / "run"
    args = ["train", "--task", "metaworld/reach-v3", "--algo", "sbx-sac", "--steps", "300", "--eval-freq", "150",
            "--eval-episodes", "1", "--device", "cpu", "--out", str(out), "--hp", "learning_starts=100", "--hp", "batch_size=32"]
    outcome = CliRunner().invoke(app, args)
    assert outcome.exit_code == 0, outcome.output
    data = json.loads((out / RESULT_FILE).read_text())
    assert data["algo"] == "sbx-sac" and data["steps"] == 300 and [p["steps"] for p in data["curve"]] == [150, 300]
    assert data["hyperparams"]["algo_kwargs"]["batch_size"] == 32
    model, meta = load_policy(out)
    assert type(model).__module__.startswith("sbx.") and meta["algo"] == "sbx-sac"
    evaluated = CliRunner().invoke(app, ["evaluate", "--model", str(out), "--episodes", "2"])
    assert evaluated.exit_code == 0, evaluated.output
    assert "success rate" in evaluated.output and "over 2 episodes" in evaluated.output
    # `t2r evaluate` and `t2r video` act one observation at a time: their SBX policy is kept to the CPU (no GPU held)
    acting = ("import sys; from policies.algorithms import jax_kept_to_cpu; from text2reward.cli.saved_policy import SavedPolicy; "
              "SavedPolicy.load(__import__('pathlib').Path(sys.argv[1])); print(jax_kept_to_cpu())")
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    loaded = subprocess.run([sys.executable, "-c", acting, str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert loaded.returncode == 0 and loaded.stdout.split() == ["True"], loaded.stderr


def test_sbx_ppo_trains_on_locomotion(tmp_path):
    config = TrainConfig(task_id="hopper/front_flip", out_dir=tmp_path, reward="sparse", steps=128, algo="sbx-ppo",
                         eval_freq=128, eval_episodes=1, device="cpu", overrides={"n_steps": 64, "batch_size": 32})
    result = train(config)
    assert result.algo == "sbx-ppo" and result.steps >= 128 and result.device == "cpu"


def test_switching_implementation_keeps_the_settings_each_one_takes():
    """`--algo sac` on a family tuned for SBX's SAC (and back) keeps the family's settings, not SB3's defaults;
    a setting only one implementation has (SBX's critic layer norm) stays with the one that takes it."""
    family = load_hyperparams("fetch")
    assert family.algo == "sbx-sac"
    sb3 = load_hyperparams("fetch", "sac")
    assert sb3.algo == "sac" and sb3.algo_kwargs == family.algo_kwargs and sb3.policy_kwargs == family.policy_kwargs
    assert sb3.algo_kwargs["learning_rate"] == 0.001 and sb3.algo_kwargs["gamma"] == 0.95
    with_norm = load_hyperparams("fetch", "sbx-sac", {"policy_kwargs": {"net_arch": [64, 64], "layer_norm": True}})
    assert with_norm.policy_kwargs == {"net_arch": [64, 64], "layer_norm": True}
    ppo = load_hyperparams("fetch", "ppo")  # another algorithm: its library's defaults
    assert ppo.algo == "ppo" and ppo.algo_kwargs == {} and ppo.policy_kwargs == {}


def test_sb3_sac_after_sbx_drops_what_it_does_not_take(tmp_path):
    from policies.hyperparams import Hyperparams, carry_settings

    sbx = Hyperparams(algo="sbx-sac", algo_kwargs={"learning_rate": 0.001, "qf_learning_rate": 0.003},
                      policy_kwargs={"net_arch": [64, 64], "layer_norm": True})
    sb3 = carry_settings(sbx, "sac")
    assert sb3.algo_kwargs == {"learning_rate": 0.001} and sb3.policy_kwargs == {"net_arch": [64, 64]}


def test_devices_for_sbx_follow_what_jax_sees():
    """SBX trains where JAX can: a machine's GPU is no use to a CPU-only JAX (no skip either way)."""
    gpus = jax_gpu_count()
    assert resolve_device("auto", "sbx-ppo") == "cpu"
    assert resolve_device("auto", "sbx-sac") == "cpu"  # one env: the GPU was slower (benchmarks/RESULTS.md)
    assert resolve_device("auto", "sbx-sac", n_envs=16) == ("cuda" if gpus else "cpu")
    assert resolve_device("auto", "sbx-sac", n_envs=16, sharers=4) == "cpu"  # four jobs took turns on an H100: slower than the CPU
    no_gpu = "JAX sees no GPU in this process: it trained on the CPU before" if jax_kept_to_cpu() else "JAX sees no GPU; install JAX's CUDA build"
    device, message = (f"cuda:{gpus}", "names no GPU here") if gpus else ("cuda", no_gpu)
    with pytest.raises(ConfigError, match=message):
        resolve_device(device, "sbx-sac")


CPU_JOB = """
import jax
from policies.algorithms import jax_backend_built, jax_kept_to_cpu
from policies.train import library_device, resolve_device
from sim_envs.errors import ConfigError
assert resolve_device("cpu", "sbx-sac") == resolve_device("auto", "sbx-sac") == resolve_device("auto", "sbx-ppo", n_envs=16) == "cpu"
print("backend after resolving:", jax_backend_built())
library_device("sbx-sac", "cpu")  # what building or loading a CPU job's SBX model does first
print("platforms:", jax.config.jax_platforms, "kept:", jax_kept_to_cpu(), "devices:", sorted({d.platform for d in jax.devices()}))
try:
    resolve_device("cuda", "sbx-sac")
except ConfigError as exc:
    print("cuda:", exc)
"""


def test_a_cpu_job_never_starts_jaxs_gpu_backend():
    """On a GPU machine JAX starts every backend it has at its first device query, and each CPU job would then hold a
    CUDA context and GPU memory it never uses: resolving `cpu` or an `auto` that picks the CPU counts no GPU (the
    backend stays unbuilt), and a CPU job keeps JAX to the CPU before its first device query. Run in a fresh process
    (this one may have built JAX's backend already)."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    done = subprocess.run([sys.executable, "-c", CPU_JOB], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "backend after resolving: False"
    assert lines[1] == "platforms: cpu kept: True devices: ['cpu']"
    assert lines[2].startswith("cuda: CUDA was requested but JAX sees no GPU in this process: it trained on the CPU before")
    user_choice = subprocess.run([sys.executable, "-c", CPU_JOB], capture_output=True, text=True, env={**env, "JAX_PLATFORMS": "cpu"},
                                 timeout=300)  # the user's JAX_PLATFORMS is theirs: not reported as the job's doing
    assert user_choice.returncode == 0, user_choice.stderr
    assert "kept: False" in user_choice.stdout and "install JAX's CUDA build" in user_choice.stdout


def test_an_unknown_algorithm_names_the_choices():
    with pytest.raises(ConfigError, match="unknown algorithm 'td3'; use one of sac, ppo, sbx-sac, sbx-ppo"):
        load_hyperparams("metaworld", "td3")


def test_a_run_trains_every_job_with_the_algorithm_it_names(tmp_path):
    """`t2r run --algo sac` keeps plain SB3 for every candidate and the final comparison; no --algo: the family's."""
    from text2reward.settings import RunConfig

    assert RunConfig.of(task_id="fetch/reach", algo="sac").train_config("fetch/reach", tmp_path / "train", "code", 0).algo == "sac"
    default = RunConfig.of(task_id="fetch/reach").train_config("fetch/reach", tmp_path / "train", "code", 0)
    assert default.algo is None and load_hyperparams("fetch", default.algo).algo == "sbx-sac"


def test_a_runs_jobs_count_its_workers_as_sharing_a_gpu(tmp_path):
    """A round trains W candidates at once: `--device auto` must weigh the GPU they would share, not one job's view."""
    from text2reward.settings import RunConfig

    assert RunConfig.of(task_id="fetch/reach", workers=4).train_config("fetch/reach", tmp_path / "train", "code", 0).gpu_sharers == 4
    assert RunConfig.of(task_id="fetch/reach", workers=1).train_config("fetch/reach", tmp_path / "train", "code", 0).gpu_sharers == 1
