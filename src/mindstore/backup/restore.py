"""`restore(store, path, ...)`: verify, plan, then write; idempotent, with conflict modes.

Two passes over the backup:

1. **verify + plan** (read-only): every check of `verify` (the shape of every record
   included), and for each batch of records one query for the documents with the same
   `_id`s in the target collection. Each record gets an action: ``insert`` (no such
   document), ``unchanged`` (stored document is byte-identical in BSON), ``skip`` /
   ``overwrite`` / conflict (it differs: by `mode`). A corrupt backup, an `_id` that
   belongs to *another tenant*, or (``mode="fail"``) a differing document raises here,
   before anything is written. ``dry_run=True`` stops here and returns these counts: the
   real ones a run would write.
2. **write**: payloads, then dialog nodes, sealed pages and tasks (a task appears only
   after what it refers to), then the LangGraph threads' blobs, writes and checkpoints (a
   checkpoint after what it names), then agents and policies, in batches. The backup is
   not read again: the first pass keeps each batch of checked records (re-keyed, as they
   will be written) in a spool (`mindstore.backup.spool`: compressed BSON in an anonymous
   temporary file, a digest per batch), so every record's Extended JSON is parsed once,
   and what is written is exactly what was checked. Each batch is planned again against
   the current state and written with `insert_many(ordered=False)` and `ReplaceOne`
   guarded by `_id` and tenant. Every filter holds plain string ids only: a record's
   `_id` can never act as a query.

Mode ``skip`` never reads stored documents in full (it fetches `_id` and `tenant` only),
so it reports every existing `_id` as skipped; ``overwrite`` and ``fail`` compare, so a
second identical run reports everything unchanged and writes nothing.

Ids and tenants (`mindstore.backup.rekey`). A task's identity is (tenant, task id): task
and dialog-node documents are written under ``task_key(tenant, task id)``, whichever form
the backup holds, so a backup written before task ids were per tenant restores into the
current form. A document already stored under the legacy bare `_id` in the same tenant
is the same task: it is compared, skipped or overwritten in place, never duplicated.
``as_tenant`` moves a one-tenant backup into another tenant: keys, tenants, payload ids
and the payload markers in messages are rewritten, so a tenant can be copied next to
itself in the same database. An encrypted tenant's backup (one that holds data keys or a
shred's tombstone) is refused under another name: its keys would replace the target
tenant's live ones. A restore never writes over a document that belongs to
another tenant, in any mode: it refuses with `RestoreConflict` naming the ids.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import bson
from pymongo.errors import BulkWriteError
from pymongo.operations import ReplaceOne

from mindstore.collection_names import (
    AGENTS,
    DATA_KEYS,
    DIALOG_NODES,
    LANGGRAPH_BLOBS,
    LANGGRAPH_CHECKPOINTS,
    LANGGRAPH_WRITES,
    MEMORY_ITEMS,
    PAYLOADS,
    POLICIES,
    TASK_PAGES,
    TASKS,
)
from mindstore.errors import BackupError, ValidationError
from mindstore.ids import check_key, task_id_of, task_key
from mindstore.operations import operation
from mindstore.protocols import HasDatabase
from mindstore.search.index import reset_tenant

from .container import open_backup
from .errors import RestoreConflict
from .manifest import Manifest, format_time
from .rekey import rekey_record
from .spool import CheckedSpool
from .verify import Progress, read_manifest, scan

__all__ = ["RestoreReport", "restore"]

Mode = Literal["skip", "overwrite", "fail"]
MODES = ("skip", "overwrite", "fail")
#: Write order: what a task refers to exists before the task does (its pages included:
#: a task that counts pages never appears without them).
WRITE_ORDER = (
    DATA_KEYS, PAYLOADS, DIALOG_NODES, TASK_PAGES, TASKS,
    LANGGRAPH_BLOBS, LANGGRAPH_WRITES, LANGGRAPH_CHECKPOINTS, AGENTS, MEMORY_ITEMS, POLICIES,
)  # fmt: skip
#: Collections whose `_id` has one form only (no legacy bare task key).
SINGLE_FORM = (
    DATA_KEYS, PAYLOADS, TASK_PAGES, LANGGRAPH_BLOBS, LANGGRAPH_WRITES, LANGGRAPH_CHECKPOINTS,
    AGENTS, MEMORY_ITEMS, POLICIES,
)  # fmt: skip
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
            "backup": {
                "created_at": format_time(self.manifest.created_at),
                "scope": self.manifest.scope.to_dict(),
                "tenants": list(self.manifest.tenants),
            },
            "elapsed_s": round(self.elapsed_s, 3),
        }


@dataclass
class _Plan:
    inserts: list[dict[str, Any]] = field(default_factory=list)
    overwrites: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0
    unchanged: int = 0
    conflicts: list[Any] = field(default_factory=list)
    collisions: list[tuple[Any, Any]] = field(default_factory=list)


def _literal(value: Any) -> str:
    """Ids in restore's filters are plain strings (the shape checks guarantee it; this is
    the second wall): never an operator document, a regex or any other BSON value."""
    if type(value) is not str:
        raise BackupError(f"refusing to use a non-string id in a filter: {value!r:.60}")
    return value


_KEYED = True
"""Write tasks and dialog nodes under ``task_key(tenant, id)``, the form the repositories
write and read. Tests set it to False to write the legacy bare ``_id`` (a database of an
older version) and check that both forms restore, compare and stay apart."""


def repositories_use_task_keys() -> bool:
    """The key form restore writes (`_KEYED`): the per-tenant key in this version.

    A constant, not a probe: backup sits below the store layer and never opens one.
    """
    return _KEYED


def _other_form(record: dict[str, Any]) -> str:
    """A task's (or node's) key in the form the record is not in: bare <-> per tenant."""
    bare = task_id_of(record["_id"])
    return bare if record["_id"] != bare else task_key(record["tenant"], bare)


class _Restorer:
    def __init__(
        self,
        store: HasDatabase,
        mode: str,
        as_tenant: str | None,
        keyed: bool,
        names: tuple[str, ...],
        spool: CheckedSpool | None = None,
    ) -> None:
        self.db = store.database
        self.mode = mode
        self.as_tenant = as_tenant
        self.keyed = keyed
        self.spool = spool
        self.counts = {name: dict.fromkeys(ACTIONS, 0) for name in names}
        self.conflicts: dict[str, int] = dict.fromkeys(names, 0)
        self.collisions: dict[str, int] = dict.fromkeys(names, 0)
        self.examples: list[str] = []
        self.collision_examples: list[str] = []

    def _targets(self, name: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [rekey_record(name, record, self.as_tenant, keyed=self.keyed) for record in records]

    async def _stored(self, name: str, records: list[dict[str, Any]],
                      full: bool) -> dict[str, dict[str, Any]]:  # fmt: skip
        """Stored documents by `_id`: the records' own, and for tasks and dialog nodes
        also the same task under the other form of its key."""
        ids = {_literal(record["_id"]) for record in records}
        if name not in SINGLE_FORM:
            ids |= {_other_form(record) for record in records}
        projection = None if full else {"_id": 1, "tenant": 1}
        cursor = self.db[name].find({"_id": {"$in": sorted(ids)}}, projection)
        return {doc["_id"]: doc for doc in await cursor.to_list()}

    async def plan(self, name: str, targets: list[dict[str, Any]]) -> _Plan:
        """What to do with each target (a record re-keyed by `_targets`)."""
        full = self.mode != "skip"
        existing = await self._stored(name, targets, full)
        tasks = await self._stored_tasks(targets) if name == TASK_PAGES else set()
        plan = _Plan()
        for record in targets:
            stored = existing.get(record["_id"])
            if name == TASK_PAGES and self._plan_page(
                plan, record, stored, record["task"] in tasks
            ):
                continue
            if stored is None and name not in SINGLE_FORM:
                other = existing.get(_other_form(record))
                if other is not None and other.get("tenant") == record["tenant"]:
                    stored = other  # the same task, stored under the other form of its key
                    record = {
                        key: (other["_id"] if key == "_id" else value)
                        for key, value in record.items()
                    }
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

    async def _stored_tasks(self, pages: list[dict[str, Any]]) -> set[str]:
        """The task keys (as the pages name them) of `pages` that are stored, in either
        key form, in the pages' tenant."""
        tenants = {_literal(page["task"]): _literal(page["tenant"]) for page in pages}
        forms = set(tenants) | {task_id_of(key) for key in tenants}
        found = (
            await self.db[TASKS]
            .find(
                {"_id": {"$in": sorted(forms)}, "tenant": {"$in": sorted(set(tenants.values()))}},
                {"_id": 1, "tenant": 1},
            )
            .to_list()
        )
        present = {task_key(doc["tenant"], task_id_of(doc["_id"])) for doc in found}
        return {
            key for key, tenant in tenants.items() if task_key(tenant, task_id_of(key)) in present
        }

    def _plan_page(
        self, plan: _Plan, record: dict[str, Any], stored: dict[str, Any] | None, task_stored: bool
    ) -> bool:
        """A page follows its task: kept when mode skip keeps the task; written over a
        stored page of a task that is not stored (a leftover of a half-done seal or an
        interrupted erase, which the restored task would otherwise count). True when the
        page is planned here, False for the rules every record follows."""
        if stored is not None and stored.get("tenant") != record["tenant"]:
            return False  # another tenant's id: refused by the common rules
        if task_stored:
            if self.mode == "skip":
                plan.skipped += 1
                return True
            return False
        if stored is None:
            return False
        if self.mode != "skip" and bson.encode(stored) == bson.encode(record):
            plan.unchanged += 1
        else:
            plan.overwrites.append(record)
        return True

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
        """First pass: count what a batch of checked records would do; spool them."""
        targets = self._targets(name, records)
        plan = await self.plan(name, targets)
        self._note(name, plan)
        self._count(name, plan)
        if self.spool is not None:
            self.spool.add(name, targets)

    def refuse_if_needed(self) -> None:
        collisions = sum(self.collisions.values())
        if collisions:
            detail = ", ".join(f"{n}: {c}" for n, c in self.collisions.items() if c)
            raise RestoreConflict(
                f"{collisions} document id(s) of the backup already belong to another tenant "
                f"in this database ({detail}; e.g. {'; '.join(self.collision_examples)}); "
                f"restore never touches another tenant's documents: nothing was written"
            )
        conflicts = sum(self.conflicts.values())
        if conflicts and self.mode == "fail":
            detail = ", ".join(f"{n}: {c}" for n, c in self.conflicts.items() if c)
            raise RestoreConflict(
                f"{conflicts} stored document(s) differ from the backup ({detail}; e.g. "
                f"{', '.join(self.examples)}); nothing was written. Use mode skip or overwrite"
            )

    async def write_batch(self, name: str, targets: list[dict[str, Any]]) -> None:
        """Second pass: plan a spooled batch against the current state again, write it."""
        plan = await self.plan(name, targets)
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
                del plan.inserts[int(exc.details.get("nInserted", 0)) :]
        if plan.overwrites:
            await collection.bulk_write(
                [
                    ReplaceOne({"_id": _literal(r["_id"]), "tenant": _literal(r["tenant"])}, r)
                    for r in plan.overwrites
                ],
                ordered=False,
            )
        self._count(name, plan)


