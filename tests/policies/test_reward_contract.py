"""One contract for reward programs: what the prompt promises, what `validate` accepts and what training
runs are the same thing. Real jailed workers, real MuJoCo states, tiny budgets."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest
from scipy.spatial import distance
from scipy.spatial.transform import Rotation
from scipy.special import expit

from policies.reward_program import PREIMPORTED, ProgramReward
from sim_envs import get_task
from sim_envs.errors import ConfigError, RewardProgramError
from text2reward.generation.extraction import extract_code
from text2reward.generation.prompting import build_initial_messages
from text2reward.sandbox import (
    Limits,
    SandboxedReward,
    collect_states,
    reward_from_file,
    run_reward,
    static_check,
    validate,
)
from text2reward.sandbox.isolation import check
from text2reward.sandbox.static import ALLOWED_MODULES

MECHANISMS = [
    pytest.param(m, marks=pytest.mark.skipif(isinstance(check(m), str), reason=f"{m} unavailable here: {check(m)}"))
    for m in ("bubblewrap", "landlock")
]

NO_IMPORTS = """
def compute_dense_reward(self, action):
    d = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    return -d + 0.0 * math.pi, {"reach": -d}
"""

FORBIDDEN_IMPORT = """
import os
import numpy as np

def compute_dense_reward(self, action):
    d = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    return -d, {"reach": -d}
"""

VALID = """
import numpy as np

def compute_dense_reward(self, action):
    d = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    return 1.0 - np.tanh(5.0 * d), {"reach": 1.0 - np.tanh(5.0 * d)}
"""

# the forms Text2Reward's published GPT-4 rewards used, plus the other allowed scipy modules
SCIPY = """
import numpy as np
import scipy.spatial.distance
from scipy.spatial import distance
from scipy.spatial.transform import Rotation
from scipy.special import expit
from scipy import linalg

def compute_dense_reward(self, action):
    ee, goal = self.robot.ee_position, self.goal_position
    d = float(distance.euclidean(ee, goal))
    c = float(scipy.spatial.distance.cdist(ee[None, :], goal[None, :])[0, 0])
    turned = Rotation.from_euler("z", 90, degrees=True).apply(np.array(ee))  # scipy refuses read-only buffers
    n = float(linalg.norm(action))
    return -d, {"euclidean": d, "cdist": c, "turned_y": float(turned[1]), "squashed": float(expit(-d)), "action": n}
