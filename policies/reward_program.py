"""Reward functions the training wrapper can call: expert, sparse, or a `compute_dense_reward` program.

Why one small protocol: the wrapper, the evaluator and the sandbox all call a reward the same way,
`reward(view, action, native_reward, step_success) -> (total, components)`, whatever produced it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from sim_envs.errors import RewardProgramError

ENTRY_POINT = "compute_dense_reward"


class RewardFunction(Protocol):
    name: str

    def __call__(self, view: Any, action: np.ndarray, native_reward: float, step_success: bool) -> tuple[float, dict[str, float]]: ...


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


@dataclass
class SparseReward:
    """1 on steps where the task's success test holds, else 0: the no-shaping baseline."""

    name: str = "sparse"
    isolation: str = "none needed: the task's own success test"

    def __call__(self, view: Any, action: np.ndarray, native_reward: float, step_success: bool) -> tuple[float, dict[str, float]]:
        value = 1.0 if step_success else 0.0
        return value, {"success": value}


@dataclass
class ProgramReward:
    """A `compute_dense_reward(self, action)` program, run in this process.

    In-process execution is for trusted code only (expert rewrites, a user's own file passed with
    `t2r train --trusted-reward`): the code shares the training process and can reach the simulator.
    Model-written code goes through the sandbox and trains in a jailed worker (SandboxedReward).
    """

    source: str
    name: str = "program"
    isolation: str = field(default="none: trusted code run in the training process (--trusted-reward)", init=False)
    function: Callable[..., Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.function = compile_reward(self.source, self.name)

    @classmethod
    def from_file(cls, path: str | Path) -> ProgramReward:
        path = Path(path)
        if not path.is_file():
            raise RewardProgramError(f"reward file {path} does not exist; pass a .py file defining {ENTRY_POINT}(self, action)")
        return cls(path.read_text(), name=path.stem)

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
    import importlib

    namespace: dict[str, Any] = {alias: importlib.import_module(module) for alias, module in PREIMPORTED.items()}
    namespace["__name__"] = name
    if builtins is not None:
        namespace["__builtins__"] = dict(builtins)
    return namespace


def find_entry_point(tree: ast.Module, origin: str) -> ast.FunctionDef:
    """The module-level `compute_dense_reward` definition, checked to be callable as `(self, action)`.

    Extra parameters are fine when they have defaults (`obs=None`, `scale=1.0`) or are `*args` /
    `**kwargs`; a third required parameter or a keyword-only one without a default is not."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == ENTRY_POINT:
            problem = _signature_problem(node.args)
            if problem:
                raise RewardProgramError(
                    f"{origin}: {ENTRY_POINT} {problem}; it must be {ENTRY_POINT}(self, action) (any further parameters need defaults)"
                )
            return node
    raise RewardProgramError(f"{origin} defines no {ENTRY_POINT}(self, action); add that function at module level")


def _signature_problem(args: ast.arguments) -> str | None:
    """Why `f(self, action)` would fail with these parameters (a TypeError at the first call), or None."""
    positional = [a.arg for a in args.posonlyargs + args.args]
    required = positional[: len(positional) - len(args.defaults)]
    if len(positional) < 2 and args.vararg is None:
        return f"takes {len(positional)} parameters ({', '.join(positional) or 'none'})"
    if len(required) > 2:
        return f"requires {len(required)} positional parameters ({', '.join(required)}); give the ones after action a default value"
    missing = [a.arg for a, default in zip(args.kwonlyargs, args.kw_defaults) if default is None]
    if missing:
        return f"has the keyword-only parameter '{missing[0]}' without a default; give it a default value or remove it"
    return None


def compile_reward(source: str, origin: str = "reward") -> Callable[..., Any]:
    """Compile trusted reward code and return its entry point."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise RewardProgramError(f"{origin} has a syntax error on line {exc.lineno}: {exc.msg}") from exc
    find_entry_point(tree, origin)
    namespace = program_namespace(f"t2r_reward_{origin}")
    exec(compile(tree, f"<{origin}>", "exec"), namespace)
    return namespace[ENTRY_POINT]


def reward_from_spec(spec: str) -> RewardFunction:
    """`expert`, `sparse`, or a path to a .py file."""
    if spec == "expert":
        return ExpertReward()
    if spec == "sparse":
        return SparseReward()
    return ProgramReward.from_file(spec)
