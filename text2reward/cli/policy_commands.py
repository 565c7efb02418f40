"""`t2r tasks | train | evaluate | video`: the tasks, and policies trained on a chosen reward."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

import sim_envs
from policies.config import DEVICE_HELP, TrainConfig
from policies.curve import CurvePoint
from policies.formatting import evaluations_of, format_seconds
from policies.io import write_json_atomic
from policies.score import progress_text
from policies.stats import Rate
from sim_envs.codec import read
from text2reward.cli.shared import (
    Column,
    RewardModeOption,
    TaskFileOption,
    app,
    console,
    err_console,
    fitted_table,
    friendly,
    load_extra_tasks,
    parse_overrides,
)
from text2reward.errors import ConfigError, RewardProgramError


@app.command(epilog="Example: t2r tasks --family fetch   |   t2r tasks --show metaworld/drawer-open-v3")
@friendly
def tasks(
    family: Annotated[Optional[str], typer.Option(help="only this family, e.g. metaworld")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable list")] = False,
    show: Annotated[Optional[str], typer.Option(help="print one task's details and its state view")] = None,
    task_file: TaskFileOption = None,
) -> None:
    """List the registered tasks."""
    load_extra_tasks(task_file)
    if show:
        task = sim_envs.get_task(show)
        console.print(f"[bold]{task.id}[/bold]: {task.description}", soft_wrap=True)
        console.print(f"success: {task.success_doc}", soft_wrap=True, highlight=False)
        console.print(f"expert reward: {task.expert_reward_doc or 'none'}", soft_wrap=True, highlight=False)
        console.print(f"episode: {task.max_episode_steps} steps; default budget {task.default_steps} steps")
        if task.budget_note:
            console.print(f"budget: {task.budget_note}", highlight=False, soft_wrap=True)
        typer.echo(sim_envs.render_view_doc(task))  # code, copied as it is: never folded at the terminal's width
        return
    selected = sim_envs.list_tasks(family)
    if family and not selected:
        known = sorted({t.family for t in sim_envs.list_tasks()})
        raise ConfigError(f"unknown --family {family!r}; the families are {', '.join(known)}")
    if as_json:
        typer.echo(json.dumps([t.summary() for t in selected], indent=2))
        return
    columns = [Column("id", keep_whole=True), Column("description"), Column("expert", optional=True),
               Column("scripted", optional=True)]
    rows = [[task.id, task.description, "yes" if task.has_expert_reward else "-", "yes" if task.has_scripted_policy else "-"]
            for task in selected]
    console.print(fitted_table(columns, rows, title=f"{len(selected)} tasks"))


@app.command(epilog="Example: t2r train --task metaworld/reach-v3 --steps 20000 --out runs/train/reach   |   t2r train --task hopper/forward --reward my_reward.py")
@friendly
def train(
    task: Annotated[Optional[str], typer.Option(help="task id, e.g. metaworld/reach-v3")] = None,
    reward: Annotated[str, typer.Option(help="expert, sparse, or a .py file defining compute_dense_reward")] = "expert",
    steps: Annotated[Optional[int], typer.Option(help="environment steps (default: the task's budget)")] = None,
    seed: Annotated[int, typer.Option(help="seed of the policy, the environment and evaluation")] = 0,
    out: Annotated[Path, typer.Option(help="output directory")] = Path("runs/train"),
    reward_mode: RewardModeOption = "dense",
    device: Annotated[str, typer.Option(help=DEVICE_HELP)] = "auto",
    algo: Annotated[Optional[str], typer.Option(help="sac, ppo (SB3), sbx-sac or sbx-ppo (SBX, JAX) (default: the family's)")] = None,
    eval_freq: Annotated[Optional[int], typer.Option(help="env steps between success evaluations")] = None,
    eval_episodes: Annotated[Optional[int], typer.Option(help="episodes per evaluation")] = None,
    stop_at_success: Annotated[Optional[float], typer.Option(help="stop once evaluation success reaches this")] = None,
    hp: Annotated[Optional[list[str]], typer.Option("--hp", help="hyper-parameter override KEY=VALUE, repeatable")] = None,
    trusted_reward: Annotated[bool, typer.Option(
        "--trusted-reward", help="run a --reward FILE.py you wrote yourself inside the training process, with no sandbox")] = False,
    her: Annotated[Optional[bool], typer.Option(
        "--her/--no-her", help="hindsight experience replay for a multi-goal task (e.g. fetch/*) with --reward sparse or expert and "
        "SAC (default: the family's)", show_default=False)] = None,
    task_file: TaskFileOption = None,
    resume: Annotated[Optional[Path], typer.Option(
        "--resume", metavar="OUT", help="continue the training a Ctrl-C (or SIGTERM) stopped in OUT, with its settings")] = None,
) -> None:
    """Train a policy with a reward and evaluate it with the task's own success test.

    A --reward FILE.py runs in the sandbox's jail, like model-written code, unless --trusted-reward. Ctrl-C stops it at
    the next step and keeps what it reached (result.json marked interrupted, a checkpoint): --resume OUT goes on."""
    from policies.checkpoint import checkpoint_path, remove_checkpoint
    from text2reward.api import reward_for_training  # the front door imports the loop: only this command needs it
    from text2reward.preflight import budget_warning, check_train_config

    if resume is not None:
        args = read_train_command(resume)
    elif task is None:
        raise ConfigError("name a task (--task metaworld/reach-v3), or continue a stopped training with --resume OUT")
    else:
        args = TrainCommand(task=task, reward=reward, steps=steps, seed=seed, out=str(out), reward_mode=reward_mode, device=device,
                            algo=algo, eval_freq=eval_freq, eval_episodes=eval_episodes, stop_at_success=stop_at_success,
                            hp=list(hp or []), trusted_reward=trusted_reward, her=her,
                            task_file=str(task_file.resolve()) if task_file else None)
        if checkpoint_path(out).is_file():
            raise ConfigError(f"{out} holds a stopped training; `t2r train --resume {out}` continues it, or pass another --out "
                              "to start afresh")
    out = Path(args.out)
    load_extra_tasks(Path(args.task_file) if args.task_file else None)
    config = TrainConfig(
        task_id=args.task, out_dir=out, reward=args.reward, reward_mode=args.reward_mode, steps=args.steps, seed=args.seed,
        device=args.device, algo=args.algo, eval_freq=args.eval_freq, eval_episodes=args.eval_episodes,
        stop_at_success=args.stop_at_success, progress=True, overrides=parse_overrides(args.hp), her=args.her,
    )
    task_obj = check_train_config(config)  # the task, numbers, device and --hp keys, before a sandbox or an env starts
    warning = budget_warning(task_obj, args.steps)
    if warning:
        err_console.print(warning, highlight=False, markup=False, soft_wrap=True)
    reward_fn = reward_for_training(args.reward, args.trusted_reward, args.reward_mode)
    # SB3 and torch (~2 s) only once every check above has passed: a mistake is answered without them
    from policies.interrupt import StopRequest, TrainingInterrupted
    from policies.train import RESULT_FILE
    from policies.train import train as run_training
    from sim_envs.model_cache import compile_each_file_once

    compile_each_file_once()  # the training env and the evaluation env: the scene compiled once
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / TRAIN_COMMAND, dataclasses.asdict(args))
    try:
        with StopRequest().catching() as stop:
            result = run_training(config, reward_fn=reward_fn, resumable=True, stop_requested=stop,
                                  on_phase=lambda phase: console.print(f"{phase}...", highlight=False, soft_wrap=True))
    except TrainingInterrupted as exc:
        err_console.print(f"interrupted at step {exc.steps:,} of {exc.requested_steps:,} after {format_seconds(exc.wall_seconds)}; "
                          f"what it reached is in {out / RESULT_FILE}; resume with `t2r train --resume {out}`",
                          highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(130) from None
    except RewardProgramError as exc:
        if exc.cause == "reward":  # its own code failed: training it again would fail again, so nothing is left to resume
            remove_checkpoint(out)
        raise
    finally:
        close = getattr(reward_fn, "close", None)
        if close is not None:
            close()
    remove_checkpoint(out)  # finished: nothing to resume
    final = Rate.of(result.success_rate, result.final_eval_episodes or result.eval_episodes)
    console.print(
        f"success rate {final.text()} ({best_during_training(result.curve, result.eval_episodes)}) after {result.steps:,} steps "
        f"in {format_seconds(result.wall_seconds)} ({result.steps_per_second:,.0f} steps/s, {result.device})",
        highlight=False, soft_wrap=True,
    )
    console.print(f"reward isolation: {result.reward_isolation}" + ("; hindsight experience replay (HER)" if result.her else ""), highlight=False)
    console.print(f"wrote {out / RESULT_FILE}, model {result.model_path}, TensorBoard logs {out / 'tb'}")


TRAIN_COMMAND = "train_command.json"
"""A `t2r train`'s settings as given, in its --out folder: what `--resume OUT` trains with again."""


