"""The settings of one training run, in a module of their own so that the run store and the job files
can hold them without importing SB3 and torch."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def switched_on(variable: str, default: bool) -> bool:
    """An on/off setting from the environment: 1, true, yes or on; 0, false, no or off; `default` when unset or other."""
    value = os.environ.get(variable, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return default


def cache_root() -> Path:
    """This machine's cache of what training reads again and again ($XDG_CACHE_HOME/text2reward, else ~/.cache/text2reward)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "text2reward"


GPU_MIN_ENVS = 4
"""`--device auto` puts an SBX off-policy training on a GPU only from this many envs (benchmarks/throughput.py on an
H100, RESULTS.md): one env on cuda ran at 0.68x one CPU core (a [128, 128] update on 256 rows is launch-bound), 4 envs
with their 4 updates compiled into one call at 1.28-1.57x, 16 at 5x, 32 at 7.5x."""
GPU_MAX_SHARERS = 2
"""`--device auto` puts a training on the GPU only while at most this many trainings run at once on the machine (a run's
`--workers`): processes on one GPU take turns on it. On an H100 with 16 cores (benchmarks/throughput.py `--workers`,
RESULTS.md), SBX SAC at 16 envs ran 530-645 steps/s alone, 174 each with 4 jobs sharing the GPU and 93 each with 8 (the
GPU's total stayed at 700-750), while one such job on the CPU runs ~260: from 4 sharers on, the GPU is the slower
device. At 2, measured on 2026-11-28 (two jobs of a configuration at once): 359 steps/s each on cuda against 225 on the
CPU at 16 envs (1.6x), and 113 against 105 at 4 envs (equal within a reading's ~10%): 2 sharers keep the GPU the
faster device or an equal one, never the slower."""
DEVICE_HELP = (f"auto (cuda only for SBX's SAC with --hp n_envs={GPU_MIN_ENVS} or more, at most {GPU_MAX_SHARERS} trainings "
               "at once and a GPU JAX sees, where the GPU was measured faster; else cpu), cpu, cuda or cuda:N")

VEC_ENVS = ("dummy", "subproc")
"""`--hp vec_env` values (policies.vec_envs): `dummy` steps every env in the training process, `subproc` each env in
its own process."""


@dataclass
class TrainConfig:
    task_id: str
    out_dir: Path
    reward: str = "expert"
    reward_mode: str = "dense"
    """How a "code" reward's program becomes the training reward: a registered reward mode's name (policies.reward_modes:
    "dense", the program is the reward; "potential", sparse success plus gamma*Phi(s') - Phi(s); "progress", progress
    gains plus a count bonus), whose RewardModeSpec says the rest."""
    steps: int | None = None
    seed: int = 0
    device: str = "auto"
    algo: str | None = None
    eval_freq: int | None = None
    eval_episodes: int | None = None
    n_envs: int | None = None
    stop_at_success: float | None = None
    stop_file: str | None = None
    """A file a supervisor creates to stop training (looked for every few dozen steps); its JSON says why (early stopping)."""
    torch_threads: int = 1
    gpu_sharers: int = 1
    """Trainings running at once on this machine, this one included (a run's `--workers`; 1 for `t2r train`): `--device
    auto` picks a GPU only while at most GPU_MAX_SHARERS share it."""
    progress: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)
    her: bool | None = None
    """Hindsight experience replay (policies.her): True / False as `--her` / `--no-her` say, None for the family's
    default (its YAML's `her`, which stays off where HER cannot apply: a reward program, PPO, a task without goals)."""