"""


@pytest.fixture(scope="module")
def reach():
    return get_task("metaworld/reach-v3")


@pytest.fixture(scope="module")
def states(reach):
    return collect_states(reach, n_random=12, n_scripted=0, seed=1)


def training_verdict(path, view, action):
    """Build the reward `t2r train --reward FILE.py` builds and make one call: None, or why it is refused."""
    try:
        reward = reward_from_file(str(path))
    except RewardProgramError as exc:
        return str(exc)
    try:
        with reward:
            reward(view, action, 0.0, False)
    except RewardProgramError as exc:
        return str(exc)
    return None


# --- 1. one verdict for one program ---


@pytest.mark.parametrize("name, code, ok", [("no_imports", NO_IMPORTS, True), ("forbidden_import", FORBIDDEN_IMPORT, False), ("valid", VALID, True)])
def test_validate_and_training_give_one_verdict(name, code, ok, reach, states, tmp_path):
    path = tmp_path / f"{name}.py"
    path.write_text(code)
    report = validate(code, reach, states)
    refused = training_verdict(path, *states[0])
    assert report.ok is ok, report.errors
    assert (refused is None) is ok, refused
    if not ok:  # the same static message, word for word
        assert report.errors and all(error in refused for error in report.errors)
        assert "import of 'os' is not allowed" in refused


def test_pre_imported_names_are_the_same_in_process_and_in_the_jail(states):
    """np and math without an import: the trusted in-process reward and the jailed worker agree."""
    assert PREIMPORTED == {"np": "numpy", "math": "math"}
    trusted = ProgramReward(NO_IMPORTS)
    with SandboxedReward(NO_IMPORTS, "no_imports") as jailed:
        for view, action in states[:3]:
            assert jailed(view, action, 0.0, False) == trusted(view, action, 0.0, False)


# --- 2. the signature: callable as (self, action) ---

ACCEPTED = ["self, action, obs=None", "self, action, *args, **kwargs", "self, action, scale=1.0", "self, action, *, k=2"]
REFUSED = {
    "self": "takes 1 parameters",
    "self, action, obs": "requires 3 positional parameters",
    "self, action, *, k": "keyword-only parameter 'k' without a default",
}


def with_signature(params: str) -> str:
    return f"import numpy as np\n\ndef compute_dense_reward({params}):\n    d = float(np.linalg.norm(self.robot.ee_position - self.goal_position))\n    return -d, {{'reach': -d}}\n"


@pytest.mark.parametrize("params", ACCEPTED)
def test_signatures_callable_as_self_action_are_accepted(params, reach, states):
    code = with_signature(params)
    assert static_check(code) == []
    assert extract_code(f"```python\n{code}```").ok
    ProgramReward(code)
    report = validate(code, reach, states)
    assert report.ok, report.errors


@pytest.mark.parametrize("params, message", REFUSED.items())
def test_signatures_that_cannot_be_called_as_self_action_are_refused(params, message):
    code = with_signature(params)
    (problem,) = static_check(code)
    assert message in problem and "must be compute_dense_reward(self, action)" in problem
    extraction = extract_code(f"```python\n{code}```")
    assert not extraction.ok and message in extraction.error
    with pytest.raises(RewardProgramError, match=re.escape(message)):
        ProgramReward(code)


# --- 3. pure-numeric scipy modules ---


def test_scipy_rewards_validate_and_return_the_right_numbers_in_the_jail(reach, states, tmp_path):
    assert validate(SCIPY, reach, states).ok
    result = run_reward(SCIPY, states[:4])
    assert result.ok, result.error
    path = tmp_path / "scipy_reward.py"
    path.write_text(SCIPY)
    with reward_from_file(str(path)) as training:
        for (view, action), (total, components) in zip(states[:4], result.outputs):
            ee, goal = view.robot.ee_position, view.goal_position
            d = math.dist(ee, goal)
            assert components["euclidean"] == pytest.approx(d, rel=1e-12)
            assert components["cdist"] == pytest.approx(d, rel=1e-12)
            assert components["turned_y"] == pytest.approx(ee[0], abs=1e-12)  # +90 degrees about z: x -> y
            assert components["squashed"] == pytest.approx(1 / (1 + math.exp(d)), rel=1e-12)
            assert components["action"] == pytest.approx(float(np.linalg.norm(action)), rel=1e-6)
            assert total == pytest.approx(-d, rel=1e-12)
            assert training(view, action, 0.0, False) == (total, components)  # the training worker agrees
    # and in-process with the same libraries
    assert float(distance.euclidean([0, 0, 0], [3, 4, 0])) == 5.0
    assert Rotation.from_euler("z", 90, degrees=True).apply([1.0, 0.0, 0.0])[1] == pytest.approx(1.0)
    assert expit(0.0) == 0.5


@pytest.mark.parametrize(
    "line",
    [
        "import scipy", "import scipy.io", "from scipy import io", "from scipy.io import loadmat", "import scipy.datasets",
        "from scipy import datasets", "import scipy.misc", "import scipy.stats", "import scipy.optimize", "import os",
        "import subprocess", "import ctypes", "import importlib", "from numpy import ctypeslib",
    ],
)
def test_io_and_code_loading_modules_stay_refused(line):
    problems = static_check(f"{line}\n\ndef compute_dense_reward(self, action):\n    return 0.0\n")
    assert problems and problems[0].startswith("line 1:"), problems


@pytest.mark.parametrize(
    "body, message",
    [
        ("return float(scipy.io.loadmat('x'))", "'scipy.io' is not allowed"),
        ("return float(scipy.datasets.face().sum())", "'scipy.datasets' is not allowed"),
        ("return float(scipy.spatial.ConvexHull(action[None], qhull_options='TI /etc/passwd').volume)", "'qhull_options' is not allowed"),
        ("return float(scipy.spatial.delaunay_plot_2d(None) is None)", "'.delaunay_plot_2d' is not allowed"),
    ],
)
def test_scipy_reaching_beyond_the_list_is_refused(body, message):
    problems = static_check(f"import scipy.spatial\n\ndef compute_dense_reward(self, action):\n    {body}\n")
    assert any(message in p for p in problems), problems


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_every_allowed_module_imports_in_each_jail(mechanism, states):
    """The whole allow-list, imported by one program, really loads in a validation child and in a
    training worker of each jail, and computes there."""
    imports = "\n".join(f"import {name}" for name in ALLOWED_MODULES)
    code = (
        f"{imports}\n\ndef compute_dense_reward(self, action):\n"
        "    d = float(scipy.spatial.distance.euclidean(self.robot.ee_position, self.goal_position))\n"
        "    r = float(scipy.spatial.transform.Rotation.from_rotvec([0.0, 0.0, d]).magnitude())\n"
        "    return d, {'d': d, 'r': r, 'erf': float(scipy.special.erf(d)), 'det': float(scipy.linalg.det(numpy.eye(2) * d))}\n"
    )
    assert static_check(code) == []
    result = run_reward(code, states[:2], Limits(isolation=mechanism))
    assert result.ok, result.error
    with SandboxedReward(code, "all_modules", Limits(isolation=mechanism)) as training:
        for (view, action), (total, components) in zip(states[:2], result.outputs):
            d = math.dist(view.robot.ee_position, view.goal_position)
            assert components["r"] == pytest.approx(d, rel=1e-12) and components["erf"] == pytest.approx(math.erf(d), rel=1e-12)
            assert components["det"] == pytest.approx(d * d, rel=1e-12)
            assert training(view, action, 0.0, False) == (total, components)


# --- 4. the prompt states that contract ---


def test_prompt_names_exactly_the_allowed_modules_and_the_pre_imported_names():
    user = build_initial_messages(get_task("metaworld/reach-v3"))[1]["content"]
    (imports,) = [line for line in user.splitlines() if line.startswith("- Imports:")]
    named = re.findall(r"`([\w.]+)`", imports.split("import only", 1)[1])
    assert tuple(named) == ALLOWED_MODULES
    for alias in PREIMPORTED:
        assert f"`{alias}`" in imports.split("import only", 1)[0] and "no import needed" in imports
    for module in named:
        assert static_check(f"import {module}\n\ndef compute_dense_reward(self, action):\n    return 0.0\n") == [], module
    assert "only `numpy` (as `np`) and `math`" not in user


def test_prompt_states_a_derived_tasks_episode_length():
    from sim_envs import derive_task

    task = derive_task("fetch/reach", id="custom/contract_reach_37", description="Reach.", is_success=lambda v, i: False,
                       success_doc="never", max_episode_steps=37)
    assert "An episode lasts at most 37 steps." in build_initial_messages(task)[1]["content"]


# --- 7. messages name flags that exist ---


def test_heuristic_refusal_names_real_run_flags():
    import typer

    from sim_envs.view_base import StateView
    from text2reward.cli import app
    from text2reward.generation.llm.heuristic_plans import build_plan

    task = dataclasses.replace(get_task("fetch/reach"), view_class=StateView)
    with pytest.raises(ConfigError) as caught:
        build_plan(task)
    named = set(re.findall(r"--[a-z][a-z-]+", str(caught.value)))
    run = typer.main.get_command(app).commands["run"]
    flags = {opt for param in run.params for opt in param.opts}
    assert named and named <= flags, named - flags


# --- the CLI: `t2r validate` and `t2r train --reward FILE.py` agree ---

TIME_BOMB = """
calls = [0]


