"""Prompting and reply extraction: task -> chat messages, model reply -> reward program.

Why templates on disk: the prompts are the part of the system people tune most; Jinja2 files in
`prompts/` can be read and edited without touching code, and `StrictUndefined` turns a renamed
variable into an error instead of a silently empty section. The environment section is always
rendered from the task's state view (`render_view_doc`), so the prompt promises exactly what
reward code can read.

Why `ast` for extraction: replies mix prose, several code blocks, helpers and imports. Parsing
each block tells us which one really defines `compute_dense_reward` at module level and which
names it needs from the others; a regex over the last `def` cannot.
"""

from __future__ import annotations

import ast
import builtins
import functools
import re
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from policies.reward_program import ENTRY_POINT, find_entry_point
from prompts import EXAMPLES_DIR, PROMPTS_DIR
from sim_envs.errors import ConfigError, RewardProgramError
from sim_envs.task import Task, render_view_doc
from text2reward.retrieval import Example, retrieve_examples

__all__ = [
    "Example",
    "Extraction",
    "build_error_messages",
    "build_feedback_messages",
    "build_human_feedback_messages",
    "build_initial_messages",
    "build_preference_messages",
    "extract_code",
    "format_messages_for_display",
    "retrieve_examples",
    "trim_error_text",
]

Message = dict[str, Any]

