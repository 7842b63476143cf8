"""`mindstore tasks redact | follow`: remove a message's content; watch a task live.

`redact` writes (the `--data` file is saved back); `follow` reads, printing each message
as it arrives and again when it changes, like `tail -f` (Ctrl-C stops it; `--idle N` stops
after N quiet seconds, which is what scripts and tests use).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import Annotated, Any

import typer

from mindstore.commands.common import note_unknown_tenant, open_store, require_tenant, run
from mindstore.commands.output import OutputFormat, echo_json, echo_text
from mindstore.commands.sanitize import terminal_text
from mindstore.commands.tasks import Format, TaskId, Tenant, tasks_app

MessageId = Annotated[str, typer.Argument(metavar="MESSAGE_ID", help="The message to redact.")]


def register(app: typer.Typer) -> None:
    """The commands join the `tasks` group (registered by `commands.tasks`)."""


@tasks_app.command("redact")
def redact_command(
    ctx: typer.Context,
    task_id: TaskId,
    message_id: MessageId,
    tenant: Tenant = None,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (kept; never the content).")
    ] = None,
    part: Annotated[
        int | None, typer.Option("--part", min=0, help="Redact this part only.")
    ] = None,
) -> None:
    """Remove a message's content (or one part's), keeping its shape (docs/lifecycle.md)."""

    async def body() -> Any:
        name = require_tenant(tenant)
        async with open_store(ctx, save=True, create=False) as store:
            await note_unknown_tenant(store, name)
            message = await store.scoped(name).tasks.redact(task_id, message_id, reason, part)
            return message.to_dict()["redaction"]

    echo_json(run(body()))


def _line(event: Any) -> str:
    message = event.message
    text = " ".join(getattr(message, "text", lambda: "")().split())
    preview = text if len(text) <= 80 else text[:79] + "…"
    return terminal_text(
        f"{event.index:>5} {event.kind:<7} {message.role or '?':<12} {message.id}  {preview}"
    )


@tasks_app.command("follow")
def follow_command(
    ctx: typer.Context,
    task_id: TaskId,
    tenant: Tenant = None,
    since: Annotated[
        str | None,
        typer.Option("--since", metavar="MESSAGE_ID", help="Start after this message id."),
    ] = None,
    idle: Annotated[
        float | None,
        typer.Option("--idle", min=0.1, max=86_400, help="Stop after this many quiet seconds."),
    ] = None,
    fmt: Format = OutputFormat.table,
) -> None:
    """Print a task's messages as they arrive, and again when they change (like tail -f).

    json and csv print one JSON object per line.
    """

    async def body() -> None:
        name = require_tenant(tenant)
        async with open_store(ctx, save=False) as store:
            await note_unknown_tenant(store, name)
            feed = store.scoped(name).tasks.watch(task_id, since_id=since).__aiter__()
            while True:
                try:
                    event = await asyncio.wait_for(feed.__anext__(), timeout=idle)
                except (TimeoutError, StopAsyncIteration):
                    if isinstance(feed, AsyncGenerator):  # `watch` is one; typed as an iterator
                        await feed.aclose()
                    return
                if (
                    fmt != OutputFormat.table
                ):  # one JSON object per line (escaped: inert on a terminal)
                    typer.echo(json.dumps({"kind": event.kind, "index": event.index,
                                           "message": event.message.model_dump(mode="json")},
                                          ensure_ascii=True, default=str))  # fmt: skip
                else:
                    echo_text(_line(event))

    run(body())
