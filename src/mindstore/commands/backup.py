"""`mindstore backup | verify | restore | erase`: the CLI over `mindstore.backup`.

Exit codes (besides the common ones of `mindstore.cli`): 8 backup refused (e.g. the
destination exists), 10 corrupt, 11 incomplete, 12 unreadable, 13 wrong format
version, 14 restore conflict, 15 erase not confirmed. See docs/backup.md.
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from mindstore.cli import open_store, require_tenant, run
from mindstore.commands.output import echo_json, progress_bar


class RestoreMode(str, Enum):
    skip = "skip"
    overwrite = "overwrite"
    fail = "fail"


def _stdout() -> Console:
    return Console(width=120, highlight=False, soft_wrap=True)


def _interactive() -> bool:
    """Can erase ask for confirmation? (stdin and stdout are a terminal)"""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _counts_table(title: str, rows: dict[str, dict[str, Any]], columns: list[str]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("collection")
    for column in columns:
        table.add_column(column, justify="right")
    for name, values in rows.items():
        table.add_row(name, *(str(values.get(c, "")) for c in columns))
    return table


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""

    @app.command("backup")
    def backup_command(
        ctx: typer.Context,
        dest: Path = typer.Argument(..., help="New directory (or .tar file) to write."),
        tenant: str | None = typer.Option(None, "--tenant", help="Only this tenant."),
        owner: str | None = typer.Option(None, "--owner", help="Only this owner (needs --tenant)."),
        task: list[str] | None = typer.Option(None, "--task", help="Only these task ids (repeat)."),
        since: str | None = typer.Option(
            None, "--since", help="Only tasks updated at or after this ISO 8601 time (incremental)."
        ),
        tar: bool = typer.Option(False, "--tar", help="Write one tar archive instead of a directory."),
        as_json: bool = typer.Option(False, "--json", help="Print the manifest as JSON."),
    ) -> None:
        """Back up tasks with their dialog nodes and payloads (gzip JSONL + manifest)."""
        from mindstore.backup import backup

        async def body() -> Any:
            async with open_store(ctx, save=False) as store:
                with progress_bar() as progress:
                    return await backup(store, dest, tenant=tenant, owner=owner,
                                        task_ids=task or None, since=since, tar=tar,
                                        progress=progress)

        manifest = run(body())
        if as_json:
            echo_json(manifest.to_dict())
            return
        console = _stdout()
        console.print(f"backup written to {manifest.path} ({manifest.scope.describe()})")
        console.print(_counts_table(
            "", {n: {"records": e.count, "bytes": e.bytes} for n, e in manifest.collections.items()},
            ["records", "bytes"]))
        console.print(f"{manifest.messages} messages, tenants: {', '.join(manifest.tenants) or '-'}")
        if manifest.missing_task_ids:
            console.print(f"not found: {', '.join(manifest.missing_task_ids)}")

    @app.command("verify")
    def verify_command(
        backup_path: Path = typer.Argument(..., metavar="BACKUP", help="Backup directory or tar."),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    ) -> None:
        """Check a backup: hashes, every record, counts, cross-references, scope.

        Exit codes: 0 intact, 10 corrupt, 11 incomplete, 12 unreadable, 13 wrong format
        version.
        """
        from mindstore.backup import verify

        async def body() -> Any:
            with progress_bar() as progress:
                return await verify(backup_path, progress=progress)

        report = run(body())
        if as_json:
            echo_json(report.to_dict())
            return
        console = _stdout()
        console.print(f"ok: {report.path} ({report.container}, format {report.manifest.format_version}, "
                      f"{report.manifest.scope.describe()})")
        console.print(", ".join(f"{n} {c}" for n, c in report.counts.items())
                      + f", {report.messages} messages")
        if report.external_parents:
            console.print(f"{report.external_parents} dialog node(s) fork from a task outside "
                          f"this backup")

    @app.command("restore")
    def restore_command(
        ctx: typer.Context,
        backup_path: Path = typer.Argument(..., metavar="BACKUP", help="Backup directory or tar."),
        mode: RestoreMode = typer.Option(
            RestoreMode.skip, "--mode", help="When a stored document differs: skip, overwrite or fail."
        ),
        as_tenant: str | None = typer.Option(
            None, "--as-tenant", help="Restore a one-tenant backup into this tenant."
        ),
        dry_run: bool = typer.Option(False, "--dry-run", help="Only report what would be written."),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    ) -> None:
        """Restore a backup (verified first; idempotent). Exit 14 on a conflict."""
        from mindstore.backup import restore

        async def body() -> Any:
            async with open_store(ctx, save=not dry_run) as store:
                with progress_bar() as progress:
                    return await restore(store, backup_path, mode=mode.value,
                                         as_tenant=as_tenant, dry_run=dry_run, progress=progress)

        report = run(body())
        if as_json:
            echo_json(report.to_dict())
            return
        console = _stdout()
        what = "dry run: would restore" if dry_run else "restored"
        target = f" as tenant {as_tenant}" if as_tenant else ""
        console.print(f"{what} {report.path}{target} (mode {report.mode})")
        console.print(_counts_table("", {**report.counts, "total": report.totals},
                                    ["inserted", "overwritten", "skipped", "unchanged"]))

    @app.command("erase")
    def erase_command(
        ctx: typer.Context,
        tenant: str | None = typer.Option(None, "--tenant", help="Tenant to erase from."),
        owner: str | None = typer.Option(None, "--owner", help="Erase this owner's data only."),
        task: str | None = typer.Option(None, "--task", help="Erase this task only."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Report what would be erased."),
        yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
        receipt: Path | None = typer.Option(None, "--receipt", help="Also write the JSON receipt here."),
    ) -> None:
        """Erase a tenant's, an owner's or a task's data; prints a JSON receipt.

        Without --yes it asks for confirmation on a terminal, and refuses (exit 15) when
        it cannot ask.
        """
        from mindstore.backup import EraseNotConfirmed, erase
        from mindstore.errors import ValidationError

        async def body() -> Any:
            name = require_tenant(tenant)
            if owner is not None and task is not None:
                raise ValidationError("pass --owner or --task, not both")
            if not (dry_run or yes or _interactive()):
                raise EraseNotConfirmed(
                    "erase needs confirmation: pass --yes (or --dry-run to see what it would "
                    "erase)"
                )
            async with open_store(ctx, save=not dry_run) as store:
                if not (dry_run or yes):
                    preview = await erase(store, name, owner=owner, task_id=task, dry_run=True)
                    counts = ", ".join(f"{c} {n}" for n, c in preview.counts.items())
                    if not typer.confirm(f"erase {counts} of tenant {name}"
                                         + (f" owner {owner}" if owner else "")
                                         + (f" task {task}" if task else "") + "?"):
                        raise EraseNotConfirmed("erase cancelled: nothing was erased")
                return await erase(store, name, owner=owner, task_id=task, dry_run=dry_run)

        result = run(body())
        data = result.to_dict()
        if receipt is not None:
            receipt.parent.mkdir(parents=True, exist_ok=True)
            receipt.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        echo_json(data)
        if result.dangling_total:
            typer.echo(f"warning: {result.dangling_total} remaining dialog node(s) now have a "
                       f"missing parent (listed in the receipt)", err=True)
