"""`t2r runs | feedback | dashboard | report`: reading runs, and a person's feedback on them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from policies.formatting import compact_success, format_seconds, format_success
from text2reward.cli.shared import (
    DEFAULT_RUNS_DIR,
    Column,
    RunsDirOption,
    app,
    console,
    fitted_table,
    friendly,
)
from text2reward.dashboard import serve
from text2reward.errors import ConfigError
from text2reward.runs.human_feedback import submit_feedback
from text2reward.runs.lock import held_by_a_live_process
from text2reward.runs.ranking import best_candidate
from text2reward.runs.statuses import RunStatus
from text2reward.runs.store import RunStore, list_runs

runs_app = typer.Typer(help="List runs, or show one.", invoke_without_command=True,
                       epilog="Example: t2r runs --runs-dir /tmp/runs   |   t2r runs show latest")
app.add_typer(runs_app, name="runs")


@runs_app.callback()
@friendly
def runs_list(ctx: typer.Context, runs_dir: RunsDirOption = DEFAULT_RUNS_DIR, as_json: Annotated[bool, typer.Option("--json", help="print the runs as JSON")] = False) -> None:
    """List runs, newest first."""
    if ctx.invoked_subcommand is not None:
        return
    rows = list_runs(runs_dir)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        console.print(f"no runs in {runs_dir}; start one with `t2r demo` or `t2r run --task fetch/reach`", highlight=False, soft_wrap=True)
        return
    columns = [Column("run", keep_whole=True), Column("task", keep_whole=True), Column("status"),
               Column("best", justify="right"), Column("rounds", optional=True, justify="right"), Column("author", optional=True),
               Column("tokens", optional=True, justify="right"), Column("wall s", optional=True, justify="right")]
    lines = []
    for r in rows:
        if r.get("damaged"):
            lines.append([r["run_id"], "-", "damaged", "-", "-", "-", "-", "-"])
            continue
        best = "-" if r["best_success"] is None else compact_success(r["best_success"], r.get("best_episodes"))
        lines.append([r["run_id"], r["task_id"], r["status"].replace("_", " "), best, str(r["rounds_done"]), r["author"] or r["backend"],
                      str((r["prompt_tokens"] or 0) + (r["completion_tokens"] or 0)), f"{r['wall_seconds'] or 0:.0f}"])
    console.print(f"runs in {runs_dir}", highlight=False)  # a path, printed whole; the table fits the terminal
    table = fitted_table(columns, lines)
    console.print(table)
    for r in rows:
        if r.get("damaged"):
            console.print(f"{r['damaged']} (`--runs-dir {runs_dir}`)", highlight=False, soft_wrap=True, markup=False)
        elif r["status"] == RunStatus.INTERRUPTED:
            console.print(f"{r['run_id']} was interrupted: `t2r resume {r['run_id']} --runs-dir {runs_dir}` finishes it",
                          highlight=False, soft_wrap=True, markup=False)


@runs_app.command("show", epilog="Example: t2r runs show latest")
@friendly
def runs_show(run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="the run: its id, a unique prefix, or latest")], runs_dir: RunsDirOption = DEFAULT_RUNS_DIR) -> None:
    """Summarise one run: best success per round, token cost, wall time, the final comparison."""
    store = RunStore.open(runs_dir, run_id)
    header = store.header()
    candidates = store.candidates()
    status = store.status()
    console.print(f"[bold]{store.run_id}[/bold] {header.task_id} by {header.author}: {status.words}, "
                  f"{format_seconds(store.wall_seconds())}", highlight=False, soft_wrap=True)
    if status == RunStatus.INTERRUPTED:
        console.print(f"its process stopped before the run ended; finish it with `t2r resume {store.run_id} --runs-dir {runs_dir}`",
                      highlight=False, soft_wrap=True, markup=False)
    table = Table("round", "candidates", "best", "best success")
    for r in sorted({c.round for c in candidates}):
        in_round = [c for c in candidates if c.round == r]
        best = best_candidate(in_round)
        table.add_row(str(r), ", ".join(f"{c.id}:{c.status.value}" for c in in_round), best.id if best else "-",
                      format_success(best.success, best.training.episodes if best.training else None) if best else "-")
    console.print(table)
    console.print(f"tokens: {sum(c.tokens.total for c in candidates)}")
    final = store.final_summary()
    arms = final.arms() if final is not None else []
    for kind, arm in arms:
        if arm.mean is not None:
            seeds = arm.seeds or (final.seeds if final is not None else [])  # older summaries named the run's seeds only
            pooled = arm.pooled
            success = pooled.text() if pooled is not None else format_success(arm.mean)  # older summaries kept no episodes
            console.print(f"final {kind}: success {success} pooled over seeds {seeds}, {arm.std or 0:.2f} standard deviation "
                          "between them", highlight=False, soft_wrap=True)
        for failed in arm.failed_seeds:
            console.print(f"final {kind} seed {failed.seed} failed: {failed.reason}", highlight=False, soft_wrap=True, markup=False)
    if any(arm.failed_seeds for _, arm in arms):
        console.print(f"`t2r resume {store.run_id} --runs-dir {runs_dir}` re-trains the failed seeds", highlight=False, soft_wrap=True,
                      markup=False)
    console.print(f"directory: {store.root}")


@runs_app.command("rm", epilog="Example: t2r runs rm 20261123-1336 --yes")
@friendly
def runs_rm(run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="the run to delete: its id or a unique prefix")],
            yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
            runs_dir: RunsDirOption = DEFAULT_RUNS_DIR) -> None:
    """Delete a run's folder and its row in the index (a damaged run, or one killed for good)."""
    if run_id == "latest":
        raise ConfigError("name the run to delete by its id (or a unique prefix), not `latest`: `t2r runs` lists them")
    store = RunStore.open(runs_dir, run_id)
    if held_by_a_live_process(store.root):
        raise ConfigError(f"run {store.run_id} is running in a live process; stop it (Ctrl-C) before deleting it")
    if not yes and not typer.confirm(f"delete {store.root} and everything in it?"):
        raise typer.Exit(1)
    store.remove()
    console.print(f"deleted {store.root}", highlight=False, soft_wrap=True)


