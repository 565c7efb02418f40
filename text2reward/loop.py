"""The synthesis loop: prompt -> K replies -> extract -> validate (fix) -> screen -> train in parallel
-> evaluate -> keep the best -> feedback -> next round; then re-train the best over seeds beside the
expert reward.

Orchestration only: each stage lives in its own module (the round's prompt in generation/round_prompt.py, the checks
in checking.py, training in training/session.py and training/results.py, keypoints in keypoints/stage.py, ranking and
records in runs/). Every stage writes its artefact atomically before the next begins, and every stage first looks for
its artefact: so `resume` is the same function as `run`, and an interrupted run redoes only unfinished work.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

from policies.plan import TrainingPlan, resolve_training_plan
from sim_envs import get_task
from sim_envs.task import Task
from text2reward.checking import CandidateChecker, CheckSettings
from text2reward.errors import ConfigError, RunInterrupted, Text2RewardError
from text2reward.generation.failure_analysis import analyse_failures
from text2reward.generation.llm import Backend, CachedBackend, GenerationRequest, Reply, ReplyCache
from text2reward.generation.llm.errors import RepliesExhausted
from text2reward.generation.llm.file_backend import render_prompt
from text2reward.generation.round_prompt import KeypointSection, RoundPrompts
from text2reward.keypoints.sources import keypoint_finder
from text2reward.keypoints.stage import KEYPOINT_AUTHOR, KeypointStage
from text2reward.preflight import budget_warning
from text2reward.runs import layout
from text2reward.runs.lock import RunLock
from text2reward.runs.ranking import best_candidate, tie_summary
from text2reward.runs.records import Candidate, FinalSummary, RoundPrompt, RoundSummary, Untrained, read, untrained_reason, write
from text2reward.runs.report import write_report
from text2reward.runs.run_events import (
    CandidateStoppedEarly,
    CandidateTrained,
    Emit,
    FinalDone,
    FinalStarted,
    Note,
    RoundDone,
    RoundStarted,
    RunEnded,
    ThresholdReached,
    TrainingStarted,
    WaitingForReplies,
    ignore,
)
from text2reward.runs.statuses import CandidateStatus, FailureCause, RunStatus
from text2reward.runs.store import RunStore, check_writable, index_run
from text2reward.sandbox import active_isolation
from text2reward.settings import RunConfig, check_backend, check_run_config, run_task, shared_fields
from text2reward.training.early_stop import EarlyStopper
from text2reward.training.job import TRAIN_DIR, TrainJob
from text2reward.training.pool import JobDisplay, JobOutcome
from text2reward.training.results import final_arm, record_outcome, record_seed_outcomes
from text2reward.training.session import JobSession
from text2reward.tuning import tune_candidate

ROUND_ATTEMPTS = 2
"""A round's candidate whose reward process was stopped or killed by the machine (never by its own code) trains again."""
FINAL_ATTEMPTS = 3
"""A final-stage training that fails for a cause other than the reward's own (its process stopped or killed by the
machine, a worker that died, a library error) is tried this many times in all before it is recorded as failed."""


def seed_label(candidate_id: str, seed: int, seeds: int) -> str:
    """A round job's label (bars, evaluation events, the early stopper's name for it): the candidate's id, and its seed
    when the candidate trains on several."""
    return candidate_id if seeds == 1 else f"{candidate_id} seed {seed}"


def replies_used(store: RunStore) -> int:
    """How many replies the run has already consumed: saved rounds (a keypoint program is no reply of the backend's),
    replies the keypoint finder asked for, and fix requests."""
    rounds = sum(sum(1 for reply in store.read_json(p) or [] if read(Reply, reply, str(p)).backend != KEYPOINT_AUTHOR)
                 for p in store.root.glob(layout.ROUND_REPLIES))
    return rounds + KeypointStage(store.paths.keypoints).replies_asked() + len(list(store.root.glob(layout.FIX_PROMPTS)))


def make_run_backend(config: RunConfig, store: RunStore) -> Backend:
    """The run's backend from its settings; its replies cached in the runs' cache unless the spec or `--no-cache` says no."""
    spec = config.backend_spec
    generation = config.generation
    backend = spec.make(config.backend_settings(replies_used=replies_used(store) if generation.reply_files else 0))
    if not spec.cache_replies or not generation.cache:
        return backend  # pasted replies are the record themselves; --no-cache asks the model again
    return CachedBackend(backend, ReplyCache(store.paths.cache))


