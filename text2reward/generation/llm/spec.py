"""A model backend as a typed spec: how to build it from a run's settings, what to check before a run, how to label it.

Why a spec per backend: the loop, the checks, the CLI and the records all need to know things about a backend (can it
see images, does it cache, is it rule-based, what to call it); asked of one record they cannot drift, and a fourth
backend is one module plus one `register_backend` line, with no other file touched:

    from text2reward.generation.llm import BackendSpec, register_backend

    register_backend(BackendSpec(name="echo", summary="replies with a fixed program", build=lambda s: EchoBackend()))

`BackendSettings` is what a run gives every backend (a backend uses what it needs); `build` gets them after
`resolve` (what the environment supplies, e.g. OPENAI_MODEL) and `check` (preflight: one line per mistake, before a
run folder exists or a model is asked).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from policies.choices import Registry
from text2reward.generation.llm.base import Backend
from text2reward.runs.records import author_label

if TYPE_CHECKING:
    from sim_envs.task import Task


@dataclass(frozen=True)
class BackendSettings:
    """What a run (or a command) tells its backend; each backend reads the fields it needs."""

    model: str | None = None
    base_url: str | None = None
    vision: bool = False
    """The backend is sent images (rollout keyframes, a keypoint scene)."""
    timeout: float | None = None
    max_retries: int | None = None
    concurrency: int | None = None
    reply_files: tuple[str, ...] = ()
    replies_used: int = 0
    """Replies a resumed run already consumed (a reply-file backend goes on after them)."""
    seed: int = 0


def _nothing_to_check(settings: BackendSettings, task: Task | None) -> None:
    return None


def _as_given(settings: BackendSettings) -> BackendSettings:
    return settings


@dataclass(frozen=True)
class BackendSpec:
    """One model backend: its name, how it is built, checked and labelled, and what it can do."""

    name: str
    """What `--llm` takes and config.json records."""
    summary: str
    """A few words for `--llm`'s help: "(rule-based, no model)"."""
    build: Callable[[BackendSettings], Backend]
    check: Callable[[BackendSettings, Task | None], None] = _nothing_to_check
    """Before a run folder exists: the settings are complete and, where it can be known, the backend will serve `task`
    (a model endpoint answers, the reply files exist, the rules can plan for it). Raises ConfigError, one line."""
    resolve: Callable[[BackendSettings], BackendSettings] = _as_given
    """The settings with what the environment supplies filled in, so the run records what it really used."""
    rule_based: bool = False
    """Rules, not a language model, compose its replies: every label says so, and its replies carry `rule_based`."""
    accepts_images: bool = False
    """It can be shown images (`--vision`): a vision model, or a person reading the saved image."""
    answers_between_rounds: bool = False
    """It can be asked a side question while a run goes on (`--vision-analysis`, a keypoint scene) without stopping."""
    reads_reply_files: bool = False
    """It answers from reply files a person writes (`--reply-file`; `t2r resume --reply-file` adds more)."""
    cache_replies: bool = True
    """Its replies go to the run's reply cache (pasted replies are their own record: never cached)."""
    model_label: str | None = None
    """Shown for the model when the run names none ("pasted replies")."""

    def label(self, model: str | None) -> str:
        """Who wrote the rewards, as every reader shows it (records.author_label)."""
        return author_label(self.name, model or self.model_label, self.rule_based)

    def make(self, settings: BackendSettings) -> Backend:
        """The backend, built from settings already resolved and checked."""
        return self.build(settings)


BACKENDS: Registry[BackendSpec] = Registry(
    "backend", lambda name, specs: f"unknown --llm {name!r}: choose {', '.join(f'{s.name} {s.summary}'.strip() for s in specs)}")
"""Every model backend by name (policies.choices: one rule set for every pluggable choice)."""


def register_backend(spec: BackendSpec, replace_existing: bool = False) -> BackendSpec:
    """Make `spec` choosable by name (`--llm NAME`, `RunConfig.backend`). A name is registered once."""
    return BACKENDS.register(spec, replace=replace_existing)


def unregister_backend(name: str) -> BackendSpec:
    """Forget a backend (tests that register a toy one)."""
    return BACKENDS.unregister(name)


def backend_specs() -> list[BackendSpec]:
    return BACKENDS.specs()


def backend_spec(name: str) -> BackendSpec:
    """The registered backend `name`, or one line naming the choices."""
    return BACKENDS.get(name)


def image_backends() -> list[str]:
    """The backends that can be asked about images between rounds (what `--vision-analysis` needs)."""
    return [s.name for s in BACKENDS.specs() if s.accepts_images and s.answers_between_rounds]