@app.command(epilog="Example: t2r feedback latest --candidate r0-s1 --text 'lift the block higher before moving it'")
@friendly
def feedback(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="the run to give feedback on: its id, a unique prefix, or latest")],
    candidate: Annotated[Optional[str], typer.Option(help="the candidate you critique, e.g. r0-s1")] = None,
    text: Annotated[Optional[str], typer.Option(help="what the robot did wrong / what you want")] = None,
    best: Annotated[Optional[str], typer.Option(help="the candidate whose behaviour you prefer")] = None,
    worst: Annotated[Optional[str], typer.Option(help="the candidate whose behaviour you reject")] = None,
    runs_dir: RunsDirOption = DEFAULT_RUNS_DIR,
) -> None:
    """Critique a candidate or pick best/worst; `t2r resume RUN_ID` then runs the round it produces."""
    store = RunStore.open(runs_dir, run_id)
    event = submit_feedback(store, candidate=candidate, text=text, best=best, worst=worst)
    console.print(f"stored feedback #{event.id} for round {event.for_round} in {store.root / 'events.json'}; "
                  f"run `t2r resume {store.run_id} --runs-dir {runs_dir}` to generate it")


@app.command(epilog="Example: t2r dashboard --runs-dir runs --port 8765")
@friendly
def dashboard(
    runs_dir: Annotated[Path, typer.Option("--runs-dir", "--runs", help="where runs live (with index.sqlite)")] = DEFAULT_RUNS_DIR,
    host: Annotated[str, typer.Option(help="interface to bind; the default keeps the dashboard on this machine")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8765,
) -> None:
    """Serve the run dashboard: watch rollouts, compare rewards, critique or pick, refine (Ctrl-C stops it)."""
    from text2reward.preflight import check_port  # preflight loads the training plan's checks (gymnasium): only this command

    check_port(port)
    serve(runs_dir, host=host, port=port)


@app.command(epilog="Example: t2r report latest --html")
@friendly
def report(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="the run to report on: its id, a unique prefix, or latest")],
    runs_dir: RunsDirOption = DEFAULT_RUNS_DIR,
    html: Annotated[bool, typer.Option("--html", help="also write a self-contained report.html")] = False,
) -> None:
    """(Re)write a run's report.md; with --html also a self-contained report.html (plots, code, small videos inside)."""
    store = RunStore.open(runs_dir, run_id)
    from text2reward.runs.report import write_report  # the keypoints' camera record needs numpy: only a report pays it

    console.print(f"wrote {write_report(store)}")
    if html:
        from text2reward.dashboard.export import export_html  # Jinja2 and Pygments (~60 ms): only --html writes a page

        console.print(f"wrote {export_html(store)}")

