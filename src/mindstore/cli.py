"""The `mindstore` command line: one root app, command groups from `mindstore.commands`.

Global options choose the store: `--uri` (default: `MINDSTORE_URI`, else embedded) and
`--data FILE`, which loads an embedded store from a snapshot file before the command and
saves it afterwards, so separate CLI runs share data. Every `MindstoreError` becomes a
one-line message on stderr and its class's exit code (see docs/cli.md).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import typer

from mindstore.errors import ConfigurationError, MindstoreError

T = TypeVar("T")

app = typer.Typer(
    name="mindstore",
    help="Store, inspect, analyse and back up AI-agent conversations in MongoDB.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXIT_USAGE = 2  # typer/click's own code for bad arguments
EXIT_INTERRUPTED = 130


@dataclass
class Settings:
    uri: str | None = None
    data: Path | None = None
    database: str | None = None


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
) -> None:
    ctx.obj = Settings(uri=uri, data=data, database=database)


def settings(ctx: typer.Context) -> Settings:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, Settings) else Settings()


@asynccontextmanager
async def open_store(ctx: typer.Context, *, save: bool = True) -> AsyncIterator[Any]:
    """The store a command works on; an embedded `--data` store is saved back afterwards."""
    from mindstore.backends.snapshot import load_snapshot, save_snapshot
    from mindstore.store import connect

    options = settings(ctx)
    if options.data is not None and options.uri and not options.uri.startswith(("embedded", "mongomock")):
        raise ConfigurationError("--data works with the embedded store only; drop --uri or --data")
    store = await connect(options.uri, database=options.database)
    try:
        if options.data is not None:
            await load_snapshot(store.database, options.data)
        yield store
        if options.data is not None and save:
            await save_snapshot(store.database, options.data)
    finally:
        await store.close()


def require_tenant(tenant: str | None) -> str:
    if not tenant:
        raise ConfigurationError("a tenant is required: pass --tenant NAME")
    return tenant


def run(coroutine: Awaitable[T]) -> T:
    """Run a command body; typed errors become one line on stderr and an exit code."""
    try:
        return asyncio.run(coroutine)  # type: ignore[arg-type]
    except MindstoreError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=exc.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise typer.Exit(code=EXIT_INTERRUPTED) from None


def _register_command_groups() -> None:
    from mindstore.commands import COMMAND_MODULES

    for module in COMMAND_MODULES:
        module.register(app)


_register_command_groups()
