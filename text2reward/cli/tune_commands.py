"""`t2r tune`: tune a trained candidate's constants with Optuna; the winner becomes candidate `<id>-tuned`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.table import Table

from text2reward.cli.shared import DEFAULT_RUNS_DIR, RunsDirOption, app, console, friendly, print_event, progress_bars, say
from text2reward.runs.lock import RunLock
from text2reward.runs.records import Candidate
from text2reward.runs.store import RunStore, index_run


@app.command(epilog="Example: t2r tune latest --trials 20   |   t2r tune 20261123-1336 --candidate r1-s0 --trials 10 --steps 20000")
@friendly
def tune(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="the run: its id, a unique prefix, or latest")],
    trials: Annotated[int, typer.Option("--trials", help="finished trials wanted (a rerun resumes the study: finished ones count)")],
    candidate: Annotated[Optional[str], typer.Option("--candidate", metavar="ID", help="the candidate to tune (default: the run's best)")] = None,
    steps: Annotated[Optional[int], typer.Option("--steps", help="training steps per trial (default: the run's budget)")] = None,
    min_gain: Annotated[Optional[float], typer.Option("--min-gain", help="how far above the parent's constants a trial must score "
                                                      "to replace them (success rate; default one evaluation episode's worth)")] = None,
    runs_dir: RunsDirOption = DEFAULT_RUNS_DIR,
) -> None:
    """Tune a reward's UPPER_CASE constants: each trial a short training, searched by Optuna's TPE with pruning."""
    from text2reward.runs.report import write_report  # the keypoints' camera record needs numpy: as the tuning below
    from text2reward.tuning import tune_candidate  # the trials' jobs load the worker's code (gymnasium): only this command

    store = RunStore.open(runs_dir, run_id)
    with RunLock(store.root, say=say):
        tuned = tune_candidate(store, candidate, trials, steps=steps, emit=print_event, display=progress_bars(), min_gain=min_gain)
        report = write_report(store)
        index_run(store)
    print_tuned(tuned, store.candidate(tuned.parent))
    console.print(f"tuned candidate {tuned.id} in {store.root / str(tuned.code_file)} (report: {report})", highlight=False, soft_wrap=True)


def print_tuned(tuned: Candidate, parent: Candidate | None) -> None:
    """The constants' diff and the winner's success beside its parent's."""
    summary = tuned.tuned
    assert summary is not None  # a tuned candidate says how it was found
    table = Table("constant", f"{tuned.parent}", f"{tuned.id}", "ratio", title=f"constants of {tuned.id}")
    for change in summary.constants_diff:
        ratio = "-" if change.ratio is None else f"x{change.ratio:.3g}"
        table.add_row(change.name, "-" if change.parent is None else f"{change.parent:g}", f"{change.tuned:g}", ratio)
    console.print(table)
    parent_success = parent.success if parent is not None and parent.has_training else None
    console.print(
        f"winner: trial {summary.trial} of {summary.trials} finished ({summary.complete} complete, {summary.pruned} "
        f"pruned, {summary.failed} failed), {summary.steps} steps: success {tuned.success:.2f}"
        + (f" (parent {tuned.parent}: {parent_success:.2f} in its own training)" if parent_success is not None else ""),
        highlight=False, soft_wrap=True)
    if summary.kept_parent:
        console.print(f"no trial beat the parent's own constants (trial {summary.trial}) by the margin of {summary.margin:.2f} "
                      "success over the curve: they are kept (more --trials, longer --steps, or a lower --min-gain)",
                      highlight=False, soft_wrap=True)
    elif summary.trial == 0:
        console.print("trial 0 is the parent's own constants: no trial beat them", highlight=False, soft_wrap=True)
