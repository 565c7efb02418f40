"""The front door as an SB3 user expects it: settings typed and checked when a search is built (Python's TypeError and
ValueError naming the parameter), the public names listed, a callback that stops the search by returning False, and
`result.policy`: the trained SB3/SBX model with `predict`, `save`, and a `load` that needs only the saved file."""

from __future__ import annotations

import inspect
import shutil
import subprocess
import sys
from typing import get_type_hints

import numpy as np
import pytest
from short_training import SHORT_ALGO, SHORT_HP

import text2reward
from text2reward import Policy, RewardSearch, SearchCallback, SearchSettings, train_reward
from text2reward.errors import ConfigError
from text2reward.runs.run_events import Evaluation
from text2reward.runs.statuses import RunStatus
from text2reward.settings import setting_fields

TINY = dict(rounds=1, samples=1, steps=200, eval_freq=100, eval_episodes=1, final_seeds=0, video=False,
            overrides=SHORT_HP, algo=SHORT_ALGO)


@pytest.mark.parametrize("settings, error, message", [
    ({"steps": "abc"}, TypeError, "steps must be a positive int or None, got 'abc'"),
    ({"rounds": "2"}, TypeError, "rounds must be a positive int, got '2'"),
    ({"early_stop": 1}, TypeError, "early_stop must be a bool, got 1"),
    ({"overrides": ["batch_size=64"]}, TypeError, "overrides must be"),
    ({"rounds": 0}, ValueError, "rounds must be a positive int, got 0"),
    ({"steps": -5}, ValueError, "steps must be a positive int or None, got -5"),
    ({"temperature": 3.0}, ValueError, "temperature must be between 0 and 2, got 3.0"),
    ({"roundz": 2}, TypeError, "unexpected keyword argument 'roundz'; the settings are .*rounds"),
])
def test_a_wrong_setting_is_refused_when_the_search_is_built_in_pythons_terms(tmp_path, settings, error, message):
    with pytest.raises(error, match=message) as raised:
        RewardSearch("fetch/reach", runs_dir=tmp_path / "runs", **settings)
    assert "--" not in str(raised.value)  # no command-line flag in a Python error
    assert isinstance(raised.value, ConfigError)  # and still the project's error, for whoever catches those
    assert not (tmp_path / "runs").exists()


def test_the_signature_lists_every_setting_typed_with_its_default():
    parameters = inspect.signature(RewardSearch).parameters
    fields = {f.name: owner for owner, f in setting_fields()}
    settings = set(fields) - {"task_id", "backend"}
    assert set(get_type_hints(SearchSettings)) == settings  # the typed settings are RunConfig's, no more, no fewer
    run_types = {name: get_type_hints(owner)[name] for name, owner in fields.items()}
    assert all(get_type_hints(SearchSettings)[name] == run_types[name] for name in settings)
    assert {"task", "backend", "runs_dir", "callbacks", *settings} <= set(parameters)
    assert parameters["rounds"].default == 2 and parameters["steps"].kind is inspect.Parameter.KEYWORD_ONLY


def test_dir_lists_the_public_names():
    names = dir(text2reward)
    assert {"RewardSearch", "SearchCallback", "SearchResult", "SearchSettings", "Policy", "train_reward", "open_run"} <= set(names)


class StopAtFirstEvaluation(SearchCallback):
    def __init__(self) -> None:
        self.evaluations: list[Evaluation] = []

    def on_evaluation(self, event: Evaluation) -> bool:
        self.evaluations.append(event)
        return False


@pytest.mark.slow
def test_a_callback_returning_false_stops_the_search(tmp_path):
    stopper = StopAtFirstEvaluation()
    result = RewardSearch("fetch/reach", runs_dir=tmp_path / "runs", callbacks=[stopper], **{**TINY, "steps": 2000}).run()
    assert result.stopped_by_callback and result.status == RunStatus.INTERRUPTED
    assert len(stopper.evaluations) == 1 and stopper.evaluations[0].steps < 2000
    assert all(c.training is None or c.training.steps < 2000 for c in result.candidates)


@pytest.mark.slow
def test_result_policy_predicts_saves_and_loads_from_the_file_alone(tmp_path):
    result = RewardSearch("fetch/reach", runs_dir=tmp_path / "runs", **TINY).run()
    policy = result.policy
    assert isinstance(policy, Policy) and policy.task == "fetch/reach"
    env = policy.make_env()
    observation, _ = env.reset(seed=3)
    action, _ = policy.predict(observation)
    assert action.shape == env.action_space.shape and env.action_space.contains(action.astype(env.action_space.dtype))
    saved = policy.save(tmp_path / "elsewhere" / "reach_policy")
    assert saved.name == "reach_policy.zip"
    shutil.rmtree(tmp_path / "runs")  # no run folder left: the file alone must do
    np.save(tmp_path / "observation.npy", observation)
    script = ("import numpy as np\nfrom text2reward import Policy\np = Policy.load('elsewhere/reach_policy.zip')\n"
              "print(p.task, p.algo, *np.round(p.predict(np.load('observation.npy'))[0], 5))")
    loaded = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    task, algo, *numbers = loaded.stdout.split()
    assert (task, algo) == ("fetch/reach", "sac") and np.allclose([float(n) for n in numbers], np.round(action, 5), atol=1e-4)


def test_a_training_result_holds_its_policy(tmp_path):
    result = train_reward("expert", "fetch/reach", out_dir=tmp_path / "train", steps=100, eval_freq=100, eval_episodes=1, algo="sac",
                          overrides={**SHORT_HP, "final_eval_episodes": 1})
    policy = result.policy
    env = policy.make_env()
    action, _ = policy.predict(env.reset(seed=0)[0])
    assert action.shape == env.action_space.shape
    with pytest.raises(TypeError, match="steps must be a positive int or None, got 'abc'"):
        train_reward("expert", "fetch/reach", out_dir=tmp_path / "t2", steps="abc")  # type: ignore[arg-type]
    assert not (tmp_path / "t2").exists()
