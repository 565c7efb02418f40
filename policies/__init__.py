"""Training and evaluating SB3 policies on a task with a chosen reward (no language models here).

Builds on `sim_envs`; `text2reward` builds on it.
"""
