"""`mindstore export`: conversations out of the store, one per line or a file each
(docs/import-export.md, "Export").

A thin shell over `mindstore.exports`: the formats and reads live there; this module turns
options into arguments, lines into stdout or files, and counts into progress on stderr.
It only reads: a `--data` file is never rewritten.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated
from urllib.parse import quote

import typer

from mindstore.commands.common import note_unknown_tenant, open_store, require_tenant, run
from mindstore.errors import ValidationError
from mindstore.exports import ExportFormat, export_lines, export_subject

PROGRESS_EVERY = 100
"""Conversations between two progress lines on stderr."""


def register(app: typer.Typer) -> None:
    """Add this module's command to the root app."""
    app.command("export")(export)


def _file_name(task_id: str) -> str:
    """A file name for a task id: percent-encoded, so no id names a path."""
    return quote(task_id, safe="") + ".json"


def _holds_files(folder: Path) -> bool:
    return folder.exists() and (not folder.is_dir() or any(folder.iterdir()))


def export(
    ctx: typer.Context,
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", envvar="MINDSTORE_TENANT", help="Tenant to export."),
    ] = None,
    owner: Annotated[str | None, typer.Option("--owner", help="Only this owner's.")] = None,
    task: Annotated[
        list[str] | None, typer.Option("--task", help="Only this task (repeat).")
    ] = None,
    fmt: Annotated[
        ExportFormat, typer.Option("--format", "-f", help="The format of each conversation.")
    ] = ExportFormat.jsonl,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="A folder: one file per conversation (default: stdout)."),
    ] = None,
    subject: Annotated[
        bool,
        typer.Option(
            "--subject",
            help="A data-subject export of --owner into --out: everything held about them.",
        ),
    ] = False,
) -> None:
    """Export conversations: one JSON line per conversation, or a file each."""

    async def body() -> int:
        name = require_tenant(tenant)
        if subject and (owner is None or out is None or task):
            raise ValidationError("--subject needs --owner and --out, and takes no --task")
        if out is not None and not subject and _holds_files(out):
            raise ValidationError(f"--out: {str(out)[:200]!r} exists and is not empty")
        async with open_store(ctx, save=False) as store:
            await note_unknown_tenant(store, name)
            if subject:
                assert owner is not None and out is not None
                done = await export_subject(
                    store, name, owner, out, progress=lambda line: typer.echo(line, err=True)
                )
                return int(done.manifest["files"]["conversations.jsonl"]["records"])
            view = store.scoped(name)
            count = 0
            if out is not None:
                out.mkdir(parents=True, exist_ok=True)
            async for line in export_lines(view, fmt, owner=owner, task_ids=task):
                text = json.dumps(line, ensure_ascii=False)
                if out is None:
                    sys.stdout.write(text + "\n")
                else:
                    (out / _file_name(line["task"]["id"])).write_text(text + "\n")
                count += 1
                if count % PROGRESS_EVERY == 0:
                    typer.echo(f"export: {count} conversations", err=True)
            sys.stdout.flush()
            return count

    count = run(body())
    typer.echo(f"export: {count} conversations", err=True)
