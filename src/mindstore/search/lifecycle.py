"""The index's side of the lifecycle: a deleted task, a redacted message, an erased or
shredded tenant, a restore (`forget_task`, `forget_message`, `forget_tenant`,
`reset_tenant`), and the removals they share with a catch-up's take-back (`pull_postings`,
`delete_entries`). A message's vector (``search_vectors``) is named as its entry is
(``<task key>/<index>``) and goes wherever the entry's chunk goes. Every write names its
documents by `_id`, or by task within the tenant. docs/search.md ("Lifecycle").
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from typing import Any

from pymongo import DeleteMany, UpdateOne

from mindstore.clock import utcnow
from mindstore.collection_names import (
    SEARCH_ENTRIES,
    SEARCH_POSTINGS,
    SEARCH_TASKS,
    SEARCH_VECTORS,
)
from mindstore.ids import task_key

from .entries import candidates, chunk_indexes, entry_id, task_range
from .postings import as_ordinal, postings_id, stats_filter, terms_id, unpack_terms


async def task_terms(database: Any, tenant: str, key: str) -> list[str]:
    """The terms a task's postings were written under."""
    return (await task_postings(database, tenant, key))[0]


def _held_postings(found: dict[str, Any] | None) -> tuple[list[str], list[int], int | None]:
    """A task's terms document read: its terms, its blocks, its ordinal (None: none)."""
    held = found or {}
    return (
        unpack_terms(held.get("k") or []),
        [int(b) for b in held.get("b") or []],
        as_ordinal(held.get("r")),
    )


async def task_postings(
    database: Any, tenant: str, key: str
) -> tuple[list[str], list[int], int | None]:
    """The terms a task's postings were written under, the blocks they went to, and the
    ordinal they name the task by (None: never indexed)."""
    found = await database[SEARCH_TASKS].find_one({"_id": terms_id(key), "tenant": tenant})
    return _held_postings(found)


def drop_emptied(tenant: str, ids: Iterable[str]) -> DeleteMany:
    """Delete the postings documents among `ids` that a pull left empty: an erased word
    leaves nothing behind, not even its name in an `_id`. (A push racing it upserts the
    document again; one it reaches first is not empty, so not deleted.)"""
    return DeleteMany({"tenant": tenant, "_id": {"$in": sorted(set(ids))}, "e": {"$size": 0}})


async def pull_postings(
    database: Any,
    tenant: str,
    ordinal: int | None,
    terms: Iterable[str],
    blocks: Iterable[int],
) -> None:
    """Pull the postings of the task of `ordinal` from the blocks `blocks` of `terms` (those
    its terms document names), and delete the documents left empty (None: nothing to
    pull)."""
    if ordinal is None:
        return
    held = sorted(set(blocks))
    ids = [postings_id(tenant, term, block) for term in dict.fromkeys(terms) for block in held]
    for chunk in range(0, len(ids), 1000):
        some = ids[chunk : chunk + 1000]
        requests: list[Any] = [
            UpdateOne({"_id": i, "tenant": tenant}, {"$pull": {"e": {"t": ordinal}}}) for i in some
        ]
        await database[SEARCH_POSTINGS].bulk_write([*requests, drop_emptied(tenant, some)])


async def _held_entries(database: Any, tenant: str, key: str) -> tuple[list[str], list[str]]:
    """The `_id`s of a task's chunks as stored, and of the vectors of the messages they
    hold (read by the task's `_id` range: for a task whose mark is gone)."""
    found = database[SEARCH_ENTRIES].find({"tenant": tenant, "_id": task_range(key)}, {"g": 1})
    chunks = [document async for document in found]
    vectors = [entry_id(key, i) for document in chunks for i in chunk_indexes(document)]
    return [str(document["_id"]) for document in chunks], vectors


async def delete_entries(
    database: Any, tenant: str, chunks: Sequence[str], vectors: Sequence[str]
) -> None:
    """Delete entries' chunks and vectors by `_id` (in parts of 1,000: every write names
    its documents)."""
    for name, ids in ((SEARCH_ENTRIES, chunks), (SEARCH_VECTORS, vectors)):
        for part in range(0, len(ids), 1000):
            named = {"tenant": tenant, "_id": {"$in": list(ids[part : part + 1000])}}
            await database[name].delete_many(named)


