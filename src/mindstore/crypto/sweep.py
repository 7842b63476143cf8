"""The re-encryption sweep: every stored value of a tenant sealed with its newest data key.

After `rotate` (old ciphertexts re-sealed, so the old key could later be retired) or when
a tenant starts being encrypted (its plaintext from before sealed). Task by task, in `_id`
order: the task's sealed pages, then the task document, then its offloaded payloads;
after each task its key is saved as the sweep's cursor in the key store, so a sweep cut
short (a crash, a kill) resumes after the last task it finished (only under the key
version it was sweeping with). Each step is idempotent: a value already sealed with the
newest key is left as it is.

The task document's update is pinned to the document the sweep read: its `version`
(which every verb bumps, and so does the update, so every writer's cached state is
dropped and re-read) and its title (`set_title` writes it alone, without a version
bump). A write landing between the sweep's read and its update makes the update miss and
the task is read again: it is never overwritten with what the sweep read.

The task document's step covers its messages, its own fields (title, metadata values,
content, agent state) and its `pending` entries (changes to sealed messages not folded
into their pages yet, docs/write-paths.md): each entry's value is sealed as the message
would hold it at its path (`fields.seal_at`), and `pending_at` moves to the new version,
so a fold that read the entries in the clear before cannot clear the sealed list (its
clear is guarded by `pending_at`); the next fold writes the sealed values.

Sizes: a page's `size_bytes`, and the task's `size_bytes` and `sealed_bytes`, move by
what re-sealing changed (the pages' change counted in the task update; if a crash falls
between them, both task counters miss the same bytes, so the open page's size, which the
16 MiB guard reads, stays exact). The task's counters hold a sealed message's size with
its pending entries applied, so that is what the sweep measures for them.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mindstore.collection_names import DATA_KEYS, PAYLOADS, TASK_PAGES, TASKS
from mindstore.crypto.aead import FORMAT, is_current, is_sealed, key_version, sealed_format
from mindstore.crypto.fields import (
    ENCRYPTED,
    OWN_FIELDS,
    open_document,
    open_value_at,
    seal_at,
    seal_document,
)
from mindstore.crypto.keys import TenantKeys
from mindstore.crypto.task_fields import (
    open_payload,
    open_task_fields,
    seal_payload,
    seal_task_fields,
)
from mindstore.errors import Conflict, CryptoError
from mindstore.ids import task_id_of
from mindstore.model.paging import apply_pending
from mindstore.model.storage_form import bson_size

__all__ = ["ProgressFn", "SweepProgress", "reencrypt"]

ProgressFn = Callable[["SweepProgress"], None]
ATTEMPTS = 20


@dataclass
class SweepProgress:
    tenant: str
    version: int
    tasks_done: int = 0
    tasks_total: int = 0
    values_sealed: int = 0
    resumed_after: str | None = None


def _sealed_versions(value: Any, found: list[int]) -> None:
    if is_sealed(value):  # an older format counts as stale (-1): re-sealed in the current one
        found.append(key_version(value) if sealed_format(value) == FORMAT else -1)
    elif isinstance(value, dict):
        for item in value.values():
            _sealed_versions(item, found)
    elif isinstance(value, list):
        for item in value:
            _sealed_versions(item, found)


def _resealed(value: Any, keys: TenantKeys, reseal: Callable[[Any], Any]) -> Any | None:
    """`reseal(value)` if that changes anything (a plaintext field, an older key), else None."""
    version = keys.current()[0]
    before: list[int] = []
    _sealed_versions(value, before)
    fresh = reseal(value)
    after: list[int] = []
    _sealed_versions(fresh, after)
    if len(before) == len(after) and all(v == version for v in before):
        return None
    return fresh


@dataclass
class _Pages:
    """What re-sealing a task's pages did: the bytes its sealed messages grew by (pending
    entries applied), and the messages the pending entries name, as now stored."""

    grown: int = 0
    named: dict[str, Any] = field(default_factory=dict)


def _folded_size(message: Any, pending: list[Any]) -> int:
    """A sealed message's size with the pending entries that name it applied (a copy)."""
    if not any(isinstance(e, dict) and e.get("id") == message.get("id") for e in pending):
        return bson_size(message)
    folded = copy.deepcopy(message)
    apply_pending([folded], pending)
    return bson_size(folded)


def _message(document: Any, keys: TenantKeys, tenant: str, task_id: str) -> Any | None:
    if not isinstance(document, dict):
        return None
    return _resealed(
        document, keys,
        lambda doc: seal_document(open_document(doc, keys, tenant, task_id), keys, tenant, task_id),
    )  # fmt: skip


