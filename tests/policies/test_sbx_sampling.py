"""SBX SAC's exploring actions drawn in one compiled call (policies/sbx_sampling.py): the same keys, actions and
training as SBX's own sampling, bit for bit, and what training builds or resumes gets it."""

import jax
import numpy as np
import pytest
from sbx import SAC
from stable_baselines3 import SAC as SB3SAC

from policies.hyperparams import load_hyperparams
from policies.reward_program import reward_from_spec
from policies.sbx_sampling import _predict, sample_in_one_call
from policies.task_env import make_task_env
from policies.train import resume_or_build
from sim_envs.registry import get_task

SETTINGS = {"learning_starts": 50, "batch_size": 32, "policy_kwargs": {"net_arch": [32, 32]}}


def fetch_reach(seed: int = 0):
    return make_task_env(get_task("fetch/reach"), reward_from_spec("expert"), seed=seed)


def test_one_call_sampling_draws_sbx_own_keys_and_actions():
    theirs, mine = (SAC("MlpPolicy", fetch_reach(), seed=3, **SETTINGS) for _ in range(2))
    sample_in_one_call(mine)
    observations = np.stack([fetch_reach(seed).reset(seed=seed)[0] for seed in range(4)])  # a batch, as n_envs > 1 gives
    for _ in range(5):
        expected, _ = theirs.predict(observations, deterministic=False)
        got, _ = mine.predict(observations, deterministic=False)
        assert np.array_equal(expected, got) and expected.shape == (4, 4)
        assert np.array_equal(np.asarray(theirs.policy.key), np.asarray(mine.policy.key))
        assert np.array_equal(np.asarray(theirs.policy.noise_key), np.asarray(mine.policy.noise_key))
    assert np.array_equal(theirs.predict(observations, deterministic=True)[0], mine.predict(observations, deterministic=True)[0])
    assert not np.array_equal(*(mine.predict(observations[:1], deterministic=False)[0] for _ in range(2)))  # still random


def test_a_seed_trains_the_same_networks_either_way(tmp_path, monkeypatch):
    """Same actions, so the same replay buffer and the same updates: the trained parameters are equal. Each model is
    built and trained before the next is built: the seed also seeds NumPy's global generator, which the buffer samples.
    (SB3 gives a `learn` with no logger of its own a folder: here under tmp_path, not a new /tmp/SB3-* per call.)"""
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path))
    theirs = SAC("MlpPolicy", fetch_reach(), seed=5, **SETTINGS).learn(150)
    mine = sample_in_one_call(SAC("MlpPolicy", fetch_reach(), seed=5, **SETTINGS)).learn(150)
    assert np.array_equal(theirs.replay_buffer.actions[:150], mine.replay_buffer.actions[:150])
    for a, b in zip(jax_leaves(theirs.policy.actor_state.params), jax_leaves(mine.policy.actor_state.params), strict=True):
        assert np.array_equal(a, b)


def jax_leaves(tree) -> list[np.ndarray]:
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(tree)]


def test_gsde_and_sb3_keep_their_own_sampling():
    gsde = sample_in_one_call(SAC("MlpPolicy", fetch_reach(), seed=0, use_sde=True, **SETTINGS))
    assert getattr(gsde.policy._predict, "__func__", None) is not _predict
    sb3 = sample_in_one_call(SB3SAC("MlpPolicy", fetch_reach(), seed=0, learning_starts=50))
    assert getattr(sb3.policy._predict, "__func__", None) is not _predict


@pytest.mark.parametrize("algo", ["sbx-sac", "sac"])
def test_what_training_builds_samples_in_one_call_where_it_is_sbx(tmp_path, algo):
    params = load_hyperparams("fetch", algo, {"learning_starts": 50, "batch_size": 32})
    model, checkpoint = resume_or_build(params, fetch_reach(), seed=0, device="cpu", tb_dir=tmp_path, checkpoint=None)
    assert checkpoint is None
    assert (getattr(model.policy._predict, "__func__", None) is _predict) == (algo == "sbx-sac")
