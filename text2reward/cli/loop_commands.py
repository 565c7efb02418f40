"""`t2r prompt | validate | run | resume | demo | doctor`: the synthesis loop and its sandbox."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from text2reward.cli.shared import (
    DEFAULT_RUNS_DIR,
    ExecutorOption,
    HyperparamOption,
    RayAddressOption,
    RewardModeOption,
    RunsDirOption,
    TaskFileOption,
    app,
    console,
    err_console,
    friendly,
    load_extra_tasks,
    parse_overrides,
    print_run_outcome,
    progress_bars,
    say,
)
from text2reward.errors import ConfigError


@app.command(epilog="Example: t2r prompt --task metaworld/drawer-open-v3 --few-shot 2   |   t2r prompt --run latest")
@friendly
def prompt(
    task: Annotated[Optional[str], typer.Option(help="task id")] = None,
    few_shot: Annotated[int, typer.Option("--few-shot", help="number of retrieved expert examples")] = 0,
    reward_mode: RewardModeOption = "dense",
    run_id: Annotated[Optional[str], typer.Option("--run", metavar="RUN_ID", help="print the prompt this run waits on (--llm file); an id, a prefix, or latest")] = None,
    runs_dir: RunsDirOption = DEFAULT_RUNS_DIR,
    task_file: TaskFileOption = None,
) -> None:
    """Print the exact messages that would be sent to the model (or, with --run, the prompt a run waits on)."""
    from sim_envs import get_task
    from text2reward.generation.prompting import build_initial_messages, format_messages_for_display

    if run_id is not None:
        typer.echo(pending_prompt(runs_dir, run_id), nl=False)
        return
    if task is None:
        raise ConfigError("name a task (--task metaworld/reach-v3) or a waiting run (--run RUN_ID)")
    load_extra_tasks(task_file)
    typer.echo(format_messages_for_display(build_initial_messages(get_task(task), few_shot=few_shot, reward_mode=reward_mode)))


def pending_prompt(runs_dir: Path, run_id: str) -> str:
    from text2reward.runs.store import RunStore

    store = RunStore.open(runs_dir, run_id)
    state = store.state()
    if state.get("status") != "waiting_for_replies" or not state.get("pending_prompt"):
        raise ConfigError(f"run {run_id} is not waiting for replies (it is {state.get('status', 'unknown')}); "
                          f"`t2r prompt --task {store.config().task_id}` prints a task's first prompt")
    return (store.root / str(state["pending_prompt"])).read_text()


@app.command(epilog="Example: t2r validate --task metaworld/reach-v3 --code my_reward.py")
@friendly
def validate(
    task: Annotated[str, typer.Option(help="task id whose real states the code runs on")],
    code: Annotated[Path, typer.Option(help="a .py file defining compute_dense_reward(self, action)")],
    as_json: Annotated[bool, typer.Option("--json", help="print the verdict as JSON")] = False,
    reward_mode: RewardModeOption = "dense",
    task_file: TaskFileOption = None,
) -> None:
    """Static checks, then an isolated smoke run on real states; exit 0 only when the code is ok."""
    from policies.reward_modes import check_mode
    from sim_envs import get_task
    from text2reward.sandbox import active_isolation
    from text2reward.sandbox import validate as run_validation

    load_extra_tasks(task_file)
    if not code.is_file():
        raise ConfigError(f"code file {code} does not exist; pass a .py file defining compute_dense_reward(self, action)")
    task_obj = get_task(task)
    active_isolation()  # fail closed: no jail, no run (even the static pass is not offered as a verdict)
    report = run_validation(code.read_text(), task_obj, mode=check_mode(reward_mode))
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print_validation(report)
    raise typer.Exit(0 if report.ok else 1)


def print_validation(report: Any) -> None:
    """The verdict, then every check on one line (what it found, µs per call), then the errors in full."""
    from rich.markup import escape

    verdict = "[green]ok[/green]: it may train" if report.ok else "[red]rejected[/red]"
    where = f" ({report.n_states} states, {report.seconds:.1f} s; {report.isolation})" if report.isolation else ""
    console.print(verdict + escape(where), highlight=False, soft_wrap=True)
    marks = {True: "[green]ok[/green]  ", False: "[red]fail[/red]", None: "[dim]skip[/dim]"}
    for name, check in report.checks.items():
        lines = str(check.get("detail") or "").splitlines() or [""]
        first = escape(next((x for x in lines if x and not x.startswith((" ", "Traceback", "hint:"))), lines[0]))
        line = f"  {marks[check.get('ok')]} {name:<18} {first}"
        console.print(f"[dim]{line}[/dim]" if check.get("ok") is None else line, highlight=False, soft_wrap=True)
    for error in report.errors:
        console.print(f"  - {error}", highlight=False, markup=False, soft_wrap=True)


@app.command(epilog="Example: t2r run --task fetch/push --llm openai --base-url http://localhost:11434/v1 --model qwen2.5-coder --samples 4")
@friendly
def run(
    task: Annotated[str, typer.Option(help="task id")],
    llm: Annotated[str, typer.Option(help="openai, heuristic (rule-based, no model) or file")] = "heuristic",
    base_url: Annotated[Optional[str], typer.Option(help="OpenAI-compatible endpoint (or OPENAI_BASE_URL)")] = None,
    model: Annotated[Optional[str], typer.Option(help="model name for --llm openai (or OPENAI_MODEL)")] = None,
    reply_file: Annotated[Optional[list[Path]], typer.Option(help="reply files for --llm file (else stdin)")] = None,
    temperature: Annotated[float, typer.Option(help="sampling temperature of the model")] = 1.0,
    timeout: Annotated[Optional[float], typer.Option(help="seconds to wait for one reply (default: 60, or 600 with --base-url)")] = None,
    max_retries: Annotated[Optional[int], typer.Option(help="retries of a failed model request (default 4)")] = None,
    concurrency: Annotated[Optional[int], typer.Option(help="model requests at once (default: 1 with a local --base-url, else 8)")] = None,
    cache: Annotated[bool, typer.Option(help="reuse replies cached for the same prompt and seed (--no-cache asks again)")] = True,
    rounds: Annotated[int, typer.Option(help="rounds of generation and training")] = 2,
    samples: Annotated[int, typer.Option(help="candidates per round (K)")] = 2,
    steps: Annotated[Optional[int], typer.Option(help="training steps per candidate")] = None,
    workers: Annotated[int, typer.Option(help="parallel training workers (W)")] = 2,
    seed: Annotated[int, typer.Option(help="seed of sampling, training and evaluation")] = 0,
    few_shot: Annotated[int, typer.Option("--few-shot", help="expert examples from similar tasks in the prompt")] = 0,
    vision: Annotated[bool, typer.Option(help="send rollout keyframes to a vision-capable model")] = False,
    screen: Annotated[bool, typer.Option(help="screen candidates on scripted trajectories before training")] = True,
    screen_threshold: Annotated[float, typer.Option(help="share of (success, failure) rollout pairs a reward must rank right")] = 0.7,
    fix_attempts: Annotated[int, typer.Option(help="times a rejected reply goes back to the model with the error")] = 1,
    video: Annotated[bool, typer.Option(help="film each trained candidate's rollout")] = True,
    final_seeds: Annotated[int, typer.Option(help="seeds to re-train the best reward (and the expert) on")] = 2,
    compare_expert: Annotated[bool, typer.Option(help="train the expert reward on the same budget")] = True,
    success_threshold: Annotated[float, typer.Option(help="a run (and, with --early-stop, a candidate) stops once it reaches this success rate")] = 0.9,
    early_stop: Annotated[bool, typer.Option(help="stop a candidate clearly behind the round's leader at 1/4 and 1/2 of the budget (--no-early-stop trains each to the end)")] = True,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda")] = "auto",
    algo: Annotated[Optional[str], typer.Option(help="sbx-sac, sbx-ppo (SBX, JAX), sac or ppo (SB3, PyTorch); default: the task family's")] = None,
    eval_freq: Annotated[Optional[int], typer.Option(help="env steps between success evaluations")] = None,
    eval_episodes: Annotated[Optional[int], typer.Option(help="episodes per evaluation")] = None,
    hp: HyperparamOption = None,
    reward_mode: RewardModeOption = "dense",
    tune: Annotated[int, typer.Option(help="after the last round, tune the best reward's constants with N Optuna trials (see t2r tune)")] = 0,
    reward_source: Annotated[str, typer.Option(help="code (the model writes the reward), keypoints (a reward from the task's keypoints, "
                                                    "see t2r keypoints) or code+keypoints (the model's reward plus the keypoint reward)")] = "code",
    keypoints: Annotated[str, typer.Option("--keypoints", help="with a keypoint reward source: oracle (true points projected) or "
                                                               "model (the vision model points; needs --vision)")] = "oracle",
    keypoint_camera: Annotated[Optional[str], typer.Option(help="camera the keypoints are read from (default: the task's)")] = None,
    anchor: Annotated[Optional[list[str]], typer.Option(help="KEYPOINT=PART: what a keypoint moves with (obj, obj_start, goal, none), "
                                                             "over the model's choice; repeatable")] = None,
    vision_analysis: Annotated[bool, typer.Option(help="ask the vision model what went wrong in a failed candidate's keyframes, "
                                                       "for the next feedback (with --vision)")] = False,
    executor: ExecutorOption = "local",
    ray_address: RayAddressOption = None,
    runs_dir: RunsDirOption = DEFAULT_RUNS_DIR,
    task_file: TaskFileOption = None,
) -> None:
    """Generate, validate, screen, train and refine rewards for a task."""
    from text2reward.keypoints.answer import parse_anchor_options
    from text2reward.loop import start_run
    from text2reward.runs.store import RunConfig

    config = RunConfig(
        task_id=task, backend=llm, model=model, base_url=base_url, reply_files=[str(p) for p in reply_file or []],
        rounds=rounds, samples=samples, steps=steps, workers=workers, seed=seed, few_shot=few_shot, vision=vision,
        screen=screen, screen_threshold=screen_threshold, fix_attempts=fix_attempts, video=video, final_seeds=final_seeds, compare_expert=compare_expert, success_threshold=success_threshold,
        device=device, algo=algo, task_file=str(task_file.resolve()) if task_file else None,
        eval_freq=eval_freq, eval_episodes=eval_episodes, overrides=parse_overrides(hp), temperature=temperature,
        timeout=timeout, max_retries=max_retries, concurrency=concurrency, cache=cache, early_stop=early_stop,
        executor=executor, ray_address=ray_address, reward_mode=reward_mode, tune=tune, reward_source=reward_source,
        keypoints=keypoints, keypoint_camera=keypoint_camera, keypoint_anchors=parse_anchor_options(anchor), vision_analysis=vision_analysis,
    )
    store = start_run(config, runs_dir, progress=say, display=progress_bars())
    print_run_outcome(store)


@app.command(epilog="Example: t2r resume latest   |   t2r resume 20261123-1336 --reply-file r1.md")
@friendly
def resume(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="the run to continue: its id, a unique prefix, or latest")],
    runs_dir: RunsDirOption = DEFAULT_RUNS_DIR,
    rounds: Annotated[Optional[int], typer.Option(help="raise the number of rounds")] = None,
    reply_file: Annotated[Optional[list[Path]], typer.Option(help="more reply files for a run made with --llm file")] = None,
    executor: Annotated[Optional[str], typer.Option("--executor", help="train on local or ray from now on (default: what the run used)")] = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Continue an interrupted run (or add rounds, or replies): finished candidates are never redone."""
    from dataclasses import asdict

    from text2reward.loop import resume_run
    from text2reward.preflight import check_executor
    from text2reward.runs.store import RunStore

    if rounds is not None or executor is not None or ray_address is not None:
        store = RunStore.open(runs_dir, run_id)
        config = store.config()
        config.rounds = max(config.rounds, rounds or 0)
        config.executor = executor or config.executor
        config.ray_address = ray_address or config.ray_address
        check_executor(config)  # before it is recorded: a typo never lands in config.json
        store.write_json("config.json", asdict(config))
    for path in reply_file or []:
        if not path.is_file():
            raise ConfigError(f"reply file {path} not found: save the model's reply to a file and pass its path")
    store = resume_run(runs_dir, run_id, progress=say, display=progress_bars(),
                       reply_files=[str(p.resolve()) for p in reply_file or []])
    print_run_outcome(store)


