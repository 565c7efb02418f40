"""A person's stop ends `learn` where the algorithm's collection ends, so a resumed training meets its budget exactly
(policies.interrupt.StopOnRequest): with `train_freq=4`, a stop mid-chunk once made a resumed 400-step training 402."""

from __future__ import annotations

import gymnasium as gym
import pytest
from stable_baselines3 import PPO, SAC
from stable_baselines3.common.logger import Logger

from policies.interrupt import StopOnRequest


def quiet(model):
    """The model with a logger that writes nowhere: SB3's default makes an empty /tmp/SB3-<time> folder per `learn`."""
    model.set_logger(Logger(folder=None, output_formats=[]))
    return model


def stopped_at(model, ask_at: int, steps: int = 40) -> int:
    """The step `learn` ended at when a stop is asked from step `ask_at` on."""
    model.learn(total_timesteps=steps, callback=StopOnRequest(lambda: model.num_timesteps >= ask_at))
    return int(model.num_timesteps)


@pytest.mark.parametrize(("train_freq", "ask_at", "ends_at"), [(1, 6, 6), (4, 6, 8), (4, 8, 8), (5, 6, 10)])
def test_an_off_policy_training_stops_at_the_end_of_its_collection(train_freq, ask_at, ends_at):
    model = quiet(SAC("MlpPolicy", gym.make("Pendulum-v1"), train_freq=train_freq, learning_starts=1000, seed=0))
    assert stopped_at(model, ask_at) == ends_at


def test_a_resumed_learn_meets_the_budget_after_a_stop():
    model = quiet(SAC("MlpPolicy", gym.make("Pendulum-v1"), train_freq=4, learning_starts=1000, seed=0))
    assert stopped_at(model, 6) == 8
    model.learn(total_timesteps=40 - model.num_timesteps, reset_num_timesteps=False)
    assert model.num_timesteps == 40


def test_an_on_policy_training_stops_at_the_next_step():
    model = quiet(PPO("MlpPolicy", gym.make("Pendulum-v1"), n_steps=16, batch_size=16, seed=0))
    assert stopped_at(model, 6) == 6
