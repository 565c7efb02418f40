"""Extraction: a model's reply -> the reward program in it, or why there is none.

Why `ast`: replies mix prose, several code blocks, helpers and imports. Parsing each block tells
us which one really defines `compute_dense_reward` at module level and which names it needs from
the others; a regex over the last `def` cannot.

Why no backtracking pattern over a reply: the reply is the model's text, read in the parent before any jail is
involved, so every pass over it is linear in its length (fences and thinking blocks are found by scanning, the few
patterns left cannot backtrack more than a line's leading whitespace), a reply over `MAX_REPLY_CHARS` is refused with
that reason before any pass and an answer over `MAX_ANSWER_CHARS` (its thinking left out) before it is parsed (a line
of "```" and 12,000 spaces once cost about twenty minutes of CPU; 1.4 MB of unclosed `<think>` tags, twelve).
"""

from __future__ import annotations

import ast
import builtins
import functools
import re
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from policies.reward_modes import program_mode
from policies.reward_program import find_entry_point
from sim_envs.errors import RewardProgramError

__all__ = ["Extraction", "extract_code"]


# --- extraction --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Extraction:
    """What came out of a reply.

    `code` is set whenever the reply contains a `compute_dense_reward` definition, even a broken
    one, so that an error prompt can show the model its own code; `error` says why the code cannot
    be used (None when it can); `function_found` says whether such a definition was seen at all.
    """

    code: str | None
    error: str | None
    function_found: bool

    @property
    def ok(self) -> bool:
        return self.code is not None and self.error is None


MAX_REPLY_CHARS = 2_000_000
"""The longest reply read, its thinking included (about half a million tokens)."""
MAX_ANSWER_CHARS = 100_000
"""The longest answer read once its thinking is removed (about 25,000 tokens: a reward program is a few thousand
characters). Reading dense code costs about 5 µs of the parent's CPU per character (198,000 characters of one-line
statements: 1.0 s), so this bounds a reply's cost to about half a second."""

_PYTHON_LABELS = frozenset({"", "python", "py", "python3", "py3", "numpy"})
_THINKING_TAG = re.compile(r"<(?P<close>/?)think(?:ing)?>", re.IGNORECASE)
_ANY_CODE_LINE = re.compile(r"^[^\S\n]*(?:def|import|from)\s", re.MULTILINE)
_CODE_START = re.compile(
    r"^(?:(?:import|from|def|class|async|if|elif|else|for|while|try|except|finally|with|return|raise|assert|pass|del|global)\b"
    r"|@|#|[)\]}]"
    r"|[A-Za-z_][\w.]*(?:\[[^\]]*\])?(?:\s*,\s*[A-Za-z_][\w.]*)*\s*(?:[-+*/%|&]?=(?!=)|\())"
)


