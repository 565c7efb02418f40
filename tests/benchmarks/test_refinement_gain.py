"""benchmarks/refinement_gain.py's decisions: the loop's statistic vs the rule before it, against a held-out truth."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from policies.stats import Rate
from sim_envs import codec
from text2reward.runs.pick_worth import AgreementFile, measured

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("refinement_gain")
    finally:
        sys.path.remove(str(BENCHMARKS))


def seed(bench, score: float, successes: int, native: float, episodes: int = 30):
    return bench.SeedResult(seed=0, score=score, success=Rate(successes, episodes), native_return=native, steps=1000)


def test_the_truth_separates_clear_differences_and_calls_overlaps_noise(bench):
    best, beyond, p = bench.truth_decision({"a": [0.50, 0.52, 0.49, 0.51, 0.50], "b": [0.20, 0.22, 0.19, 0.21, 0.18]})
    assert (best, beyond) == ("a", True) and p < 0.001
    best, beyond, p = bench.truth_decision({"a": [0.1, 0.9, 0.2, 0.8, 0.5], "b": [0.5, 0.4, 0.6, 0.3, 0.45]})
    assert best == "a" and not beyond and p > 0.5
    # identical constant scores: a tie, never "beyond noise"; different constants: as far apart as can be
    assert bench.truth_decision({"a": [0.3] * 5, "b": [0.3] * 5})[1] is False
    assert bench.truth_decision({"a": [0.4] * 5, "b": [0.3] * 5})[:2] == ("a", True)


def test_the_loop_statistic_reads_score_and_all_seeds_where_the_old_rule_read_one_seeds_return(bench):
    lucky = [seed(bench, 0.30, 0, native=900.0), seed(bench, 0.10, 0, native=100.0)]
    steady = [seed(bench, 0.25, 0, native=300.0), seed(bench, 0.25, 0, native=300.0)]
    assert bench.before_key(lucky) > bench.before_key(steady)          # seed 0's return decided
    assert bench.loop_key(lucky[:1]) > bench.loop_key(steady[:1])      # one seed: the lucky one still wins
    assert bench.loop_key(steady) > bench.loop_key(lucky)              # two seeds: the steadier reward
    succeeded = [seed(bench, 0.10, 3, native=0.0)]
    assert bench.loop_key(succeeded) > bench.loop_key(steady)          # pooled success comes first, as in runs.ranking


def test_every_draw_of_loop_seeds_is_asked_the_same_question(bench):
    """Three loop seeds per reward: 9 picks on one seed each, 9 on two, 1 on all three; each by the loop statistic."""
    seeds_of = {"draft": [seed(bench, 0.9, 0, 0.0), seed(bench, 0.15, 0, 0.0), seed(bench, 0.2, 0, 0.0)],
                "expert rewrite": [seed(bench, 0.5, 0, 0.0)] * 3}
    assert bench.draw_agreement(seeds_of, "draft", 1) == (3, 9)  # only the draft's lucky seed beats the steady expert
    assert bench.draw_agreement(seeds_of, "draft", 2) == (2 * 3, 3 * 3)  # any pair with the 0.9 seed averages above 0.5
    assert bench.draw_agreement(seeds_of, "expert rewrite", 3) == (1, 1)


def test_the_gain_is_paired_by_seed(bench):
    mean, low, high = bench.gain_interval([0.5, 0.7, 0.9], [0.4, 0.6, 0.8])
    assert mean == pytest.approx(0.1) and low == pytest.approx(0.1) and high == pytest.approx(0.1)
    mean, low, high = bench.gain_interval([0.5, 0.2, 0.9], [0.4, 0.6, 0.8])
    assert low < 0 < high


def test_every_default_task_ships_its_pair(bench):
    for task in [*bench.DEFAULT_TASKS, *bench.MORE_PAIR_TASKS]:
        draft, expert = bench.pair_rewards(task)
        assert draft.code.exists() and expert.code.exists() and draft.round == 0 and expert.round == 1
    with pytest.raises(SystemExit, match="the pairs source ships no pair for it"):
        bench.pair_rewards("metaworld/assembly-v3")


def test_each_mistake_is_its_expert_rewrite_with_one_line_changed(bench):
    """The mistakes source differs from its round 1 for one known reason: one line of code, besides the docstring."""
    import ast
    import difflib

    shipped = sorted(bench.MISTAKES.glob("*.py"))
    assert len(shipped) == 5
    for path in shipped:
        mistake, expert = bench.pair_rewards(path.stem.replace("__", "/"), "mistakes")
        assert mistake.code == path

        def code_lines(file: Path) -> list[str]:
            tree = ast.parse(file.read_text())
            tree.body = tree.body[1:]  # the module docstring says what the mistake is
            return ast.unparse(tree).splitlines()

        changed = [line for line in difflib.ndiff(code_lines(expert.code), code_lines(mistake.code)) if line[:1] in "+-"]
        assert len(changed) == 2, (path.name, changed)
    with pytest.raises(SystemExit, match="the mistakes source ships no pair for it .*choose among metaworld/drawer-close-v3"):
        bench.pair_rewards("metaworld/window-open-v3", "mistakes")


def decision(bench, task: str, seeds: int, agrees: bool, beyond: bool, rule: str | None = None):
    return bench.Decision(task, "pairs", "r1 vs r0", rule or f"after: {seeds} seed(s), loop statistic", "draft",
                          "draft" if agrees else "expert rewrite", beyond, 0.01 if beyond else 0.5, seeds, 5000)


def test_record_merges_the_loop_statistics_agreement_per_task_budget_and_seeds(bench, tmp_path):
    """What reports cite: a (source, task, steps, seeds) measured again replaces its entry, others are kept, and the
    rule from before seed-aware scores is never recorded."""
    path = tmp_path / "pick_agreement.json"
    bench.record([decision(bench, "metaworld/reach-v3", 1, agrees=False, beyond=True),
                  decision(bench, "metaworld/reach-v3", 1, agrees=True, beyond=False, rule="before: 1 seed, success then return"),
                  decision(bench, "metaworld/drawer-close-v3", 1, agrees=True, beyond=False),
                  decision(bench, "metaworld/reach-v3", 2, agrees=True, beyond=True)], path)
    bench.record([decision(bench, "metaworld/reach-v3", 1, agrees=True, beyond=True)], path)  # reach measured again
    entries = codec.read(AgreementFile, json.loads(path.read_text()), str(path)).measurements
    assert sorted((a.task, a.seeds, a.agreed, a.beyond_noise) for a in entries) == [
        ("metaworld/drawer-close-v3", 1, 1, 0), ("metaworld/reach-v3", 1, 1, 1), ("metaworld/reach-v3", 2, 1, 1)]
    one = measured(1, 5000, tuple(entries))
    assert (len(one.tasks), one.decisions, one.agreed, one.beyond_noise, one.agreed_beyond_noise) == (2, 2, 2, 1, 1)


def test_record_leaves_out_the_mistakes_source(bench, tmp_path):
    """Pairs built to differ would flatter the agreement that reports cite for the loop's real picks."""
    path = tmp_path / "pick_agreement.json"
    built = decision(bench, "metaworld/push-v3", 1, agrees=True, beyond=True)
    built.source = "mistakes"
    bench.record([built, decision(bench, "metaworld/reach-v3", 1, agrees=False, beyond=True)], path)
    entries = codec.read(AgreementFile, json.loads(path.read_text()), str(path)).measurements
    assert [(a.source, a.task) for a in entries] == [("pairs", "metaworld/reach-v3")]


