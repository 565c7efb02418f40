"""Prompting: task -> chat messages (initial, few-shot, error fix, feedback, human feedback, preference).

Why templates on disk: the prompts are the part of the system people tune most; Jinja2 files in
`prompts/` can be read and edited without touching code, and `StrictUndefined` turns a renamed
variable into an error instead of a silently empty section. The environment section is always
rendered from the task's state view (`render_view_doc`), so the prompt promises exactly what
reward code can read. Replies come back through extraction.py.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2

from policies import reward_modes
from policies.reward_modes import RewardModeSpec
from prompts import EXAMPLES_DIR, PROMPTS_DIR
from sim_envs.errors import ConfigError
from sim_envs.scale_hints import RESETS as SCALE_RESETS
from sim_envs.scale_hints import describe_scale_hints, scale_hints
from sim_envs.task import Task, render_view_doc
from text2reward.generation.retrieval import Example, retrieve_examples
from text2reward.sandbox.static import ALLOWED_MODULES, PREIMPORTED

__all__ = [
    "Example",
    "build_error_messages",
    "build_feedback_messages",
    "build_human_feedback_messages",
    "build_initial_messages",
    "build_preference_messages",
    "format_messages_for_display",
    "with_keypoint_section",
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


def mode_templates(spec: RewardModeSpec) -> dict[str, Any]:
    """What the templates read of a reward mode: its spec (`mode_spec`: nouns, whether it takes an action...) and its
    system lines and contract section, compiled from the spec's Jinja source (`mode_system`, `mode_contract`, which the
    templates include with their own variables; a built-in mode's source includes prompts/modes/<name>/)."""
    return {"mode_spec": spec, "mode_system": _compiled(spec.system_prompt), "mode_contract": _compiled(spec.contract),
            "entry": spec.function, "entry_signature": spec.signature}


@functools.lru_cache(maxsize=32)
def _compiled(source: str) -> jinja2.Template:
    return template_environment().from_string(source.strip("\n") + "\n")


def _messages(task: Task, template: str, reward_mode: str = "dense", **context: Any) -> list[Message]:
    """[system, user]: every prompt is self-contained, so it does not depend on earlier turns.

    The contract's list of imports is rendered from the sandbox's own allow-list and pre-imported
    names, so the prompt promises exactly what validation and training accept. `reward_mode` (a registered
    mode's name) picks the function asked for and its contract: the mode's spec holds both (`mode_templates`)."""
    spec = mode_templates(reward_modes.reward_mode(reward_mode))
    user = render_template(
        template, task=task, view_doc=render_view_doc(task), allowed_modules=ALLOWED_MODULES, preimported=PREIMPORTED,
        scale_hints=describe_scale_hints(scale_hints(task)), scale_resets=SCALE_RESETS, **spec, **context
    )
    return [
        {"role": "system", "content": render_template("system.j2", **spec)},
        {"role": "user", "content": user},
    ]


# --- message builders --------------------------------------------------------------------------


def build_initial_messages(task: Task, few_shot: int = 0, examples_dir: str | Path | None = None,
                           reward_mode: str = "dense") -> list[Message]:
    """The first prompt for a task: zero-shot, or with `few_shot` retrieved expert examples (dense rewards,
    shown in every mode for their distances, scales and stages)."""
    if few_shot < 0:
        raise ConfigError(f"few_shot must be 0 or more, got {few_shot}; use 0 for a zero-shot prompt")
    if few_shot == 0:
        return _messages(task, "zero_shot.j2", reward_mode)
    examples = retrieve_examples(task, few_shot, examples_dir)
    if not examples:
        where = Path(examples_dir) if examples_dir is not None else EXAMPLES_DIR
        raise ConfigError(
            f"no few-shot examples for {task.id} in {where} (a task's own expert reward is never shown); "
            "add example files there or use --few-shot 0"
        )
    return _messages(task, "few_shot.j2", reward_mode, examples=examples)


def with_keypoint_section(messages: list[Message], keypoints_text: str, keypoint_code: str) -> list[Message]:
    """`--reward-source code+keypoints`: the first prompt also shows the task's keypoints and the keypoint reward that
    will be added to the model's reward, so the model writes what complements it."""
    section = render_template("keypoints_section.j2", keypoints_text=keypoints_text, keypoint_code=keypoint_code)
    last = dict(messages[-1])
    last["content"] = str(last["content"]).rstrip() + "\n\n" + section
    return [*messages[:-1], last]


def build_error_messages(task: Task, code: str, error_text: str, reward_mode: str = "dense") -> list[Message]:
    """Ask for a fixed program after a syntax, validation or smoke-run error."""
    return _messages(task, "execution_error.j2", reward_mode, code=code, error_text=trim_error_text(error_text, source=code))


def build_feedback_messages(task: Task, best_code: str, feedback_text: str, reward_mode: str = "dense",
                            contrast_text: str = "") -> list[Message]:
    """Ask for an improved program from the best one so far and its training feedback; `contrast_text` shows the
    round's other candidates beside it (text2reward.feedback.compose.round_contrast)."""
    return _messages(task, "training_feedback.j2", reward_mode, best_code=best_code, feedback_text=feedback_text,
                     contrast_text=contrast_text)


def build_human_feedback_messages(task: Task, code: str, behaviour_text: str, critique: str, reward_mode: str = "dense") -> list[Message]:
    """Ask for a program that answers a person's critique of what the trained robot did."""
    if not critique.strip():
        raise ConfigError("the critique is empty; say what the robot should do differently")
    return _messages(task, "human_feedback.j2", reward_mode, mode="critique", code=code, behaviour_text=behaviour_text, critique=critique)


def build_preference_messages(
    task: Task,
    best_code: str,
    worst_code: str,
    behaviour_best: str,
    behaviour_worst: str,
    critique: str | None = None,
    reward_mode: str = "dense",
) -> list[Message]:
    """Ask for a program from a person's choice between two trained rewards (preferred vs rejected)."""
    return _messages(
        task,
        "human_feedback.j2",
        reward_mode,
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
