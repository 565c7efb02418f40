"""Reward modes: what a program computes, and how that becomes the reward the agent trains on.

Why modes: a raw dense reward's optimum may differ from the task's. Two shapes keep the task's own
(sparse success) reward as the objective and use the model's program only to guide learning:

- `dense` (the default): the program is `compute_dense_reward(self, action) -> (total, components)` and
  `total` is the training reward.
- `potential`: the program is a potential `compute_potential(self) -> (value, components)`. The training
  reward is the task's sparse success reward plus `gamma * Phi(s') - Phi(s)`, with `Phi(s') = 0` when the
  episode terminates (Ng, Harada and Russell, 1999: potential-based shaping keeps the optimal policies of
  the sparse task). A truncated episode keeps `Phi(s')`: the agent bootstraps from that state, so the
  shaping must too. Over an episode of T steps the discounted shaped return is the sparse one plus
  `gamma^T Phi(s_T) - Phi(s_0)`, exactly (tests/policies/test_reward_modes.py checks it along real rollouts).
- `progress`: the program is `compute_progress(self) -> float in [0, 1]`, how far along the task a state
  is. The training reward is the sparse success reward, plus the progress gain written as a potential
  (`PROGRESS_WEIGHT * (gamma * p' - p)`, so the progress term keeps the optimum too), plus a count-based
  exploration bonus `COUNT_BONUS / sqrt(N)` over cells of (progress level, object position), where N counts
  this env's visits to the cell over all of training: unseen progress levels pay, revisited ones fade.

The wrappers live in policies/shaping.py (gymnasium and numpy), so the registry of modes, which `t2r --help` lists,
starts without them.

The sandbox runs one entry point, `compute_dense_reward(self, action)`; `runnable_source` appends to a potential
or progress program a two-line adapter that calls the mode's function, so the jail, its limits and its verdicts
are the same for every mode. The wrappers below compute the shaping in the training process, from the program's
values: the parent trusts only the numbers the jailed worker returns.

Each mode is a `RewardModeSpec` (policies.mode_spec), registered at the bottom of this module; everything else
reads the spec's fields. A new mode: a module that builds its spec (and its wrapper, its prompt templates under
prompts/modes/<name>/), and one line in `BUILT_IN_MODES` below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from policies.mode_spec import (
    ENTRY_POINT,
    REWARD_MODES,
    RewardModeSpec,
    ScreeningMeasure,
    calling_adapter,
    register_reward_mode,
    reward_mode,
    rise,
    total,
    unregister_reward_mode,
)
from sim_envs.errors import ConfigError, RewardProgramError

if TYPE_CHECKING:
    import gymnasium as gym

DEFAULT_REWARD_MODE = "dense"
"""The mode a run and a training use unless told otherwise: the program is the reward."""
DEFAULT_GAMMA = 0.99
"""SB3's and SBX's discount when a family's settings name none; the shaping must use the one that trains."""


def check_mode(mode: str) -> str:
    """The mode, or a one-line ConfigError naming the choices."""
    return reward_mode(mode).name


def mode_help() -> str:
    """`--reward-mode`'s help: each registered mode in a few words."""
    summaries = [spec.summary for spec in REWARD_MODES.values()]
    return summaries[0] if len(summaries) == 1 else f"{', '.join(summaries[:-1])} or {summaries[-1]}"


def mode_report_text(mode: str) -> str:
    """How a run's report names its reward mode (a mode no longer registered: its name)."""
    spec = REWARD_MODES.get(mode)
    return mode if spec is None else spec.report_text


def require_program(mode: str, reward: str) -> str:
    """The mode, refused in one line when it would apply to a built-in reward: a potential or progress mode needs a program."""
    spec = reward_mode(mode)
    if spec.needs_program and reward in ("expert", "sparse"):
        what = "shapes" if spec.shapes_sparse_reward else "needs"
        raise ConfigError(f"--reward-mode {mode} {what} a reward program; pass --reward PATH.py defining "
                          f"{spec.signature}, or drop --reward-mode")
    return mode


def program_mode(mode: str) -> RewardModeSpec:
    """The spec of the mode a program is written for; an unknown mode is the program's error (RewardProgramError)."""
    spec = REWARD_MODES.get(mode)
    if spec is None:
        raise RewardProgramError(f"unknown reward mode {mode!r}; use one of {', '.join(REWARD_MODES)}")
    return spec


def runnable_source(source: str, mode: str) -> str:
    """The program a reward worker runs: a dense program as written; a potential or progress program with an
    adapter that makes its value the worker's `total` (the mode's wrapper turns that into a reward), so every
    mode runs through the one entry point, in the jail and in process alike."""
    spec = program_mode(mode)
    if spec.adapter is None:
        return source
    return source.rstrip("\n") + "\n" + spec.adapter


