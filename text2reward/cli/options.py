"""A command's options from the settings' own declarations (`text2reward.settings.option`): each run setting's flag,
help, type and default are written once, beside the setting, and every command that takes them gets them from there.

Why: `t2r run` took 41 options and copied each into `RunConfig` by hand; a new setting then had to be added in three
places and its help drifted. Typer reads a function's signature, so `with_settings` builds one from the declarations
and hands the command a ready `RunConfig`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any

import typer

from text2reward.settings import RunConfig, declared_option, setting_fields

SETTINGS_PARAMETER = "config"
"""The command's parameter that receives the built `RunConfig`."""


def _setting_parameters(skip: frozenset[str], defaults: dict[str, Any]) -> list[inspect.Parameter]:
    parameters = []
    for owner, f in setting_fields():
        declared = declared_option(f)
        if declared is None or f.name in skip:
            continue
        kind = declared.cli_type if declared.cli_type is not None else typing.get_type_hints(owner)[f.name]
        info = typer.Option(*declared.flags, help=declared.help_text(), metavar=declared.metavar, envvar=declared.envvar)
        if f.name in defaults:
            default: Any = defaults[f.name]
        elif f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING or declared.cli_type is not None:
            default = None  # a list or mapping setting: no flags given
        else:
            default = inspect.Parameter.empty  # required
        parameters.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[kind, info]))
    return parameters


def settings_from(values: dict[str, Any], fixed: dict[str, Any]) -> RunConfig:
    """A RunConfig from parsed option values (each through its declaration's `to_setting`) and the command's fixed ones."""
    given: dict[str, Any] = dict(fixed)
    for _, f in setting_fields():
        if f.name not in values:
            continue
        declared = declared_option(f)
        value = values[f.name]
        given[f.name] = declared.to_setting(value) if declared is not None and declared.to_setting is not None else value
    return RunConfig.of(**given)


def with_settings(skip: tuple[str, ...] = (), fixed: dict[str, Any] | None = None,
                  defaults: dict[str, Any] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command taking `config: RunConfig` (plus options of its own): its signature gains every declared
    setting but those in `skip` and `fixed` (given values), with `defaults` overriding the settings' own defaults."""
    fixed = dict(fixed or {})
    skipped = frozenset(skip) | frozenset(fixed)

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(command, include_extras=True)  # the command's own annotations, evaluated where it lives
        own = [p.replace(annotation=hints.get(name, p.annotation))
               for name, p in inspect.signature(command).parameters.items() if name != SETTINGS_PARAMETER]
        setting_names = {f.name for _, f in setting_fields()}

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            settings = {k: v for k, v in kwargs.items() if k in setting_names and k not in {p.name for p in own}}
            rest = {k: v for k, v in kwargs.items() if k not in settings}
            return command(**{SETTINGS_PARAMETER: settings_from(settings, fixed)}, **rest)

        parameters = _setting_parameters(skipped, dict(defaults or {})) + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
        wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}  # Typer evaluates these, in this module's globals
        del wrapper.__wrapped__  # Typer must read this signature, not the command's
        return wrapper

    return decorate
