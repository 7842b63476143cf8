"""`verify(path)`: prove a backup is intact, or say precisely (and with which code) why not.

Checks, in order: the container opens (else `BackupUnreadable`), and a tar archive has no
member name twice (`BackupCorrupt`: a reader and ``tar x`` would see different files);
`manifest.json` exists (else `BackupIncomplete`), is a mindstore backup
(`BackupUnreadable`) of a readable format version and encoding (`BackupVersionError`), and
is unmodified (its own checksum; `BackupCorrupt`); the backup holds exactly the files the
manifest lists (missing: `BackupIncomplete`; extra: `BackupCorrupt`). Then each file: its
size and sha256 (a file cut short is `BackupIncomplete`; any other difference, a
reordered or recompressed file included, is `BackupCorrupt`), and streamed once: every
record parses, has the shape mindstore writes (`mindstore.backup.shape`: ids in the id
alphabets, no ``$`` top-level keys, a task header that agrees with its messages), lies
within the manifest's scope and tenants, has a unique identity, and refers only to what
the backup holds: every dialog node's and payload's task, and every payload that a
message references (`BackupCorrupt`). Records of LangGraph threads, agents and policies
(format 3) have their own shapes (`mindstore.backup.shape_units`) and scope: a backup of
one owner holds only that owner's agent and threads and no policy, one of named tasks none
of them. Last, the record counts and the message total.

The checksums are not a signature (anyone can recompute them), so the content checks are
what keeps an edited backup from acting on the database: restore runs all of them before
it writes anything.

Memory: one batch of records, plus one entry per task, dialog node, payload and payload
reference for the cross-reference and duplicate checks; never the messages.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import gzip
import os
import tarfile
import time
import zlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from mindstore.collection_names import (
    AGENTS,
    DATA_KEYS,
    DIALOG_NODES,
    LANGGRAPH_CHECKPOINTS,
    MEMORY_ITEMS,
    PAYLOADS,
    POLICIES,
    TASK_PAGES,
    TASKS,
)
from mindstore.ids import task_id_of, task_key

from .codec import RecordError, decode_line
from .container import READ_CHUNK, BackupReader, HashingReader, open_backup
from .errors import BackupCorrupt, BackupError, BackupIncomplete, BackupUnreadable
from .manifest import MANIFEST_NAME, Manifest, format_time
from .pages import PageContinuityError, PagedTask, check_page, close_task, fold_page
from .shape import ShapeError, TaskFacts, check_node, check_payload, check_task
from .shape_units import UnitFacts, check_unit
from .threads import MARKER, prefix_of

__all__ = [
    "Progress",
    "VerifyReport",
    "check_shape",
    "read_records",
    "scan",
    "verify",
]

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


def _complete_gzip(reader: BackupReader, name: str) -> bool:
    """Does the file hold whole gzip members to its last byte? A file cut short does not
    (its last member has no end); a rewritten or recompressed one does."""
    try:
        with reader.open(name) as raw:
            decompressor = zlib.decompressobj(wbits=31)
            empty = True
            while chunk := raw.read(READ_CHUNK):
                empty = False
                while chunk:
                    decompressor.decompress(chunk)
                    chunk = decompressor.unused_data
                    if chunk:  # the next gzip member of a multi-member file
                        decompressor = zlib.decompressobj(wbits=31)
            return not empty and decompressor.eof
    except (OSError, EOFError, zlib.error, tarfile.TarError, BackupError):
        return False


def check_file(reader: BackupReader, manifest: Manifest, name: str) -> None:
    """Size and sha256 of one collection file against the manifest (no parsing)."""
    entry = manifest.collections[name]
    try:
        actual_size = reader.size(entry.file)
    except OSError as exc:
        raise BackupUnreadable(f"cannot read {entry.file}: {exc}") from exc
    if actual_size < entry.bytes:
        if _complete_gzip(reader, entry.file):
            raise BackupCorrupt(
                f"{entry.file}: sha256 does not match the manifest (a complete gzip file of "
                f"{actual_size} bytes where the manifest says {entry.bytes}: rewritten or "
                f"recompressed, not truncated)"
            )
        raise BackupIncomplete(f"{entry.file} is truncated: {actual_size} of {entry.bytes} bytes")
    if actual_size > entry.bytes:
        raise BackupCorrupt(
            f"{entry.file}: sha256 does not match the manifest ({actual_size} bytes, the "
            f"manifest says {entry.bytes})"
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


def read_records(
    reader: BackupReader, manifest: Manifest, name: str
) -> Iterator[tuple[int, dict[str, Any], bytes]]:
    """Yield ``(line_number, record, line)`` of one collection file, checking that every line
    parses and the count and sha256 match (the file may have changed since `check_file`).
    """
    entry = manifest.collections[name]
    raw = reader.open(entry.file)
    hashing = HashingReader(raw)
    count = 0
    try:
        with gzip.GzipFile(fileobj=hashing, mode="rb") as lines:  # type: ignore[call-overload]  # HashingReader is a readable binary file; typeshed wants its own protocol
            lineno = 0
            try:
                for lineno, line in enumerate(lines, start=1):
                    try:
                        record = decode_line(line)
                    except RecordError as exc:
                        raise BackupCorrupt(f"{entry.file} line {lineno}: {exc}") from exc
                    count += 1
                    yield lineno, record, line
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
    """What verify remembers between records: one small entry per record, no messages."""

    manifest: Manifest
    tasks: dict[str, int] = field(default_factory=dict)  # task identity -> tenant index
    nodes: set[str] = field(default_factory=set)  # dialog-node identities
    payloads: set[str] = field(default_factory=set)  # payload ids
    referenced: dict[str, str] = field(default_factory=dict)  # payload id -> task identity
    messages: int = 0
    external_parents: int = 0
    task_ids: frozenset[str] | None = None
    paged: dict[str, PagedTask] = field(default_factory=dict)  # task identity -> its pages
    pages: set[str] = field(default_factory=set)  # page ids
    units: dict[str, set[str]] = field(default_factory=dict)  # thread, agent, policy ids
    threads: set[str] = field(default_factory=set)  # thread prefixes of the backup's tasks

    def seen(self, name: str) -> set[str] | dict[str, int]:
        chosen: set[str] | dict[str, int] = {
            TASK_PAGES: self.pages,
            TASKS: self.tasks,
            DIALOG_NODES: self.nodes,
            PAYLOADS: self.payloads,
        }.get(name) or self.units.setdefault(name, set())  # type: ignore[assignment]  # the three keep their own container types
        return chosen


_SHAPES: dict[str, Callable[[Any], Any]] = {
    TASKS: check_task,
    DIALOG_NODES: check_node,
    PAYLOADS: check_payload,
}


def check_shape(name: str, where: str, record: dict[str, Any], sealed: Any = None) -> Any:
    """The record's shape (`mindstore.backup.shape`), as `BackupCorrupt` naming the line."""
    try:
        if name == TASKS:
            return check_task(record, sealed)
        return _SHAPES[name](record)
    except ShapeError as exc:
        raise BackupCorrupt(f"{where}: {exc}") from None


