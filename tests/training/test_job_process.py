"""What a training job's own process sets up before it trains (text2reward.training.job.main)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from short_training import SHORT_ALGO

from policies.config import TrainConfig
from text2reward.training.job import TrainJob

COUNT_COMPILATIONS = """
import json, sys
import mujoco
compiled = []
compile_file = mujoco.MjModel.from_xml_path
mujoco.MjModel.from_xml_path = staticmethod(lambda *args: compiled.append(args[0]) or compile_file(*args))
from text2reward.training.job import main
code = main([sys.argv[1]])
print(json.dumps({"code": code, "compiled": compiled}))
"""


def test_a_job_compiles_its_scene_once_for_its_training_evaluation_and_analysis_envs(tmp_path: Path) -> None:
    """Three envs of fetch/reach (training, evaluation, the trajectory analysis), one compilation of its scene: the job's
    `main` routes MuJoCo's compiler through sim_envs.model_cache (each env still gets a copy of its own)."""
    job = TrainJob(train=TrainConfig(task_id="fetch/reach", out_dir=tmp_path / "train", reward="sparse", steps=60, algo=SHORT_ALGO,
                                     eval_freq=60, eval_episodes=1, overrides={"learning_starts": 20, "batch_size": 16}),
                   analysis_episodes=1)
    job.write()
    done = subprocess.run([sys.executable, "-c", COUNT_COMPILATIONS, str(tmp_path / "job.json")], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["code"] == 0, (tmp_path / "error.json").read_text() if (tmp_path / "error.json").exists() else done.stderr[-3000:]
    assert len(outcome["compiled"]) == 1 and outcome["compiled"][0].endswith("reach.xml"), outcome["compiled"]
