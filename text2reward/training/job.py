"""A training worker: `python -m text2reward.training.job JOB.json` trains one reward and analyses it.

Why a process per job: a reward that crashes, a worker that is killed, or a run that is interrupted
costs only that job; finished jobs are files on disk that nothing rewrites. Model-written rewards run
in the sandbox's isolated reward process (`SandboxedReward`), never in this process.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from policies.checkpoint import remove_checkpoint
from policies.config import TrainConfig
from policies.evaluate import model_actor, run_episode
from policies.io import atomic_file, write_json_atomic, write_text_atomic
from policies.plan import TrainingPlan, resolve_training_plan
from policies.reward_modes import DEFAULT_GAMMA, runnable_source
from policies.reward_program import reward_from_spec
from policies.score import mean_and_se
from policies.stats import Rate
from policies.task_env import make_task_env
from sim_envs import codec, get_task, load_task_file
from sim_envs.errors import RewardProgramError, Text2RewardError
from sim_envs.task import Task
from text2reward.errors import ConfigError
from text2reward.process_exit import collect_once_at_exit
from text2reward.runs.records import Delivered, DoneRecord, FinalPolicy, PeakCheck, ResultFile, Video, read_result

JOB_FILE = "job.json"
DONE_FILE = "done.json"
ERROR_FILE = "error.json"
PID_FILE = "worker.pid"
PROGRESS_FILE = "progress.json"
WORKER_LOG = "worker.log"
"""The worker's stdout and stderr (its own, SB3's, the jail's)."""
FINAL_MODEL_FILE = "final_model.zip"
"""The final policy, kept beside model.zip when the peak checkpoint was better beyond noise and became model.zip."""


TRAIN_DIR = "train"
"""Where a job's training writes (model, result.json, TensorBoard), inside the job's folder."""
LEGACY_FIELDS = ("task_id", "reward", "steps", "seed", "device", "eval_freq", "eval_episodes", "stop_at_success", "overrides")
"""Training settings a job.json held at its top level before it held a TrainConfig (runs from the first layout)."""


@dataclass
class TrainJob:
    """One training job, written to `<out_dir>/job.json` by the loop: the training settings, held once as
    policies' `TrainConfig` (whose out_dir is the job's `train/` folder), and what a worker adds around them."""

    train: TrainConfig
    code_path: str | None = None
    """The reward program when `train.reward` is "code"; it runs in the sandbox's jail."""
    component_names: list[str] | None = None
    """The component names the program's validation saw: a new one in training fails it (None: a bound on the count only)."""
    task_file: str | None = None
    analysis_episodes: int = 3
    video: bool = False
    resumable: bool = True
    """Checkpoint training at evaluations, and go on from the checkpoint a killed attempt left in the folder
    (policies.resume); the Ray executor turns it off (each attempt runs in a fresh temporary folder)."""
    plan: TrainingPlan | None = None
    """The training's plan as the loop resolved it (policies.plan): the worker trains by it. None in a job.json written
    before plans were: `resolved_plan` derives it from `train` then, by the same function."""

    def resolved_plan(self, task: Task) -> TrainingPlan:
        return self.plan if self.plan is not None else resolve_training_plan(self.train, task)

    @property
    def out_dir(self) -> str:
        return str(Path(self.train.out_dir).parent)

    def write(self) -> Path:
        return write_json_atomic(Path(self.out_dir) / JOB_FILE, codec.write(self))


def read_job(data: Any, what: str = JOB_FILE) -> TrainJob:
    """A job.json as loaded, in either layout (the first held the training settings at its top level)."""
    if isinstance(data, Mapping) and "train" not in data and "out_dir" in data:
        settings = {key: data[key] for key in LEGACY_FIELDS if key in data}
        rest = {key: value for key, value in data.items() if key not in LEGACY_FIELDS and key != "out_dir"}
        data = {**rest, "train": {**settings, "out_dir": str(Path(str(data["out_dir"])) / TRAIN_DIR)}}
    return codec.read(TrainJob, data, what)


def run_job(job: TrainJob) -> DoneRecord:
    """Train, then analyse the trained policy's behaviour; returns the done record (done.json)."""
    from policies.train import train  # SB3 and torch (~1.8 s): this module loads with every `t2r` command; only a worker trains

    if job.task_file:
        load_task_file(job.task_file)
    config = job.train
    task = get_task(config.task_id)
    plan = job.resolved_plan(task)
    out = Path(job.out_dir)
    reward_fn = job_reward(job)
    progress = JobProgress(out / PROGRESS_FILE, plan.steps)
    try:
        result = train(config, reward_fn=reward_fn, on_eval=progress.publish, on_phase=progress.phase, resumable=job.resumable,
                       plan=plan)
        record = DoneRecord(result=read_result(codec.write(result), str(Path(config.out_dir) / "result.json")))
        analyse_and_film(job, task, reward_fn, record, progress.phase)
    finally:
        close = getattr(reward_fn, "close", None)
        if close is not None:
            close()
    write_json_atomic(out / DONE_FILE, codec.write(record))
    remove_checkpoint(config.out_dir)  # a finished job is never run again (the pool skips done.json)
    return record


