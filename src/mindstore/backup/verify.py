"""`verify(path)`: prove a backup is intact, or say precisely (and with which code) why not.

Checks, in order: the container opens (else `BackupUnreadable`); `manifest.json` exists
(else `BackupIncomplete`), is a mindstore backup (`BackupUnreadable`) of a readable format
version (`BackupVersionError`), and is unmodified (its own checksum; `BackupCorrupt`); the
backup holds exactly the files the manifest lists (missing: `BackupIncomplete`; extra:
`BackupCorrupt`). Then each file, streamed once: its size (shorter than recorded:
`BackupIncomplete`, i.e. truncated), its sha256, every record parses, the record count,
and per record: a string `tenant` within the scope and tenant list of the manifest,
unique `_id`s, tasks matching the scope's owner / task ids / since, every dialog node's
task (`_id`) and every payload's task (`task_id`) present in the backup under the same
tenant (`BackupCorrupt`).

Memory: one batch of records, plus one entry per task (id -> tenant) and per payload id
for the cross-reference and duplicate checks; never the messages.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import gzip
import os
import tarfile
import time
import zlib
from collections.abc import Awaitable, Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

import bson

from mindstore.documents import DIALOG_NODES, TASKS
from mindstore.ids import task_key as stored_key

from .codec import RecordError, decode_line
from .container import BackupReader, HashingReader, open_backup
from .errors import BackupCorrupt, BackupError, BackupIncomplete, BackupUnreadable
from .manifest import COLLECTIONS, MANIFEST_NAME, Manifest, format_time

__all__ = ["Progress", "VerifyReport", "read_records", "scan", "verify"]

#: ``progress(step, done, total)``: e.g. ``("verify tasks", 120, 1000)``.
Progress = Callable[[str, int, "int | None"], None]
BatchHandler = Callable[[str, list[dict[str, Any]]], Awaitable[None]]

BATCH_RECORDS = 200
BATCH_BYTES = 2 << 20


@dataclass
class VerifyReport:
    """A backup that passed every check."""

    path: str
    container: str  # "directory" | "tar"
    manifest: Manifest
    counts: dict[str, int]
    messages: int
    bytes: int
    tenants: list[str]
    external_parents: int = 0  # dialog nodes whose parent task is not in this backup
    elapsed_s: float = 0.0
    ok: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "path": self.path,
            "container": self.container,
            "format_version": self.manifest.format_version,
            "mindstore_version": self.manifest.mindstore_version,
            "created_at": format_time(self.manifest.created_at),
            "scope": self.manifest.scope.to_dict(),
            "counts": dict(self.counts),
            "messages": self.messages,
            "bytes": self.bytes,
            "tenants": list(self.tenants),
            "external_parents": self.external_parents,
            "elapsed_s": round(self.elapsed_s, 3),
        }


def _key(value: Any) -> Hashable:
    """A hashable key for an `_id` (ids are strings in mindstore; others are encoded)."""
    if type(value) is str:
        return value
    try:
        return bson.encode({"": value})
    except Exception:
        return repr(value)


def read_manifest(reader: BackupReader) -> Manifest:
    names = reader.names()
    if MANIFEST_NAME not in names:
        raise BackupIncomplete(f"{reader.path} has no {MANIFEST_NAME} (not a finished backup)")
    try:
        raw = reader.read_bytes(MANIFEST_NAME)
    except BackupError:
        raise
    except Exception as exc:
        raise BackupUnreadable(f"cannot read {MANIFEST_NAME}: {exc}") from exc
    manifest = Manifest.from_bytes(raw)
    manifest.path = str(reader.path)
    expected = {MANIFEST_NAME, *(entry.file for entry in manifest.collections.values())}
    missing = sorted(expected - set(names))
    extra = sorted(set(names) - expected)
    if missing:
        raise BackupIncomplete(f"missing from the backup: {', '.join(missing)}")
    if extra:
        raise BackupCorrupt(f"files not listed in the manifest: {', '.join(extra)}")
    return manifest


def check_file(reader: BackupReader, manifest: Manifest, name: str) -> None:
    """Size and sha256 of one collection file against the manifest (no parsing)."""
    entry = manifest.collections[name]
    try:
        actual_size = reader.size(entry.file)
    except OSError as exc:
        raise BackupUnreadable(f"cannot read {entry.file}: {exc}") from exc
    if actual_size < entry.bytes:
        raise BackupIncomplete(f"{entry.file} is truncated: {actual_size} of {entry.bytes} bytes")
    if actual_size > entry.bytes:
        raise BackupCorrupt(
            f"{entry.file} has {actual_size} bytes, the manifest says {entry.bytes}"
        )
    raw = reader.open(entry.file)
    hashing = HashingReader(raw)
    try:
        hashing.drain()
    except (OSError, EOFError, tarfile.TarError) as exc:  # e.g. a tar cut short
        raise BackupIncomplete(f"{entry.file} cannot be read to its end: {exc}") from exc
    finally:
        raw.close()
    if hashing.size < entry.bytes:
        raise BackupIncomplete(f"{entry.file} is truncated: {hashing.size} of {entry.bytes} bytes")
    if hashing.sha256.hexdigest() != entry.sha256:
        raise BackupCorrupt(f"{entry.file}: sha256 does not match the manifest")


def read_records(reader: BackupReader, manifest: Manifest, name: str) -> Iterator[tuple[int, dict[str, Any], int]]:
    """Yield ``(line_number, record, line_bytes)`` of one collection file, checking that every line
    parses and the count and sha256 match (the file may have changed since `check_file`).
    """
    entry = manifest.collections[name]
    raw = reader.open(entry.file)
    hashing = HashingReader(raw)
    count = 0
    try:
        # HashingReader reads forward only; GzipFile's stub also wants seek(), used to rewind
        with gzip.GzipFile(fileobj=hashing, mode="rb") as lines:  # type: ignore[call-overload]
            lineno = 0
            try:
                for lineno, line in enumerate(lines, start=1):
                    try:
                        record = decode_line(line)
                    except RecordError as exc:
                        raise BackupCorrupt(f"{entry.file} line {lineno}: {exc}") from exc
                    count += 1
                    yield lineno, record, len(line)
            except (OSError, EOFError, zlib.error) as exc:
                raise BackupCorrupt(
                    f"{entry.file}: damaged gzip data after line {lineno} ({exc})"
                ) from exc
            hashing.drain()
    except tarfile.TarError as exc:
        raise BackupIncomplete(f"{entry.file} cannot be read to its end: {exc}") from exc
    finally:
        raw.close()
    if hashing.sha256.hexdigest() != entry.sha256:
        raise BackupCorrupt(f"{entry.file} changed while it was being read")
    if count != entry.count:
        raise BackupCorrupt(f"{entry.file} holds {count} records, the manifest says {entry.count}")


@dataclass
class _State:
    manifest: Manifest
    tasks: dict[Hashable, int] = field(default_factory=dict)  # task id -> tenant index
    seen: set[Hashable] = field(default_factory=set)  # ids of the current collection
    messages: int = 0
    external_parents: int = 0
    task_ids: frozenset[Hashable] | None = None


def _check(state: _State, name: str, file: str, lineno: int, record: dict[str, Any],
           tenant_index: dict[str, int]) -> None:
    manifest = state.manifest
    scope = manifest.scope
    where = f"{file} line {lineno}"
    if "_id" not in record:
        raise BackupCorrupt(f"{where}: record has no _id")
    tenant = record.get("tenant")
    if not isinstance(tenant, str):
        raise BackupCorrupt(f"{where}: record has no tenant")
    if (scope.tenant is not None and tenant != scope.tenant) or tenant not in tenant_index:
        raise BackupCorrupt(
            f"{where}: record of tenant {tenant!r} is outside the backup's scope "
            f"({scope.describe()}; tenants {manifest.tenants})"
        )
    key = _key(record["_id"])
    seen = state.tasks if name == TASKS else state.seen
    if key in seen:
        raise BackupCorrupt(f"{where}: duplicate _id {record['_id']!r}")
    if name != TASKS:
        state.seen.add(key)
    if name == TASKS:
        if scope.owner is not None and record.get("owner") != scope.owner:
            raise BackupCorrupt(f"{where}: task of owner {record.get('owner')!r} is outside "
                                f"the backup's scope ({scope.describe()})")
        if state.task_ids is not None and key not in state.task_ids:
            raise BackupCorrupt(f"{where}: task {record['_id']!r} is outside the backup's "
                                f"scope ({scope.describe()})")
        if scope.since is not None:
            updated = record.get("updated_at")
            if not isinstance(updated, _dt.datetime) or updated < scope.since:
                raise BackupCorrupt(f"{where}: task updated at {updated!r} is outside the "
                                    f"backup's scope ({scope.describe()})")
        state.tasks[key] = tenant_index[tenant]
        messages = record.get("messages")
        if isinstance(messages, list):
            state.messages += len(messages)
        return
    if name == DIALOG_NODES:
        owner = state.tasks.get(key)
    else:  # payloads name the plain task id: its task is stored as tenant/id (or, legacy, id)
        plain = record.get("task_id")
        owner = state.tasks.get(_key(stored_key(tenant, plain))) if isinstance(plain, str) else None
        if owner is None:
            owner = state.tasks.get(_key(plain))
    if owner is None:
        what = "dialog node" if name == DIALOG_NODES else "payload"
        raise BackupCorrupt(f"{where}: {what} {record['_id']!r} refers to a task that is not "
                            f"in the backup")
    if owner != tenant_index[tenant]:
        raise BackupCorrupt(f"{where}: record of tenant {tenant!r} belongs to a task of "
                            f"another tenant")
    if name == DIALOG_NODES:
        parent = record.get("parent_id")
        if parent is not None and _key(parent) not in state.tasks and (
            not isinstance(parent, str) or _key(stored_key(tenant, parent)) not in state.tasks
        ):
            state.external_parents += 1


async def scan(
    reader: BackupReader,
    manifest: Manifest,
    *,
    on_batch: BatchHandler | None = None,
    progress: Progress | None = None,
    step: str = "verify",
) -> _State:
    """Hash every file, then stream each once with every check, handing batches of
    valid records to `on_batch` (restore plans its writes there)."""
    for name in COLLECTIONS:
        check_file(reader, manifest, name)
    state = _State(manifest)
    if manifest.scope.task_ids is not None:
        state.task_ids = frozenset(_key(i) for i in manifest.scope.task_ids)
    tenant_index = {tenant: i for i, tenant in enumerate(manifest.tenants)}
    for name in COLLECTIONS:
        state.seen = set()
        entry = manifest.collections[name]
        batch: list[dict[str, Any]] = []
        size = done = 0
        if progress:
            progress(f"{step} {name}", 0, entry.count)
        for lineno, record, nbytes in read_records(reader, manifest, name):
            _check(state, name, entry.file, lineno, record, tenant_index)
            if on_batch is None:
                done += 1
                if progress and done % BATCH_RECORDS == 0:
                    progress(f"{step} {name}", done, entry.count)
                continue
            batch.append(record)
            size += nbytes
            if len(batch) >= BATCH_RECORDS or size >= BATCH_BYTES:
                await on_batch(name, batch)
                done += len(batch)
                batch, size = [], 0
                if progress:
                    progress(f"{step} {name}", done, entry.count)
                await asyncio.sleep(0)
        if batch and on_batch is not None:
            await on_batch(name, batch)
            done += len(batch)
        if progress:
            progress(f"{step} {name}", done, entry.count)
    if state.messages != manifest.messages:
        raise BackupCorrupt(
            f"the backup holds {state.messages} messages, the manifest says {manifest.messages}"
        )
    return state


async def verify(path: str | os.PathLike[str], *, progress: Progress | None = None) -> VerifyReport:
    """Check a backup completely; return what it holds or raise the typed error.

    Raises `BackupCorrupt` (exit code 10), `BackupIncomplete` (11), `BackupUnreadable`
    (12) or `BackupVersionError` (13); see `mindstore.backup.errors`.
    """
    started = time.perf_counter()
    with open_backup(path) as reader:
        manifest = read_manifest(reader)
        state = await scan(reader, manifest, progress=progress)
        total_bytes = sum(entry.bytes for entry in manifest.collections.values())
        return VerifyReport(
            path=str(path),
            container=reader.kind,
            manifest=manifest,
            counts=manifest.counts,
            messages=state.messages,
            bytes=total_bytes,
            tenants=list(manifest.tenants),
            external_parents=state.external_parents,
            elapsed_s=time.perf_counter() - started,
        )
