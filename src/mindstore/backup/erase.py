"""`erase(store, tenant, ...)`: delete a tenant's, an owner's or one task's data, with a receipt.

What is erased (always within `tenant`; every collection of `mindstore.registry`):

* tenant only: every document of the tenant, in every collection (tasks, sealed pages,
  dialog nodes, payloads, LangGraph threads, agents, memory items, the tenant's policy);
* ``owner=O``: the tasks of owner O, the dialog nodes of those tasks and every dialog
  node recorded with owner O, the payloads of those tasks, O's LangGraph threads (an
  owner-scoped saver's: checkpoints with ``o == O`` and the threads O's messages tasks
  name, each whole), the agent named O and O's memory items (``owner == O``: an owner-scoped
  store's, or those whose namespace names O where the store says the owner is);
* ``task_id=T``: task T, its dialog node (`_id` T) and its payloads (`task_id` T), also
  if the task itself is already gone (leftovers are erased too); when T holds a LangGraph
  thread's messages, the whole thread: its checkpoints, writes and blobs and its other
  messages tasks (branches, namespaces), with their nodes and payloads.

A task's sealed pages (`task_pages`, visible or left by a half-done seal) go with it, and
the receipt counts them under ``task_pages`` (the key is present only when pages were
erased, so a receipt over unpaged data reads as before).

Order: payloads, dialog nodes, pages, the threads' writes and blobs, their checkpoints,
agents, policies, then tasks, each by `_id` in chunks; every delete filter also names the
tenant (and the owner, for tasks). If an erase is interrupted, run it again: the tasks
(and a thread's checkpoints) are still there to be found, and it finishes the job. The
receipt counts the collections after ``payloads`` only when something was erased there.

Other data is never modified: a remaining dialog node (e.g. another owner's fork) whose
parent task was erased keeps its `parent_id`, and the receipt lists it under
``dangling_dialog_nodes`` so the operator knows.

A dry run's receipt also lists what it would erase: under ``ids``, per collection, the
first `LISTED_IDS` ids in sorted order (tasks and dialog nodes by their task id), with
``ids_listed_max`` saying where the list stops; ``counts`` has the full numbers. A real
erase lists none.

The receipt's ``ids_sha256`` is the sha256 (hex) of the UTF-8 text made of one line per
erased document, ``<collection>\\t<_id as canonical Extended JSON>\\n`` (a string id
``abc`` is ``"abc"`` with its quotes), the lines sorted by their UTF-8 bytes. Anyone with
the list of ids can recompute it; the receipt of an erase holds no ids of erased data.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

from mindstore.clock import utcnow
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
from mindstore.draws import current_tape
from mindstore.errors import ValidationError
from mindstore.ids import check_key as check_id
from mindstore.ids import check_name, task_id_of, task_key
from mindstore.operations import operation
from mindstore.protocols import HasDatabase
from mindstore.search.index import forget_task, forget_tenant
from mindstore.version import __version__

from .codec import encode_document
from .keyset import every_match
from .manifest import format_time
from .threads import find_threads, thread_documents, thread_of_task

__all__ = ["EraseReceipt", "erase", "ids_digest"]

RECEIPT_KIND = "mindstore-erase-receipt"
RECEIPT_VERSION = 1
DELETE_CHUNK = 500
_DANGLING_LISTED = 1000
LISTED_IDS = 1000
"""How many ids of each collection a dry run's receipt lists (`listed_ids`)."""
#: Threads, agents and policies, in the order they are erased: a thread's writes and blobs
#: before its checkpoints (an interrupted erase run again finds the thread by those)
UNIT_ORDER = (
    LANGGRAPH_WRITES, LANGGRAPH_BLOBS, LANGGRAPH_CHECKPOINTS, AGENTS, MEMORY_ITEMS, POLICIES,
    DATA_KEYS,
)  # fmt: skip


def _id_json(value: Any) -> str:
    # the _id inside a one-key document, cut back out: canonical Extended JSON of the id
    return encode_document({"i": value})[5:-1]


