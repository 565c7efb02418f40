"""The code's shape in numbers: the largest classes and functions, and every import made inside a function.

    python scripts/code_shape.py                 # text2reward/ and policies/
    python scripts/code_shape.py --top 15 sim_envs

Why: a class that does every stage's work, or a function too long to read at once, shows here first; a deferred
import is fine where an optional dependency or a measured start-up cost needs it, and must say so on its line (a
comment), which this lists.
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
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    names = inner.module if isinstance(inner, ast.ImportFrom) else ", ".join(a.name for a in inner.names)
                    if isinstance(inner, ast.ImportFrom) and inner.module == "__future__":
                        continue
                    line = source_lines[inner.lineno - 1]
                    deferred.append((f"{path}:{inner.lineno}", str(names), "#" in line))
    return classes, functions, deferred


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
