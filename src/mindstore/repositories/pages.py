"""Sealed pages of a task's history: reading them, sealing the open page, folding changes.

A task document holds the open page (messages ``[sealed, seq)``); older messages live in
`task_pages` documents (`model/paging.py` decides when and where to cut). `SealedPages`
(one per view, held by the port, `port.TaskPort.sealed`) does the I/O, always after the
task document itself was read or written:

* **Reads** take the task document first (its `version`, `sealed`, `pages` and `pending`
  list), then only the pages the range needs: pages ``< pages`` overlapping the range,
  the first and last sliced on the server, the ones between whole. A page whose
  `version` is newer than the task version read has had a later change folded in: the
  read is retried from the task document (`StalePage`), so a reader sees one version.
* **Seals** write each full page under its deterministic id first (an upsert that never
  replaces a page written from a later version), then one task update, guarded by the
  mark and by the count of changes to earlier open messages (not by the version, so
  concurrent appends do not stop it), drops the sealed messages by id and advances the
  mark. A crash or a lost race between the two leaves pages past the mark, which readers
  ignore and the next seal overwrites.
* **Folds** move the task's `pending` changes into their pages: each page is updated
  guarded by the version read (compare-and-set), its `version` set to the last pending
  change's task version, then the list is cleared, guarded by that version.

docs/write-paths.md ("Paged storage") gives the argument that no reader sees a torn
state, and the order of writes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pymongo.errors import DuplicateKeyError

from mindstore.clock import utcnow
from mindstore.crypto.fields import ENCRYPTED
from mindstore.errors import Conflict, NotFound
from mindstore.ids import page_key
from mindstore.model import id_filter
from mindstore.model.header import TaskHeader
from mindstore.model.paging import (
    apply_entry,
    apply_pending,
    cut_pages,
    page_document,
    sealed_header,
)
from mindstore.model.plans.core import Plan
from mindstore.model.storage_form import bson_size
from mindstore.repositories.scope import TaskScope

logger = logging.getLogger(__name__)

JSON = dict[str, Any]

PAGING_FIELDS: tuple[str, ...] = ("seq", "version", "sealed", "pages", "pending", ENCRYPTED)
"""Task document fields a read over pages needs (`Paging.of`), and the task's `encrypted`
mark, which a read without a keyring checks on the same document
(`TaskScope.require_keyring_to_read`)."""
STALE_READS = 8
"""How often a read starts over after finding a page newer than the task it read."""


def kept_changing(task_id: str) -> Conflict:
    """What a read raises when its pages changed under every one of its `STALE_READS`."""
    return Conflict(f"task {task_id!r}: its pages kept changing under the read")


class StalePage(Exception):
    """A page read reflects a later task version than the task document read before it."""


@dataclass(frozen=True)
class Paging:
    """What a reader learnt from the task document about its pages."""

    version: int
    sealed: int
    pages: int
    pending: tuple[JSON, ...] = ()
    seq: int = 0
    strict: bool = True
    """Refuse a page newer than `version` (`StalePage`): a reader's snapshot. A writer's
    reads are not strict: its update is pinned to its state, so a newer page only means
    that update will not match and the writer plans again."""

    @classmethod
    def of(cls, document: JSON, *, strict: bool = True) -> Paging:
        pending = document.get("pending")
        return cls(
            seq=int(document.get("seq", 0) or 0),
            version=int(document.get("version", 0) or 0),
            sealed=int(document.get("sealed", 0) or 0),
            pages=int(document.get("pages", 0) or 0),
            pending=tuple(pending) if isinstance(pending, list) else (),
            strict=strict,
        )


def _counters(document: JSON) -> dict[str, int]:
    """A task document's paging counters (absent: 0)."""
    names = ("seq", "sealed", "pages", "sealed_bytes", "patched")
    return {name: int(document.get(name, 0) or 0) for name in names}


def _unchanged(field: str, value: int) -> JSON:
    """A filter clause: `field` still holds `value` (0 also matches a field never stored)."""
    return {field: value} if value else {field: {"$in": [0, None]}}


