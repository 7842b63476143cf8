"""Retention of the units that are not tasks: LangGraph threads and agents.

* **A LangGraph thread** is kept or deleted whole, by its last activity (`threads`: the
  latest of its checkpoints' times and its messages tasks' ``updated_at``). A thread not
  active since the cut-off loses every checkpoint, write and blob (its messages tasks are
  as old, and go with the tasks' sweep); a thread active since keeps everything, its
  messages tasks included even when they are older than the cut-off (a graph may run many
  steps without a new message), and the receipt lists them (`kept_with_threads`). Each
  expired thread's documents are listed, and its activity checked again on that list,
  right before they are deleted: a thread written during the sweep is kept (a checkpoint
  written between the listing and the delete stays, with the blobs it wrote). A thread
  with no known activity is kept.
* **An agent** (its dialog aliases) goes when it was not changed since the cut-off and
  none of the dialogs it names is left; the delete repeats the cut-off, so an agent
  changed during the sweep is kept.
* A tenant's policy never expires.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from mindstore.collection_names import (
    AGENTS,
    LANGGRAPH_BLOBS,
    LANGGRAPH_CHECKPOINTS,
    LANGGRAPH_WRITES,
    MEMORY_ITEMS,
    TASKS,
)
from mindstore.ids import task_id_of, task_key

from .threads import checkpoint_time, find_threads, thread_documents

__all__ = ["expire_agents", "expire_memories", "expire_threads"]

#: a thread's writes and blobs before its checkpoints (a run again finds it by those)
ORDER = (LANGGRAPH_WRITES, LANGGRAPH_BLOBS, LANGGRAPH_CHECKPOINTS)
CHUNK = 500


async def _delete(db: Any, name: str, tenant: str, ids: list[Any],
                  guard: dict[str, Any] | None = None) -> None:  # fmt: skip
    for start in range(0, len(ids), CHUNK):
        await db[name].delete_many(
            {"tenant": tenant, "_id": {"$in": ids[start : start + CHUNK]}, **(guard or {})}
        )


async def expire_threads(
    db: Any, tenant: str, owner: str | None, cutoff: _dt.datetime, dry_run: bool
) -> tuple[dict[str, list[Any]], set[str]]:
    """Delete the threads not active since `cutoff` (the owner's, if given). Returns the
    erased ids by collection, and the stored keys of the live threads' messages tasks
    (which the task sweep must keep)."""
    erased: dict[str, list[Any]] = {name: [] for name in ORDER}
    keep: set[str] = set()
    for prefix, thread in sorted((await find_threads(db, tenant, owner)).items()):
        if thread.last_active is None or thread.last_active >= cutoff:
            keep |= thread.tasks
            continue
        documents = await thread_documents(db, tenant, [prefix])
        newest = [checkpoint_time(key.rsplit("/", 1)[-1])
                  for key in documents[LANGGRAPH_CHECKPOINTS]]  # fmt: skip
        if any(moment is not None and moment >= cutoff for moment in newest):
            keep |= thread.tasks  # written since it was found: kept
            continue
        for name in ORDER:
            if not dry_run:
                await _delete(db, name, tenant, documents[name])
            erased[name] += documents[name]
    return erased, keep


async def expire_agents(
    db: Any,
    tenant: str,
    owner: str | None,
    cutoff: _dt.datetime,
    erased_tasks: set[str],
    dry_run: bool,
) -> list[Any]:
    """Delete the agents not changed since `cutoff` none of whose dialogs is left (the
    owner's agent only, if given); `erased_tasks` (stored keys) count as gone already."""
    query: dict[str, Any] = {"tenant": tenant, "updated_at": {"$lt": cutoff}}
    if owner is not None:
        query["owner"] = owner
    agents = await db[AGENTS].find(query, {"_id": 1, "dialogs": 1}).to_list()
    gone = {task_id_of(key) for key in erased_tasks}
    chosen: list[Any] = []
    for agent in agents:
        dialogs = sorted({entry["dialog_id"] for entry in agent.get("dialogs") or []
                          if isinstance(entry, dict) and isinstance(entry.get("dialog_id"), str)
                          and task_id_of(entry["dialog_id"]) not in gone})  # fmt: skip
        if dialogs:
            forms = sorted({*dialogs, *(task_key(tenant, task_id_of(d)) for d in dialogs)})
            if await db[TASKS].count_documents({"tenant": tenant, "_id": {"$in": forms}}):
                continue  # a dialog it names is still there
        chosen.append(agent["_id"])
    if chosen and not dry_run:
        await _delete(db, AGENTS, tenant, chosen, {"updated_at": {"$lt": cutoff}})
        still = await db[AGENTS].find({"tenant": tenant, "_id": {"$in": chosen}}, {"_id": 1}
                                      ).to_list()  # fmt: skip
        kept = {row["_id"] for row in still}
        chosen = [agent for agent in chosen if agent not in kept]
    return chosen


async def expire_memories(
    db: Any, tenant: str, owner: str | None, cutoff: _dt.datetime, dry_run: bool
) -> list[Any]:
    """Delete the memory items not written since `cutoff` (the owner's, if given), each
    guarded by its write time: an item written during the sweep is kept."""
    query: dict[str, Any] = {"tenant": tenant, "updated_at": {"$lt": cutoff}}
    if owner is not None:
        query["owner"] = owner
    chosen = [row["_id"] for row in await db[MEMORY_ITEMS].find(query, {"_id": 1}).to_list()]
    if chosen and not dry_run:
        await _delete(db, MEMORY_ITEMS, tenant, chosen, {"updated_at": {"$lt": cutoff}})
        still = await db[MEMORY_ITEMS].find({"tenant": tenant, "_id": {"$in": chosen}}, {"_id": 1}
                                            ).to_list()  # fmt: skip
        kept = {row["_id"] for row in still}
        chosen = [item for item in chosen if item not in kept]
    return chosen
