"""The code's shape in numbers: the largest classes and functions, and every import made inside a function.

    python scripts/code_shape.py                 # text2reward/ and policies/
    python scripts/code_shape.py --top 15 sim_envs

Why: a class that does every stage's work, or a function too long to read at once, shows here first; a deferred
import is fine where an optional dependency or a measured start-up cost needs it, and must say so on its line (a
comment), which this lists. A block of imports one after another in a function may say it once, on its first line: an
import directly following another deferred import of the same function counts as explained when that one is.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path.cwd()
"""The checkout measured: the one this is run in (so a baseline checkout is measured by running it there)."""


def spans(source: str, path: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]], list[tuple[str, str, bool]]]:
    """(class lines, function lines, deferred imports (where, what, has a reason)) of one module."""
    classes, functions, deferred = [], [], []
    source_lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            classes.append((node.end_lineno - node.lineno + 1, f"{path}:{node.lineno} {node.name}"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append((node.end_lineno - node.lineno + 1, f"{path}:{node.lineno} {node.name}"))
            deferred += _deferred_imports(node, source_lines, path)
    return classes, functions, deferred


def _deferred_imports(function: ast.FunctionDef | ast.AsyncFunctionDef, source_lines: list[str],
                      path: str) -> list[tuple[str, str, bool]]:
    """The imports in `function`'s own statements (a nested function's are its own), each with whether it is explained:
    a comment on its line, or it directly follows an explained import in the same block."""
    found = []
    blocks = [function.body]
    while blocks:
        previous_explained = False
        for statement in blocks.pop():
            if isinstance(statement, (ast.Import, ast.ImportFrom)):
                if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
                    continue
                names = statement.module if isinstance(statement, ast.ImportFrom) else ", ".join(a.name for a in statement.names)
                explained = "#" in source_lines[statement.lineno - 1] or previous_explained
                found.append((f"{path}:{statement.lineno}", str(names), explained))
                previous_explained = explained
                continue
            previous_explained = False
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for field in ("body", "orelse", "finalbody"):
                block = getattr(statement, field, None)
                if block:
                    blocks.append(block)
            blocks.extend(handler.body for handler in getattr(statement, "handlers", []))
            blocks.extend(case.body for case in getattr(statement, "cases", []))
    return sorted(found, key=lambda item: int(item[0].rpartition(":")[2]))


CONVERTERS = ("from_dict", "to_dict")
"""A hand-written converter: a record spelled a second time beside its fields (sim_envs/codec.py derives them instead)."""


def key_reads(source: str) -> tuple[int, int]:
    """(string-key reads `x.get("key")`, hand-written converters `from_dict`/`to_dict`) in one module: a record read by
    string keys is one whose fields mypy cannot check."""
    reads = converters = 0
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            reads += 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in CONVERTERS:
            converters += 1
    return reads, converters


def measure(packages: list[str]) -> tuple[list[tuple[int, str]], list[tuple[int, str]], list[tuple[str, str, bool]]]:
    classes, functions, deferred = [], [], []
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = str(path.relative_to(ROOT))
            c, f, d = spans(path.read_text(), relative)
            classes += c
            functions += f
            deferred += d
    return sorted(classes, reverse=True), sorted(functions, reverse=True), deferred


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", default=["text2reward", "policies"])
    parser.add_argument("--top", type=int, default=8)
    args = parser.parse_args()
    classes, functions, deferred = measure(args.packages)
    print(f"# {', '.join(args.packages)}: {len(classes)} classes, {len(functions)} functions, {len(deferred)} deferred imports")
    counts = [key_reads(path.read_text()) for package in args.packages for path in sorted((ROOT / package).rglob("*.py"))]
    print(f"string-key reads (.get(\"...\")): {sum(r for r, _ in counts)}; hand-written converters (from_dict/to_dict): "
          f"{sum(c for _, c in counts)}")
    print("\nlargest classes (lines):")
    for lines, where in classes[: args.top]:
        print(f"  {lines:5d}  {where}")
    print("\nlongest functions (lines):")
    for lines, where in functions[: args.top]:
        print(f"  {lines:5d}  {where}")
    unexplained = [d for d in deferred if not d[2]]
    print(f"\ndeferred imports: {len(deferred)}, {len(unexplained)} without a reason on their line")
    for where, what, _ in unexplained:
        print(f"  {where}  {what}")


if __name__ == "__main__":
    main()
