"""`mindstore keys rotate | reencrypt | shred | status | migrate --tenant T` (docs/encryption.md).

The keys come from `--key-vault DIR` (or `MINDSTORE_KEY_VAULT`: the tenants' own keys) and
`--master-key FILE` (or `MINDSTORE_MASTER_KEY_FILE`: 32 raw bytes or 64 hex digits, the
key the vault's entries are wrapped with), given here or before the command; `status`
and `shred` work without the master key (a lost master key must not stop an erasure).
`migrate` re-wraps data keys wrapped by the master key alone (the format before
per-tenant keys) with each tenant's key in the vault. `rotate --reencrypt` also runs the
re-encryption sweep (resumable: run it again after an interruption), with progress on
stderr. `shred` destroys the
tenant's data keys: it asks for confirmation (or takes `--yes`; without a terminal and
without `--yes` it refuses, exit 15), and prints a JSON receipt (`--receipt FILE` keeps
a copy, written before anything is destroyed, as `erase` does).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mindstore.commands.common import (
    build_keyring,
    check_writable,
    open_store,
    require_tenant,
    run,
    settings,
    write_receipt,
)
from mindstore.commands.output import echo_json
from mindstore.commands.sanitize import terminal_text

if TYPE_CHECKING:  # the CLI imports the crypto package only when a command runs
    from mindstore.crypto import Keyring
    from mindstore.crypto.sweep import SweepProgress
    from mindstore.store import Store

keys_app = typer.Typer(
    help="A tenant's data keys: rotate, shred (crypto-shredding), status.", no_args_is_help=True
)

Tenant = Annotated[str | None, typer.Option("--tenant", help="The tenant whose keys to use.")]
MasterKeyFile = Annotated[
    Path | None,
    typer.Option(
        "--master-key",
        envvar="MINDSTORE_MASTER_KEY_FILE",
        help="The master key file (32 raw bytes or 64 hex digits).",
    ),
]
KeyVaultDir = Annotated[
    Path | None,
    typer.Option(
        "--key-vault",
        envvar="MINDSTORE_KEY_VAULT",
        help="The key vault directory holding each tenant's own key.",
    ),
]


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(keys_app, name="keys")


class _NoMasterKey:
    """Stands in for the master key where none is needed (status, shred: a lost master
    key must not stop a shred)."""

    key_id = "none"

    async def wrap(self, data_key: bytes, context: bytes) -> bytes:
        raise self._missing()

    async def unwrap(self, wrapped: bytes, context: bytes) -> bytes:
        raise self._missing()

    @staticmethod
    def _missing() -> Exception:
        from mindstore.errors import ConfigurationError

        return ConfigurationError(
            "pass --master-key FILE (or set MINDSTORE_MASTER_KEY_FILE), and the vault of "
            "the tenants' keys with --key-vault DIR (or MINDSTORE_KEY_VAULT)"
        )


def _interactive() -> bool:
    """Can shred ask for confirmation? (stdin and stdout are a terminal)"""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _keyring(
    ctx: typer.Context, master_key: Path | None, key_vault: Path | None, store: Store, *,
    required: bool = True,
) -> Keyring:  # fmt: skip
    """The keyring the options name (this command's, else the global ones)."""
    from mindstore.crypto import Keyring

    options = settings(ctx)
    master_key = master_key or options.master_key
    key_vault = key_vault or options.key_vault
    if required and master_key is None:
        raise _NoMasterKey._missing()
    from mindstore.backup.shred_clear import shred_eraser

    keyring = build_keyring(master_key, key_vault) or Keyring(_NoMasterKey())
    return keyring.bind(store.database, store.resilience, shred_eraser(store))


@keys_app.command("status")
def status_command(
    ctx: typer.Context, tenant: Tenant = None, master_key: MasterKeyFile = None,
    key_vault: KeyVaultDir = None,
) -> None:  # fmt: skip
    """The tenant's key versions, the current one, and whether they were shredded (JSON)."""

    async def body() -> Any:
        name = require_tenant(tenant)
        async with open_store(ctx, save=False) as store:
            keyring = _keyring(ctx, master_key, key_vault, store, required=False)
            return (await keyring.status(name)).as_dict()

    echo_json(run(body()))


def _progress(state: SweepProgress) -> None:
    """The re-encryption sweep's progress, on stderr (stdout holds the JSON result)."""
    typer.echo(f"re-encrypting: {state.tasks_done}/{state.tasks_total} tasks", err=True)


@keys_app.command("rotate")
def rotate_command(
    ctx: typer.Context,
    tenant: Tenant = None,
    master_key: MasterKeyFile = None,
    key_vault: KeyVaultDir = None,
    reencrypt: Annotated[
        bool, typer.Option("--reencrypt", help="Then re-seal all stored content with the new key.")
    ] = False,
) -> None:
    """Add a data key version: new writes use it, old content stays readable."""

    async def body() -> Any:
        name = require_tenant(tenant)
        async with open_store(ctx, save=True, create=False) as store:
            keyring = _keyring(ctx, master_key, key_vault, store)
            version = await keyring.rotate(name)
            result: dict[str, Any] = {"tenant": name, "version": version}
            if reencrypt:
                swept = await keyring.reencrypt(name, progress=_progress)
                result["reencrypted"] = {"tasks": swept.tasks_done, "values": swept.values_sealed}
            return result

    echo_json(run(body()))


@keys_app.command("reencrypt")
def reencrypt_command(
    ctx: typer.Context,
    tenant: Tenant = None,
    master_key: MasterKeyFile = None,
    key_vault: KeyVaultDir = None,
    restart: Annotated[
        bool, typer.Option("--restart", help="Start over instead of resuming.")
    ] = False,
) -> None:
    """Re-seal the tenant's stored content with its newest key (resumes where it stopped)."""

    async def body() -> Any:
        name = require_tenant(tenant)
        async with open_store(ctx, save=True, create=False) as store:
            swept = await _keyring(ctx, master_key, key_vault, store).reencrypt(
                name, progress=_progress, restart=restart
            )
            return {
                "tenant": name, "version": swept.version, "tasks": swept.tasks_done,
                "values": swept.values_sealed, "resumed_after": swept.resumed_after,
            }  # fmt: skip

    echo_json(run(body()))


@keys_app.command("shred")
def shred_command(
    ctx: typer.Context,
    tenant: Tenant = None,
    master_key: MasterKeyFile = None,
    key_vault: KeyVaultDir = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    receipt: Annotated[
        Path | None, typer.Option("--receipt", help="Also write the JSON receipt here.")
    ] = None,
) -> None:
    """Destroy the tenant's data keys: its content, in the database and in every backup,
    can never be read again. Prints a JSON receipt."""
    from mindstore.backup import EraseNotConfirmed
    from mindstore.errors import BackupError

    async def body() -> dict[str, Any]:
        name = require_tenant(tenant)
        if not (yes or _interactive()):
            raise EraseNotConfirmed("shred needs confirmation: pass --yes")
        if receipt is not None:  # before anything is destroyed: the receipt must land
            check_writable(receipt, "receipt file", BackupError)
        async with open_store(ctx, save=True, create=False) as store:
            keyring = _keyring(ctx, master_key, key_vault, store, required=False)
            before = await keyring.status(name)
            if not yes and not typer.confirm(
                terminal_text(
                    f"shred the {len(before.versions)} data key(s) of tenant {name}? Its "
                    "content becomes unreadable everywhere, backups included"
                )
            ):
                raise EraseNotConfirmed("shred cancelled: nothing was destroyed")
            destroyed = await keyring.shred(name)
            after = await keyring.status(name)
            return {
                "action": "shred",
                "tenant": name,
                "keys_destroyed": destroyed,
                "versions_destroyed": list(before.versions),
                "shredded_at": (after.shredded_at or datetime.now(UTC)).isoformat(),
                "master_key_id": after.master_key_id,
                "kek": after.kek,
                "backups": "every copy (snapshots, dumps, replicas, mindstore backups) holds "
                "this tenant's data keys wrapped by its destroyed key only"
                if after.kek == "destroyed"
                else "keys wrapped by a shared master key: copies made before this shred "
                "still hold them; migrate to a key vault (keys migrate)",
            }

    data = run(body())
    echo_json(data)
    if receipt is not None:
        write_receipt(receipt, data, "shredded", BackupError)


@keys_app.command("migrate")
def migrate_command(
    ctx: typer.Context,
    tenant: Tenant = None,
    master_key: MasterKeyFile = None,
    key_vault: KeyVaultDir = None,
) -> None:
    """Re-wrap data keys wrapped by the master key alone with each tenant's own key in the
    vault (no content re-encrypted; resumable; every tenant without --tenant)."""

    async def body() -> Any:
        if (key_vault or settings(ctx).key_vault) is None:
            raise _NoMasterKey._missing()
        async with open_store(ctx, save=True, create=False) as store:
            keyring = _keyring(ctx, master_key, key_vault, store)
            report = await keyring.migrate(tenant)
            for name, count in sorted(report.rewrapped.items()):
                typer.echo(f"migrated: {name}: {count} data key(s) re-wrapped", err=True)
            return {"rewrapped": report.rewrapped, "already": report.already}

    echo_json(run(body()))
