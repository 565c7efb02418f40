"""The algorithm of the end-to-end tests that train a few hundred steps only to exercise the loop around training.

Why SB3's SAC there and not the families' SBX SAC: at 150-300 steps a job's cost is its fixed start, and SBX's is
~2 s of CPU more per job (JAX traces and lowers ~70 programs in every process; a forked 200-step SBX job ends ~5.8 s
after its start, an SB3 SAC one ~3.1 s, benchmarks/RESULTS.md "start latency"). Past ~600 steps SBX's cheaper updates
win, so longer tests keep the default. The default algorithm is trained by the tests of the learner and of the jobs
themselves (tests/policies/test_sbx.py, tests/training/test_preloaded_launcher.py, the demo's test, the resume tests).
"""

SHORT_ALGO = "sac"

SHORT_HP = {"learning_starts": 50, "batch_size": 32, "train_freq": 4, "gradient_steps": 1}
"""The hyper-parameters of those tests' jobs: updates from step 50, on batches of 32, one per 4 env steps (MetaWorld's own
settings take 4 every 4 steps: `gradient_steps` is named so that they do not). At 200-300
steps the tests exercise the loop around training, not learning: a forked 300-step SB3 SAC job took ~6.4 CPU-s with an
update every step (250 of them) and ~4.9 with one every 4 (this machine, 2026-11-27)."""

SHORT_HP_ARGS = [arg for key, value in SHORT_HP.items() for arg in ("--hp", f"{key}={value}")]
"""The same settings as `t2r run`/`t2r train` options, for the tests that start the commands."""
