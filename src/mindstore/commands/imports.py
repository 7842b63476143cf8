"""`mindstore import --from KIND SOURCE --tenant T`: move a peer's store in.

A thin shell over `mindstore.imports.import_from`: options become arguments, the receipt
is printed as JSON on stdout (and written to `--receipt FILE`), and progress goes to
stderr, a line every `PROGRESS_EVERY` conversations and at the end, when the source has
more than that.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from mindstore.commands.common import (
    check_writable,
    open_store,
    require_tenant,
    run,
    write_receipt,
)
from mindstore.commands.output import echo_json

PROGRESS_EVERY = 100
"""Conversations between two progress lines."""


def register(app: typer.Typer) -> None:
    """Add this module's command to the root app."""
    app.command("import")(import_command)


def _progress(step: object) -> None:
    from mindstore.imports import Step

    if not isinstance(step, Step) or step.unit != "conversation" or step.total <= PROGRESS_EVERY:
        return
    done = step.index + 1
    if done % PROGRESS_EVERY == 0 or done == step.total:
        print(f"{step.kind}: {done}/{step.total} conversations", file=sys.stderr, flush=True)


def import_command(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            help="The source: a file, folder, SQLAlchemy or PostgreSQL URL, or MongoDB URI."
        ),
    ],
    kind: Annotated[
        str,
        typer.Option(
            "--from", metavar="KIND", help="The source's framework (see docs/import-export.md)."
        ),
    ],
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", envvar="MINDSTORE_TENANT", help="Tenant to import into."),
    ] = None,
    owner: Annotated[
        str | None, typer.Option("--owner", help="Owner of every imported conversation.")
    ] = None,
    owner_from: Annotated[
        str | None,
        typer.Option("--owner-from", help="Source field each owner comes from (e.g. user_id)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Read the source and the store; write nothing.")
    ] = False,
    receipt: Annotated[
        Path | None, typer.Option("--receipt", help="Also write the JSON receipt here.")
    ] = None,
) -> None:
    """Import every conversation of another framework's store; prints a JSON receipt.

    Idempotent and resumable: a rerun writes only what is missing.

    KIND: openai-agents, langgraph, adk, llamaindex, agent-framework, langchain-mongodb.
    """
    from mindstore.errors import ConfigurationError
    from mindstore.imports import import_from

    async def body() -> dict[str, object]:
        name = require_tenant(tenant)
        if receipt is not None:  # before the import: the receipt must land
            check_writable(receipt, "receipt file", ConfigurationError)
        async with open_store(ctx, save=not dry_run) as store:
            done = await import_from(store, kind, source, tenant=name, owner=owner,
                                     owner_from=owner_from, dry_run=dry_run,
                                     on_step=_progress)  # fmt: skip
        return done.to_json()

    data = run(body())
    echo_json(data)
    if receipt is not None:
        write_receipt(receipt, data, "imported", ConfigurationError)