@app.command(epilog="Example: t2r demo --runs-dir /tmp/runs")
@friendly
def demo(
    runs_dir: RunsDirOption = DEFAULT_RUNS_DIR,
    task: Annotated[str, typer.Option(help="a task that learns in minutes on 2 cores")] = "fetch/reach",
    steps: Annotated[int, typer.Option(help="training steps per candidate")] = 8000,
    early_stop: Annotated[bool, typer.Option(help="stop a candidate clearly behind the round's leader (--no-early-stop trains each to the end)")] = True,
    executor: ExecutorOption = "local",
    ray_address: RayAddressOption = None,
) -> None:
    """The offline demo: the rule-based heuristic backend (no language model), 2 rounds x 2 candidates,
    a report with code, learning curves and a rollout video."""
    from text2reward.loop import start_run
    from text2reward.runs.store import RunConfig

    console.print("text2reward demo: rewards composed by the [bold]rule-based heuristic backend[/bold] (no language model), offline.")
    # Two full rounds whatever the success (threshold above 1), evaluated often enough to draw curves.
    config = RunConfig(task_id=task, backend="heuristic", rounds=2, samples=2, steps=steps, workers=2,
                       final_seeds=1, success_threshold=1.01, eval_freq=max(steps // 8, 250), eval_episodes=10,
                       early_stop=early_stop, executor=executor, ray_address=ray_address)
    store = start_run(config, runs_dir, progress=say, display=progress_bars())
    print_run_outcome(store)
    video = next(iter(sorted(store.root.glob("rounds/*/s*/training/rollout.mp4"))), None)
    if video:
        console.print(f"rollout video: {video}")


@app.command(epilog="Example: t2r doctor --json")
@friendly
def doctor(as_json: Annotated[bool, typer.Option("--json", help="print the findings as JSON")] = False) -> None:
    """Which sandbox isolation is active here and what each mechanism's self-test found."""
    from text2reward.sandbox.isolation import MECHANISMS, Isolation, active_isolation, check, guarantees

    outcomes = {mechanism: check(mechanism) for mechanism in MECHANISMS}
    try:
        active: Any = active_isolation()
    except ConfigError as exc:
        active = exc
    if as_json:
        typer.echo(json.dumps({
            "active": active.mechanism if isinstance(active, Isolation) else None,
            "mechanisms": {m: ({"ok": True, "layers": o.layers, "findings": o.findings, "guarantees": guarantees(o)}
                               if isinstance(o, Isolation) else {"ok": False, "reason": o}) for m, o in outcomes.items()},
        }, indent=2))
    else:
        for mechanism, outcome in outcomes.items():
            if isinstance(outcome, Isolation):
                console.print(f"[green]{mechanism}: self-test passed[/green]: {outcome.describe()}", highlight=False)
                for probe, finding in outcome.findings.items():
                    console.print(f"    {probe}: {finding}", highlight=False, markup=False)
                for promise, kept in guarantees(outcome).items():
                    console.print(f"    {'[green]kept[/green]' if kept else '[red]NOT kept[/red]'}: {promise}", highlight=False)
            else:
                console.print(f"[red]{mechanism}: unavailable[/red]: {outcome}", highlight=False)
        if isinstance(active, Isolation):
            console.print(f"active: [bold]{active.mechanism}[/bold]; model-written code runs in this jail")
        else:
            err_console.print(f"[red]error:[/red] {active}", highlight=False, soft_wrap=True)
    raise typer.Exit(0 if isinstance(active, Isolation) else 1)
