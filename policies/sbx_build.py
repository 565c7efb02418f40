"""SBX builds its networks with each Flax `init` compiled as one program, so the same weights cost one lowering, not fifty.

Why: SBX's `SACPolicy.build` initialises the actor and the critics eagerly. Eager JAX lowers and compiles every
primitive the initialisers use (threefry splits, truncated normals, matmuls, adds, ...) as its own program, each in
a fresh MLIR context (~10 ms for an add, ~90 ms for a truncated normal), paid in every training process: the
persistent cache keeps compilations, never lowerings. One compiled `init` per network is one lowering each: an SBX
SAC model's construction took a median 0.96 s against 1.25 s (benchmarks/RESULTS.md, "SBX's networks built by one
compiled init each"), and that lowering is itself kept on disk once per machine (policies/jax_program_cache.py). The
programs compute the same values from the same keys, so the weights and optimiser states are the same bit for bit
(tests/policies/test_sbx_build.py) and a seed's training is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import flax.linen as nn
import jax

from policies.jax_program_cache import call_kept

_EAGER_INIT = nn.Module.init


def _compiled_init(module: nn.Module, rngs: Any, *args: Any, **kwargs: Any) -> Any:
    """Flax's `init` as one compiled program where it is called as SBX calls it (keys and arrays, no options)."""
    if kwargs or not all(isinstance(arg, jax.Array) for arg in args):
        return _EAGER_INIT(module, rngs, *args, **kwargs)
    return call_kept(jax.jit(lambda keys, *inputs: _EAGER_INIT(module, keys, *inputs)), rngs, *args)


@contextmanager
def compiled_network_init() -> Iterator[None]:
    """Within this block (one SBX model's construction), every Flax module's `init` is compiled whole."""
    nn.Module.init = _compiled_init  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        nn.Module.init = _EAGER_INIT  # type: ignore[method-assign]
