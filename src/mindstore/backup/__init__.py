"""Backup, verify, restore and erase (async API; the CLI is `mindstore.commands.backup`).

::

    from mindstore.backup import backup, verify, restore, erase

    manifest = await backup(store, "backups/acme-2026-11-22", tenant="acme")
    report = await verify("backups/acme-2026-11-22")          # raises a typed error
    result = await restore(store, "backups/acme-2026-11-22", mode="skip")
    receipt = await erase(store, "acme", owner="user-7", dry_run=True)

Every collection mindstore writes is covered (`mindstore.registry`: tasks and what follows
them, LangGraph threads, agents, policies). The format is documented in docs/backup.md;
the errors and their exit codes in `mindstore.backup.errors`. What a record must look like
is `mindstore.backup.shape` (`shape_units` for threads, agents, policies); how restore
keys records (per-tenant task keys, ``as_tenant``) is `mindstore.backup.rekey`.
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
from .rekey import moved_payload_id, rekey_node, rekey_payload, rekey_record, rekey_task
from .restore import RestoreReport, restore
from .shape import ShapeError, check_node, check_payload, check_task
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
    "ShapeError",
    "VerifyReport",
    "backup",
    "check_node",
    "check_payload",
    "check_task",
    "decode_line",
    "encode_line",
    "erase",
    "ids_digest",
    "make_scope",
    "moved_payload_id",
    "rekey_node",
    "rekey_payload",
    "rekey_record",
    "rekey_task",
    "restore",
    "verify",
]
