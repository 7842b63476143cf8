"""`restore(store, path, ...)`: verify, plan, then write; idempotent, with conflict modes.

Two passes over the backup:

1. **verify + plan** (read-only): every check of `verify`, and for each batch of records
   one query for the documents with the same `_id`s in the target collection. Each
   record gets an action: ``insert`` (no such `_id`), ``unchanged`` (stored document is
   byte-identical in BSON), ``skip`` / ``overwrite`` / conflict (it differs: by `mode`).
   A corrupt backup, an `_id` that belongs to *another tenant*, or (``mode="fail"``)
   a differing document raises here, before anything is written. ``dry_run=True``
   stops here and returns these counts: the real ones a run would write.
2. **write**: payloads, then dialog nodes, then tasks (a task appears only after what
   it refers to), in batches; each batch is planned again against the current state
   and written with `insert_many(ordered=False)` and `ReplaceOne` guarded by `_id` and
   tenant.

Mode ``skip`` never reads stored documents in full (it fetches `_id` and `tenant` only),
so it reports every existing `_id` as skipped; ``overwrite`` and ``fail`` compare, so a
second identical run reports everything unchanged and writes nothing.

Tenants and `_id`s. Document `_id`s are global in a database (a task id is its `_id`),
so a restore never writes over a document that belongs to another tenant, in any mode:
it refuses with `RestoreConflict` naming the ids. ``as_tenant`` rewrites the `tenant` of
every record (the backup must hold one tenant); the ids stay as they are, because they
are referenced from inside other documents (dialog ancestry, payload markers in
messages, message origins). So ``as_tenant`` moves or copies a tenant into a database
where those ids are free (another database or cluster, or after the source tenant was
erased); restoring into another tenant of the *same* database, next to the source
tenant, is refused with the colliding ids rather than silently skipping, overwriting
or renaming them.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import bson
from pymongo.errors import BulkWriteError
from pymongo.operations import ReplaceOne

from mindstore.documents import DIALOG_NODES, PAYLOADS, TASKS
from mindstore.errors import BackupError, ValidationError
from mindstore.ids import task_id_of, task_key
from mindstore.model.planner import check_id
from mindstore.payloads import MARKER_PREFIX

from .container import open_backup
from .errors import RestoreConflict
from .manifest import COLLECTIONS, Manifest, format_time
from .verify import (
    BATCH_BYTES,
    BATCH_RECORDS,
    Progress,
    _key,
    read_manifest,
    read_records,
    scan,
)

__all__ = ["RestoreReport", "restore"]

Mode = Literal["skip", "overwrite", "fail"]
MODES = ("skip", "overwrite", "fail")
#: Write order: what a task refers to exists before the task does.
WRITE_ORDER = (PAYLOADS, DIALOG_NODES, TASKS)
ACTIONS = ("inserted", "overwritten", "skipped", "unchanged")
_EXAMPLES = 5


@dataclass
class RestoreReport:
    """Per collection: documents inserted / overwritten / skipped / unchanged."""

    path: str
    mode: str
    as_tenant: str | None
    dry_run: bool
    counts: dict[str, dict[str, int]]
    manifest: Manifest
    elapsed_s: float = 0.0

    @property
    def totals(self) -> dict[str, int]:
        return {a: sum(c[a] for c in self.counts.values()) for a in ACTIONS}

    @property
    def written(self) -> int:
        totals = self.totals
        return totals["inserted"] + totals["overwritten"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "mode": self.mode,
            "as_tenant": self.as_tenant,
            "dry_run": self.dry_run,
            "counts": {name: dict(c) for name, c in self.counts.items()},
            "totals": self.totals,
            "backup": {"created_at": format_time(self.manifest.created_at),
                       "scope": self.manifest.scope.to_dict(),
                       "tenants": list(self.manifest.tenants)},
            "elapsed_s": round(self.elapsed_s, 3),
        }


def moved_payload_id(payload_id: str, tenant: str) -> str:
    """A payload's id under another tenant: deterministic, so restoring twice is idempotent."""
    return hashlib.sha256(f"{tenant}\x00{payload_id}".encode()).hexdigest()[:32]


