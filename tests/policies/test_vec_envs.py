"""`--hp vec_env=subproc`: the training envs in processes of their own, each with its own jailed reward, training the
same numbers as the envs in one process on a task whose env leaves the learner's action space alone; a reward's failure
in an env process reaches the training as itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from polling import alive, descendants, wait_for
from short_training import SHORT_ALGO, SHORT_HP_ARGS

from policies.config import TrainConfig
from policies.plan import resolve_training_plan, vec_env_problem
from policies.resume import training_settings
from sim_envs import get_task
from sim_envs.errors import ConfigError
from text2reward.settings import RunConfig, check_run_config

ROOT = Path(__file__).parents[2]
REWARD = ROOT / "prompts" / "examples" / "fetch__reach.py"

REACHED_WITHIN = 300.0
"""A bound far above what reaching a training's first evaluation takes on a loaded machine (about 20 s), never a wait."""


DIES_WITHIN = 60.0
"""A bound far above how long a process takes to die of its parent's death (milliseconds)."""


def t2r_train(out: Path, reward: Path, kind: str, steps: int = 200) -> subprocess.CompletedProcess[str]:
    args = ["train", "--task", "fetch/reach", "--reward", str(reward), "--steps", str(steps), "--algo", SHORT_ALGO, *SHORT_HP_ARGS,
            "--hp", "n_envs=2", "--hp", f"vec_env={kind}", "--eval-freq", "100", "--eval-episodes", "1", "--out", str(out)]
    return subprocess.run([sys.executable, "-m", "text2reward.cli", *args], capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
def test_envs_in_their_own_processes_train_the_same_curve_with_a_jailed_reward(tmp_path):
    results = {}
    for kind in ("dummy", "subproc"):
        done = t2r_train(tmp_path / kind, REWARD, kind)
        assert done.returncode == 0, done.stderr[-2000:]
        results[kind] = json.loads((tmp_path / kind / "result.json").read_text())
    dummy, subproc = results["dummy"], results["subproc"]
    assert subproc["hyperparams"]["vec_env"] == "subproc" and dummy["hyperparams"]["vec_env"] == "dummy"
    assert "jail" in subproc["reward_isolation"] and subproc["reward_isolation"] == dummy["reward_isolation"]
    figures = lambda result: [(p["steps"], p["success_rate"], p["mean_native_return"]) for p in result["curve"]]
    # same seeds, envs and reward; fetch/reach's env never reseeds the learner's action space (policies.vec_envs): same numbers
    assert len(figures(subproc)) >= 2 and figures(subproc) == figures(dummy)
    assert {p.name for p in (tmp_path / "subproc" / "monitor").iterdir()} == {p.name for p in (tmp_path / "dummy" / "monitor").iterdir()}


@pytest.mark.slow
def test_a_reward_failing_in_an_env_process_stops_training_with_its_own_error(tmp_path):
    """SB3's worker would die with the error and leave the training an EOFError naming nothing; it arrives as itself."""
    reward = tmp_path / "nan.py"
    reward.write_text('calls = [0]\n\n\ndef compute_dense_reward(self, action):\n    calls[0] += 1\n    if calls[0] == 30:\n'
                      '        return float("nan"), {"reach": 0.0}\n    return 0.0, {"reach": 0.0}\n')
    done = t2r_train(tmp_path / "out", reward, "subproc")
    assert done.returncode == 1, done.stdout[-2000:]
    assert "reward program 'nan' failed at call 30: the total is nan" in done.stderr and "EOFError" not in done.stderr, done.stderr[-2000:]
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert "failed at call 30" in result["reward_failure"]
    # each env process has its own jailed worker, so its own count: the 30th call came at vector step 30, env step ~58
    # (in one process the two envs share one worker, whose count reaches 30 by env step ~28)
    assert 50 <= result["steps"] < 200, result["steps"]


def test_a_vec_env_that_does_not_exist_is_one_line_naming_both(tmp_path):
    task = get_task("fetch/reach")
    plan = lambda kind: resolve_training_plan(TrainConfig(task_id=task.id, out_dir=tmp_path, overrides={"vec_env": kind}), task)
    with pytest.raises(ConfigError, match=r"--hp vec_env='thread' is not a vector env; use --hp vec_env=dummy .* --hp vec_env=subproc"):
        plan("thread")
    assert plan("subproc").params().vec_env == "subproc"
    assert vec_env_problem("subproc", "linux") is None and vec_env_problem("dummy", "darwin") is None
    assert "needs Linux" in vec_env_problem("subproc", "darwin") and "use --hp vec_env=dummy" in vec_env_problem("subproc", "darwin")


def test_a_checkpoint_resumes_under_its_own_vec_env_and_older_checkpoints_still_match():
    settings = {kind: training_settings("fetch/reach", "expert", None, "dense", "sac", 0, 100, None, {"n_envs": 2, "vec_env": kind})
                for kind in ("dummy", "subproc")}
    assert settings["dummy"] != settings["subproc"]  # the warm-up's actions may come from another stream (policies.vec_envs)
    assert settings["dummy"] == training_settings("fetch/reach", "expert", None, "dense", "sac", 0, 100, None, {"n_envs": 2})


def test_envs_in_their_own_processes_are_refused_on_ray_before_a_run_starts():
    """A Ray worker runs gRPC threads, which a fork would copy mid-work: the local executor forks, Ray is told no."""
    config = RunConfig.of(task_id="fetch/reach", backend="heuristic", executor="ray", overrides={"vec_env": "subproc"})
    with pytest.raises(ConfigError, match=r"--hp vec_env=subproc .* --executor ray .* use --executor local for it, or --hp vec_env=dummy on ray"):
        check_run_config(config)


@pytest.mark.slow
def test_a_ctrl_c_to_the_group_keeps_the_checkpoint_and_a_killed_training_leaves_no_env_process(tmp_path):
    """A Ctrl-C reaches every process of the group: the env processes leave it to the training, which writes its
    checkpoint from them and resumes from it; a training killed outright takes its env processes (and their jails) along."""
    out = tmp_path / "train"
    args = [sys.executable, "-m", "text2reward.cli", "train", "--task", "fetch/reach", "--reward", str(REWARD), "--steps", "600",
            "--algo", SHORT_ALGO, *SHORT_HP_ARGS, "--hp", "n_envs=2", "--hp", "vec_env=subproc", "--eval-freq", "100",
            "--eval-episodes", "1", "--out", str(out)]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    wait_for(lambda: (out / "resume.ckpt").is_file() or process.poll() is not None, REACHED_WITHIN,
             "the first checkpoint (written after the first evaluation)")
    os.killpg(process.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
    _, stderr = process.communicate(timeout=REACHED_WITHIN)
    assert process.returncode == 130 and f"t2r train --resume {out}" in stderr and "Traceback" not in stderr, stderr[-2000:]
    stopped = json.loads((out / "result.json").read_text())
    assert stopped["interrupted"] is True and 100 <= stopped["steps"] < 600

    resumed = subprocess.Popen([sys.executable, "-m", "text2reward.cli", "train", "--resume", str(out)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    seen: set[int] = set()

    def envs_seen() -> bool:  # two env processes and their jails, read as they come (a jail's helpers come and go)
        seen.update(descendants(resumed.pid))
        return len(seen) >= 4 or resumed.poll() is not None

    wait_for(envs_seen, REACHED_WITHIN, "the resumed training's env processes and their jails")
    envs = sorted(seen)
    assert resumed.poll() is None and len(envs) >= 4, "the resumed training ended before its envs and their jails were seen"
    resumed.kill()
    resumed.wait(timeout=REACHED_WITHIN)
    wait_for(lambda: not any(alive(pid) for pid in envs), DIES_WITHIN, "the killed training's processes to end")
    assert not [pid for pid in envs if alive(pid)], "processes of the killed training are still running"


PLACE_AFTER_ENVS = """
import json, sys
from pathlib import Path
from policies.config import TrainConfig
from policies.train import train
from sim_envs.errors import ConfigError
config = TrainConfig(task_id="fetch/reach", out_dir=sys.argv[1], reward="expert", steps=100, device="cuda", algo="sbx-sac",
                     overrides={"n_envs": 2, "vec_env": "subproc", "learning_starts": 50})
try:
    train(config)
except ConfigError as error:
    children = [p.name for p in Path("/proc").iterdir() if p.name.isdigit() and (p / "stat").is_file()
                and (p / "stat").read_text().rpartition(")")[2].split()[1] == str(__import__("os").getpid())
                and (p / "stat").read_text().rpartition(")")[2].split()[0] != "Z"]
    print(json.dumps({"error": str(error), "children": children}))
"""


@pytest.mark.skipif(Path("/dev/nvidia0").exists(), reason="a GPU is here: cuda would be placed and train")
def test_a_device_that_is_not_here_is_refused_after_the_envs_and_closes_them(tmp_path):
    """The device is placed after the envs are built (counting GPUs starts JAX's GPU backend, whose threads env processes
    forked after it would copy); a device that is not here still ends on its one line, with the env processes closed."""
    done = subprocess.run([sys.executable, "-c", PLACE_AFTER_ENVS, str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert "CUDA was requested" in outcome["error"] and outcome["children"] == [], outcome
