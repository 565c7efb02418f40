"""`t2r prompt | validate | run | resume | demo | doctor`: the synthesis loop and its sandbox."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.markup import escape

import sim_envs
from policies.io import strict_json_dumps
from text2reward.cli.options import with_settings
from text2reward.cli.shared import (
    DEFAULT_RUNS_DIR,
    RewardModeOption,
    RunsDirOption,
    TaskFileOption,
    app,
    console,
    err_console,
    friendly,
    load_extra_tasks,
    print_event,
    print_run_outcome,
    progress_bars,
    read_source_file,
    sigterm_as_ctrl_c,
)
from text2reward.errors import ConfigError
from text2reward.inert import visible
from text2reward.runs import layout
from text2reward.runs.statuses import RunStatus
from text2reward.runs.store import RunStore
from text2reward.sandbox.isolation import MECHANISMS, Isolation, active_isolation, guarantees
from text2reward.sandbox.isolation import check as check_mechanism
from text2reward.settings import RunConfig, setting_fields

if TYPE_CHECKING:
    from text2reward.api import SearchResult


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
    from text2reward.generation.prompting import (  # Jinja2 and the templates (~30 ms): only this command renders a prompt
        build_initial_messages,
        format_messages_for_display,
    )

    if run_id is not None:  # the earlier replies' code and errors are in it: shown as text, never obeyed by the terminal
        typer.echo(visible(pending_prompt(runs_dir, run_id)), nl=False)
        return
    if task is None:
        raise ConfigError("name a task (--task metaworld/reach-v3) or a waiting run (--run RUN_ID)")
    load_extra_tasks(task_file)
    typer.echo(visible(format_messages_for_display(build_initial_messages(sim_envs.get_task(task), few_shot=few_shot, reward_mode=reward_mode))))


def pending_prompt(runs_dir: Path, run_id: str) -> str:
    store = RunStore.open(runs_dir, run_id)
    state = store.state()
    if state.status != RunStatus.WAITING_FOR_REPLIES or not state.pending_prompt:
        raise ConfigError(f"run {run_id} is not waiting for replies (it is {state.status.value}); "
                          f"`t2r prompt --task {store.header().task_id}` prints a task's first prompt")
    return store.read_text(state.pending_prompt)


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
    from text2reward.api import validate_reward  # the front door loads the whole loop: only the commands that run one pay it

    load_extra_tasks(task_file)
    source = read_source_file(code, "code file", "a .py file defining compute_dense_reward(self, action)")
    report = validate_reward(source, task, mode=reward_mode)
    if as_json:
        typer.echo(strict_json_dumps(dataclasses.asdict(report), indent=2, default=str))  # every field, at nothing or not: a stable schema for scripts)
    else:
        print_validation(report)
    raise typer.Exit(0 if report.ok else 1)


def print_validation(report: Any) -> None:
    """The verdict, then every check on one line (what it found, µs per call), then the errors in full."""
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
@with_settings()
def run(config: RunConfig, runs_dir: RunsDirOption = DEFAULT_RUNS_DIR) -> None:
    """Generate, validate, screen, train and refine rewards for a task."""
    from text2reward.api import RewardSearch  # the front door loads the whole loop: only the commands that run one pay it

    with sigterm_as_ctrl_c():
        result = RewardSearch.from_config(config, runs_dir, callbacks=[print_event], display=progress_bars()).run()
    print_run_outcome(result)


@app.command(epilog="Example: t2r resume latest   |   t2r resume 20261123-1336 --reply-file r1.md")
@friendly
def resume(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="the run to continue: its id, a unique prefix, or latest")],
    runs_dir: RunsDirOption = DEFAULT_RUNS_DIR,
    rounds: Annotated[Optional[int], typer.Option(help="raise the number of rounds")] = None,
    reply_file: Annotated[Optional[list[Path]], typer.Option(help="more reply files for a run made with --llm file")] = None,
    executor: Annotated[Optional[str], typer.Option("--executor", help="train on local or ray from now on (default: what the run used)")] = None,
    ray_address: Annotated[Optional[str], typer.Option("--ray-address", envvar="RAY_ADDRESS", metavar="ADDR",
                                                       help="with --executor ray: the cluster to join")] = None,
) -> None:
    """Continue an interrupted run (or add rounds, or replies): finished candidates are never redone."""
    from text2reward.api import RewardSearch  # the front door loads the whole loop: only the commands that run one pay it

    with sigterm_as_ctrl_c():
        result = RewardSearch.resume(run_id, runs_dir, callbacks=[print_event], display=progress_bars(), reply_files=reply_file or [],
                                     rounds=rounds, executor=executor, ray_address=ray_address)
    print_run_outcome(result)


DEMO_TASK = "fetch/reach"
DEMO_STEPS = 8000


@app.command(epilog="Example: t2r demo --runs-dir /tmp/runs")
@friendly
@with_settings(skip=tuple(f.name for _, f in setting_fields() if f.name not in ("task_id", "steps", "early_stop", "executor", "ray_address")),
               defaults={"task_id": DEMO_TASK, "steps": DEMO_STEPS})
def demo(config: RunConfig, runs_dir: RunsDirOption = DEFAULT_RUNS_DIR) -> None:
    """The offline demo: the rule-based heuristic backend (no language model), 2 rounds x 2 candidates,
    a report with code, learning curves and a rollout video."""
    from text2reward.api import RewardSearch  # the front door loads the whole loop: only the commands that run one pay it

    console.print("text2reward demo: rewards composed by the [bold]rule-based heuristic backend[/bold] (no language model), offline.")
    steps = config.training.steps or DEMO_STEPS
    # Two full rounds whatever the success (threshold above 1), evaluated often enough to draw curves.
    config = config.updated(backend="heuristic", rounds=2, samples=2, workers=2, final_seeds=1, success_threshold=1.01,
                                 eval_freq=max(steps // 8, 250), eval_episodes=10)
    with sigterm_as_ctrl_c():
        result = RewardSearch.from_config(config, runs_dir, callbacks=[print_event], display=progress_bars()).run()
    print_run_outcome(result)
    print_outputs(result)


def print_outputs(result: SearchResult) -> None:
    """Every file the run wrote that a person opens, one path a line, never folded (a pipe or a log keeps it whole)."""
    store = RunStore(result.run_dir)
    paths = [("run folder", store.root), ("report", store.paths.report), ("learning curves", store.paths.curves_plot),
             ("reward components", store.paths.components_plot)]
    best = next((c for c in result.candidates if result.best is not None and c.id == result.best.id), None)
    if best is not None and best.code_file:
        paths.append((f"best reward ({best.id})", store.root / best.code_file))
    if best is not None and best.video_file:
        paths.append((f"best candidate's rollout video ({best.id})", store.root / best.video_file))
    for candidate in result.candidates:
        if candidate.video_file and candidate is not best:
            paths.append((f"rollout video of {candidate.id}", store.root / candidate.video_file))
    paths.append(("candidates' records", store.root / "rounds" / "r*" / "s*" / layout.CANDIDATE))
    for label, path in paths:
        if "*" in str(path) or path.exists():
            typer.echo(f"{label}: {path}")


@app.command(epilog="Example: t2r doctor --json")
@friendly
def doctor(as_json: Annotated[bool, typer.Option("--json", help="print the findings as JSON")] = False) -> None:
    """Which sandbox isolation is active here, what each mechanism's self-test found, and any process of the jail's uid
    left behind."""
    from text2reward.sandbox.leftovers import NOBODY, stray_processes  # reads /proc: only this command lists processes

    outcomes = {mechanism: check_mechanism(mechanism) for mechanism in MECHANISMS}
    strays = stray_processes()
    left = [stray for stray in strays if stray.left_over]
    try:
        active: Any = active_isolation()
    except ConfigError as exc:
        active = exc
    if as_json:
        typer.echo(json.dumps({
            "active": active.mechanism if isinstance(active, Isolation) else None,
            "mechanisms": {m: ({"ok": True, "layers": o.layers, "findings": o.findings, "guarantees": guarantees(o)}
                               if isinstance(o, Isolation) else {"ok": False, "reason": o}) for m, o in outcomes.items()},
            "jail_uid_processes": [dataclasses.asdict(stray) for stray in strays],
            "leftovers": [dataclasses.asdict(stray) for stray in left],
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
        running = len(strays) - len(left)
        if left:
            console.print(f"[yellow]{len(left)} process(es) of uid {NOBODY} (the jail's uid) left behind with no command "
                          f"above them[/yellow] (end them with kill -9 PID):", highlight=False)
            for stray in left:
                cpu = f", {stray.cpu_seconds:.1f} s of CPU" if stray.cpu_seconds is not None else ""
                console.print(f"    pid {stray.pid}: {stray.name}{cpu}", highlight=False, markup=False)
        else:
            console.print(f"no process of uid {NOBODY} (the jail's uid) left behind"
                          + (f" ({running} running under live commands)" if running else ""), highlight=False)
        if isinstance(active, Isolation):
            console.print(f"active: [bold]{active.mechanism}[/bold]; model-written code runs in this jail")
        else:
            err_console.print(f"[red]error:[/red] {active}", highlight=False, soft_wrap=True)
    raise typer.Exit(0 if isinstance(active, Isolation) else 1)
