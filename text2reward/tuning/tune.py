"""`t2r tune`: tune one candidate's constants with Optuna, each trial a short training, the winner a new candidate.

Why trials are training jobs like any other (`training.job`, run by the pool): a trial's reward runs in the
sandbox's jail, a killed worker costs only its trial, and every trial leaves the same files a candidate's
training does. Trials run W at a time (the run's `workers`), asked of the study in batches of W (TPE's
"constant liar" keeps a batch's trials apart); a batch ends when its slowest trial does, and a pruned trial
ends early. Every trial trains on the run's seed, so trials differ by their constants alone.

Layout, for a candidate `r1-s0`:
    tune/r1-s0/study.db                  the Optuna study (SQLite; `load_if_exists`, so a rerun resumes)
    tune/r1-s0/trial_<n>/reward.py       trial n's program (the parent's, with its constants rewritten)
    tune/r1-s0/trial_<n>/train/...       its training, as any job's (job.json, progress.json, done.json)
    tune/r1-s0/reward.py                 the winner's program
    tune/r1-s0/candidate.json            the tuned candidate `r1-s0-tuned` (parent, constants diff, study)

The caller holds the run's lock (`t2r tune` takes it; the loop holds it already): then any trial the study shows
RUNNING was left by a dead process, and is settled as study.py says.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from policies.config import TrainConfig
from policies.io import write_text_atomic
from policies.plan import TrainingPlan, resolve_training_plan
from text2reward.errors import ConfigError, Text2RewardError
from text2reward.runs.ranking import best_candidate
from text2reward.runs.records import Candidate, CurvePoint, ResultFile, TrainingSummary, TuningSummary
from text2reward.runs.run_events import Emit, Note, ignore
from text2reward.runs.statuses import CandidateStatus
from text2reward.runs.store import STOP_FILE, RunStore
from text2reward.sandbox import active_isolation
from text2reward.settings import RunConfig, run_task
from text2reward.training.executors import JobRunner
from text2reward.training.job import TRAIN_DIR, TrainJob
from text2reward.training.pool import JobDisplay, JobOutcome, job_done
from text2reward.training.session import JobSession
from text2reward.tuning.constants import Constant, constants_diff, find_constants, require_tunable, rewrite
from text2reward.tuning.objective import curve_objective
from text2reward.tuning.pruning import TrialPruner
from text2reward.tuning.space import baseline_params, suggest
from text2reward.tuning.study import STUDY_FILE, counted, open_study, pick_winner, settle_orphans, trial_dir

TUNED_SUFFIX = "-tuned"
STEPS_ATTR = "steps"
"""The study's user attribute holding each trial's training budget: a resume must train its trials alike."""


def tuned_id(parent_id: str) -> str:
    return parent_id + TUNED_SUFFIX


def default_candidate(store: RunStore) -> Candidate:
    """The run's best candidate that is not itself a tuning result (so rerunning `t2r tune RUN` resumes the same study)."""
    best = best_candidate([c for c in store.candidates() if not c.parent])
    if best is None:
        raise ConfigError(f"run {store.run_id} has no trained candidate to tune; finish the run first "
                          f"(`t2r resume {store.run_id} --runs-dir {store.runs_dir}`)")
    return best


def parent_candidate(store: RunStore, candidate_id: str | None) -> Candidate:
    """The candidate to tune: the named one, which must have trained, or the run's best."""
    if candidate_id is None:
        return default_candidate(store)
    candidate = store.candidate(candidate_id)
    trained = [c.id for c in store.candidates() if c.has_training]
    if candidate is None:
        raise ConfigError(f"run {store.run_id} has no candidate {candidate_id!r}; its trained candidates are "
                          f"{', '.join(trained) or 'none'}")
    if not candidate.has_training or not candidate.code_file:
        raise ConfigError(f"candidate {candidate_id} did not train ({candidate.status.value}), so there is nothing to "
                          f"tune; pick a trained one: {', '.join(trained) or 'none'}")
    return candidate


