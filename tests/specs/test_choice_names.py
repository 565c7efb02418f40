"""No code outside a choice's own spec branches on its name: every backend, executor, reward mode and reward source is
asked about through its spec (`backend_spec(name).accepts_images`, `executor_spec(name).check(...)`...).

Checked on the source itself, with `ast`: a comparison of a value with a registered choice's name (`backend ==
"heuristic"`, `mode in ("potential", "progress")`), or a mapping keyed by two or more names of one kind (a table of
per-choice behaviour), anywhere but in the modules that define those choices. Names as plain data (a default value,
a help text built from the registry, a test parameter) are not comparisons and pass.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from policies.reward_modes import REWARD_MODES
from text2reward.generation.llm import backend_specs
from text2reward.keypoints.sources import KEYPOINT_FINDERS, reward_source_specs
from text2reward.training.executors import executor_specs

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("text2reward", "policies")
"""sim_envs knows nothing of these choices (its "dense" is Gymnasium-Robotics' own reward type), prompts holds templates."""
SPEC_MODULES = {
    "backend": {"text2reward/generation/llm/openai_backend.py", "text2reward/generation/llm/file_backend.py",
                "text2reward/generation/llm/heuristic.py", "text2reward/generation/llm/heuristic_plans.py",
                "text2reward/generation/llm/heuristic_rules.py", "text2reward/generation/llm/spec.py"},
    "executor": {"text2reward/training/executors.py", "text2reward/training/ray_pool.py", "text2reward/training/pool.py"},
    "reward mode": {"policies/reward_modes.py", "policies/shaping.py", "policies/reward_program.py"},
    "reward source": {"text2reward/keypoints/sources.py"},
    "keypoint finder": {"text2reward/keypoints/sources.py",
                        # who placed a run's keypoints, read back from its record: the runs layer may not import the
                        # registry (the dashboard reads runs only), and a record keeps the finder's name as written
                        "text2reward/runs/keypoint_record.py"},
}


def choice_names() -> dict[str, set[str]]:
    return {
        "backend": {s.name for s in backend_specs()},
        "executor": {s.name for s in executor_specs()},
        "reward mode": set(REWARD_MODES),
        "reward source": {s.name for s in reward_source_specs()},
        "keypoint finder": set(KEYPOINT_FINDERS),
    }


def _strings(node: ast.AST) -> list[str]:
    """The string constants a comparison's side holds (a literal, or a tuple/list/set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def switches(path: Path, names: dict[str, set[str]], root: Path = ROOT) -> list[str]:
    """Every place in one file (of the source tree at `root`) that branches on a choice's name it does not own."""
    relative = path.relative_to(root).as_posix()
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        kinds: list[tuple[str, str]] = []
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                kinds += [(kind, s) for s in _strings(side) for kind, known in names.items() if s in known]
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            for kind, known in names.items():
                if len([k for k in keys if k in known]) >= 2:
                    kinds += [(kind, k) for k in keys if k in known]
        for kind, name in kinds:
            if relative not in SPEC_MODULES[kind]:
                found.append(f"{relative}:{node.lineno}: the {kind} {name!r}")
    return found


AMBIGUOUS = {"code", "file", "local", "model"}
"""Words that are also ordinary values elsewhere (a reward named "code", a file, a local path, SB3's model): checked only
where they are compared with a setting of their kind, which the checks keep to their own registry."""


def scan(root: Path) -> list[str]:
    """Every switch on a choice's name in the source tree at `root`."""
    names = choice_names()
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            found += [f for f in switches(path, names, root) if not any(f.endswith(f"{a!r}") for a in AMBIGUOUS)]
    return found


def test_no_code_switches_on_a_choice_name_outside_its_spec():
    found = scan(ROOT)
    assert found == [], "branch on the spec's fields instead:\n" + "\n".join(found)


def test_the_scan_finds_a_switch_where_there_is_one(tmp_path):
    """The test above cannot pass by looking nowhere: a copy of the source tree (never the tree itself, which the
    test above may be scanning at the same time) with one module that switches on names of every kind."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (tmp_path / "text2reward" / "_scan_probe.py").write_text(
        'def label(config):\n'
        '    if config.keypoints == "oracle" or config.executor == "ray":\n'
        '        return "x" if config.backend == "heuristic" else {"dense": 1, "potential": 2}\n'
        '    return config.reward_source in ("keypoints", "code+keypoints")\n')
    found = scan(tmp_path)
    assert found and all(f.startswith("text2reward/_scan_probe.py:") for f in found), found
    for kind, name in (("backend", "heuristic"), ("reward mode", "potential"), ("executor", "ray"), ("keypoint finder", "oracle"),
                       ("reward source", "code+keypoints")):
        assert any(f"{kind} {name!r}" in f for f in found), (kind, found)