def ids_digest(ids: dict[str, list[Any]]) -> str:
    """sha256 of the sorted ``<collection>\\t<id as Extended JSON>\\n`` lines."""
    lines = sorted(
        f"{name}\t{_id_json(i)}\n".encode() for name, values in ids.items() for i in values
    )
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line)
    return digest.hexdigest()


def listed_ids(ids: dict[str, list[Any]], limit: int | None = None) -> dict[str, list[Any]]:
    """What a dry run shows of `ids`: per collection, the first `limit` in sorted order,
    tasks and dialog nodes by their task id (not the stored per-tenant key), other
    string ids as they are and any other id as canonical Extended JSON text."""
    limit = LISTED_IDS if limit is None else limit
    shown: dict[str, list[Any]] = {}
    for name, values in ids.items():
        plain = [
            (task_id_of(v) if name in (TASKS, DIALOG_NODES) else v)
            if isinstance(v, str)
            else _id_json(v)
            for v in values
        ]
        shown[name] = sorted(plain)[:limit]
    return shown


@dataclass
class EraseReceipt:
    tenant: str
    owner: str | None
    task_id: str | None
    dry_run: bool
    started_at: Any
    completed_at: Any
    counts: dict[str, int]
    messages: int
    ids_sha256: str
    dangling_dialog_nodes: list[dict[str, Any]] = field(default_factory=list)
    dangling_total: int = 0
    elapsed_s: float = 0.0
    ids: dict[str, list[Any]] | None = None
    """A dry run's preview of the ids (`listed_ids`); None on a real erase."""
    ids_max: int = field(default_factory=lambda: LISTED_IDS)
    """Where each list of `ids` stops."""

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": RECEIPT_KIND,
            "version": RECEIPT_VERSION,
            "mindstore_version": __version__,
            "dry_run": self.dry_run,
            "scope": {"tenant": self.tenant, "owner": self.owner, "task_id": self.task_id},
            "started_at": format_time(self.started_at),
            "completed_at": format_time(self.completed_at),
            "counts": dict(self.counts),
            "total": self.total,
            "messages": self.messages,
            "ids_sha256": self.ids_sha256,
            "ids_hash": "sha256 of sorted lines '<collection>\\t<_id as canonical Extended "
            "JSON>\\n'",
            "dangling_dialog_nodes": list(self.dangling_dialog_nodes),
            "dangling_total": self.dangling_total,
            **(
                {"ids": {n: list(v) for n, v in self.ids.items()}, "ids_listed_max": self.ids_max}
                if self.ids is not None
                else {}
            ),
        }


async def _ids(
    collection: Any, query: dict[str, Any], fields: dict[str, int] | None = None
) -> list[dict[str, Any]]:
    """Every matching document's `_id` (and `fields`), by keyset pages (flat per page)."""
    return await every_match(collection, query, {"_id": 1, **(fields or {})})


def _both_forms(tenant: str, ids: list[Any]) -> list[Any]:
    """Stored ids of tasks (or dialogs) in both forms: ``task_key(tenant, id)`` and the
    legacy bare id, whichever form `ids` are in."""
    out: dict[Any, None] = {}
    for value in ids:
        out[value] = None
        if isinstance(value, str):
            bare = task_id_of(value)
            out[bare] = None
            out[task_key(tenant, bare)] = None
    return list(out)


async def _page_ids(pages: Any, tenant: str, task_keys: list[Any] | None) -> list[Any]:
    """The sealed pages of the tenant (`task_keys` None) or of the given stored task keys,
    visible or not (a half-done seal's page is the task's data too)."""
    if task_keys is None:
        return [d["_id"] for d in await _ids(pages, {"tenant": tenant})]
    found: list[Any] = []
    for chunk in _chunks(task_keys):
        found += [d["_id"] for d in await _ids(pages, {"tenant": tenant, "task": {"$in": chunk}})]
    return found