def _identity(record: dict[str, Any]) -> str | None:
    """A task record's identity before its shape is checked (None if it has none)."""
    tenant, key = record.get("tenant"), record.get("_id")
    if not (isinstance(tenant, str) and isinstance(key, str)):
        return None
    return task_key(tenant, task_id_of(key))


def _check_page(state: _State, where: str, record: dict[str, Any],
                tenant_index: dict[str, int]) -> None:  # fmt: skip
    """A page record: shape, scope, continuity with the task's pages before it."""
    try:
        facts, raw, read = check_page(record)
    except ShapeError as exc:
        raise BackupCorrupt(f"{where}: {exc}") from None
    scope = state.manifest.scope
    if (scope.tenant is not None and facts.tenant != scope.tenant) or \
            facts.tenant not in tenant_index:  # fmt: skip
        raise BackupCorrupt(
            f"{where}: record of tenant {facts.tenant!r} is outside the backup's scope "
            f"({scope.describe()}; tenants {state.manifest.tenants})"
        )
    if facts.id in state.pages:
        raise PageContinuityError("duplicate", facts.task, f"{where}: page _id {facts.id!r} twice")
    state.paged[facts.task] = fold_page(state.paged.get(facts.task), facts, raw, read, where)
    state.pages.add(facts.id)
    _claim_payloads(state, facts.payload_ids, facts.task, where)
    state.messages += len(raw)