@dataclass(frozen=True)
class TrainCommand:
    """The options of one `t2r train` (paths as strings, a task file resolved)."""

    task: str
    reward: str
    steps: int | None
    seed: int
    out: str
    reward_mode: str
    device: str
    algo: str | None
    eval_freq: int | None
    eval_episodes: int | None
    stop_at_success: float | None
    hp: list[str]
    trusted_reward: bool
    her: bool | None
    task_file: str | None


def read_train_command(out: Path) -> TrainCommand:
    """The settings of the training stopped in `out`; one line when there is none to continue."""
    path = out / TRAIN_COMMAND
    if not checkpoint_file(out).is_file() or not path.is_file():
        raise ConfigError(f"{out} holds no stopped `t2r train` to continue (no {TRAIN_COMMAND} and checkpoint); pass the --out "
                          "folder of a training you stopped with Ctrl-C")
    try:
        data = json.loads(path.read_text())
        return TrainCommand(**{**data, "out": str(out)})
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{path} is damaged ({exc}); start the training again with `t2r train --task ...`") from None


def checkpoint_file(out: Path) -> Path:
    from policies.checkpoint import checkpoint_path  # light, but keeps the module's imports to what every command needs

    return checkpoint_path(out)


@app.command(epilog="Example: t2r evaluate --model runs/train/reach --episodes 20")
@friendly
def evaluate(
    model: Annotated[Path, typer.Option(help="a `t2r train --out` directory")],
    episodes: Annotated[int, typer.Option(help="episodes to evaluate")] = 10,
    seed: Annotated[int, typer.Option(help="seed of the first episode's reset")] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON on stdout")] = False,
    task_file: TaskFileOption = None,
) -> None:
    """Evaluate a saved policy with its task's success test."""
    from policies.policy import saved_policy_files

    saved_policy_files(model)  # a wrong path is answered before the heavy imports below
    from text2reward.cli.saved_policy import SavedPolicy  # gymnasium, SB3 and torch (~2 s): only the commands that load a policy pay them

    load_extra_tasks(task_file)
    saved = SavedPolicy.load(model)
    task = saved.task
    # with --json, stdout is the JSON alone and progress goes to stderr
    with _EpisodeProgress(err_console if as_json else console, f"evaluating {task.id}", episodes) as progress:
        result = saved.evaluate(episodes, seed, on_episode=progress)
    summary = {"task": task.id, "episodes": episodes, "success_rate": result.success_rate,
               "mean_native_return": result.mean_native_return, "mean_length": result.mean_length,
               **({"mean_progress": result.mean_progress, "progress_se": result.progress_se} if result.mean_progress is not None else {})}
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        toward = (f", {progress_text(result.mean_progress, result.progress_se or 0.0)}" if result.mean_progress is not None else "")
        console.print(f"{task.id}: success rate {result.success_rate:.2f} over {episodes} episodes "
                      f"(mean native return {result.mean_native_return:.1f}, mean length {result.mean_length:.0f}{toward})")


