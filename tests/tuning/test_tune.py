"""`t2r tune`: a reward's UPPER_CASE constants searched by Optuna, each trial a real (tiny) training in the sandbox.

The constant discovery, rewriting, search space, objective and pruner are tested alone on real Optuna studies;
the end-to-end tests tune a real heuristic run's candidate through the CLI, kill a tuning process mid-trial and
resume it."""

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from polling import wait_for
from short_training import SHORT_ALGO, SHORT_HP

from policies.curve import CurvePoint
from text2reward.errors import ConfigError
from text2reward.runs.records import ConstantChange
from text2reward.runs.store import RunStore
from text2reward.settings import RunConfig
from text2reward.tuning.constants import constants_diff, find_constants, require_tunable, rewrite
from text2reward.tuning.objective import curve_objective, objective, squash
from text2reward.tuning.pruning import TrialPruner
from text2reward.tuning.space import baseline_params, suggest
from text2reward.tuning.study import STUDY_FILE, counted, open_study
from text2reward.tuning.tune import tune_candidate

PROGRAM = '''"""A reward with constants of every kind."""
import numpy as np

# note: café, naïve (non-ASCII before the constants moves byte offsets)
K_REACH = 5.0  # 1/m, sharpness
W_REACH = 1.0  # weight of reach, range: 0.1..10
PENALTY = -0.5  # a penalty keeps its sign
N_STEPS: int = 3
OFFSET = 0.0
PINNED = 2.0  # range: 2..2
BACKWARDS = 3.0  # range: 5..1
NEG_RANGE = -1.0  # range: -10..-0.1
MIXED = 0.2  # range: -1..1
FLAG = True
lower = 1.0
TWICE = 1.0
TWICE = 2.0
NAMES = ("a", "b")


def compute_dense_reward(self, action):
    LOCAL = 4.0
    d = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    return W_REACH * np.exp(-K_REACH * d) + PENALTY * LOCAL, {}
'''

NO_CONSTANTS = '''import numpy as np


def compute_dense_reward(self, action):
    distance = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    return -distance, {"distance": -distance}
'''


# --- constants --------------------------------------------------------------------------------------------------


def test_constants_are_found_with_their_search_spaces():
    found = find_constants(PROGRAM)
    by_name = {c.name: c for c in found.constants}
    assert list(by_name) == ["K_REACH", "W_REACH", "PENALTY", "N_STEPS", "OFFSET", "PINNED", "BACKWARDS", "NEG_RANGE",
                             "MIXED", "TWICE"]  # no bools, lower-case names, tuples or function locals
    assert (by_name["K_REACH"].low, by_name["K_REACH"].high, by_name["K_REACH"].log) == (0.5, 50.0, True)
    assert (by_name["W_REACH"].low, by_name["W_REACH"].high, by_name["W_REACH"].explicit) == (0.1, 10.0, True)
    assert (by_name["PENALTY"].value, by_name["PENALTY"].low, by_name["PENALTY"].high) == (-0.5, -5.0, -0.05)
    assert by_name["N_STEPS"].is_int and (by_name["N_STEPS"].low, by_name["N_STEPS"].high) == (1, 30)
    assert (by_name["NEG_RANGE"].low, by_name["NEG_RANGE"].high, by_name["NEG_RANGE"].log) == (-10.0, -0.1, True)
    assert (by_name["MIXED"].low, by_name["MIXED"].high, by_name["MIXED"].log) == (-1.0, 1.0, False)  # spans zero: uniform
    assert (by_name["BACKWARDS"].low, by_name["BACKWARDS"].high) == (pytest.approx(0.3), 30.0)  # bad range: the default
    assert any("BACKWARDS" in w and "5..1" in w for w in found.warnings)
    assert "zero" in by_name["OFFSET"].skip_reason
    assert "pinned" in by_name["PINNED"].skip_reason
    assert "more than once" in by_name["TWICE"].skip_reason
    assert [c.name for c in found.tunable] == ["K_REACH", "W_REACH", "PENALTY", "N_STEPS", "BACKWARDS", "NEG_RANGE", "MIXED"]