def _check(
    state: _State,
    name: str,
    file: str,
    lineno: int,
    record: dict[str, Any],
    tenant_index: dict[str, int],
) -> None:
    manifest = state.manifest
    scope = manifest.scope
    where = f"{file} line {lineno}"
    if name == TASK_PAGES:
        _check_page(state, where, record, tenant_index)
        return
    if name not in _SHAPES:
        _check_unit(state, name, where, record, tenant_index)
        return
    sealed = None
    if name == TASKS:
        identity = _identity(record)
        known = state.paged.pop(identity, None) if identity is not None else None
        if identity is not None:
            close_task(known, record, identity, where)
        sealed = known.fold if known is not None else None
    facts = (
        check_shape(name, where, record)
        if sealed is None
        else check_shape(name, where, record, sealed)
    )
    tenant = facts.tenant
    if (scope.tenant is not None and tenant != scope.tenant) or tenant not in tenant_index:
        raise BackupCorrupt(
            f"{where}: record of tenant {tenant!r} is outside the backup's scope "
            f"({scope.describe()}; tenants {manifest.tenants})"
        )
    key = facts.id if name == PAYLOADS else facts.identity
    seen = state.seen(name)
    if key in seen:
        raise BackupCorrupt(
            f"{where}: duplicate _id {record['_id']!r} (task {key!r})"
            if name != PAYLOADS
            else f"{where}: duplicate _id {key!r}"
        )
    if name == TASKS:
        _check_task(state, where, record, facts)
        state.tasks[key] = tenant_index[tenant]
        return
    task = facts.identity if name == DIALOG_NODES else facts.task_identity
    owner = state.tasks.get(task)
    if owner is None:
        what = "dialog node" if name == DIALOG_NODES else "payload"
        raise BackupCorrupt(
            f"{where}: {what} {record['_id']!r} refers to a task that is not in the backup"
        )
    if owner != tenant_index[tenant]:  # pragma: no cover - identities include the tenant
        raise BackupCorrupt(
            f"{where}: record of tenant {tenant!r} belongs to a task of another tenant"
        )
    if name == DIALOG_NODES:
        state.nodes.add(key)
        if facts.parent_id is not None and task_key(tenant, facts.parent_id) not in state.tasks:
            state.external_parents += 1
        return
    referrer = state.referenced.get(key)
    if referrer is not None and referrer != task:
        raise BackupCorrupt(
            f"{where}: payload {key!r} belongs to task {task!r} but task {referrer!r} refers to it"
        )
    state.payloads.add(key)


def _check_unit(state: _State, name: str, where: str, record: dict[str, Any],
                tenant_index: dict[str, int]) -> None:  # fmt: skip
    """A record of a LangGraph thread, an agent or a policy: shape, scope, unique `_id`."""
    try:
        facts: UnitFacts = check_unit(name, record)
    except ShapeError as exc:
        raise BackupCorrupt(f"{where}: {exc}") from None
    scope = state.manifest.scope
    outside = (
        (scope.tenant is not None and facts.tenant != scope.tenant)
        or facts.tenant not in tenant_index
        or (scope.task_ids is not None and name != DATA_KEYS)
    )
    if scope.owner is not None and not outside and name != DATA_KEYS:
        if name == LANGGRAPH_CHECKPOINTS:
            outside = facts.owner != scope.owner
            if facts.prefix is not None and not outside:
                state.threads.add(facts.prefix)
        elif facts.prefix is not None:  # writes and blobs: a thread of the owner's
            outside = facts.prefix not in state.threads
        else:  # agents and memory items: the owner's own; policies: none
            outside = name not in (AGENTS, MEMORY_ITEMS) or facts.owner != scope.owner
    if scope.since is not None and name in (AGENTS, POLICIES, MEMORY_ITEMS) and not outside:
        outside = facts.updated_at is None or facts.updated_at < scope.since
    if outside:
        raise BackupCorrupt(
            f"{where}: record of tenant {facts.tenant!r} is outside the backup's scope "
            f"({scope.describe()}; tenants {state.manifest.tenants})"
        )
    seen = state.units.setdefault(name, set())
    if facts.id in seen:
        raise BackupCorrupt(f"{where}: duplicate _id {facts.id!r}")
    seen.add(facts.id)