@app.command(epilog="Example: t2r video --model runs/train/reach --episodes 2 --out reach.mp4")
@friendly
def video(
    model: Annotated[Path, typer.Option(help="a `t2r train --out` directory")],
    out: Annotated[Optional[Path], typer.Option(help="mp4 path (default: MODEL/rollout.mp4)")] = None,
    episodes: Annotated[int, typer.Option(help="episodes to record, one after another")] = 1,
    seed: Annotated[int, typer.Option(help="seed of the first episode's reset")] = 100,
    size: Annotated[int, typer.Option(help="frame width and height in pixels")] = 320,
    render_every: Annotated[Optional[int], typer.Option(
        min=1, help="render one frame every N control steps (default: as few as keep the video at 30 fps or less)")] = None,
    task_file: TaskFileOption = None,
) -> None:
    """Record a rollout video of a saved policy (offscreen rendering), played at real time."""
    from policies.policy import saved_policy_files

    saved_policy_files(model)  # a wrong path is answered before the heavy imports below
    from policies.video import record_video  # imageio and ffmpeg: only the command that films pays them
    from text2reward.cli.saved_policy import SavedPolicy  # gymnasium, SB3 and torch (~2 s): only the commands that load a policy pay them

    load_extra_tasks(task_file)
    saved = SavedPolicy.load(model)
    task = saved.task
    path = out or (model / "rollout.mp4")
    with _EpisodeProgress(console, f"recording {task.id}", episodes) as progress:
        info = record_video(task, saved.actor, path, episodes=episodes, seed=seed, size=size,
                            render_every=render_every, on_episode=progress, flatten=saved.flatten)
    every = "every step" if info["render_every"] == 1 else f"every {info['render_every']} steps"
    console.print(f"wrote {info['path']} ({info['frames']} frames, {every}, at {info['fps']:g} fps; successes {info['successes']})",
                  highlight=False, soft_wrap=True)


