"""Retention: delete a tenant's tasks not updated since a date, with their nodes, payloads and
sealed pages, and the LangGraph threads, agents and memory items not active (written) since
then (`retention_units`).

`erase_before(store, tenant, before=..., owner=None, dry_run=False)` selects by
`(tenant, updated_at)` (the `tenant_updated` index), in pages, and for each page:

1. deletes the tasks with the same guard, `updated_at < before`, so a task written during
   the sweep no longer matches and is kept (never lost, never half deleted);
2. reads which of the page's tasks are gone, and deletes their dialog nodes, payloads and
   sealed pages (`task_pages`, visible or not; counted under ``task_pages`` in the
   receipt when there are any).

A dialog that still has live forks (child nodes that are not being deleted) is kept and
listed in the receipt (`kept_with_forks`); the sweep repeats while it makes progress, so a
parent goes in the same run as its last fork, and otherwise in the run after. An
interrupted sweep is run again: it starts by deleting leftovers (nodes, payloads and pages
whose task is gone), then selects again; nothing is deleted twice, because every delete names ids
that still exist. The receipt has the same form as `erase`'s.

A retention policy is stored per tenant (`set_policy`, `get_policy`) and applied by
`apply_policy(store, tenant)` (CLI: `mindstore erase --tenant T --apply-policy`).
"""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass, field
from typing import Any

from mindstore.clock import utcnow
from mindstore.collection_names import (
    AGENTS,
    DIALOG_NODES,
    MEMORY_ITEMS,
    PAYLOADS,
    POLICIES,
    TASK_PAGES,
    TASKS,
)
from mindstore.errors import NotFound, ValidationError
from mindstore.ids import check_key, task_id_of, task_key
from mindstore.operations import operation
from mindstore.protocols import HasDatabase
from mindstore.search.index import forget_task
from mindstore.validation import check_int, check_owner

from .erase import EraseReceipt, ids_digest, listed_ids
from .retention_units import expire_agents, expire_memories, expire_threads

PAGE = 500
MAX_PASSES = 8