def test_rewrite_changes_only_the_literals():
    new = rewrite(PROGRAM, {"K_REACH": 3.21456789, "PENALTY": -0.25, "N_STEPS": 7, "NEG_RANGE": -2.5})
    old_lines, new_lines = PROGRAM.splitlines(), new.splitlines()
    changed = {i for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b}
    assert len(old_lines) == len(new_lines) and len(changed) == 4
    assert "K_REACH = 3.215  # 1/m, sharpness" in new_lines  # rounded to 4 significant digits, comment kept
    assert "PENALTY = -0.25  # a penalty keeps its sign" in new_lines
    assert "N_STEPS: int = 7" in new_lines
    assert "NEG_RANGE = -2.5  # range: -10..-0.1" in new_lines
    values = find_constants(new).values()
    assert values["K_REACH"] == 3.215 and values["N_STEPS"] == 7 and isinstance(values["N_STEPS"], int)
    assert values["W_REACH"] == 1.0  # untouched
    with pytest.raises(ConfigError, match="NOPE"):
        rewrite(PROGRAM, {"NOPE": 1.0})


def test_constants_diff():
    diff = constants_diff({"A": 2.0, "B": -0.5, "C": 0.0}, {"A": 5.0, "B": -0.25, "C": 0.3})
    assert diff == [
        ConstantChange(name="A", parent=2.0, tuned=5.0, ratio=2.5),
        ConstantChange(name="B", parent=-0.5, tuned=-0.25, ratio=0.5),
        ConstantChange(name="C", parent=0.0, tuned=0.3, ratio=None),
    ]


def test_a_program_without_constants_gets_one_clear_line():
    with pytest.raises(ConfigError) as info:
        require_tunable(NO_CONSTANTS, "r0-s1")
    message = str(info.value)
    assert "candidate r0-s1's reward has no UPPER_CASE numeric constants to tune" in message
    assert "W_REACH = 1.0" in message and "\n" not in message
    with pytest.raises(ConfigError, match=r"no tunable constants \(OFFSET is zero"):
        require_tunable("OFFSET = 0.0\nFLAG = True\n", "r0-s0")


# --- the search space, the objective, the pruner -----------------------------------------------------------------


def test_suggestions_stay_in_bounds_keep_signs_and_types():
    space = find_constants(PROGRAM).tunable
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    seen = []
    for _ in range(40):
        trial = study.ask()
        values = suggest(trial, space)
        study.tell(trial, 0.0)
        seen.append(values)
        for constant in space:
            value = values[constant.name]
            assert constant.low - 1e-9 <= value <= constant.high + 1e-9, (constant.name, value)
            assert isinstance(value, int) == constant.is_int
        assert values["PENALTY"] < 0 and values["NEG_RANGE"] < 0 and values["K_REACH"] > 0
    assert any(v["MIXED"] < 0 for v in seen) and any(v["MIXED"] > 0 for v in seen)
    # the parent's values as the first trial: magnitudes for one-signed log spaces
    params = baseline_params(space)
    assert params == {"K_REACH": 5.0, "W_REACH": 1.0, "PENALTY": 0.5, "N_STEPS": 3, "BACKWARDS": 3.0, "NEG_RANGE": 1.0, "MIXED": 0.2}
    study.enqueue_trial(params)
    assert suggest(study.ask(), space)["PENALTY"] == -0.5


def test_the_tie_breaker_never_outweighs_one_success_step():
    returns = [-1e6, -5000.0, -50.0, -6.0, -0.1, 0.0, 0.1, 7.0, 4000.0, 1e6, float("nan")]
    assert all(0 < squash(r) < 1 for r in returns)
    finite = sorted(r for r in returns if math.isfinite(r))
    assert [squash(r) for r in finite] == sorted(squash(r) for r in finite)  # monotone
    assert squash(-6.0) < squash(-5.0)  # a Fetch-sized difference still registers
    for episodes in (1, 2, 5, 100):
        step = 1 / episodes
        worst_with_more_success = objective(CurvePoint(steps=1, success_rate=step, mean_native_return=-1e9), episodes)
        best_with_less = objective(CurvePoint(steps=1, success_rate=0.0, mean_native_return=1e9), episodes)
        assert worst_with_more_success > best_with_less
        assert (objective(CurvePoint(steps=1, success_rate=step, mean_progress=0.0), episodes)
                > objective(CurvePoint(steps=1, success_rate=0.0, mean_progress=1.0), episodes))