# --- templates ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def template_environment(directory: str = str(PROMPTS_DIR)) -> jinja2.Environment:
    """One Jinja2 environment per template directory (templates are compiled once)."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(directory),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        keep_trailing_newline=True,  # partials end with a newline, so sections stay apart
    )
    environment.filters["fenced"] = fenced
    return environment


def fenced(text: str, language: str = "") -> str:
    """A Markdown code block whose fence is longer than any backtick run inside the text.

    Why: code and tracebacks are pasted verbatim; a stray ``` inside must not end the block early.
    """
    text = str(text)  # a StrictUndefined raises here, naming the missing variable
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.strip(chr(10)).rstrip()}\n{fence}"


def render_template(name: str, **context: Any) -> str:
    try:
        template = template_environment().get_template(name)
    except jinja2.TemplateNotFound:
        raise ConfigError(f"prompt template {name} is missing from {PROMPTS_DIR}; reinstall the package or restore the file") from None
    return template.render(**context).strip() + "\n"


def _messages(task: Task, template: str, **context: Any) -> list[Message]:
    """[system, user]: every prompt is self-contained, so it does not depend on earlier turns."""
    user = render_template(template, task=task, view_doc=render_view_doc(task), **context)
    return [
        {"role": "system", "content": render_template("system.j2")},
        {"role": "user", "content": user},
    ]


# --- message builders --------------------------------------------------------------------------


def build_initial_messages(task: Task, few_shot: int = 0, examples_dir: str | Path | None = None) -> list[Message]:
    """The first prompt for a task: zero-shot, or with `few_shot` retrieved expert examples."""
    if few_shot < 0:
        raise ConfigError(f"few_shot must be 0 or more, got {few_shot}; use 0 for a zero-shot prompt")
    if few_shot == 0:
        return _messages(task, "zero_shot.j2")
    examples = retrieve_examples(task, few_shot, examples_dir)
    if not examples:
        where = Path(examples_dir) if examples_dir is not None else EXAMPLES_DIR
        raise ConfigError(
            f"no few-shot examples for {task.id} in {where} (a task's own expert reward is never shown); "
            "add example files there or use --few-shot 0"
        )
    return _messages(task, "few_shot.j2", examples=examples)


def build_error_messages(task: Task, code: str, error_text: str) -> list[Message]:
    """Ask for a fixed program after a syntax, validation or smoke-run error."""
    return _messages(task, "execution_error.j2", code=code, error_text=trim_error_text(error_text, source=code))


def build_feedback_messages(task: Task, best_code: str, feedback_text: str) -> list[Message]:
    """Ask for an improved program from the best one so far and its training feedback."""
    return _messages(task, "training_feedback.j2", best_code=best_code, feedback_text=feedback_text)


def build_human_feedback_messages(task: Task, code: str, behaviour_text: str, critique: str) -> list[Message]:
    """Ask for a program that answers a person's critique of what the trained robot did."""
    if not critique.strip():
        raise ConfigError("the critique is empty; say what the robot should do differently")
    return _messages(task, "human_feedback.j2", mode="critique", code=code, behaviour_text=behaviour_text, critique=critique)


def build_preference_messages(
    task: Task,
    best_code: str,
    worst_code: str,
    behaviour_best: str,
    behaviour_worst: str,
    critique: str | None = None,
) -> list[Message]:
    """Ask for a program from a person's choice between two trained rewards (preferred vs rejected)."""
    return _messages(
        task,
        "human_feedback.j2",
        mode="preference",
        best_code=best_code,
        worst_code=worst_code,
        behaviour_best=behaviour_best,
        behaviour_worst=behaviour_worst,
        critique=(critique or "").strip(),
    )


# --- error text --------------------------------------------------------------------------------

_TRACEBACK_HEADER = "Traceback (most recent call last):"
_FRAME_LINE = re.compile(r'^\s*File "')


def trim_error_text(
    text: str, max_frames: int = 3, max_chars: int = 2500, max_line: int = 400, source: str | None = None
) -> str:
    """What the model needs from an error: the last frames and the exception, within a length cap.

    Chained tracebacks keep only the last one (the error that escaped); text before the first
    traceback (e.g. "smoke run failed on state 3") is kept; very long lines (array reprs) are cut.
    With `source` (the reward program), frames in compiled code (`File "<reward>", line 7`), which
    Python prints without a source line, get that line of the program added.
    """
    text = text.strip()
    start = text.find(_TRACEBACK_HEADER)
    if start >= 0:
        prelude = text[:start].strip()
        last = text[text.rfind(_TRACEBACK_HEADER) :]
        body = _trim_traceback(last, max_frames, source.splitlines() if source else [])
        text = f"{prelude}\n{body}" if prelude else body
    lines = [line if len(line) <= max_line else line[:max_line] + f" ... ({len(line) - max_line} characters cut)" for line in text.splitlines()]
    text = "\n".join(lines)
    if len(text) > max_chars:
        head = max_chars // 3
        tail = max_chars - head
        text = f"{text[:head]}\n... ({len(text) - max_chars} characters cut) ...\n{text[-tail:]}"
    return text


_GENERATED_FRAME = re.compile(r'^\s*File "<(?!frozen |stdin>)[^">]*>", line (?P<line>\d+), in (?P<function>\S+)')


def _trim_traceback(traceback: str, max_frames: int, source_lines: list[str]) -> str:
    lines = traceback.splitlines()[1:]
    frames: list[list[str]] = []
    index = 0
    while index < len(lines) and (_FRAME_LINE.match(lines[index]) or (frames and lines[index][:1].isspace())):
        if _FRAME_LINE.match(lines[index]):
            frames.append([])
        frames[-1].append(lines[index])
        index += 1
    exception = lines[index:]
    kept = frames[-max_frames:] if max_frames > 0 else []
    defined = set(re.findall(r"^\s*def\s+(\w+)", "\n".join(source_lines), re.MULTILINE)) | {"<module>"}
    out = [_TRACEBACK_HEADER]
    if len(frames) > len(kept):
        out.append(f"  ... ({len(frames) - len(kept)} earlier frames omitted)")
    for frame in kept:
        out.extend(frame)
        generated = _GENERATED_FRAME.match(frame[0])
        if generated and len(frame) == 1 and generated["function"] in defined and 0 < int(generated["line"]) <= len(source_lines):
            out.append("    " + source_lines[int(generated["line"]) - 1].strip())
    out.extend(exception)
    return "\n".join(out)


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


_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")
_PYTHON_LABELS = frozenset({"", "python", "py", "python3", "py3", "numpy"})
_THINKING = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_ENTRY_DEF = re.compile(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{ENTRY_POINT}\b", re.MULTILINE)
_CODE_START = re.compile(
    r"^(?:(?:import|from|def|class|async|if|elif|else|for|while|try|except|finally|with|return|raise|assert|pass|del|global)\b"
    r"|@|#|[)\]}]"
    r"|[A-Za-z_][\w.]*(?:\[[^\]]*\])?(?:\s*,\s*[A-Za-z_][\w.]*)*\s*(?:[-+*/%|&]?=(?!=)|\())"
)
_SPEAKABLE_FIX = f"reply with one ```python block that defines {ENTRY_POINT}(self, action) at module level"


