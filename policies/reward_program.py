"""Reward functions the training wrapper can call: expert, sparse, or a `compute_dense_reward` program.

Why one small protocol: the wrapper, the evaluator and the sandbox all call a reward the same way,
`reward(view, action, native_reward, step_success) -> (total, components)`, whatever produced it.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from policies.mode_spec import ENTRY_POINT
from policies.reward_modes import REWARD_MODES, program_mode, runnable_source
from sim_envs.errors import ConfigError, RewardProgramError


class RewardFunction(Protocol):
    name: str

    def __call__(self, view: Any, action: np.ndarray, native_reward: float, step_success: bool) -> tuple[float, dict[str, float]]: ...


class RelabellingReward(RewardFunction, Protocol):
    """A reward that hindsight experience replay can score against goals an episode was not aiming at (optional:
    only the built-in rewards have it; policies.her says why a program cannot).

    `relabel(achieved, desired, infos, task, env)` takes batches of goal vectors (`achieved` after the step) and
    returns the reward per row, exactly what `__call__` pays at a real step whose goal is `desired`."""

    def relabel(self, achieved: np.ndarray, desired: np.ndarray, infos: Any, task: Any, env: Any) -> np.ndarray: ...


def normalise_output(value: Any) -> tuple[float, dict[str, float]]:
    """Accept `(total, {name: value})` or a bare number; anything else breaks the contract."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], Mapping):
        total, raw = value
        components = {}
        for key, item in raw.items():
            if not isinstance(key, str):
                raise RewardProgramError(f"component names must be strings, got {key!r}; use names like 'reach'")
            components[key] = _as_float(item, f"component {key!r}")
        return _as_float(total, "total reward"), components
    total = _as_float(value, "reward")
    return total, {"reward": total}


def _as_float(value: Any, what: str) -> float:
    if type(value) is float or type(value) is np.float64:  # the common case, checked first: it runs every step
        return float(value)
    if isinstance(value, (bool, np.bool_)):
        return float(value)
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(())[()]
    if not isinstance(value, (int, float, np.integer, np.floating)):
        raise RewardProgramError(
            f"{what} must be a number, got {type(value).__name__}; return (float(total), {{'name': float(value)}})"
        )
    return float(value)


@dataclass
class ExpertReward:
    """The environment's own dense reward, passed through."""

    name: str = "expert"
    isolation: str = "none needed: the environment's own reward"

    def __call__(self, view: Any, action: np.ndarray, native_reward: float, step_success: bool) -> tuple[float, dict[str, float]]:
        return native_reward, {"expert": native_reward}

    def relabel(self, achieved: np.ndarray, desired: np.ndarray, infos: Any, task: Any, env: Any) -> np.ndarray:
        """The env's own goal-conditioned reward (Gymnasium-Robotics' `compute_reward`: for Fetch minus the distance),
        the function its step reward is computed with, on the whole batch at once (every env a task builds scores a
        batch as it scores each goal: the pen's is fixed where it is built, sim_envs.shadow_tasks.make_shadow_env)."""
        compute = getattr(env.unwrapped, "compute_reward", None)
        if compute is None:
            raise ConfigError(f"task {task.id}'s env has no compute_reward, so its expert reward cannot be relabelled; use --reward sparse --her")
        return np.asarray(compute(np.asarray(achieved), np.asarray(desired), infos), dtype=np.float64)


@dataclass
class SparseReward:
    """1 on steps where the task's success test holds, else 0: the no-shaping baseline."""

    name: str = "sparse"
    isolation: str = "none needed: the task's own success test"

    def __call__(self, view: Any, action: np.ndarray, native_reward: float, step_success: bool) -> tuple[float, dict[str, float]]:
        value = 1.0 if step_success else 0.0
        return value, {"success": value}

    def relabel(self, achieved: np.ndarray, desired: np.ndarray, infos: Any, task: Any, env: Any) -> np.ndarray:
        """1 where the task's goal test holds for the pair (for a multi-goal task the step's success test is that test)."""
        if task.goal_success is None:
            raise ConfigError(f"task {task.id} has no goals to relabel; drop --her")
        return np.asarray(task.goal_success(achieved, desired), dtype=np.float64)