class _Sweep:
    def __init__(self, database: Any, tenant: str, keys: TenantKeys) -> None:
        self.database, self.tenant, self.keys = database, tenant, keys
        self.sealed = 0

    async def pending(self, key: str) -> list[Any]:
        """The task's pending entries now (changes to sealed messages, not yet folded)."""
        document = await self.database[TASKS].find_one(
            {"_id": key, "tenant": self.tenant}, {"pending": 1}
        )
        pending = document.get("pending") if document is not None else None
        return list(pending) if isinstance(pending, list) else []

    async def pages(self, key: str, task_id: str, pending: list[Any]) -> _Pages:
        """Re-seal the task's pages. A page's `size_bytes` moves by what its documents
        grew; the task's counters by what the messages grew *with `pending` applied* (the
        size the task's header holds for a sealed message: an entry that replaces a field
        hides what re-sealing that field changed)."""
        out = _Pages()
        query = {"tenant": self.tenant, "task": key}
        async for row in self.database[TASK_PAGES].find(query, {"_id": 1}):
            await self._page(row["_id"], task_id, pending, out)
        return out

    async def _page(self, page_id: Any, task_id: str, pending: list[Any], out: _Pages) -> None:
        """Re-seal one page, guarded by its `version`: a fold or a seal that changed it
        meanwhile makes the update match nothing, and the page is read again."""
        named = {e.get("id") for e in pending if isinstance(e, dict)}
        pages = self.database[TASK_PAGES]
        for _attempt in range(ATTEMPTS):
            page = await pages.find_one({"_id": page_id, "tenant": self.tenant})
            if page is None:
                return  # removed meanwhile (a repair, a delete)
            messages = page.get("messages") or []
            fresh = [_message(m, self.keys, self.tenant, task_id) for m in messages]
            new = [f if f is not None else m for f, m in zip(fresh, messages, strict=True)]
            if any(m is not None for m in fresh):
                change = sum(bson_size(n) - bson_size(m)
                             for n, m in zip(new, messages, strict=True)
                             if isinstance(m, dict))  # fmt: skip
                result = await pages.update_one(
                    {"_id": page_id, "tenant": self.tenant, "version": page.get("version")},
                    {"$set": {"messages": new}, "$inc": {"size_bytes": change}},
                )
                if not result.matched_count:
                    await asyncio.sleep(0.01)  # a fold or a seal got there first: read again
                    continue
                out.grown += sum(_folded_size(n, pending) - _folded_size(m, pending)
                                 for n, m in zip(new, messages, strict=True)
                                 if isinstance(m, dict))  # fmt: skip
                self.sealed += sum(f is not None for f in fresh)
            out.named.update(
                {m["id"]: m for m in new if isinstance(m, dict) and m.get("id") in named}
            )
            return
        raise Conflict(
            f"a page of task {task_id!r}: the re-encryption sweep kept losing to writers"
        )

    def resealed_pending(
        self, pending: list[Any], task_id: str, pages: _Pages
    ) -> tuple[list[Any], int] | None:
        """(the pending entries with their values sealed with the newest key, what that
        changes in the sealed messages' size once folded), or None if nothing changes.
        Only entries of messages the page pass saw are re-sealed (their size is known)."""
        fresh: list[Any] = []
        for entry in pending:
            fresh.append(entry)
            if (
                not isinstance(entry, dict)
                or "v" not in entry
                or entry.get("id") not in pages.named
            ):
                continue
            message_id, path = str(entry["id"]), str(entry.get("p", ""))

            def reseal(value: Any, message_id: str = message_id, path: str = path) -> Any:
                opened = open_value_at(value, path, self.keys, self.tenant, task_id, message_id)
                try:
                    return seal_at(opened, path, self.keys, self.tenant, task_id, message_id)
                except CryptoError:  # a path inside a field sealed whole (no planner writes
                    return value  # one): kept as it is stored

            value = _resealed(entry["v"], self.keys, reseal)
            if value is not None and value is not entry["v"]:
                fresh[-1] = {**entry, "v": value}
        if all(a is b for a, b in zip(fresh, pending, strict=True)):
            return None
        change = sum(_folded_size(m, fresh) - _folded_size(m, pending)
                     for m in pages.named.values())  # fmt: skip
        return fresh, change

    async def task(self, key: str, pages: _Pages) -> None:
        task_id = task_id_of(key)
        for _attempt in range(ATTEMPTS):
            document = await self.database[TASKS].find_one({"_id": key, "tenant": self.tenant})
            if document is None:
                return  # deleted meanwhile
            sets: dict[str, Any] = {}
            values = 0
            pages_grown = pages.grown
            pending = document.get("pending")
            resealed = (
                self.resealed_pending(pending, task_id, pages)
                if isinstance(pending, list)
                else None
            )
            if resealed is not None and isinstance(pending, list):
                # a fold under way read the old list: its clear (guarded by `pending_at`)
                # then fails, and the next fold applies the sealed values
                sets["pending"], sets["pending_at"] = resealed[0], document.get("version", 0) + 1
                pages_grown += resealed[1]
                values += sum(a is not b for a, b in zip(resealed[0], pending, strict=True))
            grown = pages_grown
            for index, message in enumerate(document.get("messages") or []):
                fresh = _message(message, self.keys, self.tenant, task_id)
                if fresh is not None:
                    sets[f"messages.{index}"] = fresh
                    grown += bson_size(fresh) - bson_size(message)
                    values += 1
            own = {name: document[name] for name in OWN_FIELDS if name in document}
            fresh_own = _resealed(own, self.keys, lambda fields: self._task_fields(fields, task_id))
            if fresh_own is not None:
                sets.update(fresh_own)
                values += len(fresh_own)
            if document.get(ENCRYPTED) is not True:
                sets[ENCRYPTED] = True  # a store without a keyring refuses to write into it
            if not sets and not pages_grown:
                return
            update: dict[str, Any] = {
                "$inc": {"version": 1, "size_bytes": grown, "sealed_bytes": pages_grown},
            }
            if sets:
                update["$set"] = {**sets, "updated_at": datetime.now(UTC)}
            pinned = {"_id": key, "tenant": self.tenant, "version": document.get("version", 0),
                      "title": document.get("title")}  # fmt: skip
            result = await self.database[TASKS].update_one(pinned, update)
            if result.matched_count:
                self.sealed += values
                return
            await asyncio.sleep(0.01)  # a writer got there first: read again
        raise Conflict(f"task {task_id!r}: the re-encryption sweep kept losing to writers")

    def _task_fields(self, fields: dict[str, Any], task_id: str) -> dict[str, Any]:
        opened = open_task_fields(fields, self.keys, self.tenant, task_id)
        return seal_task_fields(opened, self.keys, self.tenant, task_id)

    async def payloads(self, task_id: str) -> None:
        query = {"tenant": self.tenant, "task_id": task_id}
        found = self.database[PAYLOADS].find(query, {"data": 1, "message_id": 1, "path": 1})
        async for payload in found:
            data = payload.get("data")
            if is_current(data, self.keys.current()[0]):
                continue
            at, key = (str(payload.get("message_id")), str(payload.get("path"))), payload["_id"]
            plain = open_payload(data, self.keys, self.tenant, task_id, key,
                                 message_id=at[0], path=at[1])  # fmt: skip
            sealed = seal_payload(plain, self.keys, self.tenant, task_id, key,
                                  message_id=at[0], path=at[1])  # fmt: skip
            await self.database[PAYLOADS].update_one(
                {"_id": payload["_id"], "tenant": self.tenant}, {"$set": {"data": sealed}}
            )
            self.sealed += 1