def _refuse_moving_keys(manifest: Manifest, as_tenant: str | None) -> None:
    """`as_tenant` naming another tenant than the backup's, for a backup that holds data
    keys (or a shred's tombstone): refused before anything is read or written. Its
    content and wrapped keys are bound to their tenant and open nowhere else, and written
    under another name they would replace that tenant's live data key (which then reads
    nothing of its own) or mark it shredded."""
    keys = manifest.collections.get(DATA_KEYS)
    if as_tenant is None or keys is None or not keys.count or manifest.tenants == [as_tenant]:
        return
    raise BackupError(
        f"this backup holds the data keys of encrypted tenant {manifest.tenants[0]!r}: it "
        f"restores only under its own tenant, not as {as_tenant!r} "
        "(its content and keys are bound to their tenant); nothing was written"
    )


@operation("restore")
async def restore(
    store: HasDatabase,
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
    a backup that holds several tenants, or names another tenant than an encrypted
    backup's own (its data keys would replace that tenant's).
    """
    if mode not in MODES:
        raise ValidationError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if as_tenant is not None:
        check_key(as_tenant, "tenant")
    started = time.perf_counter()
    with open_backup(path) as reader, contextlib.closing(CheckedSpool()) as spool:
        manifest = read_manifest(reader)
        if as_tenant is not None and len(manifest.tenants) > 1:
            raise BackupError(
                f"as_tenant needs a backup of one tenant; this one holds {len(manifest.tenants)} "
                f"({', '.join(manifest.tenants[:5])}{', ...' if len(manifest.tenants) > 5 else ''})"
            )
        _refuse_moving_keys(manifest, as_tenant)
        keyed = repositories_use_task_keys()
        names = manifest.names
        planner = _Restorer(store, mode, as_tenant, keyed, names, None if dry_run else spool)
        await scan(reader, manifest, on_batch=planner.plan_batch, progress=progress, step="check")
        planner.refuse_if_needed()
        if dry_run:
            return RestoreReport(
                str(path),
                mode,
                as_tenant,
                True,
                planner.counts,
                manifest,
                time.perf_counter() - started,
            )
        writer = _Restorer(store, mode, as_tenant, keyed, names)
        for name in WRITE_ORDER:
            if name not in manifest.collections:
                continue  # an older format: no pages (1), no threads, agents, policies
            total = manifest.collections[name].count
            done = 0
            if progress:
                progress(f"restore {name}", 0, total)
            for batch in spool.batches(name):
                await writer.write_batch(name, batch)
                done += len(batch)
                if progress:
                    progress(f"restore {name}", done, total)
        # the search index is not in backups: its next search looks at every task again
        for tenant in [as_tenant] if as_tenant is not None else manifest.tenants:
            await reset_tenant(store.database, tenant)
        return RestoreReport(
            str(path),
            mode,
            as_tenant,
            False,
            writer.counts,
            manifest,
            time.perf_counter() - started,
        )