class Loop:
    """One run's rounds, tuning and final comparison, in order; a resume is the same calls."""

    def __init__(self, store: RunStore, backend: Backend | None = None, emit: Emit | None = None, display: JobDisplay | None = None):
        self.store = store
        self.config = RunConfig.from_record(store.config_data())
        self.task: Task = run_task(self.config)
        self.emit = emit or ignore
        self.backend = backend or make_run_backend(self.config, store)
        self.resources = ExitStack()
        """What the run holds until it ends (a Ray session, opened when the first jobs train on Ray)."""
        runner = self.config.executor_spec.open(self.config.training.executor_settings(), self.resources, self.say)
        self.session = JobSession(runner, display, self.emit)
        self.display = display
        source = self.config.source
        self.keypoints = KeypointStage(store.paths.keypoints) if source.uses_keypoints else None
        generation = self.config.generation
        self.prompts = RoundPrompts(store, self.task, generation.reward_mode, generation.few_shot, generation.vision)
        # the checks' settings: their group, the generation's reward mode and fix temperature, the run's seed
        settings = shared_fields(CheckSettings, self.config.checking, generation, seed=self.config.seed)
        combine = self.keypoints.with_keypoint_reward if self.keypoints is not None and source.adds_keypoint_reward else None
        self.checker = CandidateChecker(store, self.task, self.backend, settings, self.emit, prepare_code=combine)

    def say(self, message: str) -> None:
        self.emit(Note(message))

    # --- the run -------------------------------------------------------------------------------------------------
    def run(self) -> FinalSummary | None:
        """The run to its end (or to where it waits for replies: then None); every stage done before is kept."""
        with RunLock(self.store.root, say=self.say), self.resources:
            return self._run_locked()

    def _run_locked(self) -> FinalSummary | None:
        started = time.perf_counter()
        state = self.store.set_state(status=RunStatus.RUNNING, created=self.store.state().created or time.time(), error=None,
                                     reason=None, untrained=[], pending_prompt=None)
        index_run(self.store)
        try:
            self.ensure_keypoints()
            redone = self.run_rounds()
            redone = self.tune_best() or redone
            final = self.store.final_summary()
            if redone or final is None or final.needs_training:
                final = self.finalize()
            self.finish(final, state.wall_seconds + time.perf_counter() - started)
            return final
        except RepliesExhausted as exc:
            self.wait_for_replies(exc)
            self.store.set_state(wall_seconds=round(state.wall_seconds + time.perf_counter() - started, 1))
            return None
        except BaseException as exc:
            status = RunStatus.INTERRUPTED if isinstance(exc, KeyboardInterrupt) else RunStatus.FAILED
            self.store.set_state(status=status, error=str(exc)[:500], wall_seconds=round(state.wall_seconds + time.perf_counter() - started, 1))
            raise
        finally:
            index_run(self.store)

    def run_rounds(self) -> bool:
        """Each round not yet summarised (or cut short), until the rounds are done or the best reaches the threshold;
        True when this call ran one."""
        redone = False
        for round_index in range(self.config.rounds):
            summary = self.store.round_summary(round_index)
            if summary is None or summary.interrupted:
                self.run_round(round_index)
                redone = True
            best = best_candidate(self.store.candidates())
            self.store.set_state(rounds_done=round_index + 1, best=best.id if best else None, best_success=best.success if best else None)
            index_run(self.store)
            waiting = any(e.for_round > round_index for e in self.store.events())
            if best is not None and best.success >= self.config.success_threshold and not waiting:
                self.emit(ThresholdReached(best.id, best.success))
                break
        return redone

    def finish(self, final: FinalSummary, wall_seconds: float) -> None:
        """The run's status (finished, incomplete or no_result, with why), its report and its state."""
        candidates = self.store.candidates()
        interrupted = [c.id for c in candidates if c.status == CandidateStatus.INTERRUPTED]
        status, untrained = RunStatus.FINISHED, []
        if interrupted or final.interrupted:
            status = RunStatus.INCOMPLETE
            self.say(f"some training was interrupted ({', '.join(interrupted) or 'final comparison'}): "
                     f"`t2r resume {self.store.run_id} --runs-dir {self.store.runs_dir}` finishes it")
        elif final.best_candidate is None:
            status = RunStatus.NO_RESULT
            untrained = [Untrained(c.id, c.status, c.reason or "") for c in candidates]
        reason = untrained_reason(untrained) if status == RunStatus.NO_RESULT else None
        report = write_report(self.store, status, reason)
        state = self.store.set_state(status=status, reason=reason, untrained=untrained, wall_seconds=round(wall_seconds, 1),
                                     report=self.store.relative(report))
        self.emit(RunEnded(self.store.run_id, status, state.best, state.best_success, tuple(interrupted)))

    def wait_for_replies(self, exc: RepliesExhausted) -> None:
        """Reply files ran out: write the prompt that needs answers and stop cleanly; a resume with new
        `--reply-file`s goes on from exactly here (finished stages are files, and are never redone)."""
        path = self.store.write_text(layout.PENDING_PROMPT, render_prompt(exc.request))
        self.store.set_state(status=RunStatus.WAITING_FOR_REPLIES, pending_prompt=self.store.relative(path), replies_needed=exc.needed,
                             round=exc.request.round)  # the round that waits, never the one the run was made in
        self.emit(WaitingForReplies(exc.needed, str(path)))

    # --- one round -------------------------------------------------------------------------------------------
    def run_round(self, round_index: int) -> RoundSummary:
        from_keypoints = round_index == 0 and self.config.source.first_round_is_keypoint_program
        author = None if from_keypoints else self.config.author()
        self.emit(RoundStarted(round_index, author, 1 if from_keypoints else self.config.generation.samples))
        self.store.set_state(round=round_index)
        prompt = self.prompts.prompt(round_index, self.keypoint_section(), from_keypoints)
        for sample, reply in enumerate(self.round_replies(round_index, prompt, from_keypoints)):
            self.checker.prepare(round_index, sample, reply)
        self.train_round(round_index)
        if self.config.generation.vision_analysis:
            analyse_failures(self.store, self.task, self.backend, round_index, self.config.success_threshold, self.config.seed, self.emit)
        candidates = self.store.candidates(round_index)
        best = best_candidate(candidates)
        ties = tie_summary(candidates)  # candidates within the best's noise, and how the best was chosen among them
        summary = RoundSummary(round=round_index, best=best.id if best else None, best_success=best.success if best else None,
                               statuses={c.id: c.status for c in candidates}, tied=ties.get("tied", []), tie_break=ties.get("tie_break"))
        self.store.write_round_summary(summary)
        self.emit(RoundDone(summary, tuple(candidates)))
        return summary

    def round_replies(self, round_index: int, prompt: RoundPrompt, from_keypoints: bool) -> list[Reply]:
        path = self.store.paths.round_replies(round_index)
        saved = self.store.read_json(path)
        if saved is None:
            if from_keypoints:
                assert self.keypoints is not None  # a keypoint source has its stage
                replies = [self.keypoints.first_round_reply()]
            else:
                replies = self.backend.generate(GenerationRequest(
                    messages=prompt.messages, n=self.config.generation.samples, task_id=self.task.id, round=round_index,
                    temperature=self.config.generation.temperature, seed=self.config.seed, context=prompt.context))
            saved = [write(reply) for reply in replies]
            self.store.write_json(path, saved)
        return [read(Reply, reply, str(path)) for reply in saved]

    def ensure_keypoints(self) -> None:
        """With a keypoint reward source: the task's keypoints in `keypoints/` (found once; a resume reads them)."""
        if self.keypoints is None:
            return
        generation = self.config.generation
        finder = generation.keypoints
        asks_backend = keypoint_finder(finder).asks_backend
        self.keypoints.ensure(self.task, finder, self.backend if asks_backend else None, self.config.seed,
                              generation.keypoint_camera, generation.keypoint_anchors, self.emit)

    def keypoint_section(self) -> KeypointSection | None:
        if self.keypoints is None or not self.config.source.prompt_shows_keypoints:
            return None
        return KeypointSection(self.keypoints.summary(), self.keypoints.code(),
                               self.store.relative(self.store.paths.keypoints / "keypoints.json"))

    # --- training ------------------------------------------------------------------------------------------
    def job(self, out_dir: Path, reward: str, code_path: Path | None, seed: int, video: bool, early_stop: bool = False,
            candidate: Candidate | None = None) -> TrainJob:
        """A training job, its plan resolved here once (policies.plan) and written into its job.json for the worker."""
        train = self.config.train_config(self.task.id, out_dir / TRAIN_DIR, reward, seed, early_stop=early_stop)
        return TrainJob(train=train, plan=resolve_training_plan(train, self.task), code_path=str(code_path) if code_path else None,
                        task_file=self.config.task_file, video=video,
                        component_names=candidate.validated_names if candidate is not None else None)

    def train_round(self, round_index: int) -> None:
        """The round's pending candidates, each on the run's `--candidate-seeds` seeds (one job per seed; a candidate's
        record is written once every seed has an outcome, its score pooled over them)."""
        pending = [c for c in self.store.candidates(round_index) if c.status.needs_training and c.code_file]
        if not pending:
            return
        seeds = self.config.candidate_seed_list()
        planned = [(c, seed, self.job(self.store.paths.training_dir(round_index, c.sample, None if k == 0 else seed), "code",
                                      self.store.root / str(c.code_file), seed, self.config.training.video and k == 0, early_stop=True, candidate=c))
                   for c in pending for k, seed in enumerate(seeds)]
        for _, seed, job in planned:
            if seed != seeds[0]:
                job.analysis_episodes = 0  # the feedback describes the first seed's policy; the others give their figures
        by_dir = {job.out_dir: (candidate, seed) for candidate, seed, job in planned}
        got: dict[str, dict[int, JobOutcome]] = {}
        self.emit(TrainingStarted(round_index, tuple(c.id for c in pending), self.config.training.workers))

        def on_done(outcome: JobOutcome) -> None:
            pending_candidate, seed = by_dir[outcome.job.out_dir]
            if len(seeds) == 1:
                recorded = record_outcome(pending_candidate, outcome, self.store)
            else:
                outcomes = got.setdefault(pending_candidate.id, {})
                outcomes[seed] = outcome
                if len(outcomes) < len(seeds):
                    return
                recorded = record_seed_outcomes(pending_candidate, [(s, outcomes[s]) for s in seeds], self.store)
            candidate = self.store.write_candidate(recorded)
            for warning in candidate.warnings:
                self.say(f"{candidate.id}: warning: {warning}")
            stopped = candidate.status == CandidateStatus.STOPPED_EARLY
            self.emit(CandidateStoppedEarly(candidate) if stopped else CandidateTrained(candidate))

        labelled = [(seed_label(c.id, seed, len(seeds)), job) for c, seed, job in planned]
        # the round's jobs share one plan but their seed: the stopper judges by the workers' own, a candidate's seeds as one
        stopper = self.early_stopper(round_index, planned[0][2].resolved_plan(self.task), len(seeds)) if self.config.training.early_stop else None
        # a candidate whose reward process the machine stopped or killed was not at fault: it trains once more
        self.session.run_retrying(labelled, ROUND_ATTEMPTS, on_done, stopper, causes=(FailureCause.MACHINE,))

    def early_stopper(self, round_index: int, plan: TrainingPlan, seeds: int = 1) -> EarlyStopper:
        """The round's early stopping, by the plan its jobs train by, each candidate's seeds pooled as one (their jobs
        grouped by candidate), primed with the curves of its candidates that already trained (a resume)."""
        candidates = self.store.candidates(round_index)
        groups = {seed_label(c.id, seed, seeds): c.id for c in candidates for seed in self.config.candidate_seed_list()}
        stopper = EarlyStopper(plan.steps, plan.eval_freq, groups=groups if seeds > 1 else None)
        for candidate in candidates:
            if not candidate.has_training:
                continue
            if candidate.seeds:
                for run in candidate.seeds:
                    if run.training is not None:
                        stopper.observe(seed_label(candidate.id, run.seed, seeds), run.training.curve)
            else:
                stopper.observe(candidate.id, candidate.training_result.curve if candidate.training_result is not None else [])
        return stopper

    def tune_best(self) -> bool:
        """`--tune N`: tune the best candidate's constants (text2reward.tuning) once the rounds are done; True when
        this call trained something (so the final comparison is redone for a tuned winner)."""
        if self.config.tune <= 0:
            return False
        best = best_candidate([c for c in self.store.candidates() if not c.parent])
        if best is None:
            return False
        if best.success >= self.config.success_threshold:
            self.say(f"tuning skipped: {best.id} already reached the success threshold")
            return False
        before = self.store.candidate(f"{best.id}-tuned")
        if before is not None and before.tuned is not None and before.tuned.trials >= self.config.tune:
            return False
        self.say(f"tuning {best.id}'s constants: {self.config.tune} trial(s)")
        try:
            tuned = tune_candidate(self.store, best.id, self.config.tune, emit=self.emit, display=self.display, runner=self.session.runner)
        except Text2RewardError as exc:  # no UPPER_CASE constants, no trial completed: the run keeps its result
            self.say(f"tuning skipped: {exc}")
            return False
        self.say(f"{tuned.id}: success {tuned.success:.2f} (parent {best.success:.2f})")
        return True

    # --- the final comparison ------------------------------------------------------------------------------
    def finalize(self) -> FinalSummary:
        """The best reward re-trained on fresh seeds, beside the expert reward on the same seeds and budget."""
        best = best_candidate(self.store.candidates())
        if best is None:
            summary = FinalSummary(best_candidate=None, reason="no candidate trained successfully")
            self.store.write_final_summary(summary)
            return summary
        seeds = self.config.final_seed_list()
        arms: list[tuple[str, str, str, Path | None]] = [("best", best.id, "code", self.store.root / str(best.code_file))]
        # the best's jobs are keyed by candidate: a later, better candidate never reuses these results
        if self.config.final.compare_expert and self.task.has_expert_reward:
            arms.append(("expert", "expert", "expert", None))
        jobs = [(arm, self.job(self.store.paths.final_job(folder, seed), reward, code, seed, False, candidate=best if reward == "code" else None))
                for arm, folder, reward, code in arms for seed in seeds]
        for _, job in jobs:
            job.analysis_episodes = 0
        summary = FinalSummary(best_candidate=best.id, seeds=seeds)
        if jobs:
            self.emit(FinalStarted(best.id, tuple(seeds), any(arm == "expert" for arm, _ in jobs)))
            outcomes, attempts = self.session.run_retrying([(f"final {arm} seed {job.train.seed}", job) for arm, job in jobs], FINAL_ATTEMPTS)
            summary.interrupted = any(o.interrupted for o in outcomes)
            done = [(arm, job, outcome, tries) for (arm, job), outcome, tries in zip(jobs, outcomes, attempts)]
            summary.best = final_arm([(job, o, t) for arm, job, o, t in done if arm == "best"])
            summary.expert = final_arm([(job, o, t) for arm, job, o, t in done if arm == "expert"])
        self.store.write_final_summary(summary)
        self.emit(FinalDone(summary))
        return summary


