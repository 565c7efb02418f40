"""A trained policy as one object: the SB3/SBX model, the task it acts in, and a file that loads on its own.

Why a thin wrapper over the library's model rather than the bare model: acting needs the task's observation in the
form the policy was trained on (flat, or the dict a HER policy reads), and a `model.zip` alone does not say which
task, algorithm or form that was. `save` writes the library's own zip with that record inside it (a
`text2reward.json` member, which SB3's `load` skips), so `Policy.load(path)` needs nothing beside the file, and
`stable_baselines3.SAC.load(path)` (or SBX's) still opens it.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sim_envs.errors import ConfigError

MODEL_FILE = "model.zip"
RESULT_FILE = "result.json"

META_MEMBER = "text2reward.json"
"""The member of a saved policy's zip holding what it acts in: {task, algo, her}."""


@dataclass
class Policy:
    """A trained policy: `predict` as SB3's, `save(path)` and `Policy.load(path)`; `model` is the SB3/SBX object."""

    model: Any
    task: str
    algo: str
    her: bool = False
    """Trained with hindsight experience replay: it reads the task's dict observation (`make_env` builds that form)."""

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[np.ndarray, Any]:
        """The action for `observation` (SB3's `predict`; deterministic by default, as an evaluation acts)."""
        return self.model.predict(observation, state=state, episode_start=episode_start, deterministic=deterministic)

    def make_env(self, seed: int = 0) -> Any:
        """The task's environment as this policy reads it (judged by the task's own success test, `info["is_success"]`)."""
        from policies.reward_program import SparseReward  # the env's stack (gymnasium, MuJoCo): only acting pays it
        from policies.task_env import make_task_env  # as above
        from sim_envs import get_task  # as above

        return make_task_env(get_task(self.task), SparseReward(), seed=seed, flatten=not self.her)

    def save(self, path: str | Path) -> Path:
        """The library's zip at `path` (".zip" added when missing, as SB3 does), with what `load` needs inside."""
        path = Path(path)
        if path.suffix != ".zip":
            path = path.with_suffix(path.suffix + ".zip") if path.suffix else path.with_suffix(".zip")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.model.save(path)
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr(META_MEMBER, json.dumps({"task": self.task, "algo": self.algo, "her": self.her}))
        return path

    @classmethod
    def load(cls, path: str | Path) -> Policy:
        """A policy saved by `save`, or a `t2r train --out` folder (or the model.zip in one)."""
        path = Path(path)
        if path.is_file() and zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                meta = json.loads(archive.read(META_MEMBER)) if META_MEMBER in archive.namelist() else None
            if meta is not None:
                from stable_baselines3.common.buffers import DictReplayBuffer  # torch and SB3: only loading a policy pays them

                from policies.algorithms import algorithm_class  # as above

                # a HER model rebuilds its buffer on load, which needs the training env; one that only acts needs neither
                custom = {"replay_buffer_class": DictReplayBuffer, "replay_buffer_kwargs": {}} if meta.get("her") else None
                model = algorithm_class(meta["algo"]).load(path, device="cpu", custom_objects=custom)
                return cls(model=model, task=meta["task"], algo=meta["algo"], her=bool(meta.get("her")))
        if not path.exists():
            raise ConfigError(f"no policy at {path}; pass a file saved with Policy.save, or a `t2r train --out` folder")
        model, meta = load_policy(path)
        return cls(model=model, task=meta["task"], algo=meta["algo"], her=bool(meta.get("her")))


def saved_policy_files(path: str | Path) -> tuple[Path, Path]:
    """The model.zip and result.json of a saved policy (a run directory or its model.zip), or one line naming what is
    missing: checked before torch and SB3 are imported, so a mistyped path is answered at once."""
    path = Path(path)
    model_path = path / MODEL_FILE if path.is_dir() else path
    result_path = model_path.parent / RESULT_FILE
    if not model_path.is_file() or not result_path.is_file():
        raise ConfigError(f"no trained policy at {path}; pass the --out directory of `t2r train` (with {MODEL_FILE} and {RESULT_FILE})")
    return model_path, result_path


def load_policy(path: str | Path, jax_device: str | None = None) -> tuple[Any, dict[str, Any]]:
    """A saved model and the result.json beside it (a run directory or its model.zip). A policy trained with HER
    reads dict observations: build its env with `flatten=policies.her.flat_observations(meta)`. `jax_device` places an
    SBX policy (`policies.algorithms.use_jax_device`; "cpu" keeps this process's JAX to the CPU for good, so only a
    process of ours passes it); None leaves JAX's own choice."""
    model_path, result_path = saved_policy_files(path)
    meta = json.loads(result_path.read_text())
    from stable_baselines3.common.buffers import DictReplayBuffer  # torch and SB3: only loading a policy pays them

    from policies.algorithms import algorithm_class, get_algorithm, use_jax_device

    if jax_device is not None and get_algorithm(meta["algo"]).backend == "sbx":
        use_jax_device(jax_device)
    custom_objects = None
    if meta.get("her"):  # SB3 rebuilds a HerReplayBuffer on load, which needs the training env; a policy that only acts needs neither
        custom_objects = {"replay_buffer_class": DictReplayBuffer, "replay_buffer_kwargs": {}}
    return algorithm_class(meta["algo"]).load(model_path, device="cpu", custom_objects=custom_objects), meta