class Tuner:
    """One candidate's tuning: the study, its trials in batches, and the winner."""

    def __init__(self, store: RunStore, parent: Candidate, steps: int | None, emit: Emit, session: JobSession,
                 min_gain: float | None = None):
        self.store, self.parent, self.emit, self.session = store, parent, emit, session
        self.config = RunConfig.from_record(store.config_data())
        self.task = run_task(self.config)
        assert parent.code_file is not None  # parent_candidate checked it
        self.source = store.read_text(parent.code_file)
        self.found = require_tunable(self.source, parent.id)
        self.space: list[Constant] = self.found.tunable
        self.dir = store.tune_dir(parent.id)
        self.plan = self.trial_plan(None)
        """The trials' plan before the study fixes their budget: its evaluation episodes and default budget."""
        self.episodes = self.plan.eval_episodes
        self.margin = default_margin(self.episodes) if min_gain is None else float(min_gain)
        """How far a trial must score above the parent's constants to replace them (study.pick_winner)."""
        self.steps = steps
        self.study: Any = None

    def say(self, message: str) -> None:
        self.emit(Note(message))

    def score(self, result: ResultFile) -> float:
        """A finished trial's objective: its whole curve over the trial budget (tuning/objective.py)."""
        return curve_objective(result.curve, self.episodes, self.steps)

    def score_curve(self, curve: Sequence[CurvePoint]) -> float:
        """A running trial's objective so far, for the pruner: over the steps it has trained."""
        return curve_objective(curve, self.episodes)

    # --- the study -------------------------------------------------------------------------------------
    def open(self, trials: int) -> None:
        budget_default = self.plan.steps
        self.study = open_study(self.dir, self.parent.id, self.config.seed, trials, self.steps or budget_default)
        recorded = self.study.user_attrs.get(STEPS_ATTR)
        if self.study.get_trials(deepcopy=False) and recorded is not None:
            if self.steps is not None and self.steps != recorded:
                raise ConfigError(f"the study of {self.parent.id} trains each trial for {recorded} steps; resume it "
                                  f"with --steps {recorded}, or delete {self.dir} to start over with {self.steps}")
            self.steps = recorded
        else:
            self.steps = self.steps or budget_default
            self.study.set_user_attr(STEPS_ATTR, self.steps)
        for line in settle_orphans(self.study, self.dir, self.score):
            self.say(f"{self.parent.id}: {line}")
        if not self.study.get_trials(deepcopy=False):  # the parent's own constants first, under the same budget
            self.study.enqueue_trial(baseline_params(self.space), user_attrs={"baseline": True})

    # --- trials ---------------------------------------------------------------------------------------
    def run(self, trials: int) -> Candidate:
        self.open(trials)
        names = ", ".join(c.name for c in self.space)
        skipped = [c for c in self.found.constants if not c.tunable]
        finished = len(counted(self.study, self.dir))
        self.say(f"tuning {self.parent.id}: {len(self.space)} constant(s) ({names}), {trials} trial(s) of {self.steps} steps, "
                 f"{min(self.config.training.workers, trials)} at a time; {finished} already finished; study in {self.dir / STUDY_FILE}")
        for constant in skipped:
            self.say(f"{self.parent.id}: {constant.name} is not tuned: {constant.skip_reason}")
        for warning in self.found.warnings:
            self.say(f"{self.parent.id}: {warning}")
        attempts = 0
        while (finished := len(counted(self.study, self.dir))) < trials:
            if attempts >= 2 * trials:  # workers keep dying: say so rather than loop for ever
                self.say(f"{self.parent.id}: {attempts} trial(s) were interrupted or retried; stopping with {finished} finished")
                break
            batch = min(self.config.training.workers, trials - finished)
            self.run_batch(batch)
            attempts += batch
        return self.write_winner()

    def trial_config(self, folder: Path, steps: int | None) -> TrainConfig:
        train = self.config.train_config(self.task.id, folder / TRAIN_DIR, "code", self.config.seed, early_stop=True)
        # the trial budget over --steps; the pruner's stop file, whatever the run's --no-early-stop says
        return dataclasses.replace(train, steps=steps if steps is not None else train.steps, stop_file=str(folder / STOP_FILE))

    def trial_plan(self, steps: int | None) -> TrainingPlan:
        """A trial's plan (policies.plan): the run's settings, the trial budget over its --steps."""
        return resolve_training_plan(self.trial_config(self.dir, steps), self.task)

    def job(self, number: int, values: dict[str, float | int]) -> TrainJob:
        folder = trial_dir(self.dir, number)
        code_path = write_text_atomic(folder / "reward.py", rewrite(self.source, values))
        train = self.trial_config(folder, self.steps)
        return TrainJob(train=train, plan=resolve_training_plan(train, self.task), code_path=str(code_path),
                        task_file=self.config.task_file, analysis_episodes=0, video=False)

    def run_batch(self, size: int) -> None:
        from optuna.trial import TrialState  # Optuna (~65 ms): this module loads with every `t2r` command; only a study pays it

        asked = [self.study.ask() for _ in range(size)]
        jobs = [self.job(trial.number, suggest(trial, self.space)) for trial in asked]
        names = [f"trial {trial.number}" for trial in asked]
        by_dir = {job.out_dir: (name, trial) for job, name, trial in zip(jobs, names, asked)}
        pruner = TrialPruner(dict(zip(names, asked)), self.score_curve)

        def on_done(outcome: JobOutcome) -> None:
            name, trial = by_dir[outcome.job.out_dir]
            if outcome.ok and outcome.record is not None:
                result = outcome.record.result
                success = result.success_rate or 0.0
                trial.set_user_attr("success_rate", success)
                trial.set_user_attr("trained_steps", result.steps)
                if result.stopped_behind:  # the pruner's stop file took effect
                    self.study.tell(trial, state=TrialState.PRUNED)
                    self.say(f"{self.parent.id} {name}: pruned at {result.steps} steps, success {success:.2f}")
                    return
                value = self.score(result)
                self.study.tell(trial, value)
                self.say(f"{self.parent.id} {name}: success {success:.2f} (objective {value:.4f})")
                return
            trial.set_user_attr("reason", str(outcome.reason)[:500])
            self.study.tell(trial, state=TrialState.FAIL)
            if outcome.interrupted:  # the worker died, not the constants: try them again
                self.study.enqueue_trial(dict(trial.params), user_attrs={"retry_of": trial.number})
            self.say(f"{self.parent.id} {name}: {'interrupted' if outcome.interrupted else 'failed'} ({outcome.reason})")

        self.session.run(list(zip(names, jobs)), on_done, early_stopper=pruner)

    # --- the winner -----------------------------------------------------------------------------------
    def write_winner(self) -> Candidate:
        from optuna.trial import TrialState  # Optuna (~65 ms): only a study pays it

        complete = self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if not complete:
            raise Text2RewardError(f"no trial of {self.parent.id} completed (pruned or failed: see "
                                   f"{self.dir}/trial_*/worker.log); rerun with more --trials or a larger --steps")
        best, kept_parent = pick_winner(complete, self.margin)
        folder = trial_dir(self.dir, best.number)
        record = job_done(folder)
        if record is None:
            raise Text2RewardError(f"trial {best.number} of {self.parent.id} is recorded complete but {folder} holds no "
                                   f"done.json; delete {self.dir} and tune again")
        code = (folder / "reward.py").read_text()
        code_path = write_text_atomic(self.dir / "reward.py", code)
        result = record.result
        states = [t.state for t in counted(self.study, self.dir)]
        tuned_values = {c.name: c.value for c in find_constants(code).constants if c.name in {s.name for s in self.space}}
        summary = TuningSummary(
            study=self.store.relative(self.dir / STUDY_FILE), study_name=self.parent.id, trials=len(states),
            complete=states.count(TrialState.COMPLETE), pruned=states.count(TrialState.PRUNED), failed=states.count(TrialState.FAIL),
            trial=best.number, objective=float(best.value), margin=self.margin, kept_parent=kept_parent, steps=self.steps,
            warnings=list(self.found.warnings),
            constants_diff=constants_diff(self.found.values(), tuned_values),
        )
        candidate = Candidate(
            id=tuned_id(self.parent.id), round=self.parent.round, sample=self.parent.sample, backend=self.parent.backend,
            model=self.parent.model, rule_based=self.parent.rule_based, code_file=self.store.relative(code_path),
            status=CandidateStatus.STOPPED_EARLY if result.stopped_behind else CandidateStatus.TRAINED,
            training=TrainingSummary.of_result(result), training_result=result.kept(), warnings=list(record.warnings),
            parent=self.parent.id, tuned=summary, stopped_early=result.stopped_early if result.stopped_behind else None,
        )
        return self.store.write_candidate(candidate)