def test_among_equal_success_progress_toward_the_rule_decides_not_the_native_return():
    """The tuner's tie-break is the ranking's (policies.score): progress measured by the task's own rule; the native
    return only speaks for evaluations that did not measure progress."""
    closer = CurvePoint(steps=1, success_rate=0.0, mean_progress=0.6, mean_native_return=10.0)
    richer = CurvePoint(steps=1, success_rate=0.0, mean_progress=0.2, mean_native_return=4000.0)
    assert objective(closer, 5) > objective(richer, 5)
    older = CurvePoint(steps=1, success_rate=0.0, mean_native_return=4000.0)
    assert objective(older, 5) > objective(CurvePoint(steps=1, success_rate=0.0, mean_native_return=10.0), 5)


def test_a_trial_scores_the_area_under_its_success_curve():
    episodes = 10
    late = [CurvePoint(steps=s, success_rate=r, mean_native_return=10.0) for s, r in ((100, 0.0), (200, 0.0), (300, 0.0), (400, 1.0))]
    soon = [CurvePoint(steps=s, success_rate=r, mean_native_return=10.0) for s, r in ((100, 0.0), (200, 1.0), (300, 1.0), (400, 1.0))]
    assert curve_objective(soon, episodes) > curve_objective(late, episodes)  # same final success, reached sooner
    assert curve_objective(late, episodes) == pytest.approx(objective(late[-1], episodes) / 4 + 3 * objective(late[0], episodes) / 4)
    # a trial stopped at the success threshold keeps its last value to the end of the budget
    assert curve_objective(soon[:2], episodes, budget=400) == pytest.approx(curve_objective(soon, episodes))
    # evaluations weigh by the steps they cover, not by their count
    uneven = [CurvePoint(steps=100, success_rate=1.0), CurvePoint(steps=400, success_rate=0.0)]
    assert curve_objective(uneven, episodes) == pytest.approx((objective(uneven[0], episodes) + 3 * objective(uneven[1], episodes)) / 4)
    assert curve_objective([], episodes) == 0.0


def test_the_winner_must_beat_the_parents_constants_by_the_margin():
    from text2reward.tuning.study import pick_winner

    def finished(values: dict[int, float | None]) -> list[optuna.trial.FrozenTrial]:
        study = optuna.create_study(direction="maximize")
        for number, value in values.items():
            state = optuna.trial.TrialState.COMPLETE if value is not None else optuna.trial.TrialState.PRUNED
            study.add_trial(optuna.trial.create_trial(value=value, state=state, user_attrs={"baseline": number == 0}))
        return [t for t in study.trials if t.state.name == "COMPLETE"]

    assert [(t.number, kept) for t, kept in [pick_winner(finished({0: 0.30, 1: 0.35, 2: 0.20}), 0.1)]] == [(0, True)]
    assert [(t.number, kept) for t, kept in [pick_winner(finished({0: 0.30, 1: 0.35, 2: 0.40}), 0.1)]] == [(2, False)]
    assert [(t.number, kept) for t, kept in [pick_winner(finished({0: 0.30, 1: 0.35}), 0.0)]] == [(1, False)]
    assert [(t.number, kept) for t, kept in [pick_winner(finished({0: 0.50, 1: 0.35}), 0.1)]] == [(0, False)]  # the parent won
    assert [(t.number, kept) for t, kept in [pick_winner(finished({0: None, 1: 0.05, 2: 0.01}), 0.1)]] == [(1, False)]  # pruned


def test_the_pruner_stops_a_trial_below_the_median(tmp_path):
    study = open_study(tmp_path, "unit", seed=0, trials=5, budget=400)
    for value in (0.6, 0.5):  # two finished trials: the median pruner's start-up
        trial = study.ask()
        for steps in (50, 100, 200, 300, 400):
            trial.report(value, steps)
        study.tell(trial, value)
    good, bad = study.ask(), study.ask()
    pruner = TrialPruner({"good": good, "bad": bad}, lambda curve: curve[-1].success_rate)
    pruner.add_point("good", CurvePoint(steps=50, success_rate=0.9))
    pruner.add_point("bad", CurvePoint(steps=50, success_rate=0.0))
    assert pruner.decide(["good", "bad"]) == {}  # before a quarter of the budget nobody is judged
    pruner.add_point("good", CurvePoint(steps=100, success_rate=0.9))
    pruner.add_point("bad", CurvePoint(steps=100, success_rate=0.1))
    decisions = pruner.decide(["good", "bad"])
    assert list(decisions) == ["bad"] and decisions["bad"].steps == 100 and "pruned by the tuner" in decisions["bad"].reason
    assert study.trials[bad.number].intermediate_values == {50: 0.0, 100: 0.1}
    assert pruner.decide(["good", "bad"]) == {}  # decided once
    assert (tmp_path / STUDY_FILE).is_file()