@dataclass
class _Block:
    """One candidate piece of code from a reply, parsed if it can be."""

    source: str
    tree: ast.Module | None
    syntax_error: SyntaxError | None

    @property
    def mentions_entry(self) -> bool:
        return bool(_ENTRY_DEF.search(self.source))

    def top_level_entry(self) -> ast.FunctionDef | None:
        if self.tree is None:
            return None
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == ENTRY_POINT:
                return node
        return None


def _parse_block(source: str) -> _Block:
    source = textwrap.dedent(source).strip("\n")
    try:
        return _Block(source, ast.parse(source), None)
    except SyntaxError as exc:
        return _Block(source, None, exc)


def extract_code(reply_text: str | None) -> Extraction:
    """The reward program in a model's reply, or a clear reason why there is none."""
    if reply_text is None:
        return Extraction(None, "no reply text came back (the request failed or returned nothing); nothing to extract", False)
    text = _THINKING.sub("", reply_text).strip()
    if not text:
        return Extraction(None, f"the reply is empty; {_SPEAKABLE_FIX}", False)
    sources = _fenced_python_blocks(text)
    if not sources:
        sources = _bare_code_segments(text)
    blocks = [_parse_block(s) for s in sources if s.strip()]
    if not blocks:
        return Extraction(None, f"the reply contains no Python code; {_SPEAKABLE_FIX}", False)

    candidates = [i for i, b in enumerate(blocks) if b.top_level_entry() is not None or b.mentions_entry]
    if candidates:
        chosen = candidates[-1]  # when a reply revises its code, the last version is the answer
        block = blocks[chosen]
        if block.top_level_entry() is not None:
            return _checked(_merge_helpers(blocks, chosen))
        if block.syntax_error is not None:
            return Extraction(block.source + "\n", _syntax_message(block.syntax_error), True)
        assert block.tree is not None
        return Extraction(block.source + "\n", _misplaced_entry_message(block.tree), True)

    defined = sorted({n.name for b in blocks if b.tree is not None for n in b.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))})
    if not defined and not any(re.search(r"^\s*(?:def|import|from)\s", b.source, re.MULTILINE) for b in blocks):
        return Extraction(None, f"the reply contains no Python code; {_SPEAKABLE_FIX}", False)
    seen = f" (it defines {', '.join(defined)})" if defined else ""
    return Extraction(None, f"the reply's code defines no {ENTRY_POINT}(self, action){seen}; {_SPEAKABLE_FIX}", False)


