"""SBX's networks initialised by one compiled program each (policies/sbx_build.py): the same weights as SBX's eager
build, bit for bit, for SAC (vectorised critics) and PPO, and Flax's own `init` back in place after the block."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sbx import PPO, SAC

from policies.algorithms import network_construction
from policies.reward_program import reward_from_spec
from policies.sbx_build import compiled_network_init
from policies.task_env import make_task_env
from sim_envs.registry import get_task

SAC_SETTINGS = {"learning_starts": 50, "batch_size": 32, "policy_kwargs": {"net_arch": [32, 32]}}


def fetch_reach():
    return make_task_env(get_task("fetch/reach"), reward_from_spec("expert"), seed=0)


def leaves(tree) -> list[np.ndarray]:
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(tree)]


def same(a, b) -> bool:
    left, right = leaves(a), leaves(b)
    return len(left) == len(right) > 0 and all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(left, right))


def test_sac_gets_sbx_own_weights_and_optimiser_states():
    eager = SAC("MlpPolicy", fetch_reach(), seed=7, **SAC_SETTINGS)
    with compiled_network_init():
        compiled = SAC("MlpPolicy", fetch_reach(), seed=7, **SAC_SETTINGS)
    for state in ("actor_state", "qf_state"):
        assert same(getattr(eager.policy, state).params, getattr(compiled.policy, state).params), state
        assert same(getattr(eager.policy, state).opt_state, getattr(compiled.policy, state).opt_state), state
    assert same(eager.policy.qf_state.target_params, compiled.policy.qf_state.target_params)
    assert np.array_equal(np.asarray(eager.policy.key), np.asarray(compiled.policy.key))
    assert same(eager.ent_coef_state.params, compiled.ent_coef_state.params)
    assert not same(eager.policy.actor_state.params, SAC("MlpPolicy", fetch_reach(), seed=8, **SAC_SETTINGS).policy.actor_state.params)


def test_ppo_gets_sbx_own_weights():
    eager = PPO("MlpPolicy", fetch_reach(), seed=3, n_steps=64, batch_size=32)
    with compiled_network_init():
        compiled = PPO("MlpPolicy", fetch_reach(), seed=3, n_steps=64, batch_size=32)
    assert same(eager.policy.actor_state.params, compiled.policy.actor_state.params)
    assert same(eager.policy.vf_state.params, compiled.policy.vf_state.params)


def test_flax_init_is_its_own_again_after_the_block_even_after_an_error():
    eager = nn.Module.init
    with pytest.raises(RuntimeError), compiled_network_init():
        assert nn.Module.init is not eager
        raise RuntimeError("a build that failed")
    assert nn.Module.init is eager
    dense = nn.Dense(3)
    x = jnp.ones((1, 2))
    with compiled_network_init():  # options SBX never passes: Flax's own init, unchanged
        kept = dense.init(jax.random.PRNGKey(0), x, mutable=["params"])
    assert same(kept, dense.init(jax.random.PRNGKey(0), x))


def test_only_sbx_algorithms_are_built_that_way():
    with network_construction("sac"):
        assert nn.Module.init is not None and "compiled" not in nn.Module.init.__name__
    with network_construction("sbx-sac"):
        assert "compiled" in nn.Module.init.__name__


def test_what_training_builds_initialises_its_networks_compiled(tmp_path, monkeypatch):
    """resume_or_build constructs an SBX model inside the block: Flax's init runs under tracing there. (A load
    initialises nothing: SBX unpickles its networks.)"""
    import policies.sbx_build as sbx_build
    from policies.hyperparams import load_hyperparams
    from policies.train import resume_or_build

    traced: list[bool] = []
    eager = sbx_build._EAGER_INIT

    def spy(module, rngs, *args, **kwargs):
        traced.append(isinstance(jax.tree_util.tree_leaves(rngs)[0], jax.core.Tracer))
        return eager(module, rngs, *args, **kwargs)

    monkeypatch.setattr(sbx_build, "_EAGER_INIT", spy)
    params = load_hyperparams("fetch", "sbx-sac", {"learning_starts": 50, "batch_size": 32})
    resume_or_build(params, fetch_reach(), seed=0, device="cpu", tb_dir=tmp_path, checkpoint=None)
    assert len(traced) == 4 and all(traced), traced  # the actor, two critic inits, the entropy coefficient


def sac_networks(seed: int):
    with compiled_network_init():
        model = SAC("MlpPolicy", fetch_reach(), seed=seed, **SAC_SETTINGS)
    return model.policy.actor_state.params, model.policy.qf_state.params, model.ent_coef_state.params


def test_a_network_lowered_once_is_read_back_with_the_same_weights_and_a_bad_file_is_lowered_again(tmp_path, monkeypatch):
    """policies/jax_program_cache.py: the first build stores each init's lowering; a later build reads the files instead
    of exporting (exporting is made to fail there) and gets SBX's own eager weights, bit for bit; another seed gets
    other weights from the same files (the keys are inputs, never part of a program); a truncated file is lowered and
    written again whole, with the same weights."""
    from policies.jax_program_cache import cache_folder

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    eager = SAC("MlpPolicy", fetch_reach(), seed=11, **SAC_SETTINGS)
    expected = (eager.policy.actor_state.params, eager.policy.qf_state.params, eager.ent_coef_state.params)

    stored = sac_networks(11)
    files = sorted(cache_folder().glob("*.jaxexport"))
    assert len(files) == 3, files  # the actor, the critics (both inits one program), the entropy coefficient
    written = {path: path.read_bytes() for path in files}

    def no_export(*args, **kwargs):
        raise AssertionError("a stored program was exported again")

    with monkeypatch.context() as patch:
        patch.setattr(jax.export, "export", no_export)
        read_back = sac_networks(11)
        other_seed = sac_networks(12)
    for got in (stored, read_back):
        assert all(same(a, b) for a, b in zip(expected, got, strict=True))
    assert not same(expected[0], other_seed[0]) and {p: p.read_bytes() for p in files} == written

    for path in files:
        path.write_bytes(written[path][:40])
    again = sac_networks(11)
    assert all(same(a, b) for a, b in zip(expected, again, strict=True))
    assert all(len(path.read_bytes()) > 40 for path in files)  # lowered and written again whole
    with monkeypatch.context() as patch:
        patch.setattr(jax.export, "export", no_export)
        assert all(same(a, b) for a, b in zip(expected, sac_networks(11), strict=True))
