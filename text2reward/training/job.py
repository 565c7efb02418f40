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
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from policies.checkpoint import remove_checkpoint
from policies.config import TrainConfig
from policies.evaluate import model_actor, run_episode
from policies.her import flat_observations
from policies.io import atomic_file, write_json_atomic, write_text_atomic
from policies.plan import TrainingPlan, resolve_training_plan
from policies.reward_modes import DEFAULT_GAMMA, runnable_source
from policies.reward_program import reward_from_spec
from policies.score import mean_and_se
from policies.stats import Rate
from policies.task_env import make_task_env
from sim_envs import get_task, load_task_file
from sim_envs.errors import RewardProgramError, Text2RewardError
from sim_envs.task import Task
from text2reward.errors import ConfigError

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

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**data, "train": {**asdict(self.train), "out_dir": str(self.train.out_dir)},
                "plan": self.plan.to_dict() if self.plan is not None else None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainJob:
        data = dict(data)
        if "train" not in data:  # the first layout: training settings at the top level
            settings = {key: data.pop(key) for key in LEGACY_FIELDS if key in data}
            data["train"] = {**settings, "out_dir": str(Path(data.pop("out_dir")) / TRAIN_DIR)}
        train = dict(data.pop("train"))
        train["out_dir"] = Path(train["out_dir"])
        plan = data.pop("plan", None)
        return cls(train=TrainConfig(**train), plan=TrainingPlan.from_dict(plan) if plan is not None else None, **data)

    def write(self) -> Path:
        return write_json_atomic(Path(self.out_dir) / JOB_FILE, self.to_dict())


def run_job(job: TrainJob) -> dict[str, Any]:
    """Train, then analyse the trained policy's behaviour; returns the done record."""
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
        record: dict[str, Any] = {"result": result.to_dict(), "warnings": []}
        analyse_and_film(job, task, reward_fn, record, progress.phase)
    finally:
        close = getattr(reward_fn, "close", None)
        if close is not None:
            close()
    write_json_atomic(out / DONE_FILE, record)
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


def analyse_and_film(job: TrainJob, task: Any, reward_fn: Any, record: dict[str, Any], phase: Callable[[str], None]) -> None:
    """After training, as the job asks: describe the policy's rollouts (the next prompt's feedback) and film one, into
    `record`. The policy trained: a failed analysis or video is a warning on it, never its failure."""
    from policies.train import load_policy  # SB3 and torch: as run_job

    if job.analysis_episodes <= 0 and not job.video:
        return
    config, out, result = job.train, Path(job.out_dir), record["result"]
    model, _ = load_policy(config.out_dir)
    if job.analysis_episodes > 0:
        phase(f"analysing {job.analysis_episodes} rollouts")
        try:
            analysis = analyse(task, model, reward_fn, config.seed, job.analysis_episodes, result, config.reward_mode)
            record["warnings"].extend(analysis.pop("warnings", []))
            record.update(analysis)
            write_text_atomic(out / "feedback.md", record["feedback_text"])
            if (record.get("peak") or {}).get("delivered"):
                deliver_peak(result, record["peak"], Path(config.out_dir))
                model, _ = load_policy(config.out_dir)  # the video films the delivered policy
        except Exception as exc:
            record["warnings"].append(f"trajectory analysis failed: {_reason(exc)}")
    if not job.video:
        return
    if (result.get("stopped_early") or {}).get("kind") == "behind":  # a candidate stopped for losing frees its worker now
        record["warnings"].append("no rollout video: training was stopped early for trailing the round's leader")
        return
    from policies.video import record_video  # imageio and ffmpeg (~25 ms): only a job that films loads them

    phase("filming a rollout")
    try:
        record["video"] = record_video(task, model_actor(model), out / "rollout.mp4", episodes=1, seed=config.seed + 30_000,
                                       size=256, keyframes=4, flatten=flat_observations(result))
    except Exception as exc:
        record["warnings"].append(f"rollout video failed: {_reason(exc)}")


