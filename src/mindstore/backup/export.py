"""`backup(store, dest, ...)`: stream the tasks in scope, their dialog nodes and payloads,
then the LangGraph threads, agents and policies the scope holds (`unit_export`).

Tasks are read in `_id` order by keyset pagination: a page of ``(_id, size_bytes)``
headers (projection, no messages), then the tasks themselves in chunks of at most
`CHUNK_BYTES` (by their recorded size), each chunk with one query for its dialog nodes
(`_id` in the chunk) and keyset-paged queries for its payloads (`task_id` in the chunk).
Every record is encoded and handed to gzip at once, so memory holds one chunk however
large the data: this works the same on MongoDB and on the embedded backend (whose
cursors materialise a whole result, so a plain cursor would not stream there).

A backup is not a point-in-time snapshot across documents (MongoDB has no such read
without a transaction): each document is read atomically, and a task changed during the
backup is saved as it was when its chunk was read. For incremental backups pass the
previous manifest's ``created_at`` (taken before the first read) as `since`.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from mindstore.clock import utcnow
from mindstore.collection_names import (
    DATA_KEYS,
    DIALOG_NODES,
    MEMORY_ITEMS,
    PAYLOADS,
    TASK_PAGES,
    TASKS,
)
from mindstore.errors import BackupError, ValidationError
from mindstore.ids import KEY_SEPARATOR, check_name, task_id_of, task_key
from mindstore.ids import check_key as check_id
from mindstore.operations import operation
from mindstore.protocols import HasDatabase
from mindstore.registry import BEYOND_TASKS
from mindstore.version import __version__

from .container import RecordWriter, Staging
from .manifest import (
    COLLECTIONS,
    FILE_NAMES,
    MANIFEST_NAME,
    VERSION_COLLECTIONS,
    Manifest,
    Scope,
    parse_time,
)
from .page_export import PageExporter
from .unit_export import UnitExporter
from .verify import Progress

__all__ = ["backup", "make_scope", "stored_task_key"]

#: Task headers fetched per page (projection: `_id`, `tenant`, `size_bytes`).
PAGE_TASKS = 1000
#: A chunk of full task documents stays under this many (recorded) bytes...
CHUNK_BYTES = 2 << 20
#: ... and this many tasks.
CHUNK_TASKS = 100
#: Assumed size of a task without `size_bytes` (raw documents).
UNKNOWN_TASK_BYTES = 256 << 10
#: Payloads per query page (each can be up to 16 MiB).
PAGE_PAYLOADS = 16


def make_scope(
    *,
    tenant: str | None = None,
    owner: str | None = None,
    task_ids: Iterable[str] | None = None,
    since: _dt.datetime | str | None = None,
) -> Scope:
    """Validate the scope arguments of `backup` (`ValidationError` on bad input)."""
    if tenant is not None:
        check_id(tenant, "tenant")
    if owner is not None:
        check_name(owner, "owner")
        if tenant is None:
            raise ValidationError("an owner scope needs its tenant: pass tenant= (--tenant)")
    ids: tuple[str, ...] | None = None
    if task_ids is not None:
        if isinstance(task_ids, str):
            task_ids = [task_ids]
        ids = tuple(sorted({stored_task_key(i, tenant) for i in task_ids}))
        if not ids:
            raise ValidationError("an empty list of task ids selects nothing; pass None for all")
    when: _dt.datetime | None = None
    if since is not None:
        if isinstance(since, str):
            try:
                when = parse_time(since)
            except ValueError as exc:
                raise ValidationError(f"since: not an ISO 8601 time: {since!r}") from exc
        elif isinstance(since, _dt.datetime):
            when = since if since.tzinfo else since.replace(tzinfo=_dt.UTC)
            when = when.astimezone(_dt.UTC)
        else:
            raise ValidationError("since must be a datetime or an ISO 8601 string")
        # BSON keeps milliseconds: round down so a task updated at `since` is included
        when = when.replace(microsecond=when.microsecond // 1000 * 1000)
    return Scope(tenant=tenant, owner=owner, task_ids=ids, since=when)


def stored_task_key(value: Any, tenant: str | None) -> str:
    """A task named in a backup scope, as its per-tenant key: ``tenant/id`` as given, or a
    bare id within `tenant` (a task id alone is ambiguous across tenants)."""
    if isinstance(value, str) and KEY_SEPARATOR in value:
        tenant_part, _, task_part = value.partition(KEY_SEPARATOR)
        check_id(tenant_part, "task key tenant")
        check_id(task_part, "task id")
        if tenant is not None and tenant_part != tenant:
            raise ValidationError(
                f"task {value!r} is not in tenant {tenant!r}: give its bare id or {tenant}/id"
            )
        return value
    check_id(value, "task id")
    if tenant is None:
        raise ValidationError(
            f"task id {value!r} needs its tenant: pass tenant= (--tenant), or give tenant/{value}"
        )
    return task_key(tenant, value)


def _chunks(headers: Sequence[dict[str, Any]]) -> Iterable[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    size = 0
    for header in headers:
        recorded = header.get("size_bytes")
        weight = recorded if isinstance(recorded, int) and recorded > 0 else UNKNOWN_TASK_BYTES
        if chunk and (size + weight > CHUNK_BYTES or len(chunk) >= CHUNK_TASKS):
            yield chunk
            chunk, size = [], 0
        chunk.append(header)
        size += weight
    if chunk:
        yield chunk


class _Exporter:
    def __init__(
        self, store: HasDatabase, scope: Scope, staging: Staging, progress: Progress | None
    ) -> None:
        db = store.database
        self.tasks = db[TASKS]
        self.nodes = db[DIALOG_NODES]
        self.payloads = db[PAYLOADS]
        self.pages = PageExporter(db[TASKS], db[TASK_PAGES])
        self.scope = scope
        self.progress = progress
        self.writers = {name: RecordWriter(staging.file(FILE_NAMES[name])) for name in COLLECTIONS}
        self.tenants: set[str] = set()
        self.messages = 0
        self.found_ids: set[str] = set()

    def _task_filter(self) -> dict[str, Any]:
        """The scope as a filter; a task named by ``tenant/id`` matches both stored forms
        (that key, and the legacy bare id, kept only when its tenant matches: `_chunk`)."""
        query = self.scope.task_filter()
        if self.scope.task_ids is not None:
            keys = self.scope.task_ids
            query["_id"] = {"$in": sorted({*keys, *(task_id_of(k) for k in keys)})}
            tenants = sorted({k.partition(KEY_SEPARATOR)[0] for k in keys})
            if "tenant" not in query:
                query["tenant"] = tenants[0] if len(tenants) == 1 else {"$in": tenants}
        return query

    async def run(self) -> None:
        task_filter = self._task_filter()
        total = await self.tasks.count_documents(task_filter) if self.progress else None
        done = 0
        if self.progress:
            self.progress("backup tasks", 0, total)
        last: Any = None
        while True:
            query = dict(task_filter)
            if last is not None:
                query["_id"] = {**query.get("_id", {}), "$gt": last}
            headers = await self.tasks.find(
                query, {"_id": 1, "size_bytes": 1}, sort=[("_id", 1)], limit=PAGE_TASKS
            ).to_list()
            if not headers:
                break
            last = headers[-1]["_id"]
            for chunk in _chunks(headers):
                done += await self._chunk([h["_id"] for h in chunk], task_filter)
                if self.progress:
                    self.progress("backup tasks", done, total)
            if len(headers) < PAGE_TASKS:
                break

    async def _chunk(self, ids: list[Any], task_filter: dict[str, Any]) -> int:
        # the filter again: a task may have changed since its header was read
        query = dict(task_filter)
        query["_id"] = {**query.get("_id", {}), "$in": ids}
        docs = await self.tasks.find(query, sort=[("_id", 1)]).to_list()
        identities: set[str] = set()  # task_key(tenant, task id) of every task in the chunk
        chunk_tenants: set[str] = set()
        writer = self.writers[TASKS]
        for doc in docs:
            tenant = doc.get("tenant")
            if not isinstance(tenant, str) or not isinstance(doc.get("_id"), str):
                raise BackupError(
                    f"task {doc.get('_id')!r} has no tenant or a non-string "
                    f"_id: mindstore never writes such a document"
                )
            identity = task_key(tenant, task_id_of(doc["_id"]))
            if self.scope.task_ids is not None and identity not in self.scope.task_ids:
                continue  # a legacy bare id of the same name in another tenant
            if doc.get("pages"):  # paged: its visible pages first, as of the same version
                exported = await self.pages.export(doc, self.writers[TASK_PAGES])
                if exported is None:
                    continue  # deleted meanwhile: it is not in the backup
                doc, sealed_messages = exported
                self.messages += sealed_messages
            identities.add(identity)
            chunk_tenants.add(tenant)
            self.tenants.add(tenant)
            messages = doc.get("messages")
            if isinstance(messages, list):
                self.messages += len(messages)
            if self.scope.task_ids is not None:
                self.found_ids.add(identity)
            writer.add(doc)
        count = len(identities)
        del docs
        if not identities:
            return 0
        # nodes and payloads refer to their task by either stored form
        refs = sorted({*identities, *(task_id_of(identity) for identity in identities)})
        tenants = sorted(chunk_tenants)

        def mine(ref: Any, tenant: Any) -> bool:
            return (
                isinstance(ref, str)
                and isinstance(tenant, str)
                and task_key(tenant, task_id_of(ref)) in identities
            )

        nodes = await self.nodes.find(
            {"_id": {"$in": refs}, "tenant": {"$in": tenants}}, sort=[("_id", 1)]
        ).to_list()
        for node in nodes:
            if mine(node["_id"], node.get("tenant")):
                self.writers[DIALOG_NODES].add(node)
        del nodes
        last: Any = None
        while True:
            payload_query: dict[str, Any] = {"tenant": {"$in": tenants}, "task_id": {"$in": refs}}
            if last is not None:
                payload_query["_id"] = {"$gt": last}
            page = await self.payloads.find(
                payload_query, sort=[("_id", 1)], limit=PAGE_PAYLOADS
            ).to_list()
            for payload in page:
                if mine(payload.get("task_id"), payload.get("tenant")):
                    self.writers[PAYLOADS].add(payload)
            if len(page) < PAGE_PAYLOADS:
                break
            last = page[-1]["_id"]
        return count


@operation("backup")
async def backup(
    store: HasDatabase,
    dest: str | os.PathLike[str],
    *,
    tenant: str | None = None,
    owner: str | None = None,
    task_ids: Iterable[str] | None = None,
    since: _dt.datetime | str | None = None,
    tar: bool = False,
    progress: Progress | None = None,
) -> Manifest:
    """Write a backup of the tasks in scope (with their dialog nodes and payloads).

    `dest` is a new (or empty) directory, or with ``tar=True`` (or a ``.tar`` name) a
    new tar archive. Scope conditions combine with AND: `tenant`, `owner` (needs
    `tenant`), `task_ids`, `since` (tasks with ``updated_at >= since``); none = the whole
    database. Returns the manifest written. Raises `ValidationError` for bad arguments
    and `BackupError` if `dest` exists; nothing is left at `dest` on failure.
    """
    scope = make_scope(tenant=tenant, owner=owner, task_ids=task_ids, since=since)
    target = Path(dest)
    use_tar = tar or target.suffix.lower() == ".tar"
    created = utcnow()
    try:
        staging = Staging(target, tar=use_tar)
    except OSError as exc:
        raise BackupError(f"cannot write a backup at {target}: {exc.strerror or exc}") from None
    exporter: _Exporter | None = None
    try:
        exporter = _Exporter(store, scope, staging, progress)
        await exporter.run()
        await UnitExporter(store.database, scope, exporter.writers, exporter.tenants.add).run()
        # the oldest format that holds the records: without sealed pages format 1, readable
        # by releases before paged storage; without threads, agents or policies format 2
        keys = exporter.writers[DATA_KEYS].count
        units = any(exporter.writers[name].count for name in BEYOND_TASKS if name != DATA_KEYS)
        memories = exporter.writers[MEMORY_ITEMS].count
        version = (
            5 if memories else 4 if keys else 3 if units
            else 2 if exporter.writers[TASK_PAGES].count else 1
        )  # fmt: skip
        names = VERSION_COLLECTIONS[version]
        for name in set(exporter.writers) - set(names):
            exporter.writers.pop(name).discard()
        entries = {name: exporter.writers[name].close() for name in names}
        missing = (
            sorted(set(scope.task_ids) - exporter.found_ids) if scope.task_ids is not None else []
        )
        manifest = Manifest(
            scope=scope,
            collections=entries,
            tenants=sorted(exporter.tenants),
            messages=exporter.messages,
            created_at=created,
            completed_at=utcnow(),
            mindstore_version=__version__,
            source={
                "backend": getattr(store, "kind", "unknown"),
                "database": getattr(store.database, "name", None),
            },
            missing_task_ids=missing,
            format_version=version,
        )
        staging.write_bytes(MANIFEST_NAME, manifest.to_json())
        order = [MANIFEST_NAME, *(FILE_NAMES[name] for name in names)]
        staging.commit(order, mtime=created.timestamp())
    except BaseException as exc:
        if exporter is not None:
            for writer in exporter.writers.values():
                with contextlib.suppress(Exception):  # best effort: the staging goes anyway
                    writer.abort()
        staging.abort()
        if isinstance(exc, OSError):  # disk full, permissions changed, ...: nothing left behind
            raise BackupError(
                f"cannot write the backup at {target}: {exc.strerror or exc}"
            ) from exc
        raise
    manifest.path = str(target)
    return manifest
