"""The task repository's port: one object every reader and writer of a task goes through.

It owns the view's scope (`scope.TaskScope`: tenant and owner filter, keys, locks,
collections, header cache), the sealed pages (`pages.SealedPages`) and decoding (stored
documents -> messages, markers resolved against the task's own payloads). Its reads are
public and named, so the layers built on it (the repository's reads, the writer,
retraction, the context window in `compression`) call the same primitives instead of
each other's private helpers: a read over pages is written once, here.

A read of a paged task takes the task document first, then the pages it needs, and starts
over when a page is newer than the task it read (`StalePage`, at most `STALE_READS`
times): docs/write-paths.md ("Paged storage").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mindstore.clock import utcnow
from mindstore.crypto.task_fields import payload_places
from mindstore.errors import NotFound
from mindstore.ids import check_name, page_key
from mindstore.model.messages import AnyMessage
from mindstore.model.paging import apply_pending
from mindstore.model.plans import parse_stored
from mindstore.model.stored_read import read_stored
from mindstore.payloads import Offloader
from mindstore.pipelines import boundaries as pipelines
from mindstore.pipelines.boundaries import with_fields
from mindstore.repositories.pages import (
    PAGING_FIELDS,
    STALE_READS,
    Paging,
    SealedPages,
    StalePage,
    kept_changing,
)
from mindstore.repositories.scope import TaskScope
from mindstore.validation import check_int, check_optional_int

MAX_SLICE = 2**31 - 1
"""`$slice` takes a 32-bit count on a server: larger requests are clamped to it."""


class TaskPort:
    """Scope, sealed pages and decoding of one tenant's tasks, with the reads they share."""

    def __init__(self, scope: TaskScope) -> None:
        self.scope = scope
        self.sealed = SealedPages(scope)

    async def header_document(
        self, task_id: str, *, tail: bool = False, write: bool = False
    ) -> dict[str, Any]:
        """The task's fields without its messages (`TaskScope.header_document`); with `tail`
        (always for a `write`) also the last message, which comes from its page when the
        open page is empty (every message of a paged task sealed, after retracting)."""
        document = await self.scope.header_document(task_id, tail=tail, write=write)
        if (tail or write) and not document.get("messages") and document.get("sealed"):
            paging = Paging.of(document, strict=not write)
            last = await self.sealed.last(self.scope.key(task_id), paging)
            document["messages"] = [last] if last is not None else []
            document["tail_sealed"] = last is not None
        return document

    async def locate(
        self, task_id: str, message_id: str
    ) -> tuple[dict[str, Any], int, dict[str, Any]]:
        """Where a message is, for a verb that changes it: the header document (as a write
        reads it), the message's index in the history and its stored form (pending changes
        applied), from the last message, the open page or the sealed pages."""
        check_name(message_id, "message id")
        document = await self.header_document(task_id, write=True)
        paging = Paging.of(document, strict=False)  # a writer's read (see Paging.strict)
        seq = int(document.get("seq", 0) or 0)
        stored = document.get("messages") or []
        if stored and isinstance(stored[-1], dict) and stored[-1].get("id") == message_id:
            return document, seq - 1, stored[-1]
        rows = await (
            await self.scope.tasks.aggregate(
                pipelines.locate_message_pipeline(self.scope.filter(task_id), message_id, ())
            )
        ).to_list(length=1)
        if rows:
            return document, paging.sealed + int(rows[0]["index"]), rows[0]["message"]
        located = await self.sealed.locate(self.scope.key(task_id), paging, "id", [message_id])
        if not located:
            raise NotFound(f"no message {message_id!r} in task {task_id!r}")
        return document, located[0][0], located[0][1]

    async def message_at(self, task_id: str, message_id: str) -> tuple[int, AnyMessage]:
        """(index, the message in its stored form): the last message this process wrote
        comes from the header cache, anything else is read."""
        check_name(message_id, "message id")
        entry = self.scope.cached(task_id)
        known = entry.tail_document(message_id) if entry is not None else None
        if known is None:
            _document, index, raw = await self.locate(task_id, message_id)
            known = index, raw
        raw = known[1]
        cipher = self.scope.cipher
        if cipher is not None:  # opened here: a newer key version is fetched (async)
            raw = (await cipher.opened([raw], task_id))[0]
        return known[0], self.parse_opened([raw], task_id)[0]

    def decode_stored(self, documents: list[dict[str, Any]], task_id: str) -> list[AnyMessage]:
        """Stored message documents -> messages in their stored form (for planning only:
        markers and escaped strings stay as stored, so a patch's size is computed on the
        same form as the stored document; the task ids the lean form left out filled back)."""
        if self.scope.cipher is not None:  # ciphertexts opened first (mindstore.crypto)
            documents = self.scope.cipher.open(documents, task_id)
        else:
            self.scope.require_keyring(documents)
        return self.parse_opened(documents, task_id)

    def parse_opened(self, documents: list[dict[str, Any]], task_id: str) -> list[AnyMessage]:
        """`decode_stored` of documents whose ciphertexts are opened already (opening
        twice would read the opened values as values stored in the clear)."""
        return parse_stored(documents, task_id=task_id)

    async def decode(self, task_id: str, documents: list[dict[str, Any]]) -> list[AnyMessage]:
        """Stored message documents -> messages as the caller stored them, in one walk at
        most per document (none for most) and one validation (`model.stored_read`).

        Markers resolve only against this task's payloads (tenant and task id in the
        query): a marker-shaped string can never fetch another task's payload.
        """
        cipher = self.scope.cipher
        if cipher is not None:  # ciphertexts opened first (mindstore.crypto)
            documents = await cipher.opened(documents, task_id)
        else:  # a tenant encrypted since: its sealed documents need a keyring
            self.scope.require_keyring(documents)
        read = read_stored(documents, strings=True)
        if read.markers:
            cursor = self.scope.payloads.find(
                {
                    "_id": {"$in": sorted(read.markers)},
                    "tenant": self.scope.tenant,
                    "task_id": task_id,
                },
                {"data": 1, "sha256": 1, "message_id": 1, "path": 1},
            )
            found: dict[str, Any] = {}
            places = payload_places(documents) if cipher is not None else {}
            async for payload in cursor:
                data = payload["data"]
                if cipher is not None:  # bound to where it was offloaded (a copied marker: refused)
                    data = cipher.open_payload(
                        payload["_id"], data, task_id,
                        stored=payload, places=places.get(payload["_id"], ()),
                    )  # fmt: skip
                found[payload["_id"]] = data
            read.resolve(found)
        return parse_stored(read, task_id=task_id)

    async def store_payloads(self, task_id: str, offloader: Offloader) -> list[str]:
        """Write the payloads a write's offloader took out, before the write that refers to
        them (an upsert that never replaces one: its id derives from where it is and its
        content's hash). Returns the ids it inserted (not those already there)."""
        inserted: list[str] = []
        for payload in offloader.pending.values():
            result = await self.scope.payloads.update_one(
                {"_id": payload.id, "tenant": self.scope.tenant},
                {
                    "$setOnInsert": {
                        "task_id": task_id,
                        "message_id": payload.message_id,
                        "path": payload.path,
                        "sha256": payload.sha256,
                        "size": payload.size,
                        "data": payload.data,
                        "created_at": utcnow(),
                    }
                },
                upsert=True,
            )
            if result.upserted_id is not None:
                inserted.append(payload.id)
        return inserted

    async def drop_payloads(self, ids: Sequence[str]) -> None:
        """Delete payloads a write inserted and then did not apply (its task not in this
        view): a write refused for scope leaves nothing behind."""
        if ids:
            await self.scope.payloads.delete_many(
                {"_id": {"$in": list(ids)}, "tenant": self.scope.tenant}
            )

    async def stored_messages_by_id(
        self, task_id: str, ids: Sequence[str]
    ) -> dict[str, AnyMessage]:
        """The open page's messages with one of `ids`, decoded, by id (a replay's answer)."""

        def build(query: dict[str, Any]) -> list[Any]:
            return [
                {"$match": query},
                {"$project": {"_id": 0, "messages": {"$filter": {
                    "input": "$messages", "as": "m",
                    "cond": {"$in": ["$$m.id", pipelines.literal(list(ids))]},
                }}}},
            ]  # fmt: skip

        pipeline = build(self.scope.filter(task_id))
        rows = await (await self.scope.tasks.aggregate(pipeline)).to_list(length=1)
        if not rows:
            return {}
        return {message.id: message for message in await self.decode(task_id, rows[0]["messages"])}

    async def open_ids(self, task_id: str, ids: set[str]) -> tuple[int, Paging]:
        """How many of `ids` the open page holds (one number travels back, not the
        messages), and the task's paging fields from the same read."""

        def build(query: dict[str, Any]) -> list[Any]:
            present = {
                "$filter": {
                    "input": "$messages",
                    "as": "m",
                    "cond": {"$in": ["$$m.id", pipelines.literal(sorted(ids))]},
                }
            }
            fields = dict.fromkeys(("version", "sealed", "pages", "pending"), 1)
            return [{"$match": query}, {"$project": {"_id": 0, "found": {"$size": present},
                                                     **fields}}]  # fmt: skip

        rows = await self.scope.aggregate_task(task_id, build)
        return int(rows[0]["found"]), Paging.of(rows[0], strict=False)  # writers' checks

    async def count_stored_ids(self, task_id: str, ids: set[str]) -> int:
        """How many of `ids` the task holds, in its open page or its sealed pages."""
        found, paging = await self.open_ids(task_id, ids)
        if found == len(ids) or paging.pages == 0:
            return found
        return found + len(await self.sealed.ids(self.scope.key(task_id), paging, sorted(ids)))

    def sealed_guess(self, task_id: str) -> int:
        """Where the open page starts, as this process last wrote the task (0 if unknown:
        most tasks are never paged). A wrong guess costs one more read, never a wrong
        answer: the read returns the task's real mark and is redone with it."""
        entry = self.scope.cached(task_id)
        return entry.header.sealed if entry is not None else 0

    @staticmethod
    def _open_slice(start: int, stop: int | None, sealed: int) -> dict[str, Any]:
        """The projection of the open page's part of ``[start, stop)`` (its array holds
        messages from `sealed` on) and the fields of a paged read."""
        projection: dict[str, Any] = dict.fromkeys(PAGING_FIELDS, 1)
        first = max(start - sealed, 0)
        if stop is None and first == 0:
            projection["messages"] = 1
        elif stop is None or stop > sealed:
            count = MAX_SLICE if stop is None else min(stop - sealed - first, MAX_SLICE)
            if count > 0:
                projection["messages"] = {"$slice": [min(first, MAX_SLICE), count]}
        return projection

    async def read_range(
        self, task_id: str, start: int = 0, stop: int | None = None
    ) -> list[AnyMessage]:
        """`MessageReads.read_range`'s implementation (documented there: how the range is
        read, its arguments and errors)."""
        check_int(start, "start")
        check_optional_int(stop, "stop")
        if stop is not None and stop <= start:
            # NotFound, and KeyringRequired, still apply
            self.scope.require_keyring_to_read(await self.header_document(task_id))
            return []
        key, guess = self.scope.key(task_id), self.sealed_guess(task_id)
        for _attempt in range(STALE_READS):
            document = await self.scope.find_task(task_id, self._open_slice(start, stop, guess))
            self.scope.require_keyring_to_read(document)
            paging = Paging.of(document)
            if paging.sealed != guess:
                guess = paging.sealed
                continue
            try:
                sealed = await self.sealed.messages(key, paging, start, stop or paging.sealed)
            except StalePage:
                continue
            return await self.decode(task_id, [*sealed, *(document.get("messages") or [])])
        raise kept_changing(task_id)

    async def find_message(self, task_id: str, message_id: str) -> tuple[int, Any] | None:
        """(index in the history, stored message) of a message, open page first."""
        for _attempt in range(STALE_READS):
            document = await self.scope.find_task(task_id, dict.fromkeys(PAGING_FIELDS, 1))
            self.scope.require_keyring_to_read(document)
            paging = Paging.of(document)
            rows = await (
                await self.scope.tasks.aggregate(
                    pipelines.locate_message_pipeline(self.scope.filter(task_id), message_id)
                )
            ).to_list(length=1)
            if rows:
                return paging.sealed + int(rows[0]["index"]), rows[0]["message"]
            try:
                key = self.scope.key(task_id)
                found = await self.sealed.locate(key, paging, "id", [message_id])
            except StalePage:
                continue
            return found[0] if found else None
        raise kept_changing(task_id)

    async def filtered(
        self, task_id: str, build: Callable[[dict[str, Any]], list[Any]],
        *, newest: bool = False, strict: bool = True,
    ) -> list[Any]:  # fmt: skip
        """The stored messages a one-row `$filter` pipeline keeps (its `messages` field),
        over the open page and, for a paged task, over the sealed pages (the same pipeline
        after its `$match`, pending changes applied), in history order. `newest`: only the
        latest one is wanted, so the pages are not read when the open page keeps any.
        `strict`: when some page sent no row (nothing kept, or deleted under the read), one
        more read checks that the task still exists (`NotFound` if not); a caller for whom a
        task deleted meanwhile makes no difference passes False."""
        for _attempt in range(STALE_READS):
            rows = await self.scope.aggregate_task(
                task_id, lambda query: with_fields(build(query), PAGING_FIELDS)
            )
            self.scope.require_keyring_to_read(rows[0])
            paging = Paging.of(rows[0])
            if not paging.pages or (newest and rows[0]["messages"]):
                return list(rows[0]["messages"])
            # a page with nothing kept sends no row (one per page would grow with the
            # pages, not with what is kept), unless it changed after the task was read
            kept = {"$or": [{"messages": {"$ne": []}}, {"version": {"$gt": paging.version}}]}
            tail = [*with_fields(build({})[1:], ("start", "version")), {"$match": kept}]
            try:
                pages = await self.sealed.rows(self.scope.key(task_id), paging, tail)
            except StalePage:
                continue
            if (
                strict
                and len(pages) < paging.pages
                and not await self.scope.tasks.count_documents(self.scope.filter(task_id), limit=1)
            ):  # a page that sent no row may be one deleted under the read, not an empty one
                raise self.scope.not_found(task_id)
            sealed = [message for row in pages for message in row.get("messages", [])]
            apply_pending(sealed, paging.pending)
            return [*sealed, *rows[0]["messages"]]
        raise kept_changing(task_id)

    async def segments(
        self, task_id: str, stages: list[Any], open_stages: list[Any],
        *, keep: dict[str, Any] | None = None,
    ) -> tuple[Paging, list[Any], dict[str, Any]]:  # fmt: skip
        """A per-document pipeline over a task's segments: `stages` over each visible page
        (rows in page order, with `page`, `start`, `version`), `open_stages` over the task
        document (its row, with the paging fields). Task document first (`pages`).
        `keep`: a condition on a page's row; a page whose row fails it sends none (unless
        it changed after the task was read), so a pass over many pages that matter little
        does not send a row for each."""
        for _attempt in range(STALE_READS):
            rows = await self.scope.aggregate_task(
                task_id, lambda query: [{"$match": query}, *with_fields(open_stages, PAGING_FIELDS)]
            )
            self.scope.require_keyring_to_read(rows[0])
            paging = Paging.of(rows[0])
            fields = ("page", "start", "version")
            tail = with_fields(stages, fields)
            if keep is not None:
                tail.append({"$match": {"$or": [keep, {"version": {"$gt": paging.version}}]}})
            try:
                pages = await self.sealed.rows(self.scope.key(task_id), paging, tail)
            except StalePage:
                continue
            return paging, pages, rows[0]
        raise kept_changing(task_id)

    async def page_rows(
        self, task_id: str, paging: Paging, pages: list[int], stages: list[Any]
    ) -> dict[int, Any]:
        """A per-document pipeline over some visible pages (by number), as of `paging`."""
        key = self.scope.key(task_id)
        wanted = [page_key(key, n) for n in sorted(set(pages)) if n < paging.pages]
        if not wanted:
            return {}
        match = {"$match": {"_id": {"$in": wanted}, "tenant": self.scope.tenant}}
        pipeline = [match, *with_fields(stages, ("page", "start", "version"))]
        rows = await (await self.scope.pages.aggregate(pipeline)).to_list(length=None)
        self.sealed.check(rows, paging)
        return {int(row["page"]): row for row in rows}