def _move_markers(value: Any, tenant: str) -> Any:
    if isinstance(value, str):
        if value.startswith(MARKER_PREFIX):
            return MARKER_PREFIX + moved_payload_id(value[len(MARKER_PREFIX):], tenant)
        return value
    if isinstance(value, dict):
        return {key: _move_markers(item, tenant) for key, item in value.items()}
    if isinstance(value, list):
        return [_move_markers(item, tenant) for item in value]
    return value


def rekey_record(name: str, record: dict[str, Any], as_tenant: str | None) -> None:
    """Give a backup record the keys it has in its (new) tenant, in place.

    Tasks and dialog nodes are keyed ``tenant/task id``: a backup written before per-tenant
    keys (bare ids) restores into that form, and ``as_tenant`` moves the key with the
    tenant. Moved payloads get new ids (`moved_payload_id`) and the markers that name them
    follow, so two tenants restored from one backup never share a payload.
    """
    source = record.get("tenant")
    tenant = as_tenant if as_tenant is not None else source
    if not isinstance(tenant, str) or not isinstance(record.get("_id"), str):
        return  # verify refuses such records before restore writes anything
    moved = as_tenant is not None and as_tenant != source
    record["tenant"] = tenant
    if name in (TASKS, DIALOG_NODES):
        record["_id"] = task_key(tenant, task_id_of(record["_id"]))
        if moved and name == TASKS:
            for field_name in ("messages", "content"):
                if field_name in record:
                    record[field_name] = _move_markers(record[field_name], tenant)
    elif moved:
        record["_id"] = moved_payload_id(record["_id"], tenant)


@dataclass
class _Plan:
    inserts: list[dict[str, Any]] = field(default_factory=list)
    overwrites: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0
    unchanged: int = 0
    conflicts: list[Any] = field(default_factory=list)
    collisions: list[tuple[Any, Any]] = field(default_factory=list)


class _Restorer:
    def __init__(self, store: Any, mode: str, as_tenant: str | None) -> None:
        self.db = store.database
        self.mode = mode
        self.as_tenant = as_tenant
        self.counts = {name: dict.fromkeys(ACTIONS, 0) for name in COLLECTIONS}
        self.conflicts: dict[str, int] = dict.fromkeys(COLLECTIONS, 0)
        self.collisions: dict[str, int] = dict.fromkeys(COLLECTIONS, 0)
        self.examples: list[str] = []
        self.collision_examples: list[str] = []

    def _retarget(self, name: str, records: list[dict[str, Any]]) -> None:
        for record in records:
            rekey_record(name, record, self.as_tenant)

    async def plan(self, name: str, records: list[dict[str, Any]]) -> _Plan:
        self._retarget(name, records)
        full = self.mode != "skip"
        ids = [record["_id"] for record in records]
        projection = None if full else {"_id": 1, "tenant": 1}
        existing = {
            _key(doc["_id"]): doc
            for doc in await self.db[name].find({"_id": {"$in": ids}}, projection).to_list()
        }
        plan = _Plan()
        for record in records:
            stored = existing.get(_key(record["_id"]))
            if stored is None:
                plan.inserts.append(record)
            elif stored.get("tenant") != record["tenant"]:
                plan.collisions.append((record["_id"], stored.get("tenant")))
            elif not full:
                plan.skipped += 1
            elif bson.encode(stored) == bson.encode(record):
                plan.unchanged += 1
            elif self.mode == "overwrite":
                plan.overwrites.append(record)
            else:
                plan.conflicts.append(record["_id"])
        return plan

    def _note(self, name: str, plan: _Plan) -> None:
        self.conflicts[name] += len(plan.conflicts)
        self.collisions[name] += len(plan.collisions)
        for ident in plan.conflicts:
            if len(self.examples) < _EXAMPLES:
                self.examples.append(f"{name}/{ident}")
        for ident, tenant in plan.collisions:
            if len(self.collision_examples) < _EXAMPLES:
                self.collision_examples.append(f"{name}/{ident} (tenant {tenant})")

    def _count(self, name: str, plan: _Plan) -> None:
        counts = self.counts[name]
        counts["inserted"] += len(plan.inserts)
        counts["overwritten"] += len(plan.overwrites)
        counts["skipped"] += plan.skipped
        counts["unchanged"] += plan.unchanged

    async def plan_batch(self, name: str, records: list[dict[str, Any]]) -> None:
        plan = await self.plan(name, records)
        self._note(name, plan)
        self._count(name, plan)

    def refuse_if_needed(self) -> None:
        collisions = sum(self.collisions.values())
        if collisions:
            detail = ", ".join(f"{n}: {c}" for n, c in self.collisions.items() if c)
            raise RestoreConflict(
                f"{collisions} document id(s) of the backup already belong to another tenant "
                f"in this database ({detail}; e.g. {'; '.join(self.collision_examples)}); "
                f"ids are global, so restore never touches another tenant's documents: "
                f"restore into another database, or erase the other copy first"
            )
        conflicts = sum(self.conflicts.values())
        if conflicts and self.mode == "fail":
            detail = ", ".join(f"{n}: {c}" for n, c in self.conflicts.items() if c)
            raise RestoreConflict(
                f"{conflicts} stored document(s) differ from the backup ({detail}; e.g. "
                f"{', '.join(self.examples)}); nothing was written. Use mode skip or overwrite"
            )

    async def write_batch(self, name: str, records: list[dict[str, Any]]) -> None:
        plan = await self.plan(name, records)
        self._note(name, plan)
        self.refuse_if_needed()  # a concurrent writer changed things since the plan
        collection = self.db[name]
        if plan.inserts:
            try:
                await collection.insert_many(plan.inserts, ordered=False)
            except BulkWriteError as exc:
                errors = exc.details.get("writeErrors", [])
                others = [e for e in errors if e.get("code") != 11000]
                if others or self.mode != "skip":
                    raise RestoreConflict(
                        f"{name}: {len(errors)} insert(s) failed, a concurrent writer is "
                        f"using the same ids: {errors[0].get('errmsg')}"
                    ) from exc
                # inserted meanwhile by someone else: in skip mode, that is a skip
                plan.skipped += len(errors)
                del plan.inserts[int(exc.details.get("nInserted", 0)):]
        if plan.overwrites:
            await collection.bulk_write(
                [ReplaceOne({"_id": r["_id"], "tenant": r["tenant"]}, r) for r in plan.overwrites],
                ordered=False,
            )
        self._count(name, plan)


