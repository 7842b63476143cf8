"""Backup, verify, restore and erase (async API; the CLI is `mindstore.commands.backup`).

::

    from mindstore.backup import backup, verify, restore, erase

    manifest = await backup(store, "backups/acme-2026-11-22", tenant="acme")
    report = await verify("backups/acme-2026-11-22")          # raises a typed error
    result = await restore(store, "backups/acme-2026-11-22", mode="skip")
    receipt = await erase(store, "acme", owner="user-7", dry_run=True)

The format is documented in docs/backup.md; the errors and their exit codes in
`mindstore.backup.errors`.
"""

from .codec import decode_line, encode_line
from .erase import EraseReceipt, erase, ids_digest
from .errors import (
    BackupCorrupt,
    BackupError,
    BackupIncomplete,
    BackupUnreadable,
    BackupVersionError,
    EraseNotConfirmed,
    RestoreConflict,
)
from .export import backup, make_scope
from .manifest import FORMAT, FORMAT_VERSION, Manifest, Scope
from .restore import RestoreReport, restore
from .verify import VerifyReport, verify

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "BackupCorrupt",
    "BackupError",
    "BackupIncomplete",
    "BackupUnreadable",
    "BackupVersionError",
    "EraseNotConfirmed",
    "EraseReceipt",
    "Manifest",
    "RestoreConflict",
    "RestoreReport",
    "Scope",
    "VerifyReport",
    "backup",
    "decode_line",
    "encode_line",
    "erase",
    "ids_digest",
    "make_scope",
    "restore",
    "verify",
]