@dataclass(frozen=True)
class _Entry:
    """The function a reply must define: `compute_dense_reward(self, action)`, or a reward mode's own."""

    mode: str
    name: str
    signature: str
    definition: re.Pattern[str]

    @classmethod
    def for_mode(cls, mode: str) -> _Entry:
        spec = program_mode(mode)
        pattern = re.compile(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{spec.function}\b", re.MULTILINE)
        return cls(mode, spec.function, spec.signature, pattern)

    @property
    def fix(self) -> str:
        return f"reply with one ```python block that defines {self.signature} at module level"


@dataclass
class _Block:
    """One candidate piece of code from a reply, parsed if it can be."""

    source: str
    tree: ast.Module | None
    syntax_error: SyntaxError | None

    @functools.cached_property
    def lines(self) -> list[str]:
        """The source's lines, split once (a helper's source is cut from them)."""
        return self.source.splitlines()

    def mentions(self, entry: _Entry) -> bool:
        return bool(entry.definition.search(self.source))

    def top_level(self, entry: _Entry) -> ast.FunctionDef | None:
        if self.tree is None:
            return None
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == entry.name:
                return node
        return None


def _parse(source: str) -> ast.Module:
    """`ast.parse`, with what it raises on code nested too deeply (MemoryError, RecursionError) as a SyntaxError."""
    try:
        return ast.parse(source)
    except (MemoryError, RecursionError):
        raise SyntaxError("the code nests too deeply to be parsed; write it with fewer nested brackets and operators") from None


def _parse_block(source: str) -> _Block:
    source = textwrap.dedent(source).strip("\n")
    try:
        return _Block(source, _parse(source), None)
    except SyntaxError as exc:
        return _Block(source, None, exc)


def _without_thinking(text: str) -> str:
    """The reply without its `<think>...</think>` blocks (`<thinking>` too, any case), in one scan: each block runs
    from an opening tag to the first closing tag after it; an opening tag never closed is kept with what follows it."""
    kept: list[str] = []
    start, opened = 0, None
    for tag in _THINKING_TAG.finditer(text):
        if opened is None and not tag["close"]:
            opened = tag.start()
        elif opened is not None and tag["close"]:
            kept.append(text[start:opened])
            start, opened = tag.end(), None
    kept.append(text[start:])
    return "".join(kept)


def extract_code(reply_text: str | None, mode: str = "dense") -> Extraction:
    """The reward program in a model's reply, or a clear reason why there is none. `mode` names the registered
    reward mode whose function the program must define (`compute_dense_reward`, `compute_potential`...)."""
    entry = _Entry.for_mode(mode)
    if reply_text is None:
        return Extraction(None, "no reply text came back (the request failed or returned nothing); nothing to extract", False)
    if len(reply_text) > MAX_REPLY_CHARS:
        return Extraction(None, f"the reply is {len(reply_text):,} characters, over the {MAX_REPLY_CHARS:,} read; {entry.fix} "
                          "and keep the rest short", False)
    text = _without_thinking(reply_text).strip()
    if len(text) > MAX_ANSWER_CHARS:
        return Extraction(None, f"the reply's answer (its thinking left out) is {len(text):,} characters, over the "
                          f"{MAX_ANSWER_CHARS:,} read; {entry.fix} and keep the rest short", False)
    if not text:
        return Extraction(None, f"the reply is empty; {entry.fix}", False)
    sources = _fenced_python_blocks(text)
    if not sources:
        sources = _bare_code_segments(text, entry)
    blocks = [_parse_block(s) for s in sources if s.strip()]
    if not blocks:
        return Extraction(None, f"the reply contains no Python code; {entry.fix}", False)

    candidates = [i for i, b in enumerate(blocks) if b.top_level(entry) is not None or b.mentions(entry)]
    if candidates:
        chosen = candidates[-1]  # when a reply revises its code, the last version is the answer
        block = blocks[chosen]
        if block.top_level(entry) is not None:
            return _checked(_merge_helpers(blocks, chosen, entry), entry)
        if block.syntax_error is not None:
            return Extraction(block.source + "\n", _syntax_message(block.syntax_error), True)
        assert block.tree is not None
        return Extraction(block.source + "\n", _misplaced_entry_message(block.tree, entry), True)

    defined = sorted({n.name for b in blocks if b.tree is not None for n in b.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))})
    if not defined and not any(_ANY_CODE_LINE.search(b.source) for b in blocks):
        return Extraction(None, f"the reply contains no Python code; {entry.fix}", False)
    seen = f" (it defines {', '.join(defined)})" if defined else ""
    return Extraction(None, f"the reply's code defines no {entry.signature}{seen}; {entry.fix}", False)


def _checked(code: str, entry: _Entry) -> Extraction:
    """The final program must parse and pass the project's own entry-point check."""
    try:
        tree = _parse(code)
    except SyntaxError as exc:  # only if merging produced something odd; report it, do not hide it
        return Extraction(code, _syntax_message(exc), True)
    try:
        find_entry_point(tree, "the reply's code", entry.mode)
    except RewardProgramError as exc:
        return Extraction(code, str(exc), True)
    return Extraction(code, None, True)


def _syntax_message(exc: SyntaxError) -> str:
    where = f"line {exc.lineno}" if exc.lineno else "an unknown line"
    offending = f": `{exc.text.strip()}`" if exc.text and exc.text.strip() else ""
    return f"syntax error on {where} of the code: {exc.msg}{offending}; fix it so the program parses"


def _misplaced_entry_message(tree: ast.Module, entry: _Entry) -> str:
    """Why an entry function that is present is not usable (nested, or async)."""
    fix = f"define it at module level as a plain def {entry.signature}"
    for top in tree.body:
        if isinstance(top, ast.AsyncFunctionDef) and top.name == entry.name:
            return f"{entry.name} is an async def; {fix}"
        for node in ast.walk(top):
            if node is not top and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry.name:
                kind = "class" if isinstance(top, ast.ClassDef) else "function" if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) else "block"
                name = getattr(top, "name", f"starting on line {top.lineno}")
                return f"{entry.name} is defined inside {kind} {name}; {fix}"
    return f"{entry.name} appears only as text, not as a function definition; {fix}"


def _fenced_python_blocks(text: str) -> list[str]:
    """Contents of ```python / ```py / unlabelled fences; an unclosed last fence runs to the end."""
    blocks: list[str] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opening = _fence(lines[index])
        if opening is None:
            index += 1
            continue
        fence, label = opening[0], _fence_label(opening[1])
        body: list[str] = []
        index += 1
        while index < len(lines):
            closing = _fence(lines[index])
            if closing and closing[0][0] == fence[0] and len(closing[0]) >= len(fence) and not closing[1]:
                break
            body.append(lines[index])
            index += 1
        index += 1
        if label in _PYTHON_LABELS:
            blocks.append("\n".join(body))
    return blocks


def _fence(line: str) -> tuple[str, str] | None:
    """(fence, info) when `line` opens or closes a fence: spaces or tabs, three or more backticks or tildes, then an
    info string with no backtick (trimmed of spaces and tabs); None otherwise. A scan, not a pattern: linear."""
    rest = line.lstrip(" \t")
    mark = rest[:1]
    if mark not in ("`", "~"):
        return None
    length = len(rest) - len(rest.lstrip(mark))
    if length < 3 or "`" in rest[length:]:
        return None
    return rest[:length], rest[length:].strip(" \t")


