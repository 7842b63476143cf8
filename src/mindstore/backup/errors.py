"""Typed errors of backup, verify, restore and erase, each with its own CLI exit code.

All derive from `mindstore.errors.BackupError` (exit code 8, used for plain refusals such
as "the destination already exists"). `verify` raises exactly one of the first four:

====  =======================  ==========================================================
code  class                    meaning
====  =======================  ==========================================================
10    `BackupCorrupt`          content does not match the manifest or breaks the format's
                               rules: sha256 mismatch (a flipped byte, a reordered or
                               recompressed file), a record that does not parse, wrong
                               counts, an extra file, a tar member name twice, an edited
                               manifest (checksum), a record outside the manifest's scope
                               (e.g. another tenant), a record of a shape mindstore does
                               not write (an id outside the id alphabets or not a string,
                               a ``$`` top-level key, a task header that disagrees with
                               its messages; `mindstore.backup.shape`), a dangling
                               cross-reference (a dialog node or payload whose task is not
                               in the backup, a payload a message refers to that is not in
                               it), a duplicate `_id`
11    `BackupIncomplete`       something is missing: no manifest, a listed file missing,
                               a file cut short (truncated: its gzip data has no end)
12    `BackupUnreadable`       the path cannot be read as a backup at all: missing,
                               permission denied, neither a directory nor a tar
                               archive, a damaged tar, not a mindstore backup
13    `BackupVersionError`     a mindstore backup in a format version or an encoding
                               (compression, record format) this release cannot read
14    `RestoreConflict`        restore refused: ``mode="fail"`` met a differing document,
                               or an `_id` already belongs to another tenant
15    `EraseNotConfirmed`      erase was not confirmed (non-interactive run without
                               ``--yes``)
====  =======================  ==========================================================
"""

from __future__ import annotations

from mindstore.errors import BackupError

__all__ = [
    "BackupCorrupt",
    "BackupError",
    "BackupIncomplete",
    "BackupUnreadable",
    "BackupVersionError",
    "EraseNotConfirmed",
    "RestoreConflict",
]


class BackupCorrupt(BackupError):
    """The backup's content does not match its manifest, or breaks the format's rules."""

    exit_code = 10


class BackupIncomplete(BackupError):
    """A part of the backup is missing or cut short (truncated file, missing file)."""

    exit_code = 11


class BackupUnreadable(BackupError):
    """The path cannot be opened or read as a mindstore backup."""

    exit_code = 12


class BackupVersionError(BackupError):
    """A mindstore backup whose format version or encoding this release does not read."""

    exit_code = 13


class RestoreConflict(BackupError):
    """Restore refused before writing: a conflicting document (mode "fail") or an id
    that belongs to another tenant."""

    exit_code = 14


class EraseNotConfirmed(BackupError):
    """Erase needs confirmation: pass ``--yes`` (or answer the prompt)."""

    exit_code = 15
