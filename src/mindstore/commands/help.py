"""One spelling of every value in `--help`: `--tenant NAME`, `--since TIME`, `{TASK_ID}`.

typer prints a Python type after each option and argument (``--tar <bool>``,
``--tenant <str>``, ``dest <path>``) and, in the usage line, an argument's parameter
name where no metavar was given (``{dest}`` beside ``{BACKUP}``). `tidy_help` walks the
assembled command tree once before it runs and gives every parameter a metavar: flags
none (they take no value), choices their values (``[table|json|csv]``), every other
option the placeholder of `METAVARS` (one per option name, so ``--since`` reads the same
in every command), and arguments their upper-case name, shown without a type. A metavar
written on the option itself wins (``--by`` groups in one report and ranks in another).
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperArgument, TyperOption

__all__ = ["METAVARS", "tidy_help"]

METAVARS: dict[str, str] = {
    "--uri": "URI",
    "--data": "FILE",
    "--database": "NAME",
    "--tenant": "TENANT",
    "--as-tenant": "TENANT",
    "--owner": "OWNER",
    "--task": "TASK_ID",
    "--state": "STATE",
    "--model": "MODEL",
    "--since": "TIME",
    "--until": "TIME",
    "--before": "TIME",
    "--period": "PERIOD",
    "--cursor": "CURSOR",
    "--reason": "TEXT",
    "--receipt": "FILE",
    "--idle": "SECONDS",
}
"""The placeholder of each option that takes a value; an option not named here reads
``N`` when it takes a number (a count, an index, a size), else its own name in capitals."""


class _Argument(TyperArgument):
    """An argument whose help shows its metavar alone (typer adds ``<str>``, ``<path>``)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


def _choices(option: TyperOption, ctx: Any) -> str | None:
    """``[a|b|c]`` for an option with a fixed set of values, else None."""
    shown = option.display_type(ctx)
    if "|" in shown and shown.startswith("<") and shown.endswith(">"):
        return "[" + shown[1:-1] + "]"
    return None


def _tidy_parameter(parameter: Any, ctx: Any) -> None:
    if isinstance(parameter, TyperArgument):
        if parameter.metavar is None:
            parameter.metavar = (parameter.name or "value").upper()
        parameter.__class__ = _Argument
        return
    if not isinstance(parameter, TyperOption) or parameter.metavar is not None:
        return
    if parameter.is_flag or parameter.count:
        parameter.metavar = ""  # a flag takes no value: show none
        return
    names = [name for name in parameter.opts if name.startswith("--")]
    named = next((METAVARS[name] for name in names if name in METAVARS), None)
    numeric = parameter.display_type(ctx).startswith(("<int", "<float"))
    fallback = "N" if numeric else (names or parameter.opts)[0].lstrip("-").upper()
    parameter.metavar = _choices(parameter, ctx) or named or fallback.replace("-", "_")


def tidy_help(command: Any) -> None:
    """Give every parameter of `command` and its sub-commands a metavar (idempotent)."""
    ctx = typer.Context(command)
    help_option = command.get_help_option(ctx)
    for parameter in [*command.params, *([help_option] if help_option is not None else [])]:
        _tidy_parameter(parameter, ctx)
    for sub in getattr(command, "commands", {}).values():
        tidy_help(sub)