def _check_task(state: _State, where: str, record: dict[str, Any], facts: TaskFacts) -> None:
    scope = state.manifest.scope
    if scope.owner is not None and record.get("owner") != scope.owner:
        raise BackupCorrupt(
            f"{where}: task of owner {record.get('owner')!r} is outside "
            f"the backup's scope ({scope.describe()})"
        )
    # scope task ids are per-tenant keys (bare ids in backups written before them)
    if (
        state.task_ids is not None
        and facts.identity not in state.task_ids
        and facts.task_id not in state.task_ids
    ):
        raise BackupCorrupt(
            f"{where}: task {record['_id']!r} is outside the backup's scope ({scope.describe()})"
        )
    if scope.since is not None:
        updated = record.get("updated_at")
        if not isinstance(updated, _dt.datetime) or updated < scope.since:
            raise BackupCorrupt(
                f"{where}: task updated at {updated!r} is outside the "
                f"backup's scope ({scope.describe()})"
            )
    _claim_payloads(state, facts.payload_ids, facts.identity, where)
    state.messages += facts.messages
    metadata = record.get("metadata") or {}
    if metadata.get("integration") == MARKER and isinstance(metadata.get("thread_id"), str):
        # a thread's writes and blobs are in an owner's backup when its messages are
        state.threads.add(prefix_of(facts.tenant, record.get("owner"), metadata["thread_id"]))


def _claim_payloads(state: _State, payload_ids: Any, task: Any, where: str) -> None:
    """Each payload belongs to one task: the first record that refers to it claims it
    (a page's messages claim for their task, as the open page's do)."""
    for payload_id in payload_ids:
        other = state.referenced.setdefault(payload_id, task)
        if other != task:
            raise BackupCorrupt(
                f"{where}: payload {payload_id!r} is referenced by two tasks "
                f"({other!r} and {task!r})"
            )


def _check_references(state: _State) -> None:
    """Every payload a message refers to is in the backup (after the payloads file), and
    every page belongs to a paged task of the backup."""
    if state.paged:
        task, known = next(iter(state.paged.items()))
        raise PageContinuityError(
            "orphan", task,
            f"{len(state.paged)} task(s) have pages but no task record that counts them "
            f"(e.g. from {known.where})",
        )  # fmt: skip
    missing = [pid for pid in state.referenced if pid not in state.payloads]
    if missing:
        example = missing[0]
        raise BackupCorrupt(
            f"{len(missing)} payload(s) referenced by messages are not in the backup "
            f"(e.g. {example!r} of task {state.referenced[example]!r})"
        )


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
    for name in manifest.names:
        check_file(reader, manifest, name)
    state = _State(manifest)
    if manifest.scope.task_ids is not None:
        state.task_ids = frozenset(manifest.scope.task_ids)
    tenant_index = {tenant: i for i, tenant in enumerate(manifest.tenants)}
    for name in manifest.names:
        entry = manifest.collections[name]
        batch: list[dict[str, Any]] = []
        size = done = 0
        if progress:
            progress(f"{step} {name}", 0, entry.count)
        for lineno, record, line in read_records(reader, manifest, name):
            _check(state, name, entry.file, lineno, record, tenant_index)
            if on_batch is None:
                done += 1
                if progress and done % BATCH_RECORDS == 0:
                    progress(f"{step} {name}", done, entry.count)
                continue
            batch.append(record)
            size += len(line)
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
    _check_references(state)
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
