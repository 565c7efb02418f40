"""What a run's pick is worth (runs/pick_worth.py): the report says who is within the best's noise and how the best was
chosen among them, and cites how often a pick on as many seeds agreed with a held-out re-training when measured."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace

from fixture_runs import FINISHED_RUN as FIXTURE

from sim_envs import codec, list_tasks
from text2reward.runs.pick_worth import Agreement, AgreementFile, measured, pick_worth_lines, shipped_agreements
from text2reward.runs.ranking import TIE_BREAK, best_candidate
from text2reward.runs.records import Candidate, RoundSummary, read
from text2reward.runs.report import write_report
from text2reward.runs.run_events import RoundDone
from text2reward.runs.store import RunStore


def agreement(task: str, steps: int, seeds: int, decisions: int, agreed: int, beyond: int, agreed_beyond: int,
              source: str = "pairs") -> Agreement:
    return Agreement(source=source, task=task, steps=steps, seeds=seeds, decisions=decisions, agreed=agreed,
                     beyond_noise=beyond, agreed_beyond_noise=agreed_beyond, recorded="2026-11-27")


MEASURED = (
    agreement("metaworld/reach-v3", 5000, 1, 1, 0, 1, 0), agreement("metaworld/drawer-close-v3", 5000, 1, 1, 1, 0, 0),
    agreement("metaworld/reach-v3", 5000, 2, 1, 1, 1, 1), agreement("metaworld/reach-v3", 20000, 1, 3, 1, 0, 0, "heuristic"),
    agreement("metaworld/reach-v3", 20000, 1, 1, 1, 1, 1),
)


def candidate(sample: int, successes: int, seeds: int = 1) -> Candidate:
    training = {"success_rate": successes / 30, "episodes": 30, "curve": [{"steps": 100, "success_rate": 0.0, "episodes": 5}]}
    record = {"id": f"r0-s{sample}", "round": 0, "sample": sample, "status": "trained", "training": training}
    if seeds > 1:
        record["seeds"] = [{"seed": s, "training": training} for s in range(seeds)]
    return read(Candidate, record)


def test_the_shipped_measurements_read_and_add_up():
    shipped = shipped_agreements()
    assert shipped, "text2reward/runs/pick_agreement.json is missing or empty (benchmarks/refinement_gain.py --record)"
    tasks = {t.id for t in list_tasks()}
    for a in shipped:
        assert a.task in tasks and a.steps > 0 and a.seeds >= 1 and re.fullmatch(r"\d{4}-\d{2}-\d{2}", a.recorded)
        assert 0 <= a.agreed_beyond_noise <= a.beyond_noise <= a.decisions and a.agreed <= a.decisions
        assert a.decisions - a.agreed >= a.beyond_noise - a.agreed_beyond_noise  # a wrong pick beyond noise is a wrong pick
        assert 0 <= a.agreed_draws_beyond_noise <= a.draws_beyond_noise <= a.draws and a.agreed_draws <= a.draws


def test_the_budget_nearest_the_runs_is_cited_summed_over_tasks_and_sources():
    at_5k = measured(1, 4000, MEASURED)
    assert (at_5k.steps, len(at_5k.tasks), at_5k.decisions, at_5k.agreed, at_5k.beyond_noise, at_5k.agreed_beyond_noise) == (5000, 2, 2, 1, 1, 0)
    at_20k = measured(1, 15000, MEASURED)  # nearer 20k than 5k by ratio; both sources at 20k
    assert (at_20k.steps, len(at_20k.tasks), at_20k.decisions, at_20k.agreed, at_20k.beyond_noise) == (20000, 1, 4, 2, 1)
    assert measured(1, None, MEASURED).steps == 20000  # no budget known: the largest measured
    assert measured(3, 5000, MEASURED) is None
    assert at_5k.text() == "1 of 2 decisions (0 of 1 where the 5-seed difference was beyond noise)"
    assert measured(1, 5000, MEASURED[1:2]).text() == "1 of 1 decisions (none of them beyond noise)"
    drawn = Agreement(source="pairs", task="metaworld/reach-v3", steps=5000, seeds=1, decisions=1, agreed=0, beyond_noise=1,
                      agreed_beyond_noise=0, recorded="2026-11-27", draws=9, agreed_draws=3, draws_beyond_noise=9,
                      agreed_draws_beyond_noise=3)
    assert measured(1, 5000, (drawn, MEASURED[1])).text() == (
        "1 of 2 decisions (0 of 1 where the 5-seed difference was beyond noise); asked of every draw of seeds the "
        "trainings allow, 33% of 9 picks (33% of 9 beyond noise)")


def test_a_best_within_noise_names_its_ties_and_a_clear_best_stands_apart():
    best, close, far = candidate(0, 15), candidate(1, 13), candidate(2, 1)
    tied = pick_worth_lines(best, [best, close, far], 5000, MEASURED)
    assert "Within its noise" in tied[0] and "r0-s1 0.43 (13 of 30 episodes" in tied[0] and "r0-s2" not in tied[0]
    assert "on 1 training seed per candidate" in tied[0] and "tie-break" in tied[0]
    assert tied[1] == ("- Measured (benchmarks/refinement_gain.py, 2 tasks (metaworld) at 5,000 steps): a pick on 1 training "
                       "seed per candidate agreed with a 5-seed re-training in 1 of 2 decisions (0 of 1 where the 5-seed "
                       "difference was beyond noise).")
    assert tied[2] == ("- With `--candidate-seeds 2` (2x the training): 1 of 1 decisions (1 of 1 where the 5-seed difference "
                       "was beyond noise).")
    leader = candidate(0, 28)
    clear = pick_worth_lines(leader, [leader, far], 5000, MEASURED)
    assert clear[0].startswith("- Ahead of every other trained candidate beyond noise")
    # no one to be picked against, or not the ranking's best: nothing to say
    assert pick_worth_lines(best, [best], 5000, MEASURED) == []
    assert pick_worth_lines(far, [best, far], 5000, MEASURED) == []


def test_a_seed_count_never_measured_says_so():
    best, other = candidate(0, 20, seeds=3), candidate(1, 10, seeds=3)
    lines = pick_worth_lines(best, [best, other], 5000, MEASURED)
    assert "on 3 training seeds per candidate" in lines[0]
    assert lines[-1] == ("- A pick on 3 training seeds per candidate has not been measured against a held-out re-training "
                         "(benchmarks/refinement_gain.py).")


def test_a_truth_re_tested_on_ten_seeds_is_cited_as_such_and_an_old_entry_reads_as_five():
    ten = replace(MEASURED[0], truth_seeds=10)
    both = measured(1, 5000, (ten, MEASURED[1]))
    assert both.truth == "5- to 10-seed"
    assert both.text() == "1 of 2 decisions (0 of 1 where the 5- to 10-seed difference was beyond noise)"
    assert measured(1, 5000, (ten,)).truth == "10-seed"
    best, other = candidate(0, 15), candidate(1, 13)
    cited = pick_worth_lines(best, [best, other], 5000, (ten,))[1]
    assert "agreed with a 10-seed re-training in 0 of 1 decisions (0 of 1 where the 10-seed" in cited
    old = {key: value for key, value in codec.write(AgreementFile([MEASURED[0]]))["measurements"][0].items() if key != "truth_seeds"}
    assert codec.read(AgreementFile, {"measurements": [old]}).measurements[0].truth_seeds == 5  # recorded before the field


def test_the_report_says_how_sure_the_pick_is(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / FIXTURE.name)
    store = RunStore(tmp_path / FIXTURE.name)
    best = best_candidate(store.candidates())
    report = write_report(store).read_text()
    section = report[report.index(f"## Best reward: {best.id}"):]
    assert "How sure this pick is:" in section and section.index("How sure") < section.index("```python")
    assert re.search(r"agreed with a \d+(- to \d+)?-seed re-training in", section)  # the shipped measurement, cited


def test_the_console_line_of_a_round_says_when_its_best_is_tied():
    best, close = candidate(0, 15), candidate(1, 13)
    tied = RoundSummary(round=0, best="r0-s0", best_success=0.5, statuses={}, tied=["r0-s1"], tie_break=TIE_BREAK)
    assert RoundDone(tied, (best, close)).text.endswith(
        "; best r0-s0, tied within noise with r0-s1 (first by the tie-break; report.md says what such a pick is worth)")
    apart = RoundSummary(round=0, best="r0-s0", best_success=0.5, statuses={})
    assert "tied" not in RoundDone(apart, (best, close)).text