def test_trials_left_running_by_a_dead_process_are_settled_from_their_folders(tmp_path):
    from text2reward.tuning.study import settle_orphans, trial_dir

    study = open_study(tmp_path, "orphans", seed=0, trials=3, budget=300)
    orphans = [study.ask() for _ in range(3)]
    for trial in orphans:
        trial.suggest_float("W", 0.1, 10.0, log=True)
        trial_dir(tmp_path, trial.number).mkdir()
    result = {"success_rate": 0.5, "mean_native_return": -3.0, "stopped_early": None}
    (trial_dir(tmp_path, 0) / "done.json").write_text(json.dumps({"result": result}))  # finished, never told
    (trial_dir(tmp_path, 1) / "error.json").write_text(json.dumps({"reason": "the reward returned NaN"}))  # failed itself
    said = settle_orphans(study, tmp_path, lambda r: objective(CurvePoint(steps=r.steps, success_rate=r.success_rate,
                                                                          mean_native_return=r.mean_native_return), 2))
    states = [t.state.name for t in study.trials]
    assert states[:3] == ["COMPLETE", "FAIL", "FAIL"] and study.trials[0].value == pytest.approx(
        objective(CurvePoint(steps=0, success_rate=0.5, mean_native_return=-3.0), 2))
    assert study.trials[3].state.name == "WAITING" and len(said) == 3 and "trial 2 was interrupted" in said[2]
    retry = study.ask()
    assert retry.number == 3 and retry.suggest_float("W", 0.1, 10.0, log=True) == pytest.approx(orphans[2].params["W"])
    assert retry.user_attrs.get("retry_of") == 2
    assert [t.number for t in counted(study, tmp_path)] == [0, 1]  # the interrupted one does not count


# --- end to end: real training -----------------------------------------------------------------------------------


