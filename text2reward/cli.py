"""The `t2r` command line: Typer commands that print where their outputs went.

User mistakes become one red line and exit code 1, never a traceback.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from text2reward.errors import ConfigError, Text2RewardError

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Language-model-written dense rewards for MuJoCo robot tasks.")
console = Console()
err_console = Console(stderr=True)

TaskFileOption = Annotated[Optional[Path], typer.Option("--task-file", help="Python file defining extra tasks (see README)")]


def friendly(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn project errors into one red line and a non-zero exit."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except Text2RewardError as exc:
            err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None

    return wrapper


def _load_task_file(task_file: Path | None) -> None:
    if task_file is not None:
        from sim_envs import load_task_file

        for task in load_task_file(task_file):
            err_console.print(f"loaded task {task.id} from {task_file}")


@app.command()
@friendly
def tasks(
    family: Annotated[Optional[str], typer.Option(help="only this family, e.g. metaworld")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable list")] = False,
    show: Annotated[Optional[str], typer.Option(help="print one task's details and its state view")] = None,
    task_file: TaskFileOption = None,
) -> None:
    """List the registered tasks."""
    from sim_envs import get_task, list_tasks, render_view_doc

    _load_task_file(task_file)
    if show:
        task = get_task(show)
        console.print(f"[bold]{task.id}[/bold]: {task.description}")
        console.print(f"success: {task.success_doc}")
        console.print(f"expert reward: {task.expert_reward_doc or 'none'}")
        console.print(f"episode: {task.max_episode_steps} steps; default budget {task.default_steps} steps")
        console.print(render_view_doc(task), highlight=False, markup=False)
        return
    selected = list_tasks(family)
    if as_json:
        typer.echo(json.dumps([t.summary() for t in selected], indent=2))
        return
    table = Table("id", "description", "expert", "scripted", title=f"{len(selected)} tasks")
    for task in selected:
        table.add_row(task.id, task.description, "yes" if task.has_expert_reward else "-", "yes" if task.has_scripted_policy else "-")
    console.print(table)


@app.command()
@friendly
def train(
    task: Annotated[str, typer.Option(help="task id, e.g. metaworld/reach-v3")],
    reward: Annotated[str, typer.Option(help="expert, sparse, or a .py file defining compute_dense_reward")] = "expert",
    steps: Annotated[Optional[int], typer.Option(help="environment steps (default: the task's budget)")] = None,
    seed: Annotated[int, typer.Option()] = 0,
    out: Annotated[Path, typer.Option(help="output directory")] = Path("runs/train"),
    device: Annotated[str, typer.Option(help="auto, cpu or cuda")] = "auto",
    algo: Annotated[Optional[str], typer.Option(help="sac or ppo (default: the family's)")] = None,
    eval_freq: Annotated[Optional[int], typer.Option(help="env steps between success evaluations")] = None,
    eval_episodes: Annotated[Optional[int], typer.Option(help="episodes per evaluation")] = None,
    stop_at_success: Annotated[Optional[float], typer.Option(help="stop once evaluation success reaches this")] = None,
    hp: Annotated[Optional[list[str]], typer.Option("--hp", help="hyper-parameter override KEY=VALUE, repeatable")] = None,
    trusted_reward: Annotated[bool, typer.Option(
        "--trusted-reward", help="run a --reward FILE.py you wrote yourself inside the training process, with no sandbox")] = False,
    task_file: TaskFileOption = None,
) -> None:
    """Train a policy with a reward and evaluate it with the task's own success test.

    A --reward FILE.py runs in the sandbox's jail, like model-written code, unless --trusted-reward."""
    from policies.train import RESULT_FILE, TrainConfig
    from policies.train import train as run_training

    _load_task_file(task_file)
    reward_fn = _reward_for_training(reward, trusted_reward)
    config = TrainConfig(
        task_id=task, out_dir=out, reward=reward, steps=steps, seed=seed, device=device, algo=algo,
        eval_freq=eval_freq, eval_episodes=eval_episodes, stop_at_success=stop_at_success, progress=True,
        overrides=_parse_overrides(hp),
    )
    try:
        result = run_training(config, reward_fn=reward_fn)
    finally:
        close = getattr(reward_fn, "close", None)
        if close is not None:
            close()
    console.print(
        f"success rate {result.success_rate:.2f} (best {result.best_success_rate:.2f}) after {result.steps} steps "
        f"in {result.wall_seconds:.0f} s ({result.steps_per_second:.0f} steps/s, {result.device})"
    )
    console.print(f"reward isolation: {result.reward_isolation}", highlight=False)
    console.print(f"wrote {out / RESULT_FILE}, model {result.model_path}, TensorBoard logs {out / 'tb'}")