async def restore(
    store: Any,
    path: str | os.PathLike[str],
    *,
    mode: Mode | str = "skip",
    as_tenant: str | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> RestoreReport:
    """Restore a backup into `store` (see the module docstring for the rules).

    Raises the verify errors (`BackupCorrupt`, ...) before writing anything,
    `RestoreConflict` (id of another tenant; differing document with ``mode="fail"``),
    `ValidationError` for a bad mode or tenant, `BackupError` if `as_tenant` is given for
    a backup that holds several tenants.
    """
    if mode not in MODES:
        raise ValidationError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if as_tenant is not None:
        check_id(as_tenant, "tenant")
    started = time.perf_counter()
    with open_backup(path) as reader:
        manifest = read_manifest(reader)
        if as_tenant is not None and len(manifest.tenants) > 1:
            raise BackupError(
                f"as_tenant needs a backup of one tenant; this one holds {len(manifest.tenants)} "
                f"({', '.join(manifest.tenants[:5])}{', ...' if len(manifest.tenants) > 5 else ''})"
            )
        planner = _Restorer(store, mode, as_tenant)
        await scan(reader, manifest, on_batch=planner.plan_batch, progress=progress,
                   step="check")
        planner.refuse_if_needed()
        if dry_run:
            return RestoreReport(str(path), mode, as_tenant, True, planner.counts, manifest,
                                 time.perf_counter() - started)
        writer = _Restorer(store, mode, as_tenant)
        for name in WRITE_ORDER:
            total = manifest.collections[name].count
            done = 0
            batch: list[dict[str, Any]] = []
            size = 0
            if progress:
                progress(f"restore {name}", 0, total)
            for _, record, nbytes in read_records(reader, manifest, name):
                batch.append(record)
                size += nbytes
                if len(batch) >= BATCH_RECORDS or size >= BATCH_BYTES:
                    await writer.write_batch(name, batch)
                    done += len(batch)
                    batch, size = [], 0
                    if progress:
                        progress(f"restore {name}", done, total)
            if batch:
                await writer.write_batch(name, batch)
                done += len(batch)
            if progress:
                progress(f"restore {name}", done, total)
        return RestoreReport(str(path), mode, as_tenant, False, writer.counts, manifest,
                             time.perf_counter() - started)