def _chunks(values: list[Any], size: int = DELETE_CHUNK) -> list[list[Any]]:
    return [values[i : i + size] for i in range(0, len(values), size)]


@operation("erase")
async def erase(
    store: HasDatabase,
    tenant: str,
    *,
    owner: str | None = None,
    task_id: str | None = None,
    dry_run: bool = False,
) -> EraseReceipt:
    """Erase a tenant's data, or one owner's, or one task's (see the module docstring).

    With ``dry_run=True`` nothing is deleted and the receipt says what would be.
    """
    check_id(tenant, "tenant")
    if owner is not None and task_id is not None:
        raise ValidationError("erase takes an owner or a task id, not both")
    if owner is not None:
        check_name(owner, "owner")
    if task_id is not None:
        check_id(task_id, "task id")
    started, clock = utcnow(), time.perf_counter()
    db = store.database
    tasks, nodes, payloads, pages = db[TASKS], db[DIALOG_NODES], db[PAYLOADS], db[TASK_PAGES]

    # a task holding a LangGraph thread's messages takes its thread with it: every
    # checkpoint, write and blob, and the thread's other messages tasks (branches, namespaces)
    threads: list[str] = []
    named = [task_id] if task_id is not None else []
    if task_id is not None:
        for thread in await thread_of_task(db, tenant, _both_forms(tenant, [task_id])):
            threads.append(thread.prefix)
            named += [task_id_of(key) for key in sorted(thread.tasks)]
    elif owner is not None:
        threads = sorted(await find_threads(db, tenant, owner))
    task_query: dict[str, Any] = {"tenant": tenant}
    if owner is not None:
        task_query["owner"] = owner
    if task_id is not None:
        task_query["_id"] = {"$in": _both_forms(tenant, named)}
    task_docs = await _ids(tasks, task_query, {"seq": 1})
    task_ids = [d["_id"] for d in task_docs]
    messages = sum(d["seq"] for d in task_docs if isinstance(d.get("seq"), int))
    del task_docs

    # sealed pages name their task by its stored key (either form, as the task's _id)
    whole = owner is None and task_id is None
    followed = None if whole else _both_forms(tenant, task_ids if task_id is None else named)
    page_ids = await _page_ids(pages, tenant, followed)
    if owner is None and task_id is None:  # the whole tenant
        node_ids = [d["_id"] for d in await _ids(nodes, {"tenant": tenant})]
        payload_ids = [d["_id"] for d in await _ids(payloads, {"tenant": tenant})]
    else:
        # a task's node and payloads name it by either stored form
        follow = _both_forms(tenant, task_ids if task_id is None else named)
        found: dict[Any, None] = {}
        for chunk in _chunks(follow):
            for d in await _ids(nodes, {"tenant": tenant, "_id": {"$in": chunk}}):
                found[d["_id"]] = None
        if owner is not None:
            for d in await _ids(nodes, {"tenant": tenant, "owner": owner}):
                found[d["_id"]] = None
        node_ids = sorted(found, key=_id_json)
        payload_ids = []
        for chunk in _chunks(follow):
            payload_ids += [
                d["_id"]
                for d in await _ids(payloads, {"tenant": tenant, "task_id": {"$in": chunk}})
            ]

    # threads, agents, policies: the whole tenant's, the owner's, or the task's thread
    units: dict[str, list[Any]] = {name: [] for name in UNIT_ORDER}
    if whole:
        for name in UNIT_ORDER:
            units[name] = [d["_id"] for d in await _ids(db[name], {"tenant": tenant})]
    else:
        units.update(await thread_documents(db, tenant, threads))
        if owner is not None:
            agents = await _ids(db[AGENTS], {"tenant": tenant, "owner": owner})
            units[AGENTS] = [d["_id"] for d in agents]
            memories = await _ids(db[MEMORY_ITEMS], {"tenant": tenant, "owner": owner})
            units[MEMORY_ITEMS] = [d["_id"] for d in memories]

    erased = {TASKS: task_ids, DIALOG_NODES: node_ids, PAYLOADS: payload_ids}
    # the collections added later are counted only when they held something, so a
    # receipt over data that has none reads as before
    if page_ids:
        erased[TASK_PAGES] = page_ids
    erased.update({name: ids for name, ids in units.items() if ids})
    digest = ids_digest(erased)

    # children left behind: remaining dialog nodes whose parent is erased
    dangling: list[dict[str, Any]] = []
    dangling_total = 0
    if owner is not None or task_id is not None:
        gone = set(_both_forms(tenant, [*task_ids, *node_ids]))
        for chunk in _chunks(sorted(gone, key=_id_json)):
            for d in await _ids(
                nodes, {"tenant": tenant, "parent_id": {"$in": chunk}}, {"parent_id": 1, "owner": 1}
            ):
                if d["_id"] in gone:
                    continue
                dangling_total += 1
                if len(dangling) < _DANGLING_LISTED:
                    plain = task_id_of(d["_id"]) if isinstance(d["_id"], str) else d["_id"]
                    dangling.append(
                        {"id": plain, "missing_parent": d.get("parent_id"), "owner": d.get("owner")}
                    )

    if not dry_run:
        # A thread's writes and blobs before its checkpoints, and all of it before the
        # tasks: a run again still finds the thread by its checkpoints or its tasks. The
        # tasks before their pages, payloads and nodes: a task is never left without its
        # pages (a reader would fail on it); what an interrupted erase leaves of an erased
        # task, no reader sees, and its retry in this process deletes it (what the first
        # attempt found is noted: `mindstore.draws`), or from another, a whole tenant's
        # erase, `dialogs.repair()` (pages) and the next retention sweep (docs/operations.md).
        tape = current_tape()
        earlier = tape.recall(("erase", tenant)) if tape is not None else None
        dependents: dict[str, list[Any]] = {
            PAYLOADS: payload_ids, DIALOG_NODES: node_ids, TASK_PAGES: page_ids,
        }  # fmt: skip
        if isinstance(earlier, dict):  # this call's earlier attempt: what it had found
            for name, ids in dependents.items():
                ids += [i for i in earlier.get(name, []) if i not in set(ids)]
        if tape is not None:
            tape.note(("erase", tenant), {name: list(ids) for name, ids in dependents.items()})
        for name in UNIT_ORDER:
            for chunk in _chunks(units[name]):
                await db[name].delete_many({"tenant": tenant, "_id": {"$in": chunk}})
        for chunk in _chunks(task_ids):
            await tasks.delete_many({**task_query, "_id": {"$in": chunk}})
        for collection, ids in ((pages, page_ids), (payloads, payload_ids), (nodes, node_ids)):
            for chunk in _chunks(ids):
                await collection.delete_many({"tenant": tenant, "_id": {"$in": chunk}})
        # a page sealed by a writer racing the erase (between the page read and the delete)
        erased_keys = None if owner is None and task_id is None else _both_forms(tenant, task_ids)
        late = [i for i in await _page_ids(pages, tenant, erased_keys) if i not in set(page_ids)]
        for chunk in _chunks(late):
            await pages.delete_many({"tenant": tenant, "_id": {"$in": chunk}})
        # the search index is derived: it follows the tasks (mindstore.search)
        if whole:
            await forget_tenant(db, tenant)
        else:
            for key in task_ids:
                await forget_task(db, tenant, task_id_of(key))

    return EraseReceipt(
        tenant=tenant,
        owner=owner,
        task_id=task_id,
        dry_run=dry_run,
        started_at=started,
        completed_at=utcnow(),
        counts={name: len(ids) for name, ids in erased.items()},
        messages=messages,
        ids_sha256=digest,
        dangling_dialog_nodes=dangling,
        dangling_total=dangling_total,
        elapsed_s=time.perf_counter() - clock,
        ids=listed_ids(erased) if dry_run else None,
    )