def analyse(task: Any, model: Any, reward_fn: Any, seed: int, episodes: int, result: dict[str, Any],
            reward_mode: str = "dense") -> dict[str, Any]:
    """Describe what the trained policy did (the next prompt's feedback), on the env it was evaluated on: the final
    evaluation's first `episodes` episodes, replayed (same reset seeds, same deterministic policy), so the analysis
    and the evaluation speak of the same episodes. A policy whose success fell after a peak has its peak checkpoint
    played on the same episodes beside it (text2reward.feedback.compose)."""
    from policies.train import EVAL_SEED_OFFSET, load_policy  # SB3 and torch; the feedback (~15 ms): only a worker analyses
    from text2reward.feedback import build_feedback_text, describe_behaviour
    from text2reward.feedback.compose import AnalysedEpisodes, PeakComparison, mean_facts, peak_fell

    gamma = float((result.get("hyperparams") or {}).get("algo_kwargs", {}).get("gamma", DEFAULT_GAMMA))
    evaluation = [bool(e["success"]) for e in (result.get("final_eval") or {}).get("episodes") or []]
    first = seed + EVAL_SEED_OFFSET  # the final evaluation's reset seeds: first, first + 1, ...
    count = min(episodes, len(evaluation)) if evaluation else episodes
    env = make_task_env(task, reward_fn, seed=first, reward_mode=reward_mode, gamma=gamma, flatten=flat_observations(result))
    peak, peak_progress = None, None
    try:
        act = model_actor(model)
        rollouts = [run_episode(env, act, seed=first + i, record_views=True) for i in range(count)]
        if evaluation and peak_fell(result):
            peak_act = model_actor(load_policy(result["peak"]["model_path"])[0])
            played = [run_episode(env, peak_act, seed=first + i, record_views=i < count) for i in range(len(evaluation))]
            during = result["peak"]
            peak = PeakComparison(
                steps=int(during["steps"]),
                during_training=Rate.of(during["success_rate"], int(during.get("episodes") or result.get("eval_episodes") or 5)),
                peak=[e.success for e in played], final=evaluation, peak_episodes=played[:count], final_episodes=rollouts)
            if all(e.progress is not None for e in played):
                peak_progress = mean_and_se(float(e.progress or 0.0) for e in played)
    finally:
        env.close()
    successes = [e.success for e in rollouts]
    analysed = AnalysedEpisodes(seeds=[first + i for i in range(count)], evaluation=evaluation, replayed=successes) if evaluation else None
    record: dict[str, Any] = {  # the rollouts themselves: their views and the scene's features at each reset
        "feedback_text": build_feedback_text(task, result, rollouts, successes, analysed=analysed, peak=peak),
        "behaviour_text": describe_behaviour(task, rollouts, successes),
        "facts": mean_facts(task, rollouts),
        "analysed_seeds": [first + i for i in range(count)],
    }
    if analysed is not None and not analysed.agrees:
        record["warnings"] = ["the analysis's replays of the final evaluation's episodes did not repeat its successes"]
    if peak is not None:
        record["peak"] = {"steps": peak.steps, "success_on_final_episodes": sum(peak.peak) / len(peak.peak),
                          "only_peak": peak.only_peak, "only_final": peak.only_final, "p_value": peak.p_value,
                          "delivered": peak.peak_delivered,
                          **({"progress_on_final_episodes": list(peak_progress)} if peak_progress is not None else {})}
    return record


def deliver_peak(result: dict[str, Any], peak: dict[str, Any], out_dir: Path) -> None:
    """Make the peak checkpoint the candidate's policy: its file becomes model.zip (the final policy is kept beside it
    as final_model.zip) and the result's success is the peak's on the final evaluation's episodes, the final policy's
    figures kept under `final_policy`. Why: a peak that is better beyond noise on the same episodes (McNemar) is the
    better policy; ranking, video, the Python result and the report then all speak of the one that is delivered."""
    model, peak_file = Path(result["model_path"]), Path(result["peak"]["model_path"])
    shutil.copyfile(model, out_dir / FINAL_MODEL_FILE)
    with atomic_file(model) as handle:
        handle.write(peak_file.read_bytes())
    episodes = int(result.get("final_eval_episodes") or len((result.get("final_eval") or {}).get("episodes") or []))
    result["final_policy"] = {"success_rate": result["success_rate"], "episodes": episodes,
                              "model_path": str(out_dir / FINAL_MODEL_FILE)}
    result["success_rate"] = float(peak["success_on_final_episodes"])
    if peak.get("progress_on_final_episodes") and result.get("mean_progress") is not None:  # the delivered policy's progress
        result["final_policy"] |= {"mean_progress": result["mean_progress"], "progress_se": result.get("progress_se")}
        result["mean_progress"], result["progress_se"] = (float(v) for v in peak["progress_on_final_episodes"])
    result["delivered"] = {"policy": "peak", "steps": int(peak["steps"]), "p_value": float(peak["p_value"]),
                           "only_peak": int(peak["only_peak"]), "only_final": int(peak["only_final"])}


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
    job = TrainJob.from_dict(json.loads(Path(argv[0]).read_text()))
    return 0 if execute(job) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