def test_record_keeps_its_truths_seed_count_and_leaves_out_picks_on_more_seeds_than_asked(bench, tmp_path):
    path = tmp_path / "pick_agreement.json"
    bench.record([decision(bench, "metaworld/push-v3", s, agrees=True, beyond=True) for s in (1, 2, 3, 4)], path,
                 truth_seeds=10, max_seeds=3)
    entries = codec.read(AgreementFile, json.loads(path.read_text()), str(path)).measurements
    assert [(a.seeds, a.truth_seeds) for a in entries] == [(1, 10), (2, 10), (3, 10)]
    assert measured(1, 5000, tuple(entries)).truth == "10-seed"


def test_a_truth_needs_two_held_out_seeds_and_a_longer_one_extends_the_five(bench):
    assert bench.held_out_seeds(5) == bench.TRUTH_SEEDS and bench.held_out_seeds(10)[:5] == bench.TRUTH_SEEDS
    with pytest.raises(SystemExit, match="--truth-seeds 1: a truth with noise needs at least 2 held-out seeds"):
        bench.main(["--truth-seeds", "1", "--tasks", "metaworld/reach-v3"])


def test_the_seed_sets_table_re_tests_the_five_on_the_seeds_beyond_them(bench):
    assert bench.one_seed_win_share([1.0, 0.0], [0.5, 0.5]) == 0.5 and bench.one_seed_win_share([0.3], [0.3]) == 0.5
    held_out = bench.held_out_seeds(7)
    scores = {"draft": {s: 1.0 + 0.01 * (s % 3) for s in (0, 1, *held_out)},
              "expert rewrite": {s: 0.5 + 0.01 * (s % 2) for s in (0, 1, *held_out)}}
    row = bench.seed_sets_row("metaworld/reach-v3", scores, [0, 1], held_out).split(" | ")
    assert row[1].startswith("1.012 / 0.504") and row[2].startswith("1.005 / 0.505")  # seeds 100-104, then 105-106
    assert row[-1] == "1.00 |"  # every draft seed scores above every expert seed


def test_draws_from_all_seeds_say_what_each_seed_count_buys(bench):
    """Every draw of S seeds per reward from all trained: one seed each picks the better reward half the time here,
    two seeds always (means 0.5 against 0.55)."""
    scores = {"draft": (0.1, 0.9), "expert rewrite": (0.5, 0.6)}
    seeds_of = {label: [seed(bench, score, 0, 1.0) for score in values] for label, values in scores.items()}
    assert bench.all_seed_draws(seeds_of, "expert rewrite", most=2) == "50% / 100%"
    assert bench.all_seed_draws(seeds_of, "draft", most=2) == "50% / 0%"
