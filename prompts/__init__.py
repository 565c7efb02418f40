"""Prompt templates (Jinja2, `*.j2`) and few-shot examples (`examples/<family>__<name>.py`).

An example file's name is its task id with '/' written as '__'; its module docstring says where
the reward comes from and whether it is exact or a documented simplification.
"""

from pathlib import Path

PROMPTS_DIR = Path(__file__).parent
EXAMPLES_DIR = PROMPTS_DIR / "examples"


def example_task_id(path: Path) -> str:
    return path.stem.replace("__", "/")