def _reward_for_training(spec: str, trusted: bool) -> Any:
    """expert / sparse as they are; a file jailed (SandboxedReward) unless the user vouches for it."""
    from policies.reward_program import ProgramReward

    if spec in ("expert", "sparse"):
        if trusted:
            raise ConfigError("--trusted-reward applies to a --reward FILE.py only; drop it for expert or sparse")
        return None
    path = Path(spec)
    if not path.is_file():
        raise ConfigError(f"reward file {path} does not exist; pass expert, sparse, or a .py file defining compute_dense_reward(self, action)")
    if trusted:
        return ProgramReward.from_file(path)
    from text2reward.sandbox import SandboxedReward, active_isolation

    active_isolation()  # fail closed before training starts
    return SandboxedReward(path.read_text(), name=path.stem)


@app.command()
@friendly
def evaluate(
    model: Annotated[Path, typer.Option(help="a `t2r train --out` directory")],
    episodes: Annotated[int, typer.Option()] = 10,
    seed: Annotated[int, typer.Option()] = 100,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    task_file: TaskFileOption = None,
) -> None:
    """Evaluate a saved policy with its task's success test."""
    from policies.evaluate import evaluate as run_eval
    from policies.evaluate import model_actor
    from policies.reward_program import SparseReward
    from policies.task_env import make_task_env
    from policies.train import load_policy
    from sim_envs import get_task

    _load_task_file(task_file)
    policy, meta = load_policy(model)
    task = get_task(meta["task"])
    env = make_task_env(task, SparseReward(), seed=seed)
    try:
        result = run_eval(env, model_actor(policy), episodes, seed=seed)
    finally:
        env.close()
    summary = {"task": task.id, "episodes": episodes, "success_rate": result.success_rate,
               "mean_native_return": result.mean_native_return, "mean_length": result.mean_length}
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        console.print(f"{task.id}: success rate {result.success_rate:.2f} over {episodes} episodes "
                      f"(mean native return {result.mean_native_return:.1f}, mean length {result.mean_length:.0f})")


@app.command()
@friendly
def video(
    model: Annotated[Path, typer.Option(help="a `t2r train --out` directory")],
    out: Annotated[Optional[Path], typer.Option(help="mp4 path (default: MODEL/rollout.mp4)")] = None,
    episodes: Annotated[int, typer.Option()] = 1,
    seed: Annotated[int, typer.Option()] = 100,
    size: Annotated[int, typer.Option(help="frame width and height in pixels")] = 320,
    task_file: TaskFileOption = None,
) -> None:
    """Record a rollout video of a saved policy (offscreen rendering)."""
    from policies.evaluate import model_actor
    from policies.train import load_policy
    from policies.video import record_video
    from sim_envs import get_task

    _load_task_file(task_file)
    policy, meta = load_policy(model)
    task = get_task(meta["task"])
    path = out or (model / "rollout.mp4")
    info = record_video(task, model_actor(policy), path, episodes=episodes, seed=seed, size=size)
    console.print(f"wrote {info['path']} ({info['frames']} frames at {info['fps']} fps, successes {info['successes']})")



# --- the synthesis loop -------------------------------------------------------------------------------------

RunsDirOption = Annotated[Path, typer.Option("--runs-dir", help="where runs live (with index.sqlite)")]


@app.command()
@friendly
def prompt(
    task: Annotated[str, typer.Option(help="task id")],
    few_shot: Annotated[int, typer.Option("--few-shot", help="number of retrieved expert examples")] = 0,
    task_file: TaskFileOption = None,
) -> None:
    """Print the exact messages that would be sent to the model."""
    from sim_envs import get_task
    from text2reward.codegen import build_initial_messages, format_messages_for_display

    _load_task_file(task_file)
    typer.echo(format_messages_for_display(build_initial_messages(get_task(task), few_shot=few_shot)))


