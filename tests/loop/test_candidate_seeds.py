"""`--candidate-seeds S` end to end: each candidate trains as S real jobs on different seeds, its record holds every
seed and the pooled score, the next round's prompt and the report state the spread between seeds, and the run shows
and resumes."""

import json
import subprocess
import sys

import pytest
from short_training import SHORT_ALGO, SHORT_HP

from policies.stats import Rate
from text2reward.loop import resume_run, start_run
from text2reward.runs.records import read_result, write
from text2reward.runs.seed_scores import seed_spread
from text2reward.settings import CANDIDATE_SEED_STRIDE, RunConfig

pytestmark = pytest.mark.slow  # end-to-end: real training



def test_two_seeds_per_candidate_train_two_jobs_and_pool_their_episodes(tmp_path):
    config = RunConfig.of(task_id="fetch/reach", backend="heuristic", rounds=2, samples=1, steps=300, workers=2, candidate_seeds=2,
                          final_seeds=1, compare_expert=False, eval_freq=150, eval_episodes=2, overrides=SHORT_HP, algo=SHORT_ALGO,
                          success_threshold=1.01, video=False)
    messages: list[str] = []
    store = start_run(config, tmp_path, emit=lambda e: messages.append(e.text))
    assert store.state().status == "finished"
    candidates = store.candidates()
    assert [c.id for c in candidates] == ["r0-s0", "r1-s0"] and all(c.status == "trained" for c in candidates)
    for c in candidates:
        directory = store.candidate_dir(c.round, c.sample)
        jobs = [json.loads((directory / folder / "job.json").read_text()) for folder in ("training", f"training-seed{CANDIDATE_SEED_STRIDE}")]
        assert [job["train"]["seed"] for job in jobs] == [0, CANDIDATE_SEED_STRIDE]
        assert [job["plan"]["seeds"] for job in jobs] == [[0], [CANDIDATE_SEED_STRIDE]]
        assert [s.seed for s in c.seeds] == [0, CANDIDATE_SEED_STRIDE] and all(s.training is not None for s in c.seeds)
        for seed in c.seeds:  # each seed's own figures, from its own job's result
            own = json.loads((store.root / seed.job / "train" / "result.json").read_text())
            assert seed.training.success_rate == own["success_rate"] and seed.training.curve == read_result(own).curve
        spread = seed_spread(c)
        assert spread is not None and c.training.episodes == sum(s.training.episodes for s in c.seeds)
        assert Rate.of(c.training.success_rate, c.training.episodes) == spread.pooled
    # the round-1 prompt states the shown reward's spread between seeds
    prompt = store.read_json("rounds/r1/prompt.json")["messages"][-1]["content"]
    assert "this reward was trained on 2 seeds" in prompt and "success per seed" in prompt and "standard deviation" in prompt
    assert any("pooled over 2 seeds" in m for m in messages)
    report = (store.root / "report.md").read_text()
    assert "Over 2 training seeds: success per seed" in report and "pooled over the seeds' episodes" in report
    final = store.final_summary()
    assert final.best.pooled is not None and final.best.mean == final.best.pooled.rate
    # the CLI shows it, and a resume trains nothing again
    shown = subprocess.run([sys.executable, "-m", "text2reward.cli", "runs", "show", store.run_id, "--runs-dir", str(tmp_path)],
                           capture_output=True, text=True, check=True).stdout
    assert "r1-s0" in shown
    before = {c.id: write(c) for c in candidates}
    resume_run(tmp_path, store.run_id)
    assert {c.id: write(c) for c in store.candidates()} == before
