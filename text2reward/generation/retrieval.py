"""Few-shot example retrieval: the expert rewards whose task text is closest to a new task.

Why plain TF-IDF: the example set is a few dozen short descriptions, so a bag of stemmed words
with IDF weights already separates "drawer" tasks from "puck" tasks; a downloaded embedding model
would add gigabytes and a network dependency for no measurable gain at this size. The family and
the view class are weak extra signals: an example written against the same view shows the model
attributes it can actually read, but the task text should decide.

A task's own expert reward is never returned: showing it would turn reward *design* into copying.
"""

from __future__ import annotations

import ast
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from prompts import EXAMPLES_DIR, example_task_id
from sim_envs.errors import ConfigError, UnknownTaskError
from sim_envs.task import Task

FAMILY_BONUS = 0.1
"""Added to the cosine similarity when the example's task is in the query task's family."""
VIEW_BONUS = 0.15
"""Added when the example was written against the same state view class."""
NOTES_WEIGHT = 0.5
"""Task notes (what `obj` is...) count half as much as the description and the task name."""

_DOCSTRING_PREFIX = re.compile(r"^\s*Expert reward for\s+(?P<id>\S+?)\s*:\s*(?P<description>.+)$")
_STOPWORDS = frozenset(
    "a an and are as at be by for from in into is it its of off on onto or out over so that the their "
    "then this to under up with without while which what when can as v3 v4 v5 make do does not if than".split()
)


@dataclass(frozen=True)
class Example:
    """One few-shot example: a task's text and the expert reward code written for it."""

    task_id: str
    description: str
    code: str
    path: Path | None = None
    """The file it was read from (its name also names the task: never shown for that task)."""


def load_examples(examples_dir: str | Path | None = None) -> list[Example]:
    """Every `<family>__<name>.py` example in a directory, sorted by task id.

    The description comes from the docstring's first line ("Expert reward for <id>: <text>"); the
    code shown to the model is the file without its module docstring (provenance notes are for
    people, not for the model).
    """
    directory = Path(examples_dir) if examples_dir is not None else EXAMPLES_DIR
    if not directory.is_dir():
        raise ConfigError(f"few-shot examples directory {directory} does not exist; create it or use --few-shot 0")
    examples = []
    for path in sorted(directory.glob("*.py")):
        if path.name.startswith("_"):
            continue
        examples.append(_read_example(path))
    return examples


def _read_example(path: Path) -> Example:
    source = path.read_text()
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ConfigError(f"few-shot example {path} has a syntax error on line {exc.lineno}: {exc.msg}; fix or remove the file") from exc
    task_id, description = example_task_id(path), ""
    docstring = ast.get_docstring(tree)
    if docstring:
        match = _DOCSTRING_PREFIX.match(docstring.strip().splitlines()[0])
        if match:
            task_id, description = match["id"], match["description"].strip()
    if not description:
        description = _registered_description(task_id)
    return Example(task_id=task_id, description=description, code=_strip_module_docstring(source, tree), path=path)


def _registered_description(task_id: str) -> str:
    from sim_envs.registry import get_task

    try:
        return get_task(task_id).description
    except UnknownTaskError:
        return task_id.split("/", 1)[-1].replace("-", " ").replace("_", " ")


def _strip_module_docstring(source: str, tree: ast.Module) -> str:
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        lines = source.splitlines()
        source = "\n".join(lines[first.end_lineno :])
    return source.strip("\n") + "\n"


# --- text similarity ---------------------------------------------------------------------------


def tokens(text: str) -> list[str]:
    """Lower-case word stems without stopwords: 'closed', 'closes', 'closing' all become 'clos'."""
    words = re.findall(r"[a-z]+", text.lower())
    return [_stem(w) for w in words if w not in _STOPWORDS and len(w) > 1]


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def _task_terms(task_id: str, description: str, notes: str, family: str) -> dict[str, float]:
    """Weighted term counts of a task: its description, its id (robot and behaviour), its notes.

    The family word is dropped from the id: it would repeat the family bonus as a text match.
    """
    name_words = [w for w in tokens(task_id.replace("-", " ").replace("_", " ")) if w not in tokens(family)]
    terms: dict[str, float] = {}
    for word in tokens(description) + name_words:
        terms[word] = terms.get(word, 0) + 1.0
    for word in tokens(notes):
        terms[word] = terms.get(word, 0) + NOTES_WEIGHT
    return terms


def _tfidf(terms: dict[str, float], idf: dict[str, float]) -> dict[str, float]:
    """Sublinear term frequency (a word said twice is not twice as relevant) times IDF."""
    return {t: (1.0 + math.log(c) if c >= 1.0 else c) * idf.get(t, 0.0) for t, c in terms.items()}


def _cosine(a: dict[str, float], b: dict[str, float]) -> float:
    dot = sum(v * b.get(t, 0.0) for t, v in a.items())
    norm = math.sqrt(sum(v * v for v in a.values())) * math.sqrt(sum(v * v for v in b.values()))
    return dot / norm if norm > 0 else 0.0


def _is_own(example: Example, task: Task) -> bool:
    return example.task_id == task.id or (example.path is not None and example_task_id(example.path) == task.id)


@dataclass(frozen=True)
class ScoredExample:
    example: Example
    score: float


def rank_examples(task: Task, examples: list[Example]) -> list[ScoredExample]:
    """All examples except the task's own, best first (ties broken by task id for stable prompts)."""
    from sim_envs.registry import get_task

    candidates = [e for e in examples if not _is_own(e, task)]
    documents = []
    for example in candidates:
        try:
            known: Task | None = get_task(example.task_id)
        except UnknownTaskError:
            known = None
        notes = known.view_notes if known is not None else ""
        family = known.family if known is not None else example.task_id.split("/", 1)[0]
        view = known.view_class if known is not None else None
        documents.append((example, _task_terms(example.task_id, example.description, notes, family), family, view))

    count = len(documents)
    frequency: Counter[str] = Counter()
    for _, terms, _, _ in documents:
        frequency.update(set(terms))
    idf = {t: math.log((1 + count) / (1 + df)) + 1.0 for t, df in frequency.items()}

    query = _tfidf(_task_terms(task.id, task.description, task.view_notes, task.family), idf)
    scored = []
    for example, terms, family, view in documents:
        score = _cosine(query, _tfidf(terms, idf))
        score += FAMILY_BONUS if family == task.family else 0.0
        score += VIEW_BONUS if view is not None and view is task.view_class else 0.0
        scored.append(ScoredExample(example, score))
    scored.sort(key=lambda s: (-s.score, s.example.task_id))
    return scored


def retrieve_examples(task: Task, k: int, examples_dir: str | Path | None = None) -> list[Example]:
    """The `k` examples most similar to `task`, never the task's own expert reward."""
    if k <= 0:
        return []
    return [s.example for s in rank_examples(task, load_examples(examples_dir))[:k]]
