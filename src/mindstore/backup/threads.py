"""LangGraph threads as a unit of the lifecycle: which thread a saver document belongs to,
whose thread it is, which tasks hold its messages, and when it was last active.

Every document of the saver (`mindstore.integrations.langgraph`) is keyed by a string that
starts ``"<tenant>/<thread segment>/"`` (`langgraph_keys`): that prefix is the thread, in all
three collections. The segment is derived from the thread id, and on an owner-scoped saver
from the owner and the thread id (two owners may use one thread id), so:

* a checkpoint names its owner (`o`) and, when the segment is a hash, its thread id (`th`);
* writes and blobs name neither: their owner is their thread's, known from its checkpoints
  or from its messages tasks (whose metadata name the thread, and whose owner is the saver's);
* a thread's **last activity** is the latest of its checkpoints' times (LangGraph's
  checkpoint ids are UUID version 6, which hold their creation time) and of its messages
  tasks' ``updated_at``. A thread with neither (checkpoint ids that are not UUIDv6 and no
  messages task) has no known activity: retention keeps it, an incremental backup holds it.

Only keys and small fields are read (projections), one page of ids at a time.
"""

from __future__ import annotations

import datetime as _dt
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mindstore.collection_names import (
    LANGGRAPH_BLOBS,
    LANGGRAPH_CHECKPOINTS,
    LANGGRAPH_WRITES,
    TASKS,
)
from mindstore.integrations import langgraph_keys as keys

from .keyset import every_match

__all__ = [
    "THREAD_COLLECTIONS",
    "Thread",
    "checkpoint_time",
    "find_threads",
    "prefix_of",
    "thread_documents",
    "thread_of_task",
    "thread_prefix",
]

THREAD_COLLECTIONS = (LANGGRAPH_CHECKPOINTS, LANGGRAPH_WRITES, LANGGRAPH_BLOBS)
MARKER = keys.MARKER
_UUID_EPOCH = 0x01B21DD213814000  # 100 ns intervals from 1582-10-15 to 1970-01-01


def thread_prefix(doc_id: Any) -> str | None:
    """``"<tenant>/<thread segment>/"`` of a saver document's `_id` (None if it has none)."""
    if not isinstance(doc_id, str):
        return None
    parts = doc_id.split("/", 2)
    if len(parts) < 3 or not parts[0] or not parts[1]:
        return None
    return f"{parts[0]}/{parts[1]}/"


def prefix_of(tenant: str, owner: str | None, thread_id: str) -> str:
    """The prefix of a thread, as the saver on a view of `owner` (None: tenant-wide) keys it."""
    ident = thread_id if owner is None else f"{owner}\x00{thread_id}"
    return keys.thread_prefix(tenant, ident)


def checkpoint_time(checkpoint_id: str) -> _dt.datetime | None:
    """The creation time a UUIDv6 checkpoint id holds (LangGraph's `uuid6`), else None."""
    try:
        value = uuid.UUID(checkpoint_id)
    except ValueError:
        return None
    if value.version != 6 or str(value) != checkpoint_id:
        return None
    ticks = ((value.int >> 80) << 12) | ((value.int >> 64) & 0x0FFF)
    micros = (ticks - _UUID_EPOCH) // 10
    return _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC) + _dt.timedelta(microseconds=micros)


@dataclass
class Thread:
    """One thread of a tenant: its prefix, owner, messages tasks and last activity."""

    prefix: str
    owner: str | None = None
    thread_id: str | None = None
    tasks: set[str] = field(default_factory=set)  # stored keys of its messages tasks
    last_active: _dt.datetime | None = None

    def saw(self, moment: Any) -> None:
        if isinstance(moment, _dt.datetime):
            moment = moment if moment.tzinfo else moment.replace(tzinfo=_dt.UTC)
            if self.last_active is None or moment > self.last_active:
                self.last_active = moment


def _messages_task_query(tenant: str, owner: str | None) -> dict[str, Any]:
    return {"tenant": tenant, "metadata.integration": MARKER, "owner": owner}


async def find_threads(db: Any, tenant: str, owner: str | None = None) -> dict[str, Thread]:
    """The tenant's threads by prefix (only `owner`'s, an owner-scoped saver's, when given):
    from its checkpoints and from its messages tasks."""
    found: dict[str, Thread] = {}
    query: dict[str, Any] = {"tenant": tenant}
    if owner is not None:
        query["o"] = owner
    for row in await every_match(db[LANGGRAPH_CHECKPOINTS], query, {"_id": 1, "o": 1, "th": 1}):
        prefix = thread_prefix(row["_id"])
        if prefix is None:
            continue
        thread = found.setdefault(prefix, Thread(prefix, row.get("o")))
        segment, checkpoint_id = prefix.split("/")[1], row["_id"].rsplit("/", 1)[-1]
        thread.thread_id = row.get("th") or thread.thread_id or segment
        thread.saw(checkpoint_time(checkpoint_id))
    projection = {"_id": 1, "owner": 1, "metadata.thread_id": 1, "updated_at": 1}
    tasks: dict[str, Any] = {"tenant": tenant, "metadata.integration": MARKER}
    if owner is not None:
        tasks["owner"] = owner
    for task in await every_match(db[TASKS], tasks, projection):
        thread_id = (task.get("metadata") or {}).get("thread_id")
        if not isinstance(thread_id, str):
            continue
        prefix = prefix_of(tenant, task.get("owner"), thread_id)
        thread = found.setdefault(prefix, Thread(prefix, task.get("owner"), thread_id))
        thread.tasks.add(task["_id"])
        thread.saw(task.get("updated_at"))
    return found


async def thread_of_task(db: Any, tenant: str, stored_keys: Iterable[str]) -> list[Thread]:
    """The threads whose messages the given tasks hold (stored keys, either form), each
    with every messages task of the thread."""
    keys_ = sorted(set(stored_keys))
    if not keys_:
        return []
    rows = (
        await db[TASKS]
        .find(
            {"tenant": tenant, "_id": {"$in": keys_}, "metadata.integration": MARKER},
            {"_id": 1, "owner": 1, "metadata.thread_id": 1},
        )
        .to_list()
    )
    out: dict[str, Thread] = {}
    for row in rows:
        thread_id = (row.get("metadata") or {}).get("thread_id")
        if not isinstance(thread_id, str):
            continue
        owner = row.get("owner")
        prefix = prefix_of(tenant, owner, thread_id)
        if prefix in out:
            continue
        thread = Thread(prefix, owner, thread_id)
        query = _messages_task_query(tenant, owner)
        query["metadata.thread_id"] = thread_id
        thread.tasks = {t["_id"] for t in await every_match(db[TASKS], query, {"_id": 1})}
        out[prefix] = thread
    return list(out.values())


async def thread_documents(db: Any, tenant: str, prefixes: Iterable[str]
                           ) -> dict[str, list[str]]:  # fmt: skip
    """The `_id`s of every saver document under these thread prefixes, by collection."""
    out: dict[str, list[str]] = {name: [] for name in THREAD_COLLECTIONS}
    for prefix in sorted(set(prefixes)):
        for name in THREAD_COLLECTIONS:
            rows = await every_match(db[name], {"tenant": tenant, "_id": keys.prefix_range(prefix)},
                                {"_id": 1})  # fmt: skip
            out[name].extend(row["_id"] for row in rows)
    return out
