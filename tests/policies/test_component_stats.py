"""The training callback's component history: the reward's names are data, our own figures come from the env.

A real SB3 model gives the callback its logger and step count; `infos` are what `TaskRewardWrapper` puts in them.
"""

from __future__ import annotations

import gymnasium as gym
import pytest
from stable_baselines3 import PPO
from stable_baselines3.common.logger import Logger

from policies.callbacks import ComponentStatsCallback

HOSTILE = {"_steps": 1e300, "_components": 0.5, "_step_success": 1.0, "_native": 1e300, "steps": 2.0, "components": 3.0}


@pytest.fixture
def callback():
    model = PPO("MlpPolicy", gym.make("Pendulum-v1"), n_steps=64, batch_size=32, device="cpu")
    model.set_logger(Logger(folder=None, output_formats=[]))  # what learn() would set up
    stats = ComponentStatsCallback(log_every=4)
    stats.init_callback(model)
    return stats


def step(callback: ComponentStatsCallback, infos: list[dict]) -> None:
    callback.model.num_timesteps += len(infos)  # what SB3 counts; on_step reads it
    callback.locals = {"infos": infos}
    callback.on_step()


def test_names_that_are_our_keys_stay_under_components(callback):
    for _ in range(4):
        step(callback, [{"reward_components": dict(HOSTILE), "native_reward": -0.5, "step_success": False}])
    (entry,) = callback.history
    assert entry["steps"] == 4 and entry["native"] == -0.5 and entry["step_success"] == 0.0
    assert set(entry) == {"steps", "components", "native", "step_success"}
    assert {name: stats["mean"] for name, stats in entry["components"].items()} == HOSTILE


def test_a_checkpoint_from_before_the_two_windows_resumes(callback):
    """An older checkpoint kept the env's figures in the reward's window as `_native` and `_step_success`."""
    callback.restore({"history": [], "window": {"reach": [1.0], "_native": [-2.0], "_step_success": [1.0]}, "last_flush": 0})
    for _ in range(4):
        step(callback, [{"reward_components": {"reach": 3.0}, "native_reward": -4.0, "step_success": False}])
    (entry,) = callback.history
    assert entry["components"] == {"reach": {"mean": 2.6, "min": 1.0, "max": 3.0}}
    assert entry["native"] == pytest.approx(-3.6) and entry["step_success"] == pytest.approx(0.2)
    restored = ComponentStatsCallback()
    restored.restore(callback.state())
    assert restored.history == callback.history
