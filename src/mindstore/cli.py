"""The `mindstore` command line: one root app, command groups from `mindstore.commands`.

This module only assembles the app (the entry point ``mindstore.cli:app``): the global
options and the command modules. What the commands share (opening the store, settings,
errors as one line and an exit code, the URI and file checks) lives in
`mindstore.commands.common`, and the names below are re-exported from there for callers
that import them from here.

Global options choose the store: `--uri` (default: `MINDSTORE_URI`, else embedded) and
`--data FILE`, which loads an embedded store from a snapshot file before the command and
saves it afterwards, so separate CLI runs share data.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

import typer

from mindstore.commands import COMMAND_MODULES
from mindstore.commands.common import (
    DEBUG_ENV,
    EXIT_INTERRUPTED,
    EXIT_UNEXPECTED,
    EXIT_USAGE,
    OneLineErrors,
    Settings,
    check_uri,
    check_writable,
    note_unknown_tenant,
    one_line,
    open_store,
    require_tenant,
    run,
    settings,
)
from mindstore.commands.help import tidy_help

__all__ = [
    "DEBUG_ENV", "EXIT_INTERRUPTED", "EXIT_UNEXPECTED", "EXIT_USAGE", "OneLineErrors", "Settings",
    "app", "check_uri", "check_writable", "main", "note_unknown_tenant", "one_line", "open_store",
    "require_tenant", "run", "settings",
]  # fmt: skip


class _Root(OneLineErrors):
    """The root command: every parameter gets its metavar (`commands.help`) before the
    command line is read, so usage errors and `--help` spell values alike."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        tidy_help(self)
        return super().main(*args, **kwargs)


app = typer.Typer(
    cls=_Root,
    name="mindstore",
    help="Store, inspect, analyse and back up AI-agent conversations in MongoDB.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"mindstore {importlib.metadata.version('mindstore')}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="Show the version and exit."
    ),
    uri: str = typer.Option(
        None, "--uri", envvar="MINDSTORE_URI", help="mongodb:// URI; default: embedded store."
    ),
    data: Path = typer.Option(
        None, "--data", help="Embedded store snapshot file, loaded before and saved after."
    ),
    database: str = typer.Option(None, "--database", help="Database name (default: mindstore)."),
    master_key: Path = typer.Option(
        None,
        "--master-key",
        envvar="MINDSTORE_MASTER_KEY_FILE",
        help="Master key file (32 raw bytes or 64 hex digits): reads encrypted tenants.",
    ),
    key_vault: Path = typer.Option(
        None,
        "--key-vault",
        envvar="MINDSTORE_KEY_VAULT",
        help="Key vault directory (the tenants' own keys), with --master-key.",
    ),
    embedder: str = typer.Option(
        None,
        "--embedder",
        envvar="MINDSTORE_EMBEDDER",
        help="Recall by meaning: hashing[:DIMS], local:FOLDER, openai[:MODEL], gemini[:MODEL].",
    ),
) -> None:
    ctx.obj = Settings(uri=uri, data=data, database=database, master_key=master_key,
                       key_vault=key_vault, embedder=embedder)  # fmt: skip


for _module in COMMAND_MODULES:
    _module.register(app)
