"""Every pluggable choice is held by one registry type (policies.choices.Registry) with one rule set: a taken name is
DuplicateChoice unless replaced on purpose, an unknown one a one-line ConfigError naming the choices, unregistering
gives the spec back, and readers get a read-only view."""

from __future__ import annotations

import dataclasses
import re

import pytest

from policies.choices import Registry
from policies.mode_spec import MODES
from sim_envs.errors import ConfigError, DuplicateChoice
from text2reward.generation.llm.spec import BACKENDS
from text2reward.keypoints.sources import KEYPOINT_FINDERS, REWARD_SOURCES
from text2reward.training.executors import EXECUTORS

REGISTRIES = {"backend": BACKENDS, "executor": EXECUTORS, "reward mode": MODES, "reward source": REWARD_SOURCES,
              "keypoint finder": KEYPOINT_FINDERS}


@pytest.mark.parametrize("kind", REGISTRIES)
def test_every_choice_keeps_the_one_rule_set(kind):
    registry = REGISTRIES[kind]
    assert isinstance(registry, Registry) and registry.kind == kind and len(registry) >= 2
    first = registry.specs()[0]
    with pytest.raises(DuplicateChoice, match=f"a {kind} named {first.name!r} is registered already"):
        registry.register(first)
    with pytest.raises(ConfigError, match="^unknown .*'no-such-choice'.*" + ".*".join(map(re.escape, registry.names()))):
        registry.get("no-such-choice")
    with pytest.raises(TypeError):
        registry.view["other"] = first  # type: ignore[index]  # read-only: register through the registry
    toy = dataclasses.replace(first, name="toy")
    assert registry.register(toy) is toy and registry.get("toy") is toy and registry.view["toy"] is toy
    try:
        replacement = dataclasses.replace(first, name="toy")
        assert registry.register(replacement, replace=True) is replacement and registry.get("toy") is replacement
    finally:
        assert registry.unregister("toy").name == "toy"
    assert "toy" not in registry and list(registry) == registry.names()
    with pytest.raises(ConfigError, match="'toy'"):
        registry.unregister("toy")
