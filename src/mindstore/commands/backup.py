"""`mindstore backup | verify | restore | erase`: the CLI over `mindstore.backup`.

Exit codes (besides the common ones of `mindstore.commands.common`): 8 backup refused (e.g. the
destination exists), 10 corrupt, 11 incomplete, 12 unreadable, 13 wrong format
version, 14 restore conflict, 15 erase not confirmed. See docs/backup.md.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from mindstore.commands.arguments import time_bound
from mindstore.commands.common import (
    check_writable,
    note_unknown_tenant,
    open_store,
    require_tenant,
    run,
    write_receipt,
)
from mindstore.commands.output import console, echo_json, progress_bar
from mindstore.commands.sanitize import plain, terminal_text

if TYPE_CHECKING:
    from mindstore.backup import EraseReceipt
    from mindstore.backup.retention import RetentionReceipt
    from mindstore.store import Store


PREVIEW_IDS = 10
"""Ids per collection that `erase --dry-run` names on stderr."""


class RestoreMode(str, Enum):
    skip = "skip"
    overwrite = "overwrite"
    fail = "fail"


class _Out:
    """Plain lines and tables on stdout; paths and ids are escaped, never markup."""

    def __init__(self) -> None:
        self._console = console(width=120)

    def print(self, item: Any) -> None:
        self._console.print(terminal_text(item) if isinstance(item, str) else item)


def _stdout() -> _Out:
    return _Out()


def _interactive() -> bool:
    """Can erase ask for confirmation? (stdin and stdout are a terminal)"""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _counts_table(title: str, rows: dict[str, dict[str, Any]], columns: list[str]) -> Table:
    table = Table(title=plain(title), title_justify="left")
    table.add_column("collection")
    for column in columns:
        table.add_column(column, justify="right")
    for name, values in rows.items():
        table.add_row(plain(name), *(plain(values.get(c, "")) for c in columns))
    return table


def _preview_ids(counts: dict[str, int], ids: dict[str, list[Any]]) -> None:
    """A dry run on stderr: per collection, how many documents would go and the first
    `PREVIEW_IDS` of their ids (the JSON receipt on stdout lists more: `ids`)."""
    for name, count in counts.items():
        if not count:
            continue
        shown = [str(i) for i in ids.get(name, [])[:PREVIEW_IDS]]
        more = f", ... ({count - len(shown)} more)" if count > len(shown) else ""
        typer.echo(
            terminal_text(f"would erase {count} from {name}: {', '.join(shown)}{more}"), err=True
        )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""

    @app.command("backup")
    def backup_command(
        ctx: typer.Context,
        dest: Path = typer.Argument(..., help="New directory (or .tar file) to write."),
        tenant: str | None = typer.Option(None, "--tenant", help="Only this tenant."),
        owner: str | None = typer.Option(None, "--owner", help="Only this owner (needs --tenant)."),
        task: list[str] | None = typer.Option(
            None, "--task", help="Only these tasks (repeat): tenant/id, or a bare id with --tenant."
        ),
        since: str | None = typer.Option(
            None, "--since", help="Only tasks updated at or after this ISO 8601 time (incremental)."
        ),
        tar: bool = typer.Option(
            False, "--tar", help="Write one tar archive instead of a directory."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the manifest as JSON."),
    ) -> None:
        """Back up tasks with their dialog nodes and payloads (gzip JSONL + manifest)."""
        from mindstore.backup import backup

        async def body() -> Any:
            async with open_store(ctx, save=False) as store:
                if tenant is not None:
                    await note_unknown_tenant(store, require_tenant(tenant))
                with progress_bar() as progress:
                    return await backup(
                        store,
                        dest,
                        tenant=tenant,
                        owner=owner,
                        task_ids=task or None,
                        since=since,
                        tar=tar,
                        progress=progress,
                    )

        manifest = run(body())
        if as_json:
            echo_json(manifest.to_dict())
            return
        console = _stdout()
        console.print(f"backup written to {manifest.path} ({manifest.scope.describe()})")
        console.print(
            _counts_table(
                "",
                {
                    n: {"records": e.count, "bytes": e.bytes}
                    for n, e in manifest.collections.items()
                },
                ["records", "bytes"],
            )
        )
        console.print(
            f"{manifest.messages} messages, tenants: {', '.join(manifest.tenants) or '-'}"
        )
        if manifest.missing_task_ids:
            console.print(f"not found: {', '.join(manifest.missing_task_ids)}")

    @app.command("verify")
    def verify_command(
        backup_path: Path = typer.Argument(..., metavar="BACKUP", help="Backup directory or tar."),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    ) -> None:
        """Check a backup: hashes, the shape of every record, references, counts, scope.

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
        console.print(
            f"ok: {report.path} ({report.container}, format {report.manifest.format_version}, "
            f"{report.manifest.scope.describe()})"
        )
        console.print(
            ", ".join(f"{n} {c}" for n, c in report.counts.items())
            + f", {report.messages} messages"
        )
        if report.external_parents:
            console.print(
                f"{report.external_parents} dialog node(s) fork from a task outside this backup"
            )

    @app.command("restore")
    def restore_command(
        ctx: typer.Context,
        backup_path: Path = typer.Argument(..., metavar="BACKUP", help="Backup directory or tar."),
        mode: RestoreMode = typer.Option(
            RestoreMode.skip,
            "--mode",
            help="When a stored document differs: skip, overwrite or fail.",
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
                    return await restore(
                        store,
                        backup_path,
                        mode=mode.value,
                        as_tenant=as_tenant,
                        dry_run=dry_run,
                        progress=progress,
                    )

        report = run(body())
        if as_json:
            echo_json(report.to_dict())
            return
        console = _stdout()
        what = "dry run: would restore" if dry_run else "restored"
        target = f" as tenant {as_tenant}" if as_tenant else ""
        console.print(f"{what} {report.path}{target} (mode {report.mode})")
        console.print(
            _counts_table(
                "",
                {**report.counts, "total": report.totals},
                ["inserted", "overwritten", "skipped", "unchanged"],
            )
        )

    @app.command("erase")
    def erase_command(
        ctx: typer.Context,
        tenant: str | None = typer.Option(None, "--tenant", help="Tenant to erase from."),
        owner: str | None = typer.Option(None, "--owner", help="Erase this owner's data only."),
        task: str | None = typer.Option(None, "--task", help="Erase this task only."),
        before: str | None = typer.Option(
            None,
            "--before",
            help="Retention: erase tasks not updated since this time (ISO 8601 or epoch seconds).",
        ),
        apply_policy: bool = typer.Option(
            False, "--apply-policy", help="Retention: erase what the tenant's stored policy says."
        ),
        dry_run: bool = typer.Option(
            False, "--dry-run", help="Erase nothing; list what would be erased (ids and counts)."
        ),
        yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
        receipt: Path | None = typer.Option(
            None, "--receipt", help="Also write the JSON receipt here."
        ),
    ) -> None:
        """Erase a tenant's, an owner's or a task's data; prints a JSON receipt.

        Without --yes it asks for confirmation on a terminal, and refuses (exit 15) when
        it cannot ask.
        """
        from mindstore.backup import EraseNotConfirmed, erase, retention
        from mindstore.errors import BackupError, ValidationError

        async def sweep(store: Store, name: str, dry: bool) -> EraseReceipt | RetentionReceipt:
            if apply_policy:
                return await retention.apply_policy(store, name, dry_run=dry)
            if cutoff is not None:
                return await retention.erase_before(
                    store, name, before=cutoff, owner=owner, dry_run=dry
                )
            return await erase(store, name, owner=owner, task_id=task, dry_run=dry)

        cutoff = None

        async def body() -> Any:
            nonlocal cutoff
            name = require_tenant(tenant)
            cutoff = time_bound(before, "--before")  # an error names the option
            if owner is not None and task is not None:
                raise ValidationError("pass --owner or --task, not both")
            if sum(x for x in (before is not None, apply_policy, task is not None)) > 1:
                raise ValidationError("pass one of --before, --apply-policy and --task")
            if apply_policy and owner is not None:
                raise ValidationError("--apply-policy applies to the whole tenant: drop --owner")
            if not (dry_run or yes or _interactive()):
                raise EraseNotConfirmed(
                    "erase needs confirmation: pass --yes (or --dry-run to see what it would erase)"
                )
            if receipt is not None:  # before anything is erased: the receipt must land
                check_writable(receipt, "receipt file", BackupError)
            async with open_store(ctx, save=not dry_run, create=False) as store:
                await note_unknown_tenant(store, name)
                if not (dry_run or yes):
                    preview = await sweep(store, name, True)
                    counts = ", ".join(f"{c} {n}" for n, c in preview.counts.items())
                    if not typer.confirm(
                        terminal_text(
                            f"erase {counts} of tenant {name}"
                            + (f" owner {owner}" if owner else "")
                            + (f" task {task}" if task else "")
                            + "?"
                        )
                    ):
                        raise EraseNotConfirmed("erase cancelled: nothing was erased")
                return await sweep(store, name, dry_run)

        result = run(body())
        data = result.to_dict()
        if result.dry_run:
            _preview_ids(result.counts, data.get("ids") or {})
        echo_json(data)
        if receipt is not None:
            write_receipt(receipt, data, "erased", BackupError)
        if result.dangling_total:
            typer.echo(
                f"warning: {result.dangling_total} remaining dialog node(s) now have a "
                f"missing parent (listed in the receipt)",
                err=True,
            )
