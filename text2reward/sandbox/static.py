"""The static pass: an AST allow-list that turns away reward code before any process is spent on it.

Why an allow-list *and* a runtime guard: the allow-list gives the model precise, line-numbered
feedback ("line 3: import of 'os' ..."), which is what lets the next round fix the code. It is not
a sandbox: allowed modules reach forbidden ones (`numpy.f2py.os`), so the isolated runner
(`runner.py`, `jailed.py`) enforces the same rules again without trusting this pass.
"""

from __future__ import annotations

import ast

from policies.reward_program import PREIMPORTED, find_entry_point
from sim_envs.errors import RewardProgramError

MAX_SOURCE_CHARS = 100_000
"""Longer code is refused outright: reward functions are a page, not a library."""

ALLOWED_MODULES: tuple[str, ...] = (
    "numpy",
    "numpy.linalg",
    "numpy.random",
    "numpy.fft",
    "numpy.polynomial",
    "math",
    "scipy.spatial",
    "scipy.spatial.distance",
    "scipy.spatial.transform",
    "scipy.special",
    "scipy.linalg",
)
"""The one list of modules reward code may import (also `from numpy import linalg`, `from scipy.spatial
import distance` and the like): pure numeric code that reads no files, opens no sockets and loads no
code. Used by the static pass, by the jailed worker (which imports the ones a program names before it
locks down) and by the prompt's contract (rendered from this tuple). Left out on purpose: `scipy`
itself (its lazy attributes reach scipy.io and scipy.datasets), scipy.io, scipy.datasets, scipy.misc
(files and downloads), scipy.stats (~1 s and ~500 modules to import, random draws) and scipy.optimize
(iterative solvers: neither cheap nor needed per step)."""

EAGER_MODULES: tuple[str, ...] = tuple(name for name in ALLOWED_MODULES if name.partition(".")[0] in ("numpy", "math"))
"""Imported by every worker before lock-down (a few ms). The scipy modules cost ~0.15-0.35 s and
~30 MB each time a worker starts, so a worker imports them only when the program's code names them."""

ALLOWED_TEXT = ", ".join(ALLOWED_MODULES)

if not set(PREIMPORTED.values()) <= set(ALLOWED_MODULES):  # pragma: no cover - a definition error
    raise ImportError("every pre-imported module must be on the allow-list")

FORBIDDEN_NAMES = frozenset(
    {
        "exec", "eval", "compile", "open", "__import__", "globals", "locals", "vars", "getattr", "setattr",
        "delattr", "input", "breakpoint", "memoryview", "exit", "quit", "help", "dir", "type", "object",
        "super", "id", "classmethod", "staticmethod", "property", "__builtins__", "__loader__", "__spec__",
    }
)
"""Builtins that reach outside the computation, introspect, or mutate objects by name."""

FORBIDDEN_ATTRIBUTES = frozenset(
    {
        # numpy reaches to the file system, compilers and C: all of it I/O or code loading.
        "f2py", "ctypeslib", "ctypes", "distutils", "testing", "npyio", "DataSource",
        "save", "savez", "savez_compressed", "savetxt", "load", "loadtxt", "genfromtxt", "fromfile",
        "tofile", "fromregex", "memmap", "dump", "dumps", "load_library",
        # scipy.spatial's plotting helpers import matplotlib.
        "delaunay_plot_2d", "voronoi_plot_2d", "convex_hull_plot_2d",
        # names of modules an allowed module may hold a reference to.
        "os", "sys", "subprocess", "socket", "shutil", "builtins", "importlib", "mmap", "signal",
        "system", "popen", "open",
        # frame and code introspection.
        "gi_frame", "gi_code", "cr_frame", "ag_frame", "tb_frame", "f_back", "f_globals", "f_locals",
        "f_builtins", "f_code",
    }
)
"""Attribute names that have no place in a reward computation (besides every `_name`)."""


TOO_DEEP = "the code is nested too deeply to check; write flat expressions and ordinary statements"

READ_ONLY_ARGUMENTS = frozenset({"self", "action"})


def check_program(code: str, origin: str = "the reward code", mode: str = "dense") -> None:
    """Raise `RewardProgramError` listing every rule `code` breaks: the static verdict as an exception,
    for paths that build a reward without a validation report (training from a file)."""
    problems = static_check(code, mode)
    if problems:
        raise RewardProgramError(f"{origin} is refused by the static check (as `t2r validate` refuses it): " + "; ".join(problems))


def static_check(code: str, mode: str = "dense") -> list[str]:
    """Every rule the code breaks, one message each (line, what, how to fix); empty when it passes.
    `mode` names the function the program must define (its RewardModeSpec's, policies.reward_modes)."""
    if len(code) > MAX_SOURCE_CHARS:
        return [f"the code is {len(code):,} characters long; keep the reward program under {MAX_SOURCE_CHARS:,}"]
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return [f"line {exc.lineno}: syntax error: {exc.msg}; fix the Python syntax"]
    except ValueError as exc:  # e.g. null bytes
        return [f"the code cannot be parsed ({exc}); send plain Python source"]
    except (MemoryError, RecursionError):
        return [TOO_DEEP]
    errors: list[str] = []
    try:
        find_entry_point(tree, "the reward code", mode)
    except RewardProgramError as exc:
        errors.append(str(exc))
    visitor = _Rules()
    try:
        visitor.visit(tree)
    except RecursionError:
        return errors + [TOO_DEEP]
    errors.extend(message for _, message in sorted(set(visitor.problems)))
    return errors


