"""Help text that reads like other command-line tools': ``--resume``, ``--log PATH``, ``fae show RUN_ID``.

Typer labels every option with its Python type (``<bool>`` beside a plain flag,
``<list[str]>`` beside a repeatable option) and wraps required arguments in
braces in the usage line; this rewrites the placeholders once, on the built
Click command tree. Help is laid out as Click lays it out (an option's names,
then its help wrapped beside or under them), not in Typer's boxed tables,
which cut long option names at 80 columns.
"""

from __future__ import annotations

from typing import Any

_PLACEHOLDERS: dict[str, str] = {"str": "TEXT", "int": "N", "float": "NUMBER", "bool": "BOOL"}


def _placeholder(option: Any) -> str:
    if "dir" in (option.name or ""):
        return "DIR"
    if option.type_descriptor.is_path:
        return "PATH"
    bare = str(option.bare_type())
    if bare.startswith("list[") and bare.endswith("]"):
        bare = bare[5:-1]
    return _PLACEHOLDERS.get(bare, bare.upper())


def _argument_usage(argument: Any) -> list[str]:
    name = argument.metavar or (argument.name or "ARG").upper()
    name += "..." if argument.nargs != 1 else ""
    return [name if argument.required else f"[{name}]"]


def _quiet_help(make_option: Any) -> Any:
    """``--help`` is a flag too: no placeholder."""

    def help_option(ctx: Any) -> Any:
        option = make_option(ctx)
        if option is not None:
            option.metavar = ""
        return option

    return help_option


def conventional_help(command: Any) -> Any:
    """Give every option and argument of ``command`` (and its subcommands) a conventional placeholder."""
    for param in command.params:
        # typer carries its own copy of Click, so parameters are told apart by kind, not class
        if param.param_type_name == "argument":
            param.metavar = param.metavar or (param.name or "arg").upper()
            param.get_usage_pieces = lambda ctx, p=param: _argument_usage(p)
            param.display_type_rich = lambda ctx: ""  # the name already says what to give
        elif param.param_type_name == "option":
            if param.is_flag or param.count:
                param.metavar = ""
            elif param.metavar is None:
                param.metavar = _placeholder(param) + (" (repeatable)" if param.multiple else "")
    command.get_help_option = _quiet_help(command.get_help_option)
    command.rich_markup_mode = None  # Click's layout: no name is ever cut, whatever the terminal's width
    for sub in getattr(command, "commands", {}).values():
        conventional_help(sub)
    return command
