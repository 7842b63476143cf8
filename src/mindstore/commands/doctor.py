"""`mindstore doctor`: the store's description (`mindstore.diagnosis`), one row per check.

Exits 1 when a check fails (the server did not answer, the embedder did not), so a
deployment script can gate on it; a ``note`` (embedded backend, no embedder, vectors
ranked in the process) is a limit to know, not a failure. Read-only: a `--data`
snapshot is never rewritten.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from mindstore.commands.common import open_store, run
from mindstore.commands.output import OutputFormat, render
from mindstore.diagnosis import diagnose

COLUMNS = ("check", "status", "detail")


def register(app: typer.Typer) -> None:
    """Add this module's command to the root app."""
    app.command("doctor")(doctor)


def doctor(
    ctx: typer.Context,
    fmt: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="table, json or csv.")
    ] = OutputFormat.table,
) -> None:
    """Check the store: server, where vectors are ranked, the embedder, the keyring."""

    async def body() -> bool:
        async with open_store(ctx, save=False) as store:
            findings = await diagnose(store)
        render([dataclasses.asdict(f) for f in findings], fmt, title="mindstore doctor",
               columns=COLUMNS)  # fmt: skip
        return all(f.status != "fail" for f in findings)

    if not run(body()):
        raise typer.Exit(code=1)