def _as_utc(value: Any, name: str) -> _dt.datetime:
    if isinstance(value, _dt.timedelta):
        if value <= _dt.timedelta(0):
            raise ValidationError(f"{name} must be a positive duration")
        return utcnow() - value
    if isinstance(value, _dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=_dt.UTC)
    if isinstance(value, _dt.date):
        return _dt.datetime(value.year, value.month, value.day, tzinfo=_dt.UTC)
    if isinstance(value, str):
        try:
            return _as_utc(_dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00")), name)
        except ValueError:
            raise ValidationError(f"{name}: not an ISO 8601 date or time: {value!r}") from None
    raise ValidationError(f"{name} must be a datetime, a date, ISO 8601 text or a timedelta")


@dataclass
class RetentionReceipt(EraseReceipt):
    """An erase receipt plus the cut-off and the dialogs kept because forks still live."""

    before: Any = None
    kept_with_forks: list[str] = field(default_factory=list)
    kept_with_threads: list[str] = field(default_factory=list)
    """Messages tasks older than the cut-off, kept because their LangGraph thread is live."""

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["scope"]["before"] = self.before.isoformat() if self.before else None
        out["kept_with_forks"] = list(self.kept_with_forks)
        if self.kept_with_threads:
            out["kept_with_threads"] = list(self.kept_with_threads)
        return out


async def _page_ids(db: Any, tenant: str, keys: list[Any]) -> list[Any]:
    """Sealed pages (visible or not) of the tasks stored under `keys`."""
    found: list[Any] = []
    for start in range(0, len(keys), PAGE):
        found += [d["_id"] for d in await db[TASK_PAGES].find(
            {"tenant": tenant, "task": {"$in": keys[start : start + PAGE]}}, {"_id": 1}
        ).to_list()]  # fmt: skip
    return found


async def _leftover_pages(db: Any, tenant: str) -> list[Any]:
    """Pages of this tenant whose task is gone (an interrupted sweep's rest)."""
    owners = [k for k in await db[TASK_PAGES].distinct("task", {"tenant": tenant})
              if isinstance(k, str)]  # fmt: skip
    present: set[str] = set()
    for start in range(0, len(owners), PAGE):
        chunk = owners[start : start + PAGE]
        present |= {d["_id"] for d in await db[TASKS].find(
            {"tenant": tenant, "_id": {"$in": chunk}}, {"_id": 1}).to_list()}  # fmt: skip
    return await _page_ids(db, tenant, [k for k in owners if k not in present])


async def _leftovers(db: Any, tenant: str) -> tuple[list[Any], list[Any]]:
    """Nodes and payloads of this tenant whose task is gone (an interrupted sweep's rest)."""
    node_keys = [
        d["_id"] for d in await db[DIALOG_NODES].find({"tenant": tenant}, {"_id": 1}).to_list()
    ]
    task_ids = {task_id_of(k) for k in node_keys}
    task_ids |= {
        i for i in await db[PAYLOADS].distinct("task_id", {"tenant": tenant}) if isinstance(i, str)
    }
    present: set[str] = set()
    keys = [task_key(tenant, i) for i in sorted(task_ids)] + sorted(task_ids)
    for start in range(0, len(keys), PAGE):
        chunk = keys[start : start + PAGE]
        present |= {task_id_of(d["_id"]) for d in await db[TASKS].find(
            {"tenant": tenant, "_id": {"$in": chunk}}, {"_id": 1}).to_list()}  # fmt: skip
    gone = task_ids - present
    nodes = [k for k in node_keys if task_id_of(k) in gone]
    payloads = (
        [
            d["_id"]
            for d in await db[PAYLOADS]
            .find({"tenant": tenant, "task_id": {"$in": sorted(gone)}}, {"_id": 1})
            .to_list()
        ]
        if gone
        else []
    )
    return nodes, payloads


@operation("retention.erase_before")
async def erase_before(
    store: HasDatabase,
    tenant: str,
    *,
    before: Any,
    owner: str | None = None,
    dry_run: bool = False,
) -> RetentionReceipt:
    """Delete the tenant's (or owner's) tasks not updated since `before` (a datetime, a date,
    ISO 8601 text, or a timedelta meaning "older than")."""
    check_key(tenant, "tenant")
    check_owner(owner)
    cutoff = _as_utc(before, "before")
    started, clock = utcnow(), time.perf_counter()
    db = store.database
    erased: dict[str, list[Any]] = {TASKS: [], DIALOG_NODES: [], PAYLOADS: [], TASK_PAGES: []}
    messages = 0
    kept: set[str] = set()
    if not dry_run:
        leftover_pages = await _leftover_pages(db, tenant)
        if leftover_pages:
            await db[TASK_PAGES].delete_many({"tenant": tenant, "_id": {"$in": leftover_pages}})
        erased[TASK_PAGES] += leftover_pages
        nodes, payloads = await _leftovers(db, tenant)
        if nodes:
            await db[DIALOG_NODES].delete_many({"tenant": tenant, "_id": {"$in": nodes}})
        if payloads:
            await db[PAYLOADS].delete_many({"tenant": tenant, "_id": {"$in": payloads}})
        erased[DIALOG_NODES] += nodes
        erased[PAYLOADS] += payloads
    # LangGraph threads not active since the cut-off go whole; a live one keeps its tasks
    threads, with_threads = await expire_threads(db, tenant, owner, cutoff, dry_run)
    query: dict[str, Any] = {"tenant": tenant, "updated_at": {"$lt": cutoff}}
    if owner is not None:
        query["owner"] = owner
    for _ in range(MAX_PASSES):
        progress = False
        candidates = await db[TASKS].find(query, {"_id": 1, "seq": 1}).sort(
            [("updated_at", 1), ("_id", 1)]).to_list()  # fmt: skip
        skipped = set(erased[TASKS]) | with_threads
        candidates = [c for c in candidates if c["_id"] not in skipped]
        for start in range(0, len(candidates), PAGE):
            page = candidates[start : start + PAGE]
            plain = {task_id_of(c["_id"]): c for c in page}
            children = await db[DIALOG_NODES].find(
                {"tenant": tenant, "parent_id": {"$in": sorted(plain)}}, {"_id": 1, "parent_id": 1}
            ).to_list()  # fmt: skip
            doomed = set(plain) | {task_id_of(k) for k in erased[TASKS]}
            with_forks = {c["parent_id"] for c in children if task_id_of(c["_id"]) not in doomed}
            kept |= with_forks
            chosen = [plain[i] for i in sorted(plain) if i not in with_forks]
            if not chosen:
                continue
            keys = [c["_id"] for c in chosen]
            if dry_run:
                gone = keys
            else:
                await db[TASKS].delete_many({**query, "_id": {"$in": keys}})
                still = {d["_id"] for d in await db[TASKS].find(
                    {"tenant": tenant, "_id": {"$in": keys}}, {"_id": 1}).to_list()}  # fmt: skip
                gone = [k for k in keys if k not in still]  # written during the sweep: kept
            if not gone:
                continue
            progress = True
            ids = sorted(task_id_of(k) for k in gone)
            node_keys = [task_key(tenant, i) for i in ids] + ids
            nodes = [d["_id"] for d in await db[DIALOG_NODES].find(
                {"tenant": tenant, "_id": {"$in": node_keys}}, {"_id": 1}).to_list()]  # fmt: skip
            payloads = [d["_id"] for d in await db[PAYLOADS].find(
                {"tenant": tenant, "task_id": {"$in": ids}}, {"_id": 1}).to_list()]  # fmt: skip
            pages = await _page_ids(db, tenant, gone)
            if not dry_run:
                for start in range(0, len(pages), PAGE):
                    await db[TASK_PAGES].delete_many(
                        {"tenant": tenant, "_id": {"$in": pages[start : start + PAGE]}}
                    )
                if nodes:
                    await db[DIALOG_NODES].delete_many({"tenant": tenant, "_id": {"$in": nodes}})
                if payloads:
                    await db[PAYLOADS].delete_many({"tenant": tenant, "_id": {"$in": payloads}})
                for task_id in ids:  # the search index follows its tasks (mindstore.search)
                    await forget_task(db, tenant, task_id)
            erased[TASKS] += gone
            erased[DIALOG_NODES] += nodes
            erased[PAYLOADS] += payloads
            erased[TASK_PAGES] += pages
            messages += sum(int(c.get("seq") or 0) for c in chosen if c["_id"] in set(gone))
        if not progress or dry_run:
            break
    agents = await expire_agents(db, tenant, owner, cutoff, set(erased[TASKS]), dry_run)
    remaining_parents = sorted(kept - {task_id_of(k) for k in erased[TASKS]})
    if not erased[TASK_PAGES]:
        del erased[TASK_PAGES]  # a receipt over unpaged data reads as before
    # threads and agents are counted only when some went, for the same reason
    erased.update({name: ids for name, ids in threads.items() if ids})
    if agents:
        erased[AGENTS] = agents
    memories = await expire_memories(db, tenant, owner, cutoff, dry_run)
    if memories:
        erased[MEMORY_ITEMS] = memories
    return RetentionReceipt(
        tenant=tenant, owner=owner, task_id=None, dry_run=dry_run, started_at=started,
        completed_at=utcnow(), counts={name: len(ids) for name, ids in erased.items()},
        messages=messages, ids_sha256=ids_digest(erased), elapsed_s=time.perf_counter() - clock,
        before=cutoff, kept_with_forks=remaining_parents,
        kept_with_threads=sorted(task_id_of(k) for k in with_threads),
        ids=listed_ids(erased) if dry_run else None,
    )  # fmt: skip


# ---------------------------------------------------------------------------- policies
@operation("retention.set_policy")
async def set_policy(
    store: HasDatabase, tenant: str, *, max_age_days: int | None
) -> dict[str, Any]:
    """Store the tenant's retention policy (None: keep forever). One upsert by `_id`."""
    check_key(tenant, "tenant")
    if max_age_days is not None:
        check_int(max_age_days, "max_age_days", minimum=1, maximum=100_000)
    policy = {"max_age_days": max_age_days, "updated_at": utcnow()}
    await store.database[POLICIES].update_one(
        {"_id": tenant, "tenant": tenant}, {"$set": {"retention": policy}}, upsert=True
    )
    return policy


@operation("retention.get_policy")
async def get_policy(store: HasDatabase, tenant: str) -> dict[str, Any] | None:
    check_key(tenant, "tenant")
    document = await store.database[POLICIES].find_one({"_id": tenant, "tenant": tenant})
    return (document or {}).get("retention")


@operation("retention.apply_policy")
async def apply_policy(
    store: HasDatabase, tenant: str, *, dry_run: bool = False
) -> RetentionReceipt:
    """Run `erase_before` with the tenant's stored policy (NotFound without one)."""
    policy = await get_policy(store, tenant)
    if not policy or policy.get("max_age_days") is None:
        raise NotFound(f"tenant {tenant!r} has no retention policy (set one with set_policy)")
    return await erase_before(store, tenant, before=_dt.timedelta(days=int(policy["max_age_days"])),
                              dry_run=dry_run)  # fmt: skip
