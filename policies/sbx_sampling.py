"""SBX's SAC draws each exploring action in one compiled call, with the same random keys and so the same actions.

Why: SBX's `SACPolicy._predict` splits its random key outside any compiled function (`jax.random.split`, then two
slices of the result: three JAX dispatches, each costing more Python than the sampling itself on a CPU) before its
compiled sampling call. On MetaWorld that was ~0.5 of the ~2 ms a training step costs outside the updates
(benchmarks/update_cost.py, "one-call sampling"). Splitting inside the compiled call computes the same split, so the
keys, the noise and the actions are the same bit for bit (tests/policies/test_sbx_sampling.py): a seed's training is
unchanged.
"""

from __future__ import annotations

from types import MethodType
from typing import Any

import jax
import numpy as np
from sbx.common.policies import BaseJaxPolicy
from sbx.sac.policies import SACPolicy


@jax.jit
def _split_and_sample(actor_state: Any, observations: np.ndarray, key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """SBX's `reset_noise` then `sample_action`, in one program: the next key, the noise key, and the action."""
    key, noise_key = jax.random.split(key, 2)
    return actor_state.apply_fn(actor_state.params, observations).sample(seed=noise_key), key, noise_key


def _predict(policy: SACPolicy, observation: np.ndarray, deterministic: bool = False) -> jax.Array:
    if deterministic:
        return BaseJaxPolicy.select_action(policy.actor_state, observation)
    action, policy.key, policy.noise_key = _split_and_sample(policy.actor_state, observation, policy.key)
    return action


def sample_in_one_call(model: Any) -> Any:
    """Give an SBX SAC model's policy the one-call sampling (in place; any other model is returned untouched).
    gSDE keeps SBX's own: its noise key is drawn once per `reset_noise`, not per action."""
    policy = getattr(model, "policy", None)
    if isinstance(policy, SACPolicy) and not policy.use_sde:
        policy._predict = MethodType(_predict, policy)  # type: ignore[method-assign]  # this instance only
    return model
