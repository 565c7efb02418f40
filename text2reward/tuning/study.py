"""The Optuna study of one candidate: stored in the run (SQLite), resumable, and honest about killed trials.

Why SQLite in the run folder: the study is an artefact like any other (a person can open it with
`optuna-dashboard` or `optuna.load_study`), it moves with the run, and a rerun of `t2r tune` opens it again
(`load_if_exists`) so finished trials are never redone.

Which trials count toward the requested number: COMPLETE and PRUNED ones, and FAIL ones whose training
failed for itself (their folder holds the worker's `error.json`: the reward broke with those constants, and
would again). A trial left RUNNING by a killed process is settled on resume from its folder: a training that
finished (`done.json`) is told its result; one that was cut short is marked FAIL and its constants are queued
again, so a fresh trial retries exactly them (the kill was not their fault).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from text2reward.training.job import ERROR_FILE
from text2reward.training.pool import job_done

STUDY_FILE = "study.db"
TRIAL_DIR = "trial_{number}"


def trial_dir(tune_dir: Path, number: int) -> Path:
    """Where trial `number` writes its program and trains (the training job's folder)."""
    return Path(tune_dir) / TRIAL_DIR.format(number=number)


def open_study(tune_dir: Path, name: str, seed: int, trials: int, budget: int) -> Any:
    """The study in `<tune_dir>/study.db`, created or reopened.

    TPE (Bayesian optimisation with tree-structured Parzen estimators), multivariate since a reward's weights
    act together, seeded by the run's seed; its first few trials sample at random (a third of the trials, 3 to
    10). The median pruner stops a trial whose best objective so far is below the median of the finished trials
    at the same step, once 2 trials have finished and from a quarter of the budget on (before that a short
    training says little), as a round's early stopping does."""
    import optuna  # ~65 ms: this module loads with every `t2r` command; only a study pays it

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=min(10, max(3, trials // 3)), multivariate=True,
                                         constant_liar=True)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=max(1, budget // 4), n_min_trials=2)
    Path(tune_dir).mkdir(parents=True, exist_ok=True)
    return optuna.create_study(storage=f"sqlite:///{Path(tune_dir).resolve() / STUDY_FILE}", study_name=name,
                               direction="maximize", sampler=sampler, pruner=pruner, load_if_exists=True)


def counted(study: Any, tune_dir: Path) -> list[Any]:
    """The finished trials that count toward the requested number (see the module docstring)."""
    from optuna.trial import TrialState  # Optuna (~65 ms): only a study pays it

    finished = []
    for trial in study.get_trials(deepcopy=False):
        if trial.state in (TrialState.COMPLETE, TrialState.PRUNED):
            finished.append(trial)
        elif trial.state == TrialState.FAIL and (trial_dir(tune_dir, trial.number) / ERROR_FILE).is_file():
            finished.append(trial)
    return finished


def settle_orphans(study: Any, tune_dir: Path, score: Any) -> list[str]:
    """Settle trials a killed process left RUNNING (the caller holds the run's lock, so no live process owns them).
    `score(result) -> float` scores a finished training. Returns what was done, one line per trial."""
    from optuna.trial import TrialState  # Optuna (~65 ms): only a study pays it

    said = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        folder = trial_dir(tune_dir, trial.number)
        record = job_done(folder)
        if record is not None:
            result = record.result
            if result.stopped_behind:
                study.tell(trial.number, state=TrialState.PRUNED)
            else:
                study.tell(trial.number, score(result))
            said.append(f"trial {trial.number} had finished training before the process stopped: recorded")
            continue
        study.tell(trial.number, state=TrialState.FAIL)
        if (folder / ERROR_FILE).is_file():
            said.append(f"trial {trial.number} had failed before the process stopped: recorded as failed")
            continue
        study.enqueue_trial(dict(trial.params), user_attrs={"retry_of": trial.number})
        said.append(f"trial {trial.number} was interrupted: marked failed, and its constants queued for a fresh trial")
    return said


def pick_winner(complete: list[Any], margin: float) -> tuple[Any, bool]:
    """The winning trial among COMPLETE ones, and whether it is the parent's own constants kept for lack of a real win.

    Why a margin: every trial trains once, on one seed, so the best of N trials beats the parent by luck alone as N
    grows (a maximum of noisy scores), and a winner chosen that way can lose on the next seed. A trial replaces the
    parent's constants (the study's baseline trial) only when it scores at least `margin` above it; otherwise the
    baseline wins. Without a completed baseline trial (pruned, or failed) the best trial wins outright."""
    best = max(complete, key=lambda t: (t.value, -t.number))
    baseline = next((t for t in complete if t.user_attrs.get("baseline")), None)
    if baseline is None or best.number == baseline.number or best.value >= baseline.value + margin:
        return best, False
    return baseline, True