def _fence_label(info: str) -> str:
    words = info.strip().strip("{}").lstrip(".").split()
    return words[0].lower() if words else ""


def _bare_code_segments(text: str, entry: _Entry) -> list[str]:
    """Code written without fences: the whole reply if it parses, else runs of code-looking lines.

    A run starts at a top-level line that looks like Python (`import`, `def`, an assignment...),
    continues through indented and blank lines, and ends at a top-level line of prose. Trailing
    lines that break parsing are dropped only when that keeps any entry function intact.
    """
    try:
        _parse(text)
        return [text]
    except SyntaxError:
        pass
    segments: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if not line.strip() or line[:1].isspace():
            if current is not None:
                current.append(line)
        elif _CODE_START.match(line):
            if current is None:
                current = []
                segments.append(current)
            current.append(line)
        else:
            current = None
    return [_trim_trailing_prose("\n".join(s).strip("\n"), entry) for s in segments]


def _trim_trailing_prose(source: str, entry: _Entry) -> str:
    """Drop trailing top-level lines that break parsing (prose that looked like code).

    A cut is made only at a top-level line, and kept only if the rest parses and still has any
    entry function it had: a syntax error inside the function must be reported, not hidden
    by cutting the function short.
    """
    lines = source.splitlines()
    had_entry = bool(entry.definition.search(source))
    candidate = lines
    for _ in range(5):
        try:
            _parse("\n".join(candidate))
        except SyntaxError as exc:
            last = min(exc.lineno or 0, len(candidate)) - 1
            cuts = [i for i in range(last, 0, -1) if candidate[i].strip() and not candidate[i][:1].isspace()]
            if not cuts:
                return source
            candidate = candidate[: cuts[0]]
            continue
        text = "\n".join(candidate)
        return text if bool(entry.definition.search(text)) == had_entry else source
    return source


# --- merging helpers from other blocks ---------------------------------------------------------

_BUILTINS = frozenset(dir(builtins))
_PROVIDERS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)


def _bound_names(statements: Iterable[ast.AST]) -> set[str]:
    """Names these statements bind in their own scope (bodies of nested functions excluded)."""
    names: set[str] = set()
    stack = list(statements)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        stack.extend(ast.iter_child_nodes(node))
    return names


def _parameters(args: ast.arguments) -> set[str]:
    every = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a is not None]
    return {a.arg for a in every}


def _free_names(statements: Sequence[ast.AST], enclosing: frozenset[str] = frozenset()) -> set[str]:
    """Names read but bound neither here nor in an enclosing scope (builtins included)."""
    bound = enclosing | _bound_names(statements)
    free: set[str] = set()
    stack = list(statements)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            outer: list[ast.AST] = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
            if not isinstance(node, ast.Lambda):
                outer.extend(node.decorator_list)
            stack.extend(outer)
            body = node.body if isinstance(node.body, list) else [node.body]
            free |= _free_names(body, frozenset(bound | _parameters(node.args)))
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound:
            free.add(node.id)
        stack.extend(ast.iter_child_nodes(node))
    return free


def _statement_source(block: _Block, node: ast.stmt) -> str:
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return "\n".join(block.lines[start - 1 : node.end_lineno])


def _merge_helpers(blocks: list[_Block], chosen: int, entry: _Entry) -> str:
    """The chosen block, preceded by the imports, helpers and constants it needs from other blocks."""
    main = blocks[chosen]
    assert main.tree is not None
    providers: dict[str, tuple[int, ast.stmt]] = {}
    for index, block in enumerate(blocks):
        if index == chosen or block.tree is None:
            continue
        for node in block.tree.body:
            if isinstance(node, _PROVIDERS) and entry.name not in _bound_names([node]):
                for name in _bound_names([node]):
                    providers[name] = (index, node)  # a later block's definition wins

    have = _bound_names(main.tree.body) | _BUILTINS
    needed = _free_names(main.tree.body) - have
    selected: dict[int, tuple[int, ast.stmt]] = {}
    while needed:  # each set operation is sized by one statement's names, never by all of them: linear in the reply
        name = needed.pop()
        if name in have or name not in providers:
            continue
        index, node = providers[name]
        if id(node) in selected:
            continue
        selected[id(node)] = (index, node)
        have |= _bound_names([node])
        needed |= _free_names([node]) - have

    if not selected:
        return main.source + "\n"
    ordered = sorted(selected.values(), key=lambda item: (item[0], item[1].lineno))
    imports = [_statement_source(blocks[i], n) for i, n in ordered if isinstance(n, (ast.Import, ast.ImportFrom))]
    others = [_statement_source(blocks[i], n) for i, n in ordered if not isinstance(n, (ast.Import, ast.ImportFrom))]
    parts = []
    if imports:
        parts.append("\n".join(dict.fromkeys(imports)))
    parts.extend(others)
    parts.append(main.source)
    return "\n\n\n".join(parts) + "\n"