def compute_dense_reward(self, action):
    calls[0] += 1
    if calls[0] == 450:  # validation makes 400 calls (200 states, twice)
        while True:
            pass
    return float(self.torso.x_velocity), {"forward": float(self.torso.x_velocity)}
"""

DUNDER = """
def compute_dense_reward(self, action):
    return float(self.torso.x_velocity.__class__.__name__ == "ndarray")
"""


def test_t2r_train_refuses_what_t2r_validate_refuses_and_jails_what_it_accepts(tmp_path):
    """A file the static pass refuses is refused by both commands with the same message; a file it
    accepts trains in the jail, where a time bomb validation could not see (call 450) stops training."""
    import json

    from typer.testing import CliRunner

    from text2reward.cli import app

    runner = CliRunner()
    tiny = ["--steps", "128", "--eval-freq", "128", "--eval-episodes", "1", "--device", "cpu",
            "--hp", "n_steps=64", "--hp", "batch_size=64", "--hp", "n_epochs=1"]
    dunder = tmp_path / "dunder.py"
    dunder.write_text(DUNDER)
    checked = runner.invoke(app, ["validate", "--task", "halfcheetah/forward", "--code", str(dunder), "--json"])
    trained = runner.invoke(app, ["train", "--task", "halfcheetah/forward", "--reward", str(dunder), "--out", str(tmp_path / "d"), *tiny])
    assert checked.exit_code == 1 and trained.exit_code == 1
    errors = json.loads(checked.stdout)["errors"]
    assert any("'.__class__' is not allowed" in error for error in errors)
    assert all(error in " ".join(trained.output.split()) for error in errors)
    assert not (tmp_path / "d" / "result.json").exists()

    bomb = tmp_path / "bomb.py"
    bomb.write_text(TIME_BOMB)
    assert runner.invoke(app, ["validate", "--task", "halfcheetah/forward", "--code", str(bomb)]).exit_code == 0
    trained = runner.invoke(app, ["train", "--task", "halfcheetah/forward", "--reward", str(bomb), "--out", str(tmp_path / "b"), *tiny])
    assert trained.exit_code == 1 and "failed at call 450" in trained.output
    result = json.loads((tmp_path / "b" / "result.json").read_text())
    assert "jail" in result["reward_isolation"] and "failed at call 450" in result["reward_failure"]