def default_margin(episodes: int) -> float:
    """One evaluation episode's worth of success, on average over the curve: below that a trial's lead over the
    parent's constants is within what one training seed to the next moves it."""
    return 1.0 / max(1, episodes)


def tune_candidate(store: RunStore, candidate_id: str | None, trials: int, steps: int | None = None, emit: Emit = ignore,
                   display: JobDisplay | None = None, runner: JobRunner | None = None, min_gain: float | None = None) -> Candidate:
    """Tune a candidate's constants (None: the run's best untuned candidate) over `trials` finished trials of `steps`
    training steps each (None: the run's budget, or the budget an existing study was started with), and write the
    winner as candidate `<id>-tuned`: the best trial when it scores `min_gain` above the parent's own constants
    (None: one evaluation episode's worth of success, `default_margin`), else those constants, kept. Resumes the
    candidate's study: finished trials count and are never redone.
    `runner` (the loop's) runs the trials' jobs; by default the run's executor, opened for this tuning. The caller holds
    the run's lock. Model code runs only in the training jobs' sandbox."""
    if trials < 1:
        raise ConfigError(f"--trials must be at least 1, got {trials}")
    if steps is not None and steps <= 0:
        raise ConfigError(f"--steps must be positive, got {steps}")
    if min_gain is not None and not 0 <= min_gain <= 1:
        raise ConfigError(f"--min-gain is a success rate between 0 and 1, got {min_gain}")
    parent = parent_candidate(store, candidate_id)
    with ExitStack() as resources:
        if runner is None:
            config = RunConfig.from_record(store.config_data())
            runner = config.executor_spec.open(config.training.executor_settings(), resources, lambda message: emit(Note(message)))
        tuner = Tuner(store, parent, steps, emit, JobSession(runner, display, emit), min_gain)
        active_isolation()  # fail closed before any trial trains
        return tuner.run(trials)
