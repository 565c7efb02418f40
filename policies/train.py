"""Train an SB3 policy on a task with a chosen reward; evaluate it with the task's success test.

Read top to bottom: resolve the reward and settings, build vectorised training envs and a separate
evaluation env, build the model (or, for a resumable training, load the checkpoint a killed attempt left:
policies.resume), train with callbacks (component stats, periodic success evaluation, checkpoints, the resume
checkpoint), evaluate the final policy, write `result.json` atomically.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from stable_baselines3.common.callbacks import CallbackList, CheckpointCallback, ProgressBarCallback

from policies.algorithms import (
    algorithm_class,
    cache_jax_compilations,
    configure_jax,
    get_algorithm,
    jax_gpu_count,
    jax_kept_to_cpu,
    network_construction,
    use_jax_device,
)
from policies.callbacks import ComponentStatsCallback, SuccessEvalCallback, progress_fields
from policies.checkpoint import Checkpoint, checkpoint_path
from policies.config import GPU_MAX_SHARERS, GPU_MIN_ENVS, TrainConfig
from policies.cpu_affinity import hold_to_a_free_core
from policies.evaluate import EvalResult, evaluate, model_actor
from policies.her import HER_POLICY, check_learning_starts, her_algo_kwargs, her_buffer_size, resolve_her
from policies.hyperparams import Hyperparams
from policies.interrupt import StopOnRequest, TrainingInterrupted
from policies.io import atomic_file, write_json_atomic
from policies.plan import TrainingPlan, check_device_spelling, resolve_training_plan
from policies.policy import MODEL_FILE, RESULT_FILE, Policy
from policies.policy import load_policy as load_policy  # where callers have always found it
from policies.resume import ResumeCheckpoint, find_checkpoint, load_model, training_settings
from policies.reward_modes import DEFAULT_GAMMA, require_program
from policies.reward_program import RewardFunction, SparseReward, reward_from_spec
from policies.task_env import make_task_env
from policies.vec_envs import build_training_vec_env
from sim_envs import codec
from sim_envs.errors import ConfigError, RewardProgramError
from sim_envs.registry import get_task
from sim_envs.task import Task

PEAK_MODEL_FILE = "peak_model.zip"
"""The policy of the best evaluation during training (the first to reach it), beside the final one."""
EVAL_SEED_OFFSET = 10_000  # evaluation placements never coincide with training resets


@dataclass
class TrainResult:
    task: str
    reward: str
    algo: str
    reward_mode: str
    seed: int
    device: str
    steps: int
    wall_seconds: float
    steps_per_second: float
    success_rate: float
    best_success_rate: float
    mean_return: float
    mean_native_return: float
    curve: list[dict[str, Any]]
    components: list[dict[str, Any]]
    final_eval: dict[str, Any]
    model_path: str
    hyperparams: dict[str, Any]
    requested_steps: int = 0
    """The step budget asked for (`steps` is what was trained: PPO rounds up, an early stop cuts short)."""
    eval_freq: int = 0
    """Env steps between success evaluations, as used (a flag, or the family's YAML)."""
    eval_episodes: int = 0
    """Episodes per evaluation during training, as used."""
    final_eval_episodes: int = 0
    """Episodes of the final evaluation (`success_rate`, `final_eval`), as used; 0 in older results: `eval_episodes`."""
    peak: dict[str, Any] | None = None
    """The best evaluation during training: {steps, success_rate, episodes, model_path} (its policy, `PEAK_MODEL_FILE`)."""
    n_envs: int = 1
    stop_at_success: float | None = None
    torch_threads: int = 1
    reward_isolation: str = ""
    """How the reward ran: a jail (model code), in-process (trusted), or built in."""
    reward_failure: str | None = None
    reward_failure_cause: str | None = None
    """"reward" (its code broke the contract or a limit) or "machine" (its process was stopped or killed from outside)."""
    reward_failure_numbers: str = ""
    """The sandbox's account of a stopped call: CPU, blocked, wall and waiting-for-a-CPU times."""
    """Why training stopped early: the reward broke a limit or failed (the curve so far is kept)."""
    stopped_early: dict[str, Any] | None = None
    """Training ended before its budget by choice: `kind` "success" (the evaluation reached `stop_at_success`)
    or "behind" (a supervisor's stop file: the run's early stopping, with its `rung` and `reason`)."""
    her: bool = False
    """Trained with hindsight experience replay (policies.her): the policy reads the task's dict observation, not the
    flat one, and whatever rebuilds its env must keep it (`policies.her.flat_observations`). Absent in older results: False."""
    resumed_from: list[int] = field(default_factory=list)
    """The step counts this training was resumed from after an interruption (policies.resume), in order; empty when it
    ran in one go. Absent in older results: empty."""
    mean_progress: float | None = None
    """The final evaluation's mean progress toward the task's success rule (policies.score); None in older results."""
    progress_se: float | None = None
    """Its standard error over the final evaluation's episodes."""
    checkpoints: dict[str, Any] | None = None
    """What its resume checkpoints cost in this attempt: {writes, seconds, max_seconds, bytes (the last one's size)};
    None when it wrote none (`t2r train`). `wall_seconds` includes them."""

    @property
    def policy(self) -> Policy:
        """The trained policy (`predict`, `save`, `Policy.load`), loaded from `model_path`."""
        return Policy.load(Path(self.model_path).parent)


def gpu_pays(backend: str, on_policy: bool, n_envs: int, sharers: int = 1) -> bool:
    """The measured rule behind `--device auto`: never the slower device. A GPU only for SBX (JAX) off-policy training
    at n_envs >= GPU_MIN_ENVS, and only while at most GPU_MAX_SHARERS trainings share the GPU (processes take turns on
    it); PPO's small MLP updates and SB3's per-update Python dispatch (SB3 SAC ran 81 steps/s on cuda against 106 on
    cpu at one env) stay on the CPU."""
    return backend == "sbx" and not on_policy and n_envs >= GPU_MIN_ENVS and sharers <= GPU_MAX_SHARERS


def auto_device(backend: str, on_policy: bool, n_envs: int, gpus: int, sharers: int = 1) -> str:
    return "cuda" if gpus and gpu_pays(backend, on_policy, n_envs, sharers) else "cpu"


def resolve_device(device: str, algo: str | None = None, n_envs: int = 1, sharers: int = 1) -> str:
    """The device to train on: `auto` by the measured rule (`auto_device`; `sharers`: trainings running at once on this
    machine), `cuda`/`cuda:N` checked against the GPUs the training library sees. SB3 trains with torch, SBX with JAX,
    and each needs its own GPU build to see one."""
    check_device_spelling(device)
    algorithm = get_algorithm(algo) if algo is not None else None
    if device == "cpu" or (device == "auto" and (algorithm is None or not gpu_pays(algorithm.backend, algorithm.on_policy, n_envs, sharers))):
        return "cpu"  # without counting GPUs: JAX's count starts its GPU backend (a CUDA context and memory) for good
    if algorithm is not None and algorithm.backend == "sbx":
        gpus = jax_gpu_count()
        missing = ("CUDA was requested but JAX sees no GPU in this process: it trained on the CPU before, which keeps "
                   "its JAX to the CPU (train on cuda in a new process)" if jax_kept_to_cpu() else
                   "CUDA was requested but JAX sees no GPU; install JAX's CUDA build (pip install 'jax[cuda12]') or use --device cpu")
    else:
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        missing = "CUDA was requested but no CUDA GPU is visible; use --device cpu or --device auto"
    if device.startswith("cuda") and not gpus:
        raise ConfigError(missing)
    if device == "auto":
        assert algorithm is not None  # checked above
        return auto_device(algorithm.backend, algorithm.on_policy, n_envs, gpus, sharers)
    if device.startswith("cuda:"):  # a GPU index that exists
        index = device.partition(":")[2]
        if not index.isdigit() or int(index) >= gpus:
            raise ConfigError(f"--device {device} names no GPU here: this machine has {gpus} (use cuda:0 to cuda:{gpus - 1})")
    return device


def resolve_reward(task: Task, spec: str) -> RewardFunction:
    if spec == "expert" and not task.has_expert_reward:
        raise ConfigError(f"task {task.id} has no expert reward; use --reward sparse or --reward PATH.py")
    return reward_from_spec(spec)


def library_device(algo: str, device: str) -> str:
    """The device argument for the algorithm's constructor or `load`: SBX's networks go where JAX is told to put them."""
    if get_algorithm(algo).backend == "sbx":
        use_jax_device(device)
        cache_jax_compilations()
        return "cpu"  # SBX's torch side only holds numpy buffers; JAX holds the networks
    return device


def build_algorithm(params: Hyperparams, env: Any, seed: int, device: str, tb_dir: Path) -> Any:
    device = library_device(params.algo, device)
    with network_construction(params.algo):
        return algorithm_class(params.algo)(
            params.policy,
            env,
            seed=seed,
            device=device,
            verbose=0,
            tensorboard_log=str(tb_dir),
            policy_kwargs=dict(params.policy_kwargs),
            **library_kwargs(her_algo_kwargs(params.algo_kwargs, params.her_kwargs) if params.her else params.algo_kwargs),
        )


def library_kwargs(algo_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The algorithm's arguments as the library takes them. JSON and YAML have no tuples, and SB3 takes `train_freq` as
    a whole number or a (number, unit) tuple: a `--hp train_freq=[4,"episode"]` list was refused ("must be an integer")."""
    value = algo_kwargs.get("train_freq")
    return {**algo_kwargs, "train_freq": tuple(value)} if isinstance(value, list) else dict(algo_kwargs)


def train(
    config: TrainConfig,
    reward_fn: RewardFunction | None = None,
    on_eval: Callable[[dict[str, Any]], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
    resumable: bool = False,
    plan: TrainingPlan | None = None,
    stop_requested: Callable[[], bool] | None = None,
) -> TrainResult:
    """Train, evaluate and write `out_dir/result.json`; `reward_fn` overrides `config.reward`. `resumable`: write a
    resume checkpoint after evaluations and go on from one a previous attempt left in `out_dir` with the same
    settings (policies.resume); the caller removes it once its job is done (policies.checkpoint.remove_checkpoint).
    `plan`: the job's resolved plan (policies.plan); without one, it is resolved from `config` here.
    `stop_requested` (a person's Ctrl-C, policies.interrupt): once true, training ends at the next step, the checkpoint
    and a result.json marked interrupted are written (no final evaluation), and `TrainingInterrupted` is raised."""
    task = get_task(config.task_id)
    reward_fn = reward_fn or resolve_reward(task, config.reward)
    setup = resolve_setup(config, plan or resolve_training_plan(config, task), task, reward_fn)
    torch.set_num_threads(config.torch_threads)  # one thread is faster on 2 cores (benchmarks/RESULTS.md)
    out = Path(config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    settings = training_settings(task.id, config.reward, reward_fn, setup.mode, setup.params.algo, setup.seed, setup.steps,
                                 config.stop_at_success, asdict(setup.params))
    checkpoint = find_checkpoint(out, settings) if resumable else None
    train_env, eval_env = build_envs(task, reward_fn, setup.seed, setup, out, resumed=checkpoint is not None)
    place_device(setup, config, (train_env, eval_env))  # after the envs: `subproc` forks them before any GPU backend starts
    if setup.device == "cpu" and (cpu := hold_to_a_free_core()) is not None:  # before the model: its thread pools start on it
        print(f"training on CPU core {cpu}, held by this job alone (policies/cpu_affinity.py)", flush=True)
    model, checkpoint = resume_or_build(setup.params, train_env, setup.seed, setup.device, out / "tb", checkpoint)
    hooks = build_callbacks(config, setup, model, eval_env, out, checkpoint, on_eval, settings if resumable else None)
    if stop_requested is not None:
        hooks.listed.insert(0, StopOnRequest(stop_requested))
        if hooks.resume is not None:
            hooks.resume.unfinished = stop_requested
    try:
        final, wall, failure = learn_and_evaluate(model, hooks, train_env, eval_env, task, config, setup, out, on_phase, stop_requested)
    except TrainingInterrupted as stop:
        write_json_atomic(out / RESULT_FILE, interrupted_result(task, reward_fn, config, setup, hooks, stop))
        raise
    add_final_point(hooks.evaluator.curve, int(model.num_timesteps), final, wall)
    result = training_result(task, reward_fn, config, setup, model, final, wall, hooks, failure)
    write_json_atomic(out / RESULT_FILE, codec.write(result))
    if failure is not None:
        error = type(failure)(f"{failure} (training stopped at step {result.steps}; the partial curve is in {out / RESULT_FILE})")
        error.numbers = failure.numbers
        raise error
    return result


@dataclass
class TrainingSetup:
    """The plan (policies.plan) as this training applies it: its hyper-parameters adapted to the reward (HER), the
    reward mode, and the device placed on this machine. `params` is what result.json records."""

    params: Hyperparams
    steps: int
    mode: str
    final_episodes: int
    device: str
    """The plan's spelling (`auto`, `cuda:1`...) until `place_device` puts it on this machine, once the envs are built."""
    flatten: bool
    """False with HER: the replay buffer swaps the goal in the dict observation, so the policy reads the dict."""
    gamma: float
    seed: int


def resolve_setup(config: TrainConfig, plan: TrainingPlan, task: Task, reward_fn: RewardFunction) -> TrainingSetup:
    """What the plan leaves to the training: HER (which depends on the reward) and the reward mode; the device is placed
    on this machine once the envs are built (`place_device`)."""
    configure_jax(config.torch_threads)
    params = plan.params()
    mode = require_program(config.reward_mode, config.reward)
    params.her = resolve_her(config.her, params.her, task, params.algo, callable(getattr(reward_fn, "relabel", None)), mode)
    if params.her:  # the buffer swaps the goal in the dict observation, so the policy reads the dict
        params.policy = HER_POLICY
        check_learning_starts(params.algo, params.algo_kwargs, task, params.n_envs)
        params.algo_kwargs["buffer_size"] = her_buffer_size(params.algo_kwargs.get("buffer_size"), plan.steps, params.n_envs)
    return TrainingSetup(params=params, steps=plan.steps, mode=mode, final_episodes=plan.final_eval_episodes,
                         device=plan.device, flatten=not params.her,
                         gamma=float(params.algo_kwargs.get("gamma", DEFAULT_GAMMA)), seed=plan.seed)


def place_device(setup: TrainingSetup, config: TrainConfig, envs: tuple[Any, ...]) -> None:
    """The plan's device spelling placed on this machine (`resolve_device`). Called after the envs are built: counting
    GPUs starts JAX's GPU backend and its threads, which env processes forked after it would copy (policies.vec_envs).
    A device that is not here closes the envs before its one-line error."""
    try:
        setup.device = resolve_device(setup.device, setup.params.algo, setup.params.n_envs, config.gpu_sharers)
    except BaseException:
        for env in envs:
            env.close()
        raise


def build_envs(task: Task, reward_fn: RewardFunction, seed: int, plan: TrainingSetup, out: Path, resumed: bool) -> tuple[Any, Any]:
    """The vectorised training envs (monitored into `out/monitor`), then the separate evaluation env."""
    train_env = build_training_vec_env(
        lambda reward: make_task_env(task, reward, seed=seed, reward_mode=plan.mode, gamma=plan.gamma, flatten=plan.flatten,
                                     measure_progress=False),  # only the evaluation env's episodes are graded
        reward_fn,
        n_envs=plan.params.n_envs,
        seed=seed,
        kind=plan.params.vec_env,
        monitor_dir=str(out / "monitor"),
        monitor_kwargs={"info_keywords": ("is_success",), "override_existing": not resumed},  # a resumed run appends
    )
    eval_env = make_task_env(task, reward_fn, seed=seed + EVAL_SEED_OFFSET, reward_mode=plan.mode, gamma=plan.gamma, flatten=plan.flatten)
    return train_env, eval_env


@dataclass
class TrainingCallbacks:
    """A training's callbacks, in the order SB3 calls them (`listed`), and where a resumed training starts from."""

    components: ComponentStatsCallback
    evaluator: SuccessEvalCallback
    listed: list[Any]
    resume: ResumeCheckpoint | None = None
    resumed: bool = False
    elapsed_before: float = 0.0
    training_done: bool = False
    """The checkpoint's training had ended (its budget, or an early stop): only the final evaluation is left."""
    resumed_from: list[int] = field(default_factory=list)


def build_callbacks(config: TrainConfig, plan: TrainingSetup, model: Any, eval_env: Any, out: Path, checkpoint: Checkpoint | None,
                    on_eval: Callable[[dict[str, Any]], None] | None, resume_settings: dict[str, Any] | None) -> TrainingCallbacks:
    """Component stats, the success evaluations, periodic checkpoints and (with `resume_settings`) the resume checkpoint,
    given the state of the checkpoint a resumed training goes on from."""
    params = plan.params
    components = ComponentStatsCallback(log_every=max(1000, params.eval_freq // 2))
    evaluator = SuccessEvalCallback(
        eval_env, params.eval_freq, params.eval_episodes, plan.seed + EVAL_SEED_OFFSET, config.stop_at_success, on_eval,
        stop_file=config.stop_file, peak_model_path=out / PEAK_MODEL_FILE,
    )
    checkpoints = CheckpointCallback(
        save_freq=max(params.checkpoint_freq // params.n_envs, 1), save_path=str(out / "checkpoints"), name_prefix="model"
    )
    hooks = TrainingCallbacks(components, evaluator, [components, evaluator, checkpoints], resumed=checkpoint is not None)
    if checkpoint is not None:
        hooks.elapsed_before, hooks.resumed_from = resume_callbacks(checkpoint, components, evaluator, out / PEAK_MODEL_FILE)
        checkpoints.n_calls = model.num_timesteps // params.n_envs  # its periodic saves keep their step counts
        hooks.training_done = bool(checkpoint.state["finished"] or evaluator.stopped is not None)
        print(f"resuming from the checkpoint at step {checkpoint.steps} of {plan.steps} ({len(evaluator.curve)} evaluations kept)"
              + ("; its training had ended" if hooks.training_done else ""), flush=True)
    if resume_settings is not None:  # after the evaluator: it checkpoints what an evaluation just added
        hooks.resume = ResumeCheckpoint(checkpoint_path(out), resume_settings, evaluator, components, out / PEAK_MODEL_FILE,
                                        hooks.elapsed_before, hooks.resumed_from,
                                        env_rng=checkpoint.state["rng"]["envs"] if checkpoint is not None else None)
        hooks.listed.append(hooks.resume)
    return hooks


def learn_and_evaluate(model: Any, hooks: TrainingCallbacks, train_env: Any, eval_env: Any, task: Task, config: TrainConfig,
                       plan: TrainingSetup, out: Path, on_phase: Callable[[str], None] | None,
                       stop_requested: Callable[[], bool] | None = None) -> tuple[EvalResult, float, RewardProgramError | None]:
    """Train for what is left of the budget, save the model, evaluate it; close both envs. Returns the final evaluation,
    the training's seconds (a resumed one's included) and the reward's failure: a reward that broke a limit stops
    training but keeps what was learned, and the final evaluation, which needs no reward, runs on the sparse one."""
    start = time.perf_counter()
    failure = None
    # the bar as our callback, not SB3's `progress_bar=True`: closed here when training raises (else tqdm closes it at
    # interpreter exit, and prints a traceback after the error's one line)
    bar = ProgressBarCallback() if config.progress else None
    try:
        try:
            if not hooks.training_done:
                model.learn(
                    total_timesteps=max(plan.steps - model.num_timesteps, 0) if hooks.resumed else plan.steps,
                    callback=CallbackList([*hooks.listed, *([bar] if bar is not None else [])]),
                    progress_bar=False,
                    tb_log_name="run",
                    reset_num_timesteps=not hooks.resumed,  # the budget counts from where the checkpoint stopped
                )
        except RewardProgramError as exc:  # the reward broke a limit: keep what was learned so far
            failure = exc
        wall = hooks.elapsed_before + time.perf_counter() - start
        model.save(out / MODEL_FILE)
        if stop_requested is not None and stop_requested():  # a person stopped it (a jailed reward the signal reached included)
            raise TrainingInterrupted(int(model.num_timesteps), plan.steps, wall)
        if failure is not None:  # the reward can no longer be called; the success test needs none
            eval_env.close()
            eval_env = make_task_env(task, SparseReward(), seed=plan.seed + EVAL_SEED_OFFSET, flatten=plan.flatten)
        if on_phase is not None:  # the last evaluation can take as long as a stretch of training: say so
            on_phase(f"final evaluation ({plan.final_episodes} episode{'s' if plan.final_episodes != 1 else ''})")
        final = evaluate(eval_env, model_actor(model), plan.final_episodes, seed=plan.seed + EVAL_SEED_OFFSET)
    finally:
        if bar is not None and getattr(bar, "pbar", None) is not None:
            bar.pbar.close()
        train_env.close()
        eval_env.close()
    return final, wall, failure


def interrupted_result(task: Task, reward_fn: RewardFunction, config: TrainConfig, plan: TrainingSetup, hooks: TrainingCallbacks,
                       stop: TrainingInterrupted) -> dict[str, Any]:
    """result.json of a training a person stopped: how far it got (steps, the curve, the components), the policy it
    saved, and what `load_policy` reads (task, algo, her); no final evaluation was made."""
    curve = hooks.evaluator.curve
    return {"interrupted": True, "task": task.id, "reward": getattr(reward_fn, "name", config.reward), "reward_mode": plan.mode,
            "algo": plan.params.algo, "seed": plan.seed, "device": plan.device, "steps": stop.steps,
            "requested_steps": int(plan.steps), "wall_seconds": round(stop.wall_seconds, 2),
            "success_rate": curve[-1]["success_rate"] if curve else None, "curve": curve, "components": hooks.components.history,
            "model_path": str(Path(config.out_dir) / MODEL_FILE), "her": plan.params.her, "resumed_from": hooks.resumed_from,
            "eval_freq": int(plan.params.eval_freq), "eval_episodes": int(plan.params.eval_episodes)}


def add_final_point(curve: list[dict[str, Any]], steps: int, final: EvalResult, wall: float) -> None:
    """The final evaluation as the curve's last point, unless an evaluation at the same step count ended it already."""
    if curve and curve[-1]["steps"] == steps:
        return
    curve.append(
        {
            "steps": steps,
            "wall_seconds": round(wall, 2),
            "success_rate": final.success_rate,
            "mean_return": final.mean_return,
            "std_return": final.std_return,
            "mean_native_return": final.mean_native_return,
            "mean_length": final.mean_length,
            "episodes": len(final.episodes),
            **progress_fields(final),
        }
    )


def training_result(task: Task, reward_fn: RewardFunction, config: TrainConfig, plan: TrainingSetup, model: Any, final: EvalResult,
                    wall: float, hooks: TrainingCallbacks, failure: RewardProgramError | None) -> TrainResult:
    """What result.json records: the final evaluation, the curve and components over training, the settings as used."""
    params, evaluator = plan.params, hooks.evaluator
    return TrainResult(
        task=task.id,
        reward=getattr(reward_fn, "name", config.reward),
        reward_mode=plan.mode,
        algo=params.algo,
        seed=plan.seed,
        device=plan.device,
        steps=int(model.num_timesteps),
        wall_seconds=round(wall, 2),
        steps_per_second=round(model.num_timesteps / max(wall, 1e-9), 1),
        success_rate=final.success_rate,
        best_success_rate=max([final.success_rate, *(p["success_rate"] for p in evaluator.curve)]),
        mean_return=final.mean_return,
        mean_native_return=final.mean_native_return,
        curve=evaluator.curve,
        components=hooks.components.history,
        final_eval=codec.write(final),
        model_path=str(Path(config.out_dir) / MODEL_FILE),
        hyperparams=asdict(params),
        requested_steps=int(plan.steps),
        eval_freq=int(params.eval_freq),
        eval_episodes=int(params.eval_episodes),
        final_eval_episodes=int(plan.final_episodes),
        peak=evaluator.peak,
        n_envs=int(params.n_envs),
        stop_at_success=config.stop_at_success,
        torch_threads=int(config.torch_threads),
        reward_isolation=str(getattr(reward_fn, "isolation", "")),
        reward_failure=str(failure) if failure is not None else None,
        reward_failure_cause=failure.cause if failure is not None else None,
        reward_failure_numbers=failure.numbers if failure is not None else "",
        stopped_early=evaluator.stopped,
        her=params.her,
        resumed_from=hooks.resumed_from,
        checkpoints=hooks.resume.cost() if hooks.resume is not None else None,
        mean_progress=final.mean_progress,
        progress_se=final.progress_se,
    )


def resume_or_build(params: Hyperparams, env: Any, seed: int, device: str, tb_dir: Path,
                    checkpoint: Checkpoint | None) -> tuple[Any, Checkpoint | None]:
    """The checkpoint's model when there is one that loads, else a new one; and the checkpoint, if it was used.
    Either way an SBX SAC model samples its exploring actions in one compiled call (policies/sbx_sampling.py)."""
    if checkpoint is not None:
        try:
            model = load_model(algorithm_class(params.algo), checkpoint, env, library_device(params.algo, device), str(tb_dir))
            return one_call_sampling(params.algo, model), checkpoint
        except Exception as exc:  # a library that changed under it, a buffer that does not fit: the checkpoint is of no use
            print(f"the checkpoint {checkpoint.path} cannot be restored ({type(exc).__name__}: {exc}); starting over", flush=True)
    return one_call_sampling(params.algo, build_algorithm(params, env, seed, device, tb_dir)), None


def one_call_sampling(algo: str, model: Any) -> Any:
    """The model, its exploring actions drawn in one compiled call where it is SBX's SAC (the same actions, less time)."""
    if get_algorithm(algo).backend != "sbx":
        return model
    from policies.sbx_sampling import sample_in_one_call  # JAX and SBX: loaded already for an SBX model

    return sample_in_one_call(model)


def resume_callbacks(checkpoint: Checkpoint, components: ComponentStatsCallback, evaluator: SuccessEvalCallback,
                     peak_model: Path) -> tuple[float, list[int]]:
    """Give the callbacks the checkpoint's curve, peak, statistics and early-stopping state, and put back the peak policy
    it knew (one saved after it belongs to an evaluation the resumed run makes again). Returns the training seconds
    before it and the steps of every resumption so far, this one included."""
    state = checkpoint.state
    components.restore(state["components"])
    evaluator.restore(state["evaluator"], elapsed=state["wall_seconds"])
    if checkpoint.peak_model is not None and evaluator.peak is not None:
        with atomic_file(peak_model) as handle:
            handle.write(checkpoint.peak_model)
        evaluator.peak["model_path"] = str(peak_model)  # where it is now, should the folder have moved
    return float(state["wall_seconds"]), [*state["resumed_from"], checkpoint.steps]