def potential_shaping(env: gym.Env, gamma: float) -> gym.Env:
    """`potential`'s training wrapper (policies.shaping)."""
    from policies.shaping import PotentialShaping  # gymnasium: only a training env needs it, never `t2r --help` (~0.1 s)

    return PotentialShaping(env, gamma)


def progress_bonus(env: gym.Env, gamma: float) -> gym.Env:
    """`progress`'s training wrapper (policies.shaping)."""
    from policies.shaping import ProgressBonus  # gymnasium: only a training env needs it, never `t2r --help` (~0.1 s)

    return ProgressBonus(env, gamma)


def wrap_for_mode(env: gym.Env, mode: str, gamma: float) -> gym.Env:
    """The env a mode trains on, around a TaskRewardWrapper whose reward_fn is the mode's program."""
    spec = reward_mode(mode)
    return env if spec.wrap is None else spec.wrap(env, gamma)


# --------------------------------------------------------------------------- the built-in modes

DENSE = RewardModeSpec(
    name="dense",
    function=ENTRY_POINT,
    parameters=("self", "action"),
    noun="reward",
    value_noun="reward",
    value_range=None,
    adapter=None,
    wrap=None,
    shapes_sparse_reward=False,
    screening=ScreeningMeasure(
        "return", "Returns (sum of per-step totals over a rollout)",
        "A useful dense reward gives successful rollouts a higher return than failed ones: progress towards "
        "the goal and completing the task must pay more than idling, flailing or moving at random.",
        total,
    ),
    system_prompt='{% include "modes/dense/system.j2" %}',
    contract='{% include "modes/dense/contract.j2" %}',
    summary="dense (the program is the reward)",
    report_text="dense (the program is the reward)",
    heuristic_doc="Rule-based staged reward (see the header): returns (total, {component: value}).",
)

POTENTIAL = RewardModeSpec(
    name="potential",
    function="compute_potential",
    parameters=("self",),
    noun="potential",
    value_noun="potential",
    value_range=None,
    adapter=calling_adapter("potential", "compute_potential", ("self",)),
    wrap=potential_shaping,
    shapes_sparse_reward=True,
    screening=ScreeningMeasure(
        "rise of the potential", "Rises (the potential at the last step minus at the first; the shaped return gains "
        "gamma^T times the last minus the first)",
        "A useful potential rises more along successful rollouts than along failed ones: states closer to completing "
        "the task must score higher than where idling, flailing or random moves end up.",
        rise,
    ),
    system_prompt='{% include "modes/potential/system.j2" %}',
    contract='{% include "modes/potential/contract.j2" %}',
    summary="potential (compute_potential shapes the sparse success reward)",
    report_text="potential (compute_potential shapes the task's sparse success reward: gamma * Phi(s') - Phi(s))",
    heuristic_doc="Rule-based staged potential (see the header): returns (value, {component: value}); "
                  "training adds gamma * its change to the task's success reward.",
)

PROGRESS = RewardModeSpec(
    name="progress",
    function="compute_progress",
    parameters=("self",),
    noun="progress function",
    value_noun="progress",
    value_range=(0.0, 1.0),
    adapter=calling_adapter("progress", "compute_progress", ("self",)),
    wrap=progress_bonus,
    shapes_sparse_reward=True,
    screening=ScreeningMeasure(
        "rise of the progress", "Rises (the progress at the last step minus at the first)",
        "A useful progress function rises more along successful rollouts than along failed ones: it must reach its "
        "high levels only by doing the task, not by idling, flailing or moving at random.",
        rise,
    ),
    system_prompt='{% include "modes/progress/system.j2" %}',
    contract='{% include "modes/progress/contract.j2" %}',
    summary="progress (compute_progress, with a count bonus)",
    report_text="progress (compute_progress: progress gains plus a count bonus, with the task's sparse success reward)",
    heuristic_doc="Rule-based staged progress in [0, 1] (see the header): the weighted share of the stages met; "
                  "returns (progress, {component: value}).",
)

BUILT_IN_MODES = (DENSE, POTENTIAL, PROGRESS)
"""Registered here, in this order (the order `--reward-mode`'s errors list them in)."""
for _spec in BUILT_IN_MODES:
    register_reward_mode(_spec)


__all__ = ["BUILT_IN_MODES", "DEFAULT_GAMMA", "DEFAULT_REWARD_MODE", "DENSE", "POTENTIAL", "PROGRESS",
           "REWARD_MODES", "RewardModeSpec", "ScreeningMeasure",
           "check_mode", "mode_help", "mode_report_text", "program_mode", "register_reward_mode", "require_program", "reward_mode",
           "runnable_source", "unregister_reward_mode", "wrap_for_mode"]
