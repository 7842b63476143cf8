"""Paged tasks built by raw database writes, in the stored shape of paged storage.

Until the task repository seals pages itself, tests of the readers outside it (analytics,
backup, erase) page a stored task here: its `messages` array is cut at the given split
points into sealed page documents (`task_pages`) and the open page left in the task, with
the header's paging fields (`sealed`, `pages`, `sealed_bytes`) set as a seal sets them.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from typing import Any

import bson

from mindstore.documents import TASK_PAGES, TASKS, utcnow
from mindstore.ids import page_key


def page_docs(
    task: dict[str, Any], splits: Sequence[int]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(page documents, the task's new fields) for `task` cut at `splits` (sorted message
    indexes in ``(0, len]``: page k holds ``[splits[k-1], splits[k])``)."""
    messages = task.get("messages", [])
    bounds = [0, *sorted(set(splits))]
    assert all(0 < s <= len(messages) for s in bounds[1:]), (splits, len(messages))
    pages = []
    for number, (start, end) in enumerate(zip(bounds, bounds[1:])):
        chunk = copy.deepcopy(messages[start:end])
        pages.append(
            {
                "_id": page_key(task["_id"], number),
                "tenant": task["tenant"],
                "task": task["_id"],
                "page": number,
                "start": start,
                "end": end,
                "size_bytes": sum(len(bson.encode(m)) for m in chunk),
                "version": task.get("version", 0),
                "messages": chunk,
                "created_at": utcnow().replace(microsecond=0),
            }
        )
    sealed = bounds[-1]
    fields = {
        "messages": messages[sealed:],
        "sealed": sealed,
        "pages": len(pages),
        "sealed_bytes": sum(p["size_bytes"] for p in pages),
    }
    return pages, fields


async def page_task(database: Any, key: str, splits: Sequence[int]) -> list[dict[str, Any]]:
    """Page the stored task `key` at `splits`; returns the page documents written."""
    task = await database[TASKS].find_one({"_id": key})
    assert task is not None, key
    assert not task.get("pages"), "already paged"
    if not splits:
        return []
    pages, fields = page_docs(task, splits)
    await database[TASK_PAGES].insert_many(copy.deepcopy(pages))
    await database[TASKS].update_one({"_id": key}, {"$set": fields})
    return pages


def random_splits(rng: random.Random, length: int, most: int = 4) -> list[int]:
    """Up to `most` split points in ``(0, length]`` (none for an empty task)."""
    if length == 0:
        return []
    count = rng.randint(1, min(most, length))
    return sorted(rng.sample(range(1, length + 1), count))


async def page_all(
    database: Any, tenant: str | None, rng: random.Random, *, share: float = 1.0
) -> int:
    """Page a `share` of the stored tasks (of `tenant`, or all) at random split points;
    returns how many were paged."""
    query = {} if tenant is None else {"tenant": tenant}
    tasks = await database[TASKS].find(query, {"_id": 1, "seq": 1, "messages": 1}).to_list(None)
    paged = 0
    for task in sorted(tasks, key=lambda t: t["_id"]):
        if rng.random() >= share:
            continue
        splits = random_splits(rng, len(task.get("messages", [])))
        if splits:
            await page_task(database, task["_id"], splits)
            paged += 1
    return paged


async def add_invisible_page(
    database: Any, key: str, messages: list[dict[str, Any]]
) -> dict[str, Any]:
    """A half-done seal: a page document numbered at the task's `pages` mark (not counted)."""
    task = await database[TASKS].find_one({"_id": key})
    assert task is not None
    number = task.get("pages", 0)
    start = task.get("sealed", 0)
    page = {
        "_id": page_key(key, number),
        "tenant": task["tenant"],
        "task": key,
        "page": number,
        "start": start,
        "end": start + len(messages),
        "size_bytes": sum(len(bson.encode(m)) for m in messages),
        "version": task.get("version", 0),
        "messages": copy.deepcopy(messages),
        "created_at": utcnow().replace(microsecond=0),
    }
    await database[TASK_PAGES].insert_one(copy.deepcopy(page))
    return page