def _cursor_id(tenant: str) -> str:
    return f"{tenant}/sweep"


async def reencrypt(
    database: Any,
    keys: TenantKeys,
    *,
    progress: ProgressFn | None = None,
    restart: bool = False,
) -> SweepProgress:
    """Seal every task of the tenant of `keys` with its newest data key (see the module
    doc). Resumes after the last task a previous sweep finished, unless `restart`."""
    tenant = keys.tenant
    version = keys.current()[0]
    cursors = database[DATA_KEYS]
    saved = (
        None if restart else await cursors.find_one({"_id": _cursor_id(tenant), "tenant": tenant})
    )
    after = None  # a sweep of another key version or ciphertext format starts anew
    if saved is not None and saved.get("version") == version and saved.get("format") == FORMAT:
        after = saved.get("after")
    query: dict[str, Any] = {"tenant": tenant}
    if after is not None:
        query["_id"] = {"$gt": after}
    state = SweepProgress(tenant, version, resumed_after=after)
    state.tasks_total = await database[TASKS].count_documents(query)
    sweep = _Sweep(database, tenant, keys)
    async for row in database[TASKS].find(query, {"_id": 1}).sort("_id", 1):
        key = row["_id"]
        pages = await sweep.pages(key, task_id_of(key), await sweep.pending(key))
        await sweep.task(key, pages)
        await sweep.payloads(task_id_of(key))
        await cursors.update_one(
            {"_id": _cursor_id(tenant), "tenant": tenant},
            {"$set": {"kind": "sweep", "after": key, "version": version, "format": FORMAT}},
            upsert=True,
        )
        state.tasks_done += 1
        state.values_sealed = sweep.sealed
        if progress is not None:
            progress(state)
    await cursors.delete_one({"_id": _cursor_id(tenant), "tenant": tenant})
    return state
