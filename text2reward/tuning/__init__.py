"""Tuning a reward program's numeric constants with Optuna (`t2r tune`, and `t2r run --tune N`).

- constants: the program's UPPER_CASE constants (ast), their search space, rewriting them, the diff
- space: the constants as Optuna parameters; the parent's values as the first trial
- objective: what a trial scores (the area under its success curve, with the native return as a tie-breaker)
- pruning: Optuna's pruner fed by the training pool's evaluations, stopping trials by stop file
- study: the study in the run (SQLite), resumable; settling trials a killed process left running
- tune: trials as training jobs, in batches of the run's workers; the winner as candidate `<id>-tuned`
"""

from text2reward.tuning.tune import tune_candidate, tuned_id

__all__ = ["tune_candidate", "tuned_id"]
