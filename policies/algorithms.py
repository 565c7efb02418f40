"""The training algorithms by name: SB3's (PyTorch) and SBX's (the same algorithms in JAX, JIT-compiled).

Why two implementations of one algorithm: SBX's compiled SAC update costs half SB3's on the same network
(benchmarks/update_cost.py), and that update is most of a step's time. Both share SB3's API
(`learn`, callbacks, vec envs, `save`/`load`, `predict`), so the rest of training does not care which
one it drives; this module is the only place that imports either to train (policies/sbx_sampling.py changes how SBX's
SAC draws its actions, and policies/sbx_build.py how SBX initialises its networks, for SBX models only).
"""

from __future__ import annotations

import os
import sys
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from policies.config import cache_root
from sim_envs.errors import ConfigError


@dataclass(frozen=True)
class Algorithm:
    name: str
    family: str
    """The algorithm itself (`sac` or `ppo`): settings carry over between implementations of one family."""
    backend: str
    """`sb3` (PyTorch) or `sbx` (JAX)."""

    @property
    def on_policy(self) -> bool:
        return self.family == "ppo"


ALGORITHMS = {
    "sac": Algorithm("sac", "sac", "sb3"),
    "ppo": Algorithm("ppo", "ppo", "sb3"),
    "sbx-sac": Algorithm("sbx-sac", "sac", "sbx"),
    "sbx-ppo": Algorithm("sbx-ppo", "ppo", "sbx"),
}

SBX_MISSING = "--algo {name} needs SBX (JAX); install it with: pip install sbx-rl"


def get_algorithm(name: str) -> Algorithm:
    if name not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {name!r}; use one of {', '.join(ALGORITHMS)}")
    return ALGORITHMS[name]


def configure_jax(threads: int) -> None:
    """Settings XLA reads once, when JAX builds its backend (the first `jax.devices()`, array or compiled call: not
    its import, so a worker forked from the training fork server, which imported JAX, still takes them):
    - its CPU backend's matrix products use every core by default; W workers on a small machine would fight over
      them (its executor's own thread pool is sized to the cores whatever the flags say: a job its launcher gives a
      core is held to it, policies/cpu_affinity.py);
    - on a GPU it takes 75% of the memory up front, so a second worker on the same GPU would fail to
      allocate: it allocates as it goes instead, as torch does.
    A value the user set in the environment wins. (The `intra_op_parallelism_threads=1` often written beside the
    flag is no XLA flag: XLA's parser stops at it and silently drops every flag after it.)"""
    if jax_backend_built():
        return
    flags = os.environ.get("XLA_FLAGS", "")
    if threads == 1 and "multi_thread_eigen" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen=false".strip()
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def jax_backend_built() -> bool:
    """Whether JAX has built its backend in this process (False where JAX is not imported; True where unsure)."""
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge  # already imported with jax; no public API says whether a backend exists
    except ImportError:
        return True  # a JAX laid out otherwise: assume the worst, as before (settings too late)
    built = getattr(xla_bridge, "backends_are_initialized", None)
    return bool(built()) if built is not None else True


def algorithm_class(name: str) -> Any:
    """The class that trains `name` (imported on first use: torch and JAX are slow to import)."""
    algorithm = get_algorithm(name)
    if algorithm.backend == "sb3":
        from stable_baselines3 import PPO, SAC  # SB3 and torch (~1.8 s): this module loads with every `t2r` command

        return {"sac": SAC, "ppo": PPO}[algorithm.family]
    try:
        import sbx  # SBX and JAX (~1.2 s beyond SB3), after configure_jax's settings: only SBX algorithms pay it
    except ImportError as exc:
        raise ConfigError(SBX_MISSING.format(name=name)) from exc
    return {"sac": sbx.SAC, "ppo": sbx.PPO}[algorithm.family]


def network_construction(name: str) -> AbstractContextManager[None]:
    """Where an algorithm's model is built: SBX's networks are initialised by one compiled program each
    (policies/sbx_build.py: the same weights, ~0.3 s less of every SBX job's start); SB3's as SB3 does. (A load
    initialises nothing: both libraries unpickle their networks.)"""
    if get_algorithm(name).backend != "sbx":
        return nullcontext()
    from policies.sbx_build import compiled_network_init  # Flax: imported already with SBX

    return compiled_network_init()


def cache_jax_compilations() -> None:
    """Keep XLA's compiled programs on disk: every candidate of a run trains the same networks on the same
    shapes, so only the first worker on a machine pays the compilation."""
    import jax  # SBX trainings only (~0.5 s), after configure_jax's settings

    jax.config.update("jax_compilation_cache_dir", str(cache_root() / "jax"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def jax_kept_to_cpu() -> bool:
    """Whether `use_jax_device("cpu")` kept this process's JAX to its CPU backend (for the rest of the process's life)."""
    if "jax" not in sys.modules or os.environ.get("JAX_PLATFORMS"):
        return False
    import jax  # imported already

    return getattr(jax.config, "jax_platforms", None) == "cpu"  # a flag JAX declares at run time


def jax_gpu_count() -> int:
    """The GPUs JAX can train on (none with its CPU-only build, whatever the machine has)."""
    try:
        import jax  # JAX (~0.5 s) for SBX's device checks only, after configure_jax's settings

        return sum(device.platform == "gpu" for device in jax.devices())
    except (ImportError, RuntimeError):
        return 0


def use_jax_device(device: str) -> None:
    """Put SBX's computations where `--device` says: JAX picks a GPU by itself when its CUDA build is there.
    A CPU job also keeps JAX to its CPU backend (`jax_platforms`, where no backend is built yet and the user set no
    JAX_PLATFORMS): otherwise JAX starts every backend it has, and on a GPU machine each CPU job would hold a CUDA
    context and GPU memory it never uses, and pay the GPU's start-up before its first step."""
    import jax  # SBX trainings only (~0.5 s), after configure_jax's settings

    if device == "cpu":
        if not jax_backend_built() and not os.environ.get("JAX_PLATFORMS"):
            jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_default_device", jax.devices("cpu")[0])
    elif device.startswith("cuda"):
        index = int(device.partition(":")[2] or 0)
        jax.config.update("jax_default_device", jax.devices("gpu")[index])
