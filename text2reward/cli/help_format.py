"""Help text a person reads: flags without `<bool>`, arguments as `RUN_ID` rather than `{RUN_ID}`.

Typer 0.29 prints the Python type beside every parameter, so each flag reads `--video <bool>` and each
required argument appears in the usage line as `{RUN_ID}`. Valued options keep their type (`<int>`,
`<path>` say what to type); flags and arguments drop it. The group re-classes its commands' parameters
once, when Typer builds it, so every command (sub-groups included) gets the same help without each
command having to ask for it.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption


class FlagOption(TyperOption):
    """A boolean flag: its name says everything, so no `<bool>` beside it."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


class PlainArgument(TyperArgument):
    """A positional argument shown as its name (`RUN_ID`, `[RUN_ID]` when optional), without `<str>`."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")


def plain_param(param: Any) -> Any:
    """The same parameter, re-classed so that its help is plain."""
    if type(param) is TyperOption and param.is_flag:
        param.__class__ = FlagOption
    elif type(param) is TyperArgument:
        param.__class__ = PlainArgument
    return param


class PlainHelpCommand(TyperCommand):
    """A command whose `--help` flag (made per call by click) is plain too."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        return None if option is None else plain_param(option)


def plain_help(command: Any) -> None:
    """Re-class `command`'s parameters, its help flag and every command below it."""
    for param in command.params:
        plain_param(param)
    if type(command) is TyperCommand:
        command.__class__ = PlainHelpCommand
    elif type(command) is TyperGroup:
        command.__class__ = PlainHelpGroup
    if isinstance(command, TyperGroup):  # Typer vendors its own click: its classes, not click's
        for sub in command.commands.values():
            plain_help(sub)


class PlainHelpGroup(TyperGroup):
    """The `t2r` group: Typer's group, with the help of all its commands made plain."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        plain_help(self)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        return None if option is None else plain_param(option)