class _Rules(ast.NodeVisitor):
    """Collects (line, message) for every node that breaks a rule."""

    def __init__(self) -> None:
        self.problems: list[tuple[int, str]] = []

    def _flag(self, node: ast.AST, message: str) -> None:
        line = getattr(node, "lineno", 0)
        self.problems.append((line, f"line {line}: {message}"))

    # --- imports ---
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name not in ALLOWED_MODULES:
                self._flag(node, f"import of '{alias.name}' is not allowed; import only {ALLOWED_TEXT}")
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self._flag(node, "relative imports are not allowed; import only " + ALLOWED_TEXT)
            return
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if alias.name == "*":
                self._flag(node, f"'from {module} import *' is not allowed; import the module and use its names")
            elif module in ALLOWED_MODULES and (alias.name.startswith("_") or alias.name in FORBIDDEN_ATTRIBUTES):
                self._flag(node, f"importing '{alias.name}' from '{module}' is not allowed; reward code only computes, it reads no files and loads no code")
            elif module not in ALLOWED_MODULES and full not in ALLOWED_MODULES:
                what = f"'{full}'" if _allowed_package(module) else f"import from '{module}'"
                self._flag(node, f"{what} is not allowed; import only {ALLOWED_TEXT}")
        self.generic_visit(node)

    # --- names and attributes ---
    def visit_Name(self, node: ast.Name) -> None:
        if node.id in FORBIDDEN_NAMES:
            self._flag(node, f"'{node.id}' is not allowed in reward code; compute the reward from `self` and `action` with numpy/math")
        elif node.id.startswith("__"):
            self._flag(node, f"the dunder name '{node.id}' is not allowed; use ordinary names")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self._flag(node, f"assigning or deleting the attribute '.{node.attr}' is not allowed; the view is read-only, keep values in local variables")
        if node.attr.startswith("_"):
            self._flag(node, f"access to the private or dunder attribute '.{node.attr}' is not allowed; read only the documented view fields and public numpy/math functions")
        elif node.attr in FORBIDDEN_ATTRIBUTES:
            self._flag(node, f"'.{node.attr}' is not allowed; reward code reads no files, starts no processes and loads no code")
        elif node.attr == "format" and isinstance(node.value, ast.Attribute) and node.value.attr == "lib":
            self._flag(node, "'lib.format' is not allowed; reward code reads and writes no files")
        elif isinstance(node.value, ast.Name) and node.value.id == "scipy" and not _allowed_package(f"scipy.{node.attr}"):
            # after `import scipy.spatial`, `scipy.io` would load through scipy's lazy attributes
            self._flag(node, f"'scipy.{node.attr}' is not allowed; use only {ALLOWED_TEXT}")
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg == "qhull_options":
            self._flag(node.value, "'qhull_options' is not allowed (Qhull options can read and write files); use the defaults")
        self.generic_visit(node)

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        # `case C(__class__=x)` reads an attribute without attribute syntax
        for name in node.kwd_attrs:
            if name.startswith("_") or name in FORBIDDEN_ATTRIBUTES:
                self._flag(node, f"the pattern attribute '{name}' is not allowed; match only on values and public fields")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)) and _root_name(node) in READ_ONLY_ARGUMENTS:
            self._flag(node, f"writing into '{_root_name(node)}' is not allowed; it is read-only, copy it first (e.g. np.array(...)) if you need a modified array")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and "__" in node.value:
            self._flag(node, "strings containing '__' are not allowed (they name hidden attributes); rename the component")

    # --- definitions ---
    def _check_def_name(self, node: ast.AST, name: str) -> None:
        if name.startswith("__"):
            self._flag(node, f"defining the dunder name '{name}' is not allowed; use an ordinary name")

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._check_def_name(node, node.name)
        for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
            self._check_def_name(arg, arg.arg)
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._flag(node, f"class definitions are not allowed; write '{node.name}' as plain functions")
        self.generic_visit(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._flag(node, f"async functions are not allowed; make '{node.name}' a plain function")
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self._flag(node, "'global' is not allowed: a reward must depend only on `self` and `action`; keep no state between calls")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self._flag(node, "'nonlocal' is not allowed: a reward must depend only on `self` and `action`; keep no state between calls")


def _allowed_package(name: str) -> bool:
    """An allowed module, or a package on the way to one (`scipy.spatial` for `scipy.spatial.distance`)."""
    return any(module == name or module.startswith(name + ".") for module in ALLOWED_MODULES)


def _root_name(node: ast.AST) -> str | None:
    """`self` for `self.robot.ee_position[0]`: the name an attribute/subscript chain starts from."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


__all__ = ["ALLOWED_MODULES", "ALLOWED_TEXT", "EAGER_MODULES", "PREIMPORTED", "check_program", "static_check"]