class SealedPages:
    """Page reads, seals and folds for one tenant's tasks (over the view's `TaskScope`)."""

    def __init__(self, scope: TaskScope) -> None:
        self.scope = scope

    def visible(self, key: str, paging: Paging) -> JSON:
        """The filter of a task's visible pages (those below its `pages` mark: a page past
        it is left by a crashed or lost seal, garbage no reader may see)."""
        return {"tenant": self.scope.tenant, "task": key, "page": {"$lt": paging.pages}}

    # ------------------------------------------------------------------ reads
    async def bounds(self, key: str, paging: Paging, start: int, stop: int) -> list[JSON]:
        """(page, start, end, version) of the visible pages overlapping ``[start, stop)``."""
        query = {
            **self.visible(key, paging),
            "start": {"$lt": stop},
            "end": {"$gt": start},
        }
        projection = {"_id": 0, "page": 1, "start": 1, "end": 1, "version": 1}
        rows: list[JSON] = await self.scope.pages.find(query, projection).to_list(length=None)
        rows.sort(key=lambda row: int(row["start"]))
        return rows

    def check(self, rows: Sequence[JSON], paging: Paging) -> None:
        """Raise `StalePage` if a strict reader read a page newer than its task version."""
        if not paging.strict:
            return
        for row in rows:
            if int(row.get("version", 0)) > paging.version:
                raise StalePage(row.get("page"))

    async def messages(self, key: str, paging: Paging, start: int, stop: int) -> list[JSON]:
        """Stored messages ``[start, min(stop, sealed))`` from the pages, pending applied.

        The first and last page are sliced on the server; the pages between travel whole
        (every message of them is asked for)."""
        stop = min(stop, paging.sealed)
        if paging.pages == 0 or start >= stop:
            return []
        bounds = await self.bounds(key, paging, start, stop)
        self.check(bounds, paging)
        whole = [b for b in bounds if b["start"] >= start and b["end"] <= stop]
        found: dict[int, list[JSON]] = {}
        if whole:
            ids = [page_key(key, int(b["page"])) for b in whole]
            cursor = self.scope.pages.find(
                {"_id": {"$in": ids}, "tenant": self.scope.tenant},
                {"_id": 0, "page": 1, "version": 1, "messages": 1},
            )
            for row in await cursor.to_list(length=None):
                self.check([row], paging)
                found[int(row["page"])] = row.get("messages") or []
        for bound in bounds:
            if bound in whole:
                continue
            first = max(start, int(bound["start"])) - int(bound["start"])
            count = min(stop, int(bound["end"])) - max(start, int(bound["start"]))
            row = await self.scope.pages.find_one(
                {"_id": page_key(key, int(bound["page"])), "tenant": self.scope.tenant},
                {"_id": 0, "version": 1, "messages": {"$slice": [first, count]}},
            )
            if row is None:
                raise StalePage(bound["page"])
            self.check([row], paging)
            found[int(bound["page"])] = row.get("messages") or []
        messages = [m for bound in bounds for m in found.get(int(bound["page"]), [])]
        if len(messages) != stop - start:
            raise StalePage(None)  # a page changed under the read: read again
        apply_pending(messages, paging.pending)
        return messages

    async def rows(self, key: str, paging: Paging, pipeline_tail: list[JSON]) -> list[JSON]:
        """Rows of a pipeline run over the task's visible pages (``$match`` first), each
        with the page's `start`, `page` and `version`, in page order."""
        if paging.pages == 0:
            return []
        pipeline = [{"$match": self.visible(key, paging)}, *pipeline_tail]
        rows: list[JSON] = await (await self.scope.pages.aggregate(pipeline)).to_list(length=None)
        self.check(rows, paging)
        rows.sort(key=lambda row: (int(row.get("start", 0)), int(row.get("index", 0))))
        return rows

    async def ids(self, key: str, paging: Paging, ids: Sequence[str]) -> set[str]:
        """Which of `ids` are stored in the task's visible pages (ids travel back, not
        messages; the `(tenant, task, messages.id)` index finds the pages)."""
        if paging.pages == 0 or not ids:
            return set()
        rows = await self.rows(
            key,
            paging,
            [
                {"$match": {"messages.id": {"$in": list(ids)}}},
                {"$unwind": {"path": "$messages"}},
                {"$match": {"messages.id": {"$in": list(ids)}}},
                {"$project": {"_id": 0, "id": "$messages.id", "start": 1, "version": 1}},
            ],
        )
        return {row["id"] for row in rows}

    async def locate(
        self, key: str, paging: Paging, field: str, values: Sequence[Any]
    ) -> list[tuple[int, JSON]]:
        """(index, stored message, pending applied) of the sealed messages whose `field`
        is among `values` (e.g. ``id``), in history order."""
        if paging.pages == 0 or not values:
            return []
        path = f"messages.{field}"
        rows = await self.rows(
            key,
            paging,
            [
                {"$match": {path: {"$in": list(values)}}},
                {"$unwind": {"path": "$messages", "includeArrayIndex": "index"}},
                {"$match": {path: {"$in": list(values)}}},
                {"$project": {"_id": 0, "index": 1, "start": 1, "version": 1,
                              "message": "$messages"}},
            ],
        )  # fmt: skip
        located = [(int(row["start"]) + int(row["index"]), row["message"]) for row in rows]
        apply_pending([message for _, message in located], paging.pending)
        return located

    async def ids_at(self, key: str, paging: Paging, plan: Plan) -> dict[int, str]:
        """The ids of the sealed messages a plan patches without naming them (a tool call's
        flags: the header keeps only the call's index), read from their pages."""
        wanted = {p.index for p in plan.patches if p.index < paging.sealed and not p.message_id}
        found: dict[int, str] = {}
        for index in sorted(wanted):
            stored = await self.messages(key, paging, index, index + 1)
            if stored and isinstance(stored[0].get("id"), str):
                found[index] = stored[0]["id"]
        return found

    async def last(self, key: str, paging: Paging) -> JSON | None:
        """The last sealed message (pending applied), for a task whose open page is empty."""
        messages = await self.messages(key, paging, paging.sealed - 1, paging.sealed)
        return messages[0] if messages else None

    # ------------------------------------------------------------------ seals
    async def seal(
        self, task_id: str, version: int, header: TaskHeader, *, force: bool = False
    ) -> tuple[TaskHeader, datetime] | None:
        """Seal the task's open page (see the module docstring): the new header and the
        time written when the task was still at `version` (the caller caches them), else
        None (sealed at a later version, nothing to cut, or another writer's change won).

        The task update is guarded by the paging mark (`sealed`) and the count of changes
        to earlier messages (`patched`), not by `version`: appends made meanwhile do not
        stop it (they only add at the end; the sealed messages are removed by id with
        `$pull`), so a busy task is sealed on time. A forced seal (the document would
        outgrow its limit) cuts a partial last page and is pinned to the exact version."""
        key = self.scope.key(task_id)
        query = self.scope.filter(task_id)
        fields = ("version", "updated_at", "created_at", "seq", "sealed", "pages",
                  "sealed_bytes", "patched", "id_filter")  # fmt: skip
        projection = {**dict.fromkeys(fields, 1), "messages": 1}
        document = await self.scope.tasks.find_one(query, projection)
        if document is None or (force and document.get("version", 0) != version):
            return None
        read = _counters(document)
        stored: list[JSON] = document.get("messages") or []
        if len(stored) != read["seq"] - read["sealed"]:
            logger.warning("task %r: open page holds %d messages, header says %d; not sealed",
                           task_id, len(stored), read["seq"] - read["sealed"])  # fmt: skip
            return None
        cuts = cut_pages(
            [bson_size(message) for message in stored], first_index=read["sealed"],
            first_page=read["pages"], policy=self.scope.page_policy, force=force,
        )  # fmt: skip
        if not cuts:
            return None
        now, born, at = utcnow(), document.get("created_at"), int(document.get("version", 0))
        for cut in cuts:
            page = page_document(
                key=key, tenant=self.scope.tenant, cut=cut, version=at, now=now, born=born,
                messages=stored[cut.start - read["sealed"] : cut.end - read["sealed"]],
            )  # fmt: skip
            # never over a page this task wrote from a later version (a newer seal is under
            # way, or a fold); a page left by a deleted task of the same id (another `born`)
            # is garbage
            newer_or_foreign = {"$or": [{"born": {"$ne": born}}, {"version": {"$lt": at + 1}}]}
            try:
                await self.scope.pages.replace_one(
                    {"_id": page["_id"], "tenant": self.scope.tenant, **newer_or_foreign},
                    page,
                    upsert=True,
                )
            except DuplicateKeyError:
                return None
        cut_to = cuts[-1].end
        moved = stored[: cut_to - read["sealed"]]
        blocks, filter_sets = await self._grown_filter(key, document, read, moved)
        sets = {
            "sealed": cut_to,
            "pages": cuts[-1].page + 1,
            "sealed_bytes": read["sealed_bytes"] + sum(cut.size_bytes for cut in cuts),
            "id_filter_words": blocks,
            **filter_sets,
            "updated_at": now,
        }
        if force:
            guard = {**query, "version": at, "updated_at": document.get("updated_at")}
            drop: JSON = {"$push": {"messages": {"$each": [], "$slice": -(read["seq"] - cut_to)}}}
        else:
            guard = {**query, **_unchanged("sealed", read["sealed"]),
                     **_unchanged("patched", read["patched"])}  # fmt: skip
            gone = [message.get("id") for message in moved]
            drop = {"$pull": {"messages": {"id": {"$in": gone}}}}
        update = {**drop, "$set": sets, "$inc": {"version": 1}}
        result = await self.scope.tasks.update_one(guard, update)
        if result.matched_count != 1:
            return None
        logger.debug("task %r: sealed pages %d-%d (messages up to %d)",
                     task_id, cuts[0].page, cuts[-1].page, cut_to)  # fmt: skip
        if at != version:
            return None  # sealed at a later version than the caller's header: not cached
        return sealed_header(header, cuts, blocks), now

    async def _grown_filter(
        self, key: str, document: JSON, read: dict[str, int], moved: Sequence[JSON]
    ) -> tuple[int, JSON]:
        """The sealed-id filter after a seal moves `moved` into pages (`model/id_filter.py`):
        (its size in blocks, the `$set` entries that write it). Only the blocks the moved
        ids touch are sent; a filter that is missing (a task sealed by an earlier version),
        malformed or full is rebuilt from every sealed id."""
        ids = [m["id"] for m in moved if isinstance(m.get("id"), str)]
        stored = document.get("id_filter")
        current = list(stored) if isinstance(stored, list) else None
        if current is not None and not id_filter.needs_rebuild(current, read["sealed"] + len(ids)):
            changed = id_filter.add(current, ids)
            return len(current), {f"id_filter.{i}": word for i, word in changed.items()}
        every: list[str] = []
        if read["pages"]:  # the ids sealed before, from their pages (once per doubling)
            earlier = Paging(version=0, sealed=read["sealed"], pages=read["pages"], strict=False)
            cursor = self.scope.pages.find(self.visible(key, earlier), {"_id": 0, "messages.id": 1})
            every = [
                message["id"]
                for row in await cursor.to_list(length=None)
                for message in row.get("messages") or []
                if isinstance(message, dict) and isinstance(message.get("id"), str)
            ]
        rebuilt = id_filter.build(len(every) + len(ids), [*every, *ids])
        return len(rebuilt), {"id_filter": rebuilt}

    async def unseal_last(self, task_id: str) -> None:
        """Bring the last sealed page back into an empty open page (retracting a message
        that was sealed): one guarded task update; the page, now past the mark, is garbage
        the next seal overwrites. Pending changes are folded first, so none is lost."""
        await self.fold(task_id)
        query = self.scope.filter(task_id)
        fields = ("version", "updated_at", "sealed", "pages", "sealed_bytes", "pending", "seq")
        projection = {**dict.fromkeys(fields, 1), "messages": 1}
        document = await self.scope.tasks.find_one(query, projection)
        if document is None or document.get("messages") or document.get("pending"):
            return  # changed meanwhile: the caller reads again
        paging = Paging.of(document)
        if not paging.pages:
            return
        page = await self.scope.pages.find_one(
            {
                "_id": page_key(self.scope.key(task_id), paging.pages - 1),
                "tenant": self.scope.tenant,
            }
        )
        if page is None or int(page["end"]) != paging.sealed:
            raise NotFound(f"task {task_id!r}: its last sealed page is missing")
        update = {
            "messages": page.get("messages") or [],
            "sealed": int(page["start"]),
            "pages": paging.pages - 1,
            "sealed_bytes": int(document.get("sealed_bytes", 0)) - int(page.get("size_bytes", 0)),
            "updated_at": utcnow(),
            "version": paging.version + 1,
        }
        guard = {**query, "version": paging.version, "updated_at": document.get("updated_at")}
        await self.scope.tasks.update_one(guard, {"$set": update})
        self.scope.forget(task_id)

    # ------------------------------------------------------------------ folds
    async def fold(self, task_id: str) -> bool:
        """Fold the task's pending changes into their pages, then clear them (True if the
        list was cleared, or was empty)."""
        key = self.scope.key(task_id)
        query = self.scope.filter(task_id)
        document = await self.scope.tasks.find_one(
            query, {"version": 1, "pending": 1, "pending_at": 1, "sealed": 1, "pages": 1}
        )
        if document is None:
            return True
        paging = Paging.of(document)
        if not paging.pending:
            return True
        folded_at = int(document.get("pending_at", paging.version))
        indexes = [int(e["i"]) for e in paging.pending if isinstance(e.get("i"), int)]
        if indexes:
            bounds = await self.bounds(key, paging, min(indexes), max(indexes) + 1)
            for bound in bounds:
                if not await self._fold_page(key, bound, paging.pending, folded_at):
                    return False
        cleared = await self.scope.tasks.update_one(
            {**query, "pending_at": folded_at}, {"$unset": {"pending": "", "pending_at": ""}}
        )
        return bool(cleared.matched_count)

    async def _fold_page(
        self, key: str, bound: JSON, pending: Sequence[JSON], folded_at: int
    ) -> bool:
        """Apply the pending entries that fall in one page (compare-and-set on its version)."""
        start, end = int(bound["start"]), int(bound["end"])
        entries = [e for e in pending if isinstance(e.get("i"), int) and start <= e["i"] < end]
        if not entries or int(bound.get("version", 0)) >= folded_at:
            return True
        _id = page_key(key, int(bound["page"]))
        page = await self.scope.pages.find_one(
            {"_id": _id, "tenant": self.scope.tenant},
            {"version": 1, "messages": 1, "size_bytes": 1},
        )
        if page is None or int(page.get("version", 0)) >= folded_at:
            return True
        messages: list[JSON] = page.get("messages") or []
        sets: JSON = {}
        size = int(page.get("size_bytes", 0))
        for position in sorted({int(e["i"]) - start for e in entries}):
            if position >= len(messages):
                continue
            before = bson_size(messages[position])
            message = messages[position]
            for entry in entries:
                if int(entry["i"]) - start == position and entry.get("id") == message.get("id"):
                    apply_entry(message, entry)
            size += bson_size(message) - before
            sets[f"messages.{position}"] = message
        sets["version"] = folded_at
        sets["size_bytes"] = size
        result = await self.scope.pages.update_one(
            {"_id": _id, "tenant": self.scope.tenant, "version": page.get("version", 0)},
            {"$set": sets},
        )
        return bool(result.matched_count)