class _EpisodeProgress:
    """`t2r evaluate` and `t2r video` progress: a line per finished episode (success, return, length), under a
    Rich bar while the output is a terminal; plain lines, never a redrawn or hard-wrapped bar, in a file or pipe."""

    def __init__(self, out: Any, label: str, episodes: int):
        self.out, self.label, self.episodes = out, label, episodes
        self._progress: Any = None
        self._bar: Any = None

    def __enter__(self) -> _EpisodeProgress:
        if self.out.is_terminal:
            from rich.progress import (  # rich's live display (~5 ms): only a terminal shows the bar
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), console=self.out, transient=True)
            self._progress.start()
            self._bar = self._progress.add_task(self.label, total=self.episodes)
        return self

    def __call__(self, index: int, stats: Any) -> None:
        self.out.print(f"episode {index + 1}/{self.episodes}: {'success' if stats.success else 'failure'}, "
                       f"return {stats.episode_return:.2f} (native {stats.native_return:.1f}), {stats.length} steps",
                       highlight=False, markup=False, soft_wrap=True)
        if self._progress is not None:
            self._progress.advance(self._bar)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


def best_during_training(curve: list[dict], episodes: int) -> str:
    """The best evaluation during training with its episodes and interval; an all-zero curve has no best to name."""
    points = [read(CurvePoint, p, "result.json") for p in curve]
    points = [p for p in points if (p.episodes or episodes) == episodes]  # not the final evaluation appended to it
    if not points or max(p.success_rate for p in points) <= 0:
        return f"no evaluation during training succeeded ({evaluations_of(len(points), episodes)})"
    top = max(points, key=lambda p: p.success_rate)
    return f"best during training {Rate.of(top.success_rate, top.episodes or episodes).text()} at step {top.steps:,}"