async def forget_task(database: Any, tenant: str, task_id: str) -> None:
    """Remove a deleted task from the tenant's index (postings, entries, mark, counts).

    Called after the task's document is gone. A search indexing the task meanwhile either
    finds its claim gone when it releases it, or the task gone when it asks again: either
    way it removes what it wrote (`SearchStore.refresh`)."""
    key = task_key(tenant, task_id)
    marks = database[SEARCH_TASKS]
    held = await marks.find({"tenant": tenant, "_id": {"$in": [key, terms_id(key)]}}).to_list(None)
    if not held:
        return
    mark = await marks.find_one_and_delete({"_id": key, "tenant": tenant})
    found = next((d for d in held if d["_id"] == terms_id(key)), None)
    if found is not None:
        terms, blocks, ordinal = _held_postings(found)
        await pull_postings(database, tenant, ordinal, terms, blocks)
    if mark is not None:
        chunks, vectors = candidates(key, int(mark.get("s", 0)))
    else:  # another caller took the mark: the chunks are found by the task's `_id` range
        chunks, vectors = await _held_entries(database, tenant, key)
    await delete_entries(database, tenant, chunks, vectors)
    await marks.delete_one({"_id": terms_id(key), "tenant": tenant})
    if mark is not None:
        await database[SEARCH_POSTINGS].update_one(
            stats_filter(tenant),
            {"$inc": {"docs": -int(mark.get("d", 0)), "length": -int(mark.get("l", 0))}},
        )


async def forget_message(database: Any, tenant: str, task_id: str, message_id: str) -> None:
    """Remove one (redacted) message, `message_id`, from the index at once, before any
    search runs.

    The task's mark is reset and claimed first, as a search claims a task it indexes: a
    search that claimed the task before takes back what it wrote (its release finds the
    mark reset), and one that comes while this runs waits for the claim instead of
    reading the task half pulled (`SearchStore.refresh`). Then the task's entries go (the
    message's text is packed with its neighbours': every chunk and vector of the task,
    named by the mark's count) and every posting of its task is pulled (no word of it
    stays, not in an `_id`); the release leaves the mark reset, so the next search indexes
    the task again, whole, without the message. The release runs even if a step failed
    (the re-index removes what the step left), so searches do not wait out the claim's
    lease for a failed call."""
    key = task_key(tenant, task_id)
    marks = database[SEARCH_TASKS]
    token = secrets.token_hex(8)
    claim = {"v": -1, "w": token, "wa": utcnow()}
    mark = await marks.find_one_and_update({"_id": key, "tenant": tenant}, {"$set": claim})
    if mark is None:  # never indexed; a search indexing it now asks again before it answers
        return
    try:
        await delete_entries(database, tenant, *candidates(key, int(mark.get("s", 0))))
        terms, blocks, ordinal = await task_postings(database, tenant, key)
        await pull_postings(database, tenant, ordinal, terms, blocks)
        await marks.update_one(
            {"_id": terms_id(key), "tenant": tenant}, {"$set": {"k": [], "b": []}}
        )
    finally:
        await marks.update_one({"_id": key, "tenant": tenant, "w": token}, {"$set": {"w": ""}})


async def forget_tenant(database: Any, tenant: str) -> None:
    """Remove everything the index holds for `tenant` (erase, shred, rebuild)."""
    for name in (SEARCH_POSTINGS, SEARCH_ENTRIES, SEARCH_TASKS, SEARCH_VECTORS):
        await database[name].delete_many({"tenant": tenant})


async def reset_tenant(database: Any, tenant: str) -> None:
    """Make the next search of `tenant` look at every task again (after a restore wrote
    tasks older than its watermark): the watermark is cleared and the epoch moves on, so
    stores that hold the old state notice at their next lookup."""
    await database[SEARCH_POSTINGS].update_one(
        stats_filter(tenant), {"$unset": {"wm": ""}, "$inc": {"epoch": 1}}
    )