def _checked(code: str) -> Extraction:
    """The final program must parse and pass the project's own entry-point check."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:  # only if merging produced something odd; report it, do not hide it
        return Extraction(code, _syntax_message(exc), True)
    try:
        find_entry_point(tree, "the reply's code")
    except RewardProgramError as exc:
        return Extraction(code, str(exc), True)
    return Extraction(code, None, True)


def _syntax_message(exc: SyntaxError) -> str:
    where = f"line {exc.lineno}" if exc.lineno else "an unknown line"
    offending = f": `{exc.text.strip()}`" if exc.text and exc.text.strip() else ""
    return f"syntax error on {where} of the code: {exc.msg}{offending}; fix it so the program parses"


def _misplaced_entry_message(tree: ast.Module) -> str:
    """Why a `compute_dense_reward` that is present is not usable (nested, or async)."""
    fix = f"define it at module level as a plain def {ENTRY_POINT}(self, action)"
    for top in tree.body:
        if isinstance(top, ast.AsyncFunctionDef) and top.name == ENTRY_POINT:
            return f"{ENTRY_POINT} is an async def; {fix}"
        for node in ast.walk(top):
            if node is not top and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == ENTRY_POINT:
                kind = "class" if isinstance(top, ast.ClassDef) else "function" if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) else "block"
                name = getattr(top, "name", f"starting on line {top.lineno}")
                return f"{ENTRY_POINT} is defined inside {kind} {name}; {fix}"
    return f"{ENTRY_POINT} appears only as text, not as a function definition; {fix}"


def _fenced_python_blocks(text: str) -> list[str]:
    """Contents of ```python / ```py / unlabelled fences; an unclosed last fence runs to the end."""
    blocks: list[str] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, label = opening["fence"], _fence_label(opening["info"])
        body: list[str] = []
        index += 1
        while index < len(lines):
            closing = _FENCE.match(lines[index])
            if closing and closing["fence"][0] == fence[0] and len(closing["fence"]) >= len(fence) and not closing["info"]:
                break
            body.append(lines[index])
            index += 1
        index += 1
        if label in _PYTHON_LABELS:
            blocks.append("\n".join(body))
    return blocks


def _fence_label(info: str) -> str:
    words = info.strip().strip("{}").lstrip(".").split()
    return words[0].lower() if words else ""


def _bare_code_segments(text: str) -> list[str]:
    """Code written without fences: the whole reply if it parses, else runs of code-looking lines.

    A run starts at a top-level line that looks like Python (`import`, `def`, an assignment...),
    continues through indented and blank lines, and ends at a top-level line of prose. Trailing
    lines that break parsing are dropped only when that keeps any `compute_dense_reward` intact.
    """
    try:
        ast.parse(text)
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
    return [_trim_trailing_prose("\n".join(s).strip("\n")) for s in segments]


def _trim_trailing_prose(source: str) -> str:
    """Drop trailing top-level lines that break parsing (prose that looked like code).

    A cut is made only at a top-level line, and kept only if the rest parses and still has any
    `compute_dense_reward` it had: a syntax error inside the function must be reported, not hidden
    by cutting the function short.
    """
    lines = source.splitlines()
    had_entry = bool(_ENTRY_DEF.search(source))
    candidate = lines
    for _ in range(5):
        try:
            ast.parse("\n".join(candidate))
        except SyntaxError as exc:
            last = min(exc.lineno or 0, len(candidate)) - 1
            cuts = [i for i in range(last, 0, -1) if candidate[i].strip() and not candidate[i][:1].isspace()]
            if not cuts:
                return source
            candidate = candidate[: cuts[0]]
            continue
        text = "\n".join(candidate)
        return text if bool(_ENTRY_DEF.search(text)) == had_entry else source
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
    return "\n".join(block.source.splitlines()[start - 1 : node.end_lineno])


def _merge_helpers(blocks: list[_Block], chosen: int) -> str:
    """The chosen block, preceded by the imports, helpers and constants it needs from other blocks."""
    main = blocks[chosen]
    assert main.tree is not None
    providers: dict[str, tuple[int, ast.stmt]] = {}
    for index, block in enumerate(blocks):
        if index == chosen or block.tree is None:
            continue
        for node in block.tree.body:
            if isinstance(node, _PROVIDERS) and ENTRY_POINT not in _bound_names([node]):
                for name in _bound_names([node]):
                    providers[name] = (index, node)  # a later block's definition wins

    have = _bound_names(main.tree.body) | _BUILTINS
    needed = _free_names(main.tree.body) - have
    selected: dict[int, tuple[int, ast.stmt]] = {}
    while needed:
        name = needed.pop()
        if name not in providers:
            continue
        index, node = providers[name]
        if id(node) in selected:
            continue
        selected[id(node)] = (index, node)
        have |= _bound_names([node])
        needed |= _free_names([node]) - have
        needed -= have

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


# --- display -----------------------------------------------------------------------------------


def format_messages_for_display(messages: Sequence[Message]) -> str:
    """The exact messages that would be sent, as plain text for a terminal (`t2r prompt`)."""
    out = []
    total = len(messages)
    for number, message in enumerate(messages, 1):
        text = _content_text(message.get("content"))
        header = f"──── message {number}/{total} · {message.get('role', '?')} · {len(text)} characters "
        out.append(header.ljust(72, "─") + "\n" + text.rstrip("\n"))
    return "\n\n".join(out) + "\n"


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    pieces = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            pieces.append(part.get("text", ""))
        elif kind == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            shown = url if len(url) <= 60 else url[:40] + f"... ({len(url)} characters)"
            pieces.append(f"[image: {shown}]")
        else:
            pieces.append(f"[{kind or type(part).__name__} part]")
    return "\n".join(pieces)