def job_reward(job: TrainJob) -> Any:
    """The job's reward: model code in the sandbox's jail, a built-in one, or None (training resolves `train.reward`)."""
    config = job.train
    if config.reward == "code":
        from text2reward.sandbox import SandboxedReward  # the jail's client (~25 ms): only a worker training model code needs it

        if job.code_path is None:
            raise ConfigError(f"training job {job.out_dir} trains reward 'code' but names no code_path")
        return SandboxedReward(runnable_source(Path(job.code_path).read_text(), config.reward_mode), name="candidate",
                               names=job.component_names)
    return reward_from_spec(config.reward) if config.reward in ("expert", "sparse") else None


class JobProgress:
    """The job's progress.json, read by the CLI's progress bars and the dashboard: the latest evaluation, and what the
    worker does after training (when no step moves for a while)."""

    def __init__(self, path: Path, total_steps: int):
        self.path, self.total_steps = path, total_steps
        self.latest: dict[str, Any] = {}

    def publish(self, point: dict[str, Any]) -> None:
        self.latest = dict(point)
        write_json_atomic(self.path, {**point, "total_steps": self.total_steps})

    def phase(self, name: str) -> None:
        write_json_atomic(self.path, {**self.latest, "total_steps": self.total_steps, "phase": name})


def analyse_and_film(job: TrainJob, task: Any, reward_fn: Any, record: DoneRecord, phase: Callable[[str], None]) -> None:
    """After training, as the job asks: describe the policy's rollouts (the next prompt's feedback) and film one, into
    `record`. The policy trained: a failed analysis or video is a warning on it, never its failure."""
    from policies.train import load_policy  # SB3 and torch: as run_job

    if job.analysis_episodes <= 0 and not job.video:
        return
    config, out, result = job.train, Path(job.out_dir), record.result
    model, _ = load_policy(config.out_dir)
    if job.analysis_episodes > 0:
        phase(f"analysing {job.analysis_episodes} rollouts")
        try:
            analysis = analyse(task, model, reward_fn, config.seed, job.analysis_episodes, result, config.reward_mode)
            record.warnings.extend(analysis.warnings)
            record.feedback_text, record.behaviour_text, record.facts = analysis.feedback_text, analysis.behaviour_text, analysis.facts
            record.analysed_seeds, record.peak = analysis.analysed_seeds, analysis.peak
            write_text_atomic(out / "feedback.md", record.feedback_text)
            if record.peak is not None and record.peak.delivered:
                deliver_peak(result, record.peak, Path(config.out_dir))
                model, _ = load_policy(config.out_dir)  # the video films the delivered policy
        except Exception as exc:
            record.warnings.append(f"trajectory analysis failed: {_reason(exc)}")
    if not job.video:
        return
    if result.stopped_behind:  # a candidate stopped for losing frees its worker now
        record.warnings.append("no rollout video: training was stopped early for trailing the round's leader")
        return
    from policies.video import record_video  # imageio and ffmpeg (~25 ms): only a job that films loads them

    phase("filming a rollout")
    try:
        filmed = record_video(task, model_actor(model), out / "rollout.mp4", episodes=1, seed=config.seed + 30_000,
                              size=256, keyframes=4, flatten=not result.her)
        record.video = codec.read(Video, filmed, "the rollout video's record")
    except Exception as exc:
        record.warnings.append(f"rollout video failed: {_reason(exc)}")


@dataclass
class Analysis:
    """What `analyse` found: the next prompt's feedback, the behaviour in words, the mean facts, the episodes it
    replayed, and the peak checkpoint against the final policy where success fell after a peak."""

    feedback_text: str
    behaviour_text: str
    facts: dict[str, float]
    analysed_seeds: list[int]
    warnings: list[str] = field(default_factory=list)
    peak: PeakCheck | None = None