def t2r(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "text2reward.cli", *map(str, args)], capture_output=True, text=True, **kwargs)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A real heuristic run with one trained candidate (r0-s0), on a tiny budget; tests tune copies of it."""
    from text2reward.loop import start_run

    config = RunConfig.of(task_id="fetch/reach", backend="heuristic", rounds=1, samples=1, steps=300, workers=2, final_seeds=0,
                          compare_expert=False, video=False, screen=False, eval_freq=100, eval_episodes=2, overrides=SHORT_HP, algo=SHORT_ALGO,
                          success_threshold=1.01)
    return start_run(config, tmp_path_factory.mktemp("base"))


def copy_run(store: RunStore, runs_dir: Path) -> RunStore:
    shutil.copytree(store.root, runs_dir / store.run_id)
    return RunStore(runs_dir / store.run_id)


def trials_of(store: RunStore, candidate_id: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=candidate_id, storage=f"sqlite:///{store.tune_dir(candidate_id) / STUDY_FILE}").trials


@pytest.mark.slow
def test_tune_three_trials_writes_study_winner_and_diff(trained_run, tmp_path):
    from text2reward.dashboard.runview import load_run
    from text2reward.runs.ranking import best_candidate

    store = copy_run(trained_run, tmp_path)
    started = time.perf_counter()
    result = t2r("tune", store.run_id, "--trials", 3, "--runs-dir", tmp_path, timeout=400)
    assert result.returncode == 0, result.stdout + result.stderr
    elapsed = time.perf_counter() - started
    tune_dir = store.tune_dir("r0-s0")
    study_trials = trials_of(store, "r0-s0")
    assert len(study_trials) == 3 and len(counted(optuna.load_study(study_name="r0-s0", storage=f"sqlite:///{tune_dir / STUDY_FILE}"), tune_dir)) == 3
    assert study_trials[0].user_attrs.get("baseline") is True  # the parent's own constants first
    assert all((tune_dir / f"trial_{t.number}" / "done.json").is_file() for t in study_trials)
    for trial in study_trials:  # every trial trained its own rewrite of the parent's program
        assert find_constants((tune_dir / f"trial_{trial.number}" / "reward.py").read_text()).values()["K_REACH"] == pytest.approx(
            trial.params["K_REACH"], rel=1e-3)
    # the winner: a candidate listed with the others, right after its parent, that ranks
    tuned = store.candidate("r0-s0-tuned")
    assert tuned is not None and [c.id for c in store.candidates()] == ["r0-s0", "r0-s0-tuned"]
    assert tuned.parent == "r0-s0" and tuned.status == "trained" and tuned.code_file == "tune/r0-s0/reward.py"
    summary = tuned.tuned
    assert summary.study == "tune/r0-s0/study.db" and summary.trials == 3 and summary.steps == 300
    assert summary.complete + summary.pruned + summary.failed == 3
    top = max((t for t in study_trials if t.state.name == "COMPLETE"), key=lambda t: (t.value, -t.number))
    baseline = study_trials[0]
    kept = baseline.state.name == "COMPLETE" and top.number != 0 and top.value < baseline.value + summary.margin
    best_trial = baseline if kept else top  # the parent's constants stay unless a trial beats them by the margin
    assert summary.margin == pytest.approx(1 / 2) and summary.kept_parent == kept  # 2 evaluation episodes
    assert summary.trial == best_trial.number and summary.objective == pytest.approx(best_trial.value)
    winner_result = json.loads((tune_dir / f"trial_{best_trial.number}" / "train" / "result.json").read_text())
    assert tuned.training.success_rate == winner_result["success_rate"] and tuned.training.steps == winner_result["steps"]
    assert (store.root / tuned.code_file).read_text() == (tune_dir / f"trial_{best_trial.number}" / "reward.py").read_text()
    assert [d.name for d in summary.constants_diff] == ["K_REACH", "W_REACH", "W_SUCCESS"]
    tuned_values = find_constants((store.root / tuned.code_file).read_text()).values()
    for change in summary.constants_diff:
        assert change.parent == 5.0 and change.tuned == tuned_values[change.name]
        assert change.ratio == pytest.approx(change.tuned / change.parent, rel=1e-5)
    assert best_candidate(store.candidates()) is not None
    # the CLI printed the diff table and the winner's success; the report and the dashboard show the diff
    assert "K_REACH" in result.stdout and "W_SUCCESS" in result.stdout and "winner: trial" in result.stdout
    assert f"success {tuned.training.success_rate:.2f}" in result.stdout
    assert ("no trial beat the parent's own constants" in result.stdout) == kept
    report = (store.root / "report.md").read_text()
    assert "## Tuned constants: r0-s0-tuned (from r0-s0)" in report and "| K_REACH | 5 |" in report
    view = load_run(store, url_for=lambda path: None)
    card = next(c for r in view.rounds for c in r.candidates if c.id == "r0-s0-tuned")
    assert card.parent == "r0-s0" and card.diff_base == "r0-s0" and card.replies == []
    assert [d.name for d in card.tuning.constants_diff] == ["K_REACH", "W_REACH", "W_SUCCESS"]
    print(f"3 tiny trials through the CLI: {elapsed:.1f} s")


@pytest.mark.slow
def test_tune_resumes_after_a_kill_without_redoing_finished_trials(trained_run, tmp_path):
    from text2reward.tuning import tune_candidate

    store = copy_run(trained_run, tmp_path)
    tune_dir = store.tune_dir("r0-s0")
    messages: list[str] = []
    first = tune_candidate(store, "r0-s0", 2, emit=lambda e: messages.append(e.text))
    assert first.tuned.trials == 2 and sorted(p.name for p in tune_dir.glob("trial_*")) == ["trial_0", "trial_1"]
    finished = {n: (tune_dir / f"trial_{n}" / "done.json").stat().st_mtime_ns for n in (0, 1)}

    # a third trial, killed mid-training with its whole process group (the tuner and its worker)
    process = subprocess.Popen([sys.executable, "-m", "text2reward.cli", "tune", store.run_id, "--trials", "3", "--runs-dir", tmp_path],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               process_group=0)  # a group of its own, in this session: its jobs fork from the shared server
    try:
        wait_for(lambda: (tune_dir / "trial_2" / "progress.json").is_file(), timeout=240, what="trial 2 to start training")
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert not (tune_dir / "trial_2" / "done.json").exists()
    killed = trials_of(store, "r0-s0")[2]
    assert killed.state.name == "RUNNING"

    messages.clear()
    again = tune_candidate(store, "r0-s0", 3, emit=lambda e: messages.append(e.text))
    trials = trials_of(store, "r0-s0")
    assert [t.state.name in ("COMPLETE", "PRUNED") for t in trials[:2]] == [True, True] and trials[2].state.name == "FAIL"
    assert any("trial 2 was interrupted" in m for m in messages)
    assert len(trials) == 4 and trials[3].user_attrs.get("retry_of") == 2 and trials[3].params == killed.params
    assert trials[3].state.name in ("COMPLETE", "PRUNED")
    assert {n: (tune_dir / f"trial_{n}" / "done.json").stat().st_mtime_ns for n in (0, 1)} == finished  # never redone
    assert (tune_dir / "trial_3" / "done.json").is_file()
    assert again.tuned.trials == 3 and again.tuned.failed == 0  # the killed trial does not count

    # asking again for the same number trains nothing
    before = sorted(p.name for p in tune_dir.glob("trial_*"))
    tune_candidate(store, "r0-s0", 3)
    assert sorted(p.name for p in tune_dir.glob("trial_*")) == before and len(trials_of(store, "r0-s0")) == 4
    with pytest.raises(ConfigError, match="trains each trial for 300 steps"):
        tune_candidate(store, "r0-s0", 4, steps=500)


def test_cli_refuses_a_program_without_constants_and_an_unknown_candidate(trained_run, tmp_path):
    store = copy_run(trained_run, tmp_path)
    parent = store.candidate("r0-s0")
    (store.root / parent.code_file).write_text(NO_CONSTANTS)
    result = t2r("tune", store.run_id, "--trials", 3, "--runs-dir", tmp_path, timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: candidate r0-s0's reward has no UPPER_CASE numeric constants to tune; put weights, scales and thresholds in "
        "module-level constants like W_REACH = 1.0 (a comment `# range: 0.1..10` bounds one)"]
    assert not store.tune_dir("r0-s0").exists()  # nothing trained, no study
    with pytest.raises(ConfigError, match=r"^--min-gain is a success rate between 0 and 1, got 2"):
        tune_candidate(store, "r0-s0", 3, min_gain=2)
    result = t2r("tune", store.run_id, "--candidate", "r3-s9", "--trials", 3, "--runs-dir", tmp_path, timeout=120)
    assert result.returncode == 1 and "has no candidate 'r3-s9'; its trained candidates are r0-s0" in result.stderr


@pytest.mark.slow
def test_run_with_tune_tunes_the_best_after_the_last_round_and_compares_the_winner(tmp_path):
    """`t2r run --tune N`: the best candidate is tuned once the rounds are done, the tuned candidate ranks with the
    others, the final comparison re-trains whichever is best, and a resume trains nothing more."""
    from text2reward.loop import resume_run, start_run
    from text2reward.runs.ranking import best_candidate

    config = RunConfig.of(task_id="fetch/reach", backend="heuristic", rounds=1, samples=1, steps=300, workers=2, final_seeds=1,
                          compare_expert=False, video=False, screen=False, eval_freq=100, eval_episodes=2, overrides=SHORT_HP, algo=SHORT_ALGO,
                          success_threshold=1.01, tune=2)
    messages: list[str] = []
    store = start_run(config, tmp_path, emit=lambda e: messages.append(e.text))
    tuned = store.candidate("r0-s0-tuned")
    assert tuned is not None and tuned.parent == "r0-s0" and tuned.tuned.trials == 2
    assert any("tuning r0-s0's constants: 2 trial(s)" in m for m in messages)
    best = best_candidate(store.candidates())
    final = store.read_json("final/summary.json")
    assert final["best_candidate"] == best.id and store.state().status == "finished"
    trained = sorted(p.stat().st_mtime for p in store.root.glob("tune/r0-s0/trial_*/done.json"))
    resume_run(tmp_path, store.run_id)
    assert sorted(p.stat().st_mtime for p in store.root.glob("tune/r0-s0/trial_*/done.json")) == trained
