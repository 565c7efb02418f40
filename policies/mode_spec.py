"""What a reward mode is, as one typed record, and the registry of the modes a run can name.

Why one record: a mode decides what the model writes (its function and parameters), how the sandbox runs it
(an adapter to the one entry point), how training turns its value into a reward (a wrapper), how screening
compares rollouts by it, what the prompt, the heuristic backend and the report say about it, and whether HER
can relabel it. Held in one place, the rest of the code reads the record's fields instead of switching on a
mode's name, and a new mode is one module that builds a `RewardModeSpec` plus one `register_reward_mode` line
(policies.reward_modes registers the three built-in modes; tests/policies/test_reward_mode_spec.py adds a toy one).

Import the registry from `policies.reward_modes`, which registers the built-in modes: this module holds only
the type and the registry, so that a mode's own module can import it without importing the others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from policies.choices import Registry
from sim_envs.errors import ConfigError

if TYPE_CHECKING:  # the measures read arrays; this module (a registry `t2r --help` lists) never needs numpy itself
    import numpy as np

ENTRY_POINT = "compute_dense_reward"
"""The sandbox's one entry point, `compute_dense_reward(self, action)`: what every worker calls, in every mode."""
ENTRY_PARAMETERS = ("self", "action")


def total(values: np.ndarray) -> float:
    """A rollout's return: the sum of its per-step values (what a dense reward pays over an episode)."""
    return float(values.sum())


def rise(values: np.ndarray) -> float:
    """How much a rollout's value rose: the last step's minus the first's (what a potential-style shaping pays)."""
    return float(values[-1] - values[0])


@dataclass(frozen=True)
class ScreeningMeasure:
    """How screening compares a mode's rollouts: one number per rollout, higher for success-like rollouts."""

    name: str
    """The number's name in the verdict ("the higher return"), so the model reads what was compared."""
    description: str
    """The line that heads the numbers ("Returns (sum of per-step totals over a rollout)"): how the number is made."""
    advice: str
    """The sentence a failed comparison ends with: what a useful program of this mode does that this one did not."""
    score: Callable[[np.ndarray], float]
    """A rollout's per-step values (the entry point's totals, in order) -> the number compared (`total`, `rise`)."""


def calling_adapter(mode: str, function: str, parameters: tuple[str, ...]) -> str:
    """The lines appended to a program so that the entry point returns `function`'s value (the usual adapter)."""
    call = f"{function}({', '.join(parameters)})"
    return f"\n\ndef {ENTRY_POINT}(self, action):  # added by text2reward: the {mode} mode calls {call}\n    return {call}\n"


@dataclass(frozen=True)
class RewardModeSpec:
    """Everything a reward mode is: what the model writes, how it runs and trains, and how it is described."""

    name: str
    """The `--reward-mode` value: the registry's key, and what run and job records store."""
    function: str
    """The module-level function the model writes: extraction, the static check and the prompt look for it."""
    parameters: tuple[str, ...]
    """Its parameters (("self", "action") or ("self",)): the entry-point check counts them and the prompt shows them."""
    noun: str
    """What a program of this mode is called in prose ("reward", "potential", "progress function"): the heuristic's replies."""
    value_noun: str
    """What the function's value is called ("reward", "potential", "progress"): screening's verdict, the prompts' headings."""
    value_range: tuple[float, float] | None
    """The interval its value is held to (progress: (0, 1)), None where it has none: the heuristic writes a share of it."""
    adapter: str | None
    """Source appended to a program so the sandbox's one entry point returns this mode's value; None: the program is that entry point."""
    wrap: Callable[[Any, float], Any] | None
    """Training's wrapper around the env whose reward is the mode's value, given the agent's gamma; None: the value is the reward."""
    shapes_sparse_reward: bool
    """The training reward is the task's sparse success reward shaped by the program: only a program can, and HER cannot relabel it."""
    screening: ScreeningMeasure
    """How screening scores a rollout of the mode's values, names that measure, and advises on a failed comparison."""
    system_prompt: str
    """Jinja source of the system message's lines on what the model writes (a built-in mode includes prompts/modes/<name>/)."""
    contract: str
    """Jinja source of the prompt's contract section, rendered with the prompt's variables (e.g. extending "_contract.j2")."""
    summary: str
    """The mode in a few words, for `--reward-mode`'s help ("potential (compute_potential shapes the sparse success reward)")."""
    report_text: str
    """How a run's report names the mode: what the program computes and what training pays."""
    heuristic_doc: str | None = None
    """The docstring the rule-based heuristic backend gives the function it writes; None: that backend cannot write this mode."""

    def __post_init__(self) -> None:
        if not self.name or not self.function.isidentifier() or not self.parameters or self.parameters[0] != "self":
            raise ConfigError(f"reward mode {self.name!r}: give it a name, a function name and parameters starting with 'self'")
        if self.adapter is None and (self.function, self.parameters) != (ENTRY_POINT, ENTRY_PARAMETERS):
            raise ConfigError(f"reward mode {self.name!r} asks for {self.signature} but has no adapter: the sandbox calls only "
                              f"{ENTRY_POINT}(self, action); give it one (policies.mode_spec.calling_adapter)")

    @property
    def signature(self) -> str:
        """The function as the prompt and error messages write it, e.g. "compute_potential(self)"."""
        return f"{self.function}({', '.join(self.parameters)})"

    @property
    def takes_action(self) -> bool:
        """Whether the program may read the step's `action` (a potential scores states, not moves)."""
        return "action" in self.parameters

    @property
    def needs_program(self) -> bool:
        """A dense reward (the built-in expert and sparse rewards, a keypoint program) is no program of this mode."""
        return self.adapter is not None or self.shapes_sparse_reward


MODES: Registry[RewardModeSpec] = Registry(
    "reward mode", lambda name, specs: f"unknown reward mode {name!r} (--reward-mode); use one of {', '.join(s.name for s in specs)}")
"""Every reward mode by name (policies.choices: one rule set for every pluggable choice)."""
REWARD_MODES: Mapping[str, RewardModeSpec] = MODES.view
"""Name -> spec of every registered mode, in registration order (read-only: register through `register_reward_mode`)."""


def register_reward_mode(spec: RewardModeSpec, replace: bool = False) -> RewardModeSpec:
    """Add a mode; a name already registered is refused (two modes of one name would make records ambiguous)."""
    if not isinstance(spec, RewardModeSpec):
        raise TypeError(f"register_reward_mode takes a RewardModeSpec, got {type(spec).__name__}")
    return MODES.register(spec, replace=replace)


def unregister_reward_mode(name: str) -> RewardModeSpec:
    """Remove a mode (tests that register their own take it out again)."""
    return MODES.unregister(name)


def reward_mode(name: str) -> RewardModeSpec:
    """The spec of a mode, or a one-line ConfigError naming the registered ones."""
    return MODES.get(name)


__all__ = ["ENTRY_POINT", "MODES", "REWARD_MODES", "RewardModeSpec", "ScreeningMeasure", "calling_adapter", "register_reward_mode",
           "reward_mode", "rise", "total", "unregister_reward_mode"]