def analyse(task: Any, model: Any, reward_fn: Any, seed: int, episodes: int, result: ResultFile,
            reward_mode: str = "dense") -> Analysis:
    """Describe what the trained policy did (the next prompt's feedback), on the env it was evaluated on: the final
    evaluation's first `episodes` episodes, replayed (same reset seeds, same deterministic policy), so the analysis
    and the evaluation speak of the same episodes. A policy whose success fell after a peak has its peak checkpoint
    played on the same episodes beside it (text2reward.feedback.compose)."""
    from policies.train import EVAL_SEED_OFFSET, load_policy  # SB3 and torch; the feedback (~15 ms): only a worker analyses
    from text2reward.feedback import build_feedback_text, describe_behaviour
    from text2reward.feedback.compose import AnalysedEpisodes, PeakComparison, mean_facts

    kwargs = result.hyperparams.algo_kwargs if result.hyperparams is not None else {}
    gamma = float(kwargs.get("gamma", DEFAULT_GAMMA))  # SB3's own keyword, as the family's file spells it
    evaluation = result.final_eval.successes if result.final_eval is not None else []
    first = seed + EVAL_SEED_OFFSET  # the final evaluation's reset seeds: first, first + 1, ...
    count = min(episodes, len(evaluation)) if evaluation else episodes
    env = make_task_env(task, reward_fn, seed=first, reward_mode=reward_mode, gamma=gamma, flatten=not result.her)
    peak, peak_progress = None, None
    try:
        act = model_actor(model)
        rollouts = [run_episode(env, act, seed=first + i, record_views=True) for i in range(count)]
        if evaluation and result.peak is not None and result.peak_fell:
            during = result.peak
            peak_act = model_actor(load_policy(during.model_path)[0])
            played = [run_episode(env, peak_act, seed=first + i, record_views=i < count) for i in range(len(evaluation))]
            peak = PeakComparison(
                steps=during.steps, during_training=Rate.of(during.success_rate, during.episodes or result.episodes[0]),
                peak=[e.success for e in played], final=evaluation, peak_episodes=played[:count], final_episodes=rollouts)
            if all(e.progress is not None for e in played):
                peak_progress = mean_and_se(float(e.progress or 0.0) for e in played)
    finally:
        env.close()
    successes = [e.success for e in rollouts]
    analysed = AnalysedEpisodes(seeds=[first + i for i in range(count)], evaluation=evaluation, replayed=successes) if evaluation else None
    analysis = Analysis(  # the rollouts themselves: their views and the scene's features at each reset
        feedback_text=build_feedback_text(task, result, rollouts, successes, analysed=analysed, peak=peak),
        behaviour_text=describe_behaviour(task, rollouts, successes), facts=mean_facts(task, rollouts),
        analysed_seeds=[first + i for i in range(count)])
    if analysed is not None and not analysed.agrees:
        analysis.warnings.append("the analysis's replays of the final evaluation's episodes did not repeat its successes")
    if peak is not None:
        analysis.peak = PeakCheck(steps=peak.steps, success_on_final_episodes=sum(peak.peak) / len(peak.peak),
                                  only_peak=peak.only_peak, only_final=peak.only_final, p_value=peak.p_value,
                                  delivered=peak.peak_delivered, progress_on_final_episodes=peak_progress)
    return analysis


def deliver_peak(result: ResultFile, peak: PeakCheck, out_dir: Path) -> None:
    """Make the peak checkpoint the candidate's policy: its file becomes model.zip (the final policy is kept beside it
    as final_model.zip) and the result's success is the peak's on the final evaluation's episodes, the final policy's
    figures kept under `final_policy`. Why: a peak that is better beyond noise on the same episodes (McNemar) is the
    better policy; ranking, video, the Python result and the report then all speak of the one that is delivered."""
    assert result.peak is not None  # a peak was compared, so the result had one
    model, peak_file = Path(result.model_path), Path(result.peak.model_path)
    shutil.copyfile(model, out_dir / FINAL_MODEL_FILE)
    with atomic_file(model) as handle:
        handle.write(peak_file.read_bytes())
    final = FinalPolicy(success_rate=result.success_rate or 0.0, episodes=result.final_episodes, model_path=str(out_dir / FINAL_MODEL_FILE))
    result.success_rate = peak.success_on_final_episodes
    if peak.progress_on_final_episodes is not None and result.mean_progress is not None:  # the delivered policy's progress
        final = replace(final, mean_progress=result.mean_progress, progress_se=result.progress_se)
        result.mean_progress, result.progress_se = peak.progress_on_final_episodes
    result.final_policy = final
    result.delivered = Delivered(policy="peak", steps=peak.steps, p_value=peak.p_value, only_peak=peak.only_peak,
                                 only_final=peak.only_final)


def _reason(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, Text2RewardError) else f"{type(exc).__name__}: {exc}"


def failure_cause(exc: BaseException) -> str:
    """Whose doing a failed job was: "reward" (the reward's own code), "machine" (its process was stopped or killed
    from outside: worth another try), or "error" (anything else: a setting, a library, a bug)."""
    return exc.cause if isinstance(exc, RewardProgramError) else "error"


def execute(job: TrainJob) -> bool:
    """Run the job in this process with its outcome as files: `done.json`, or `error.json` with the reason.
    Shared by both executors (a local worker process, a Ray task), so a job's folder reads the same after either."""
    out = Path(job.out_dir)
    write_text_atomic(out / PID_FILE, str(os.getpid()))
    try:
        run_job(job)
    except Exception as exc:  # recorded for the loop, which marks the candidate failed with this reason
        reason = _reason(exc)
        cause = failure_cause(exc)
        write_json_atomic(out / ERROR_FILE, {"reason": reason, "cause": cause, "numbers": getattr(exc, "numbers", ""),
                                             "traceback": traceback.format_exc()[-4000:]})
        if cause == "reward":  # its own code failed: never trained again, so nothing will resume from the checkpoint
            remove_checkpoint(job.train.out_dir)
        return False
    return True


def main(argv: list[str]) -> int:
    from sim_envs.model_cache import compile_each_file_once  # MuJoCo: here, not where a driver imports this module

    collect_once_at_exit()
    compile_each_file_once()  # four envs of one task (training, evaluation, analysis, video): its scene compiled once
    job = read_job(json.loads(Path(argv[0]).read_text()), argv[0])
    return 0 if execute(job) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
