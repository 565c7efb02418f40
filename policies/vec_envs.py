"""The training's vector env: every env in the training process (SB3's DummyVecEnv), or each in a process of its own
(SubprocVecEnv), chosen by `--hp vec_env`.

Why both: one env step of a MetaWorld task costs ~0.84 ms of one core, so 64 envs stepped one after the other in the
training process cap a candidate below ~1,200 env steps/s whatever the GPU does (benchmarks/RESULTS.md, "throughput": the
product's path read 754 steps/s at 64 envs where 64 envs in subprocesses read 1,917). On 2 cores the extra processes
only compete with the learner, so `dummy` stays every family's default.

The envs are built and seeded alike in both, and step alike for the same actions (the same observations and
rewards). A seed's training can still differ between them: in one process the learner's action space is env 0's own
object, which a MetaWorld env reseeds at its seeded reset, so the warm-up's random actions come from another stream
than in `subproc`, where the learner holds a copy (on fetch/reach, whose env never reseeds it, the curves are equal).

In `subproc`, each env process holds its own copy of the reward: a jailed reward (text2reward.sandbox) starts its own
jailed worker there on its first call, so every env's reward is still computed in a jail, one per env. A reward that
breaks a limit there would kill SB3's worker process and leave the training an `EOFError` naming nothing; it is carried
back in the step's `info` instead and raised in the training process as the same error, where training keeps what it
learned (policies.train).
"""

from __future__ import annotations

import copy
import ctypes
import os
import signal
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecEnvWrapper

from sim_envs.errors import RewardProgramError

FAILURE_KEY = "reward_failure"
"""The `info` key a subprocess env carries its reward's failure back under (never a key a reward can set: the reward's
own names live under `reward_components`)."""


class CarryRewardFailure(gym.Wrapper):
    """In an env process, outside its Monitor: a step whose reward failed ends the episode and returns the error in
    `info` (the Monitor logs no episode for it)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._last_obs: Any = None

    def reset(self, **kwargs: Any) -> Any:
        obs, info = self.env.reset(**kwargs)
        self._last_obs = obs
        return obs, info

    def step(self, action: Any) -> Any:
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except RewardProgramError as failure:
            return self._last_obs, 0.0, True, False, {FAILURE_KEY: failure}
        self._last_obs = obs
        return obs, reward, terminated, truncated, info


class RaiseRewardFailure(VecEnvWrapper):
    """In the training process: raises the first env's carried reward failure as it was raised in that env; the
    rewards as float32, as DummyVecEnv's buffer holds them (the replay buffer keeps float32 either way)."""

    def reset(self) -> Any:
        return self.venv.reset()

    def step_wait(self) -> Any:
        obs, rewards, dones, infos = self.venv.step_wait()
        for info in infos:
            failure = info.get(FAILURE_KEY)
            if isinstance(failure, RewardProgramError):
                raise failure
        return obs, rewards.astype(np.float32), dones, infos


PR_SET_PDEATHSIG = 1


def become_env_process(parent: int) -> None:
    """First thing in a forked env process: die with the training process, and leave a person's Ctrl-C or SIGTERM to it.

    Why: forked, each env process holds copies of its siblings' pipe ends, so none would see its pipe close if the
    training were killed: they would outlive it (SB3 avoids this with a fork server; `SandboxedReward`'s workers die
    with their parent the same way). And a Ctrl-C reaches the whole process group: an env process that exited on it
    would leave the training unable to read the envs' state for the checkpoint it writes as it stops (policies.interrupt);
    the training closes them itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the training died before the line above
        os._exit(1)


def build_training_vec_env(make_env: Callable[[Any], gym.Env], reward_fn: Any, n_envs: int, seed: int, kind: str,
                           monitor_dir: str, monitor_kwargs: dict[str, Any]) -> VecEnv:
    """`n_envs` envs of `make_env(reward)`, monitored into `monitor_dir`, seeded `seed`, `seed + 1`... as SB3 seeds them.

    `subproc` forks its env processes (nothing imported again: ~0.1 s for all of them). A fork is safe here because:
    the training builds its envs before its model and before it places its device (policies.train.place_device), so in
    a training job before any JAX or CUDA work, as the preloaded fork server forks (training.preloaded); an env process
    never calls JAX or CUDA, which is what a fork after them would break; and the training runs in a process of ours
    (a Ray worker, whose gRPC threads a fork would copy mid-work, is refused this setting before a run starts:
    text2reward.preflight). Each env process deep-copies the reward, so a jailed reward never shares the training
    process's worker (a copy holds no worker: `SandboxedReward.__getstate__`)."""
    if kind == "subproc":
        parent = os.getpid()

        def make_in_env_process() -> gym.Env:
            become_env_process(parent)
            return make_env(copy.deepcopy(reward_fn))

        with warnings.catch_warnings():
            # JAX warns at every fork once its backend runs (a `t2r train --device cuda` checked its GPU first): a child
            # that called JAX could deadlock on its threads' locks. An env process never calls JAX.
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            venv = make_vec_env(make_in_env_process, n_envs=n_envs, seed=seed, monitor_dir=monitor_dir,
                                monitor_kwargs=monitor_kwargs, wrapper_class=CarryRewardFailure, vec_env_cls=SubprocVecEnv,
                                vec_env_kwargs={"start_method": "fork"})  # the carrier outside the Monitor: no episode is logged
        return RaiseRewardFailure(venv)
    return make_vec_env(lambda: make_env(reward_fn), n_envs=n_envs, seed=seed, monitor_dir=monitor_dir,
                        monitor_kwargs=monitor_kwargs, vec_env_cls=DummyVecEnv)