# --- starting and resuming -----------------------------------------------------------------------------------------


def start_run(config: RunConfig, runs_dir: Path, emit: Emit | None = None, backend: Backend | None = None,
              display: JobDisplay | None = None) -> RunStore:
    """Check everything that can be checked, then create the run folder and run it."""
    config = check_run_config(config, backend_given=backend is not None)
    active_isolation()  # fail closed before any model is asked or any code runs: no jail here, no run
    check_writable(runs_dir)  # a read-only or full place: one line, before anything is asked or written
    warning = budget_warning(get_task(config.task_id), config.training.steps)
    if warning and emit is not None:
        emit(Note(warning))
    store = RunStore.create(runs_dir, config.to_record())
    try:
        loop = Loop(store, backend, emit, display)
    except BaseException as exc:  # a run never stays `running` because its start failed
        store.set_state(status=RunStatus.FAILED, error=str(exc)[:500])
        index_run(store)
        raise
    try:
        loop.run()
    except KeyboardInterrupt as exc:  # recorded as interrupted by the loop; the caller learns which run to resume
        raise RunInterrupted(store.run_id, str(store.runs_dir)) from exc
    return store


def resume_run(runs_dir: Path, run_id: str, emit: Emit | None = None, backend: Backend | None = None,
               display: JobDisplay | None = None, reply_files: list[str] | None = None) -> RunStore:
    """Go on with a run; `reply_files` adds replies for a run that waits on a person (`--llm file`)."""
    store = RunStore.open(runs_dir, run_id)
    config = RunConfig.from_record(store.config_data())
    config.executor_spec.check(config.training.executor_settings())
    if reply_files:
        if not config.backend_spec.reads_reply_files:
            raise ConfigError(f"run {run_id} asks {config.generation.backend}, not reply files: --reply-file is for runs made with --llm file")
        config = config.updated(reply_files=[*config.generation.reply_files, *reply_files])
    task = run_task(config)
    if backend is None:
        check_backend(config, task)
    active_isolation()
    if reply_files:
        store.write_config(config.to_record())
    try:
        Loop(store, backend, emit, display).run()
    except KeyboardInterrupt as exc:
        raise RunInterrupted(store.run_id, str(store.runs_dir)) from exc
    return store