@dataclass
class ProgramReward:
    """A `compute_dense_reward(self, action)` program, run in this process.

    In-process execution is for trusted code only (expert rewrites, a user's own file passed with
    `t2r train --trusted-reward`): the code shares the training process and can reach the simulator.
    Model-written code goes through the sandbox and trains in a jailed worker (SandboxedReward).
    """

    source: str
    name: str = "program"
    mode: str = "dense"
    """The reward mode the program is written for: its value is the total (policies.reward_modes shapes it)."""
    isolation: str = field(default="none: trusted code run in the training process (--trusted-reward)", init=False)
    function: Callable[..., Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.function = compile_reward(self.source, self.name, self.mode)

    @classmethod
    def from_file(cls, path: str | Path, mode: str = "dense") -> ProgramReward:
        path = Path(path)
        if not path.is_file():
            raise RewardProgramError(f"reward file {path} does not exist; pass a .py file defining {ENTRY_POINT}(self, action)")
        return cls(path.read_text(), name=path.stem, mode=mode)

    def __call__(self, view: Any, action: np.ndarray, native_reward: float, step_success: bool) -> tuple[float, dict[str, float]]:
        return normalise_output(self.function(view, action))


PREIMPORTED: dict[str, str] = {"np": "numpy", "math": "math"}
"""Names every reward program can use without importing them (name -> module), in training and in
validation alike: model code often uses `np` without `import numpy as np`. The modules are also on
the sandbox's allow-list (text2reward.sandbox.static.ALLOWED_MODULES), and the prompt says so."""


def program_namespace(name: str, builtins: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The globals a reward program's module body runs in: the one definition for every path.

    In process (`compile_reward`, trusted code) and in the jailed worker (text2reward.sandbox.jailed,
    which passes its restricted `builtins`), a program sees the same pre-imported names, so one
    program gets one verdict whichever path runs it."""
    namespace: dict[str, Any] = {alias: importlib.import_module(module) for alias, module in PREIMPORTED.items()}
    namespace["__name__"] = name
    if builtins is not None:
        namespace["__builtins__"] = dict(builtins)
    return namespace


def find_entry_point(tree: ast.Module, origin: str, mode: str = "dense") -> ast.FunctionDef:
    """The module-level function the reward mode asks for (`compute_dense_reward(self, action)`, or
    `compute_potential(self)` / `compute_progress(self)`), checked to be callable with those arguments.

    Extra parameters are fine when they have defaults (`obs=None`, `scale=1.0`) or are `*args` /
    `**kwargs`; a further required parameter or a keyword-only one without a default is not."""
    spec = program_mode(mode)
    name, signature = spec.function, spec.signature
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            problem = _signature_problem(node.args, len(spec.parameters))
            if problem:
                raise RewardProgramError(f"{origin}: {name} {problem}; it must be {signature} (any further parameters need defaults)")
            return node
    entry_names = {other.function for other in REWARD_MODES.values()}
    other = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in entry_names and n.name != name]
    wrong_mode = f" (it defines {other[0]}, which another reward mode asks for; this run's mode is {mode})" if other else ""
    raise RewardProgramError(f"{origin} defines no {signature}{wrong_mode}; add that function at module level")


def _signature_problem(args: ast.arguments, count: int = 2) -> str | None:
    """Why calling the function with `count` positional arguments would fail (a TypeError at the first call), or None."""
    positional = [a.arg for a in args.posonlyargs + args.args]
    required = positional[: len(positional) - len(args.defaults)]
    if len(positional) < count and args.vararg is None:
        return f"takes {len(positional)} parameters ({', '.join(positional) or 'none'})"
    if len(required) > count:
        return (f"requires {len(required)} positional parameters ({', '.join(required)}); "
                f"give the ones after {positional[count - 1]} a default value")
    missing = [a.arg for a, default in zip(args.kwonlyargs, args.kw_defaults) if default is None]
    if missing:
        return f"has the keyword-only parameter '{missing[0]}' without a default; give it a default value or remove it"
    return None


def compile_reward(source: str, origin: str = "reward", mode: str = "dense") -> Callable[..., Any]:
    """Compile trusted reward code and return its entry point (for a potential or progress program, the adapter)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise RewardProgramError(f"{origin} has a syntax error on line {exc.lineno}: {exc.msg}") from exc
    find_entry_point(tree, origin, mode)
    namespace = program_namespace(f"t2r_reward_{origin}")
    exec(compile(runnable_source(source, mode), f"<{origin}>", "exec"), namespace)
    return namespace[ENTRY_POINT]


def reward_from_spec(spec: str) -> RewardFunction:
    """`expert`, `sparse`, or a path to a .py file."""
    if spec == "expert":
        return ExpertReward()
    if spec == "sparse":
        return SparseReward()
    return ProgramReward.from_file(spec)
