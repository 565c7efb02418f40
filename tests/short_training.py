"""The algorithm of the end-to-end tests that train a few hundred steps only to exercise the loop around training.

Why SB3's SAC there and not the families' SBX SAC: at 150-300 steps a job's cost is its fixed start, and SBX's is
~2 s of CPU more per job (JAX traces and lowers ~70 programs in every process; a forked 200-step SBX job ends ~5.8 s
after its start, an SB3 SAC one ~3.1 s, benchmarks/RESULTS.md "start latency"). Past ~600 steps SBX's cheaper updates
win, so longer tests keep the default. The default algorithm is trained by the tests of the learner and of the jobs
themselves (tests/policies/test_sbx.py, tests/training/test_preloaded_launcher.py, the demo's test, the resume tests).
"""

SHORT_ALGO = "sac"
