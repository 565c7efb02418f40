"""What `t2r evaluate` and `t2r video` do with a saved policy: load it and its task, rebuild the env it trained on.

Why a module of its own: it needs gymnasium, SB3 and torch (~2 s), which only those two commands pay; each imports it
when it runs, so `t2r --help` and every other command start without them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import sim_envs
from policies.evaluate import Actor, EpisodeCallback, EvalResult, model_actor
from policies.evaluate import evaluate as run_eval
from policies.her import flat_observations
from policies.reward_program import SparseReward
from policies.task_env import make_task_env
from policies.train import load_policy
from sim_envs.task import Task


@dataclass(frozen=True)
class SavedPolicy:
    """A `t2r train --out` folder's policy, as an actor on its task's env (observations as it trained on them)."""

    task: Task
    actor: Actor
    flatten: bool

    @classmethod
    def load(cls, folder: Path) -> SavedPolicy:
        policy, meta = load_policy(folder, jax_device="cpu")  # one observation at a time: a GPU would only add launches
        return cls(sim_envs.get_task(meta["task"]), model_actor(policy), flat_observations(meta))

    def evaluate(self, episodes: int, seed: int, on_episode: EpisodeCallback | None = None) -> EvalResult:
        """`episodes` episodes from `seed` on, judged by the task's own success test (the sparse reward: none trains)."""
        env = make_task_env(self.task, SparseReward(), seed=seed, flatten=self.flatten)
        try:
            return run_eval(env, self.actor, episodes, seed=seed, on_episode=on_episode)
        finally:
            env.close()
