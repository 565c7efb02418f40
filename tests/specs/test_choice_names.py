"""No code outside a choice's own spec branches on its name: every backend, executor, reward mode and reward source is
asked about through its spec (`backend_spec(name).accepts_images`, `executor_spec(name).check(...)`...).

Checked on the source itself, with `ast`: a comparison of a value with a registered choice's name (`backend ==
"heuristic"`, `mode in ("potential", "progress")`), or a mapping keyed by two or more names of one kind (a table of
per-choice behaviour), anywhere but in the modules that define those choices. Names as plain data (a default value,
a help text built from the registry, a test parameter) are not comparisons and pass.
"""

from __future__ import annotations

import ast
from pathlib import Path

from policies.reward_modes import REWARD_MODES
from text2reward.generation.llm import backend_specs
from text2reward.keypoints.sources import reward_source_specs
from text2reward.training.executors import executor_specs

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("text2reward", "policies")
"""sim_envs knows nothing of these choices (its "dense" is Gymnasium-Robotics' own reward type), prompts holds templates."""
SPEC_MODULES = {
    "backend": {"text2reward/generation/llm/openai_backend.py", "text2reward/generation/llm/file_backend.py",
                "text2reward/generation/llm/heuristic.py", "text2reward/generation/llm/heuristic_plans.py",
                "text2reward/generation/llm/heuristic_rules.py", "text2reward/generation/llm/spec.py"},
    "executor": {"text2reward/training/executors.py", "text2reward/training/ray_pool.py", "text2reward/training/pool.py"},
    "reward mode": {"policies/reward_modes.py", "policies/reward_program.py"},
    "reward source": {"text2reward/keypoints/sources.py"},
}


def choice_names() -> dict[str, set[str]]:
    return {
        "backend": {s.name for s in backend_specs()},
        "executor": {s.name for s in executor_specs()},
        "reward mode": set(REWARD_MODES),
        "reward source": {s.name for s in reward_source_specs()},
    }


def _strings(node: ast.AST) -> list[str]:
    """The string constants a comparison's side holds (a literal, or a tuple/list/set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def switches(path: Path, names: dict[str, set[str]]) -> list[str]:
    """Every place in one file that branches on a choice's name it does not own."""
    relative = path.relative_to(ROOT).as_posix()
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


def test_no_code_switches_on_a_choice_name_outside_its_spec():
    names = choice_names()
    # words that are also ordinary values elsewhere (a reward named "code", a file, a local path) are checked only where
    # they are compared with a setting of their kind: the checks below keep them to their own registry
    ambiguous = {"code", "file", "local"}
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found += [f for f in switches(path, names) if not any(f.endswith(f"{a!r}") for a in ambiguous)]
    assert found == [], "branch on the spec's fields instead:\n" + "\n".join(found)


def test_the_scan_finds_a_switch_where_there_is_one(tmp_path):
    """The test above cannot pass by looking nowhere."""
    sample = ROOT / "text2reward" / "_scan_probe.py"
    sample.write_text('def label(config):\n    return "x" if config.backend == "heuristic" else {"dense": 1, "potential": 2}\n')
    try:
        found = switches(sample, choice_names())
    finally:
        sample.unlink()
    assert any("backend 'heuristic'" in f for f in found) and any("reward mode 'potential'" in f for f in found)