@app.command()
@friendly
def validate(
    task: Annotated[str, typer.Option(help="task id whose real states the code runs on")],
    code: Annotated[Path, typer.Option(help="a .py file defining compute_dense_reward(self, action)")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
    task_file: TaskFileOption = None,
) -> None:
    """Static checks, then an isolated smoke run on real states; exit 0 only when the code is ok."""
    from sim_envs import get_task
    from text2reward.sandbox import active_isolation
    from text2reward.sandbox import validate as run_validation

    _load_task_file(task_file)
    if not code.is_file():
        raise ConfigError(f"code file {code} does not exist; pass a .py file defining compute_dense_reward(self, action)")
    task_obj = get_task(task)
    active_isolation()  # fail closed: no jail, no run (even the static pass is not offered as a verdict)
    report = run_validation(code.read_text(), task_obj)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        console.print("[green]ok[/green]" if report.ok else "[red]rejected[/red]")
        for error in report.errors:
            console.print(f"  - {error}", highlight=False, markup=False)
    raise typer.Exit(0 if report.ok else 1)


HyperparamOption = Annotated[Optional[list[str]], typer.Option("--hp", help="hyper-parameter override KEY=VALUE (YAML value), repeatable")]


def _parse_overrides(items: list[str] | None) -> dict[str, Any]:
    import yaml

    from text2reward.errors import ConfigError

    overrides: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--hp {item!r} is not KEY=VALUE; e.g. --hp batch_size=64")
        overrides[key.strip()] = yaml.safe_load(value)
    return overrides


def _say(message: str) -> None:
    console.print(message, highlight=False, markup=False)


def _bars() -> Any:
    from text2reward.progress import TrainingBars

    return TrainingBars(console)


def _print_run_outcome(store: Any) -> None:
    state = store.state()
    console.print(f"run {store.run_id}: {state.get('status')} - best success {state.get('best_success')}")
    console.print(f"outputs in {store.root} (report: {store.root / state.get('report', 'report.md')})")


@app.command()
@friendly
def run(
    task: Annotated[str, typer.Option(help="task id")],
    llm: Annotated[str, typer.Option(help="openai, heuristic (rule-based, no model) or file")] = "heuristic",
    base_url: Annotated[Optional[str], typer.Option(help="OpenAI-compatible endpoint (or OPENAI_BASE_URL)")] = None,
    model: Annotated[Optional[str], typer.Option(help="model name for --llm openai")] = None,
    reply_file: Annotated[Optional[list[Path]], typer.Option(help="reply files for --llm file (else stdin)")] = None,
    rounds: Annotated[int, typer.Option()] = 2,
    samples: Annotated[int, typer.Option(help="candidates per round (K)")] = 2,
    steps: Annotated[Optional[int], typer.Option(help="training steps per candidate")] = None,
    workers: Annotated[int, typer.Option(help="parallel training workers (W)")] = 2,
    seed: Annotated[int, typer.Option()] = 0,
    few_shot: Annotated[int, typer.Option("--few-shot")] = 0,
    vision: Annotated[bool, typer.Option(help="send rollout keyframes to a vision-capable model")] = False,
    screen: Annotated[bool, typer.Option(help="screen candidates on scripted trajectories before training")] = True,
    final_seeds: Annotated[int, typer.Option(help="seeds to re-train the best reward (and the expert) on")] = 2,
    compare_expert: Annotated[bool, typer.Option(help="train the expert reward on the same budget")] = True,
    success_threshold: Annotated[float, typer.Option(help="stop early at this success rate")] = 0.9,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda")] = "auto",
    eval_freq: Annotated[Optional[int], typer.Option(help="env steps between success evaluations")] = None,
    eval_episodes: Annotated[Optional[int], typer.Option(help="episodes per evaluation")] = None,
    hp: HyperparamOption = None,
    runs_dir: RunsDirOption = Path("runs"),
    task_file: TaskFileOption = None,
) -> None:
    """Generate, validate, screen, train and refine rewards for a task."""
    from text2reward.loop import start_run
    from text2reward.store import RunConfig

    config = RunConfig(
        task_id=task, backend=llm, model=model, base_url=base_url, reply_files=[str(p) for p in reply_file or []],
        rounds=rounds, samples=samples, steps=steps, workers=workers, seed=seed, few_shot=few_shot, vision=vision,
        screen=screen, final_seeds=final_seeds, compare_expert=compare_expert, success_threshold=success_threshold,
        device=device, task_file=str(task_file.resolve()) if task_file else None,
        eval_freq=eval_freq, eval_episodes=eval_episodes, overrides=_parse_overrides(hp),
    )
    store = start_run(config, runs_dir, progress=_say, display=_bars())
    _print_run_outcome(store)


@app.command()
@friendly
def resume(
    run_id: Annotated[str, typer.Argument(help="the run to continue")],
    runs_dir: RunsDirOption = Path("runs"),
    rounds: Annotated[Optional[int], typer.Option(help="raise the number of rounds")] = None,
) -> None:
    """Continue an interrupted run (or add rounds): finished candidates are never redone."""
    from text2reward.loop import resume_run
    from text2reward.store import RunStore

    if rounds is not None:
        store = RunStore.open(runs_dir, run_id)
        config = store.config()
        if rounds > config.rounds:
            from dataclasses import asdict

            config.rounds = rounds
            store.write_json("config.json", asdict(config))
    store = resume_run(runs_dir, run_id, progress=_say, display=_bars())
    _print_run_outcome(store)


runs_app = typer.Typer(help="List runs, or show one.", invoke_without_command=True)
app.add_typer(runs_app, name="runs")


@runs_app.callback()
@friendly
def runs_list(ctx: typer.Context, runs_dir: RunsDirOption = Path("runs"), as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List runs, newest first."""
    if ctx.invoked_subcommand is not None:
        return
    from text2reward.store import list_runs

    rows = list_runs(runs_dir)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table("run", "task", "backend", "status", "rounds", "best success", "tokens", "wall s", title=f"runs in {runs_dir}")
    for r in rows:
        backend = r["backend"] + (" (rule-based)" if r["backend"] == "heuristic" else f" {r['model'] or ''}")
        best = "-" if r["best_success"] is None else f"{r['best_success']:.2f}"
        table.add_row(r["run_id"], r["task_id"], backend, r["status"], str(r["rounds_done"]), best,
                      str(r["prompt_tokens"] + r["completion_tokens"]), f"{r['wall_seconds'] or 0:.0f}")
    console.print(table)


@runs_app.command("show")
@friendly
def runs_show(run_id: Annotated[str, typer.Argument()], runs_dir: RunsDirOption = Path("runs")) -> None:
    """Summarise one run: best success per round, token cost, wall time, the final comparison."""
    from text2reward.loop import best_candidate
    from text2reward.store import RunStore

    store = RunStore.open(runs_dir, run_id)
    config, state = store.config(), store.state()
    candidates = store.candidates()
    author = "heuristic (rule-based, no language model)" if config.backend == "heuristic" else f"{config.backend} {config.model or ''}"
    console.print(f"[bold]{run_id}[/bold] {config.task_id} by {author}: {state.get('status')}, {state.get('wall_seconds', 0):.0f} s")
    table = Table("round", "candidates", "best", "best success")
    rounds = sorted({c["round"] for c in candidates})
    for r in rounds:
        in_round = [c for c in candidates if c["round"] == r]
        best = best_candidate(in_round)
        table.add_row(str(r), ", ".join(f"{c['id']}:{c['status']}" for c in in_round), best["id"] if best else "-",
                      f"{best['training']['success_rate']:.2f}" if best else "-")
    console.print(table)
    tokens = sum(c["tokens"]["prompt"] + c["tokens"]["completion"] for c in candidates)
    console.print(f"tokens: {tokens}")
    final = store.read_json("final/summary.json") or {}
    for kind in ("best", "expert"):
        if isinstance(final.get(kind), dict) and final[kind]["mean"] is not None:
            console.print(f"final {kind}: success {final[kind]['mean']:.2f} +/- {final[kind]['std']:.2f} over seeds {final['seeds']}")
    console.print(f"directory: {store.root}")


@app.command()
@friendly
def feedback(
    run_id: Annotated[str, typer.Argument(help="the run to give feedback on")],
    candidate: Annotated[Optional[str], typer.Option(help="the candidate you critique, e.g. r0-s1")] = None,
    text: Annotated[Optional[str], typer.Option(help="what the robot did wrong / what you want")] = None,
    best: Annotated[Optional[str], typer.Option(help="the candidate whose behaviour you prefer")] = None,
    worst: Annotated[Optional[str], typer.Option(help="the candidate whose behaviour you reject")] = None,
    runs_dir: RunsDirOption = Path("runs"),
) -> None:
    """Critique a candidate or pick best/worst; `t2r resume RUN_ID` then runs the round it produces."""
    from text2reward.human import submit_feedback
    from text2reward.store import RunStore

    store = RunStore.open(runs_dir, run_id)
    event = submit_feedback(store, candidate=candidate, text=text, best=best, worst=worst)
    console.print(f"stored feedback #{event['id']} for round {event['for_round']} in {store.root / 'events.json'}; "
                  f"run `t2r resume {run_id} --runs-dir {runs_dir}` to generate it")


@app.command()
@friendly
def dashboard(
    runs_dir: Annotated[Path, typer.Option("--runs", "--runs-dir", help="where runs live (with index.sqlite)")] = Path("runs"),
    host: Annotated[str, typer.Option(help="interface to bind; the default keeps the dashboard on this machine")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8765,
) -> None:
    """Serve the run dashboard: watch rollouts, compare rewards, critique or pick, refine (Ctrl-C stops it)."""
    from text2reward.dashboard import serve

    serve(runs_dir, host=host, port=port)


@app.command()
@friendly
def report(
    run_id: Annotated[str, typer.Argument(help="the run to report on")],
    runs_dir: RunsDirOption = Path("runs"),
    html: Annotated[bool, typer.Option("--html", help="also write a self-contained report.html")] = False,
) -> None:
    """(Re)write a run's report.md; with --html also a self-contained report.html (plots, code, small videos inside)."""
    from text2reward.report import write_report
    from text2reward.store import RunStore

    store = RunStore.open(runs_dir, run_id)
    console.print(f"wrote {write_report(store)}")
    if html:
        from text2reward.html_report import export_html

        console.print(f"wrote {export_html(store)}")


@app.command()
@friendly
def demo(
    runs_dir: RunsDirOption = Path("runs"),
    task: Annotated[str, typer.Option(help="a task that learns in minutes on 2 cores")] = "fetch/reach",
    steps: Annotated[int, typer.Option(help="training steps per candidate")] = 4000,
) -> None:
    """The offline demo: the rule-based heuristic backend (no language model), 2 rounds x 2 candidates,
    a report with code, learning curves and a rollout video."""
    from text2reward.loop import start_run
    from text2reward.store import RunConfig

    console.print("text2reward demo: rewards composed by the [bold]rule-based heuristic backend[/bold] (no language model), offline.")
    # Two full rounds whatever the success (threshold above 1), evaluated often enough to draw curves;
    # learning starts early because the budget is small (SAC's default waits 1,000 steps).
    config = RunConfig(task_id=task, backend="heuristic", rounds=2, samples=2, steps=steps, workers=2,
                       final_seeds=1, success_threshold=1.01, eval_freq=max(steps // 8, 250), eval_episodes=10,
                       overrides={"learning_starts": min(300, steps // 4)})
    store = start_run(config, runs_dir, progress=_say, display=_bars())
    _print_run_outcome(store)
    video = next(iter(sorted(store.root.glob("rounds/*/s*/training/rollout.mp4"))), None)
    if video:
        console.print(f"rollout video: {video}")


@app.command()
@friendly
def doctor(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Which sandbox isolation is active here and what each mechanism's self-test found."""
    from text2reward.sandbox.isolation import MECHANISMS, Isolation, active_isolation, check

    outcomes = {mechanism: check(mechanism) for mechanism in MECHANISMS}
    try:
        active: Any = active_isolation()
    except ConfigError as exc:
        active = exc
    if as_json:
        typer.echo(json.dumps({
            "active": active.mechanism if isinstance(active, Isolation) else None,
            "mechanisms": {m: ({"ok": True, "layers": o.layers, "findings": o.findings} if isinstance(o, Isolation)
                               else {"ok": False, "reason": o}) for m, o in outcomes.items()},
        }, indent=2))
    else:
        for mechanism, outcome in outcomes.items():
            if isinstance(outcome, Isolation):
                console.print(f"[green]{mechanism}: self-test passed[/green]: {outcome.describe()}", highlight=False)
                for probe, finding in outcome.findings.items():
                    console.print(f"    {probe}: {finding}", highlight=False, markup=False)
            else:
                console.print(f"[red]{mechanism}: unavailable[/red]: {outcome}", highlight=False)
        if isinstance(active, Isolation):
            console.print(f"active: [bold]{active.mechanism}[/bold]; model-written code runs in this jail")
        else:
            err_console.print(f"[red]error:[/red] {active}", highlight=False, soft_wrap=True)
    raise typer.Exit(0 if isinstance(active, Isolation) else 1)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
