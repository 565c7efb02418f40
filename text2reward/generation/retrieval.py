"""Few-shot example retrieval: the expert rewards whose task text is closest to a new task.

Why plain TF-IDF: the example set is a few dozen short descriptions, so a bag of stemmed words
with IDF weights already separates "drawer" tasks from "puck" tasks; a downloaded embedding model
would add gigabytes and a network dependency for no measurable gain at this size. The family and
the view class are weak extra signals: an example written against the same view shows the model
attributes it can actually read, but the task text should decide.

Only compatible examples are candidates (`compatible`): an example whose task is in the query
task's family, or whose task's state view is the query's view class or has exactly its fields. A
locomotion task is never shown a MetaWorld or Fetch reward, nor a manipulation task a locomotion
one: such an example reads attributes the task's view does not have and teaches the wrong kind of
reward. Among compatible examples, those that read only attributes the task's view has come before
those that read others (an Ant reward for a Hopper task), whatever their text scores. When fewer
compatible examples exist than asked for, fewer are returned and a warning says so: a prompt is
never padded with an example from another family.

A task's own expert reward is never returned: showing it would turn reward *design* into copying.
"""

from __future__ import annotations

import ast
import functools
import logging
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from prompts import EXAMPLES_DIR, example_task_id
from sim_envs.errors import ConfigError, UnknownTaskError
from sim_envs.registry import get_task
from sim_envs.task import Task
from sim_envs.view_base import view_field_paths

log = logging.getLogger(__name__)

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


_FIELD_PATHS: dict[type, frozenset[str]] = {}


def _field_paths(view_class: type) -> frozenset[str]:
    """Once per view class: ranking compares every example with the task, and resolving a class's type hints is slow."""
    paths = _FIELD_PATHS.get(view_class)
    if paths is None:
        paths = _FIELD_PATHS[view_class] = frozenset(view_field_paths(view_class))
    return paths


def _example_task(example: Example) -> Task | None:
    try:
        return get_task(example.task_id)
    except UnknownTaskError:
        return None


def _example_family(example: Example, known: Task | None) -> str:
    """The registered task's family; for an example of an unregistered task, its id's first part."""
    return known.family if known is not None else example.task_id.split("/", 1)[0]


def compatible(example: Example, task: Task) -> bool:
    """Whether `example` may be shown for `task`: same family, or the same state view (the same view
    class, or a view class with exactly the same attribute paths). Never the task's own example."""
    if _is_own(example, task):
        return False
    known = _example_task(example)
    if _example_family(example, known) == task.family:
        return True
    if known is None:
        return False  # an unregistered task's view is unknown: only its family can vouch for it
    return known.view_class is task.view_class or _field_paths(known.view_class) == _field_paths(task.view_class)


@functools.lru_cache(maxsize=512)
def attributes_read(code: str) -> frozenset[str]:
    """Every `self.a.b` attribute chain a program reads (`self.torso.position[2]` gives `self.torso.position`).

    Reads through a plain alias count too: after `torso = self.torso`, `torso.pitch` is `self.torso.pitch`.
    Cached by the code's text: ranking asks it of every example for every task, and parsing is most of its cost.
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return frozenset()
    aliases = {"self": "self"}
    for _ in range(4):  # aliases of aliases (`t = self.torso; p = t.position`), a few levels deep
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                chain = _chain(node.value, aliases)
                if chain is not None and node.targets[0].id != "self":
                    aliases[node.targets[0].id] = chain
    chains = {_chain(node, aliases) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    return frozenset(c for c in chains if c is not None)


def _chain(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """`self.a.b` for an attribute chain (or bare name) rooted at `self` or an alias of a part of it."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return None
    return ".".join([aliases[node.id], *reversed(parts)])


def reads_only_view_fields(example: Example, task: Task) -> bool:
    """Whether every `self.` attribute the example reads exists in `task`'s state view."""
    return attributes_read(example.code) <= _field_paths(task.view_class)


@dataclass(frozen=True)
class ScoredExample:
    example: Example
    score: float
    readable: bool = True
    """Every attribute the example reads exists in the query task's view."""


def rank_examples(task: Task, examples: list[Example]) -> list[ScoredExample]:
    """The compatible examples (never the task's own), best first: those that read only attributes of
    the task's view before the others, then by score (ties broken by task id for stable prompts)."""
    candidates = [e for e in examples if compatible(e, task)]
    documents = []
    for example in candidates:
        known = _example_task(example)
        notes = known.view_notes if known is not None else ""
        family = _example_family(example, known)
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
        scored.append(ScoredExample(example, score, reads_only_view_fields(example, task)))
    scored.sort(key=lambda s: (not s.readable, -s.score, s.example.task_id))
    return scored


def retrieve_examples(task: Task, k: int, examples_dir: str | Path | None = None) -> list[Example]:
    """The `k` compatible examples most similar to `task`, never the task's own expert reward.

    Fewer than `k` when fewer are compatible (a warning says how many and why); never padded with
    an example from another family or view."""
    if k <= 0:
        return []
    examples = load_examples(examples_dir)
    found = [s.example for s in rank_examples(task, examples)[:k]]
    if len(found) < k:
        log.warning(
            "few-shot: %d of the %d examples asked for %s are compatible (same family %r or same state view, "
            "not its own); the prompt shows %d rather than borrow from another family",
            len(found), k, task.id, task.family, len(found),
        )
    return found
