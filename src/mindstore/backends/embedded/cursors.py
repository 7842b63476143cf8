"""Cursors of the embedded backend: pymongo's `AsyncCursor` and `AsyncCommandCursor`.

A cursor runs its command on first iteration (find) or at creation (aggregate, listIndexes)
and then hands documents out in the batches a server would send: 101 documents first (or
`batch_size`), then up to 16 MiB per getMore. Each getMore is one more round trip in the
record of the opening command and yields to the event loop, as a network read would.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from bson.int64 import Int64
from pymongo.errors import InvalidOperation

from .codec import (
    DEFAULT_FIRST_BATCH,
    as_returned,
    cursor_reply,
    cursor_reply_size,
    new_cursor_id,
    plan_batches,
    projection_spec,
    size_of,
    sort_spec,
)
from .collection_base import MockCollection
from .finds import find_documents
from .reporting import CommandReporter, Operation

__all__ = [
    "BatchedCursor",
    "CursorSource",
    "EmbeddedCommandCursor",
    "EmbeddedCursor",
    "FindSource",
]


class CursorSource(Protocol):
    """What a cursor needs from its collection."""

    @property
    def name(self) -> str: ...

    @property
    def full_name(self) -> str: ...

    @property
    def database_name(self) -> str: ...

    @property
    def delegate(self) -> MockCollection: ...

    @property
    def reporter(self) -> CommandReporter: ...

    @property
    def lock(self) -> threading.RLock: ...


class FindSource(CursorSource, Protocol):
    """What a find cursor needs from its collection."""

    async def distinct(self, key: str, filter: Mapping[str, Any] | None = None) -> list[Any]: ...


class BatchedCursor:
    """Shared batching/accounting of find and command cursors."""

    def __init__(self, collection: CursorSource | None, ns: str) -> None:
        self._collection = collection
        self._ns = ns
        self._docs: list[dict[str, Any]] | None = None
        self._sizes: list[int] = []
        self._ends: list[int] = [0]
        self._batch = 0  # index of the last batch received
        self._pos = 0
        self._op: Operation | None = None
        self._cursor_id = 0
        self._closed = False
        self._get_more_batch_size: int | None = None

    # -- to be provided by subclasses
    async def _execute(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _set_results(
        self,
        raw_docs: Iterable[Mapping[str, Any]],
        first: int | None,
        following: int | None,
        single: bool = False,
    ) -> None:
        docs, sizes = [], []
        for d in raw_docs:
            doc, size = as_returned(d)
            docs.append(doc)
            sizes.append(size)
        self._docs, self._sizes = docs, sizes
        self._ends = plan_batches(sizes, first, following, single)
        if len(self._ends) > 1:
            self._cursor_id = new_cursor_id()
        if self._op is not None:
            first_sizes = sizes[: self._ends[0]]
            self._op.record.bytes_received += cursor_reply_size(
                "firstBatch", self._cursor_id, self._ns, first_sizes
            )
            self._op.record.n_returned += len(first_sizes)

    async def _fetch_next_batch(self) -> None:
        """Account one getMore round trip (and yield to other coroutines)."""
        await asyncio.sleep(0)
        self._batch += 1
        start, end = self._ends[self._batch - 1], self._ends[self._batch]
        last = self._batch == len(self._ends) - 1
        coll = self._collection
        if self._op is not None and coll is not None:
            cmd: dict[str, Any] = {"getMore": Int64(self._cursor_id), "collection": coll.name}
            if self._get_more_batch_size:
                cmd["batchSize"] = self._get_more_batch_size
            cmd["$db"] = coll.database_name
            next_id = 0 if last else self._cursor_id
            reply_size = cursor_reply_size("nextBatch", next_id, self._ns, self._sizes[start:end])
            docs = self._docs or []

            def reply() -> dict[str, Any]:
                return cursor_reply("nextBatch", next_id, self._ns, docs[start:end])

            with coll.lock:
                coll.reporter.extra_round_trip(
                    self._op, cmd, reply_size, end - start, event_reply=reply
                )

    def first_reply(self) -> dict[str, Any]:
        """The reply that carried the first batch (what listeners are shown)."""
        batch = (self._docs or [])[: self._ends[0]]
        return cursor_reply("firstBatch", self._cursor_id, self._ns, batch)

    @property
    def alive(self) -> bool:
        if self._closed:
            return False
        if self._docs is None:
            return True
        return self._pos < len(self._docs)

    @property
    def retrieved(self) -> int:
        return self._pos

    @property
    def collection(self) -> CursorSource | None:
        return self._collection

    @property
    def cursor_id(self) -> int:
        return self._cursor_id

    def __aiter__(self) -> BatchedCursor:
        return self

    async def next(self) -> dict[str, Any]:
        if self._docs is None:
            await self._execute()
        assert self._docs is not None
        if self._closed or self._pos >= len(self._docs):
            raise StopAsyncIteration
        if self._pos >= self._ends[self._batch]:
            await self._fetch_next_batch()
        doc = self._docs[self._pos]
        self._pos += 1
        return doc

    __anext__ = next

    async def try_next(self) -> dict[str, Any] | None:
        try:
            return await self.next()
        except StopAsyncIteration:
            return None

    async def to_list(self, length: int | None = None) -> list[dict[str, Any]]:
        if length is not None and length < 0:
            raise ValueError("to_list() length must be greater than 0")
        out: list[dict[str, Any]] = []
        if length == 0:
            return out
        while length is None or len(out) < length:
            try:
                out.append(await self.next())
            except StopAsyncIteration:
                break
        return out

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        open_on_server = (
            self._docs is not None and self._cursor_id and self._batch < len(self._ends) - 1
        )
        coll = self._collection
        if open_on_server and self._op is not None and coll is not None:
            cmd = {
                "killCursors": coll.name,
                "cursors": [Int64(self._cursor_id)],
                "$db": coll.database_name,
            }
            reply = {
                "cursorsKilled": [Int64(self._cursor_id)],
                "cursorsNotFound": [],
                "cursorsAlive": [],
                "cursorsUnknown": [],
                "ok": 1.0,
            }
            with coll.lock:
                coll.reporter.extra_round_trip(self._op, cmd, size_of(reply), event_reply=reply)

    async def __aenter__(self) -> BatchedCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class EmbeddedCommandCursor(BatchedCursor):
    """Like `AsyncCommandCursor`: returned by ``await aggregate(...)``, ``list_indexes()``."""

    def __init__(
        self,
        collection: CursorSource | None,
        ns: str,
        docs: Iterable[Mapping[str, Any]],
        op: Operation | None,
        batch_size: int | None = None,
    ) -> None:
        super().__init__(collection, ns)
        self._op = op
        self._get_more_batch_size = batch_size or None
        self._set_results(docs, batch_size or DEFAULT_FIRST_BATCH, batch_size or None)

    async def _execute(self) -> None:  # pragma: no cover - results set at creation
        return None

    def batch_size(self, batch_size: int) -> EmbeddedCommandCursor:
        self._get_more_batch_size = batch_size
        return self


class EmbeddedCursor(BatchedCursor):
    """Like pymongo's `AsyncCursor`: built by `find()`, runs on first iteration."""

    _collection: FindSource

    def __init__(
        self,
        collection: FindSource,
        filter: Mapping[str, Any] | None = None,
        projection: Any = None,
        skip: int = 0,
        limit: int = 0,
        sort: Any = None,
        batch_size: int = 0,
        collation: Mapping[str, Any] | None = None,
        hint: Any = None,
        max_time_ms: int | None = None,
        comment: Any = None,
        allow_disk_use: bool | None = None,
        let: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(collection, collection.full_name)
        if filter is not None and not isinstance(filter, Mapping):
            raise TypeError("filter must be an instance of dict, bson.son.SON, or Mapping")
        if not isinstance(skip, int) or skip < 0:
            raise ValueError("skip must be a non-negative int")
        if not isinstance(limit, int):
            raise TypeError("limit must be an int")
        if not isinstance(batch_size, int) or batch_size < 0:
            raise ValueError("batch_size must be >= 0")
        self._filter = dict(filter) if filter is not None else {}
        self._proj = projection_spec(projection)
        if self._proj == {}:
            self._proj = {"_id": 1}  # pymongo sends an empty projection as {_id: 1}
        self._skip = skip
        self._limit = limit
        self._sort = sort_spec(sort)
        self._batch_size = batch_size
        self._collation = collation
        self._hint = hint
        self._max_time_ms = max_time_ms
        self._comment = comment
        self._allow_disk_use = allow_disk_use
        self._let = let

    # -- chaining (only before the query runs, like pymongo)
    def _check_not_started(self) -> None:
        if self._docs is not None:
            raise InvalidOperation("cannot set options after executing query")

    def sort(self, key_or_list: Any, direction: Any = None) -> EmbeddedCursor:
        self._check_not_started()
        self._sort = sort_spec(key_or_list, direction)
        return self

    def skip(self, skip: int) -> EmbeddedCursor:
        self._check_not_started()
        if not isinstance(skip, int) or skip < 0:
            raise ValueError("skip must be a non-negative int")
        self._skip = skip
        return self

    def limit(self, limit: int) -> EmbeddedCursor:
        self._check_not_started()
        if not isinstance(limit, int):
            raise TypeError("limit must be an int")
        self._limit = limit
        return self

    def batch_size(self, batch_size: int) -> EmbeddedCursor:
        self._check_not_started()
        if not isinstance(batch_size, int) or batch_size < 0:
            raise ValueError("batch_size must be >= 0")
        self._batch_size = batch_size
        return self

    def hint(self, index: Any) -> EmbeddedCursor:
        self._check_not_started()
        self._hint = index
        return self

    def max_time_ms(self, max_time_ms: int | None) -> EmbeddedCursor:
        self._check_not_started()
        self._max_time_ms = max_time_ms
        return self

    def comment(self, comment: Any) -> EmbeddedCursor:
        self._check_not_started()
        self._comment = comment
        return self

    def collation(self, collation: Mapping[str, Any] | None) -> EmbeddedCursor:
        self._check_not_started()
        self._collation = collation
        return self

    def allow_disk_use(self, allow_disk_use: bool) -> EmbeddedCursor:
        self._check_not_started()
        self._allow_disk_use = allow_disk_use
        return self

    def clone(self) -> EmbeddedCursor:
        return EmbeddedCursor(
            self._collection,
            self._filter,
            self._proj,
            self._skip,
            self._limit,
            self._sort,
            self._batch_size,
            self._collation,
            self._hint,
            self._max_time_ms,
            self._comment,
            self._allow_disk_use,
            self._let,
        )

    def rewind(self) -> EmbeddedCursor:
        self._docs = None
        self._pos = 0
        self._batch = 0
        self._closed = False
        self._cursor_id = 0
        self._op = None
        return self

    def _command(self) -> dict[str, Any]:
        """The find command pymongo would send (message._gen_find_command)."""
        cmd: dict[str, Any] = {"find": self._collection.name, "filter": self._filter}
        if self._sort:
            cmd["sort"] = dict(self._sort)
        if self._proj:
            cmd["projection"] = self._proj
        if self._skip:
            cmd["skip"] = self._skip
        if self._limit:
            cmd["limit"] = abs(self._limit)
            if self._limit < 0:
                cmd["singleBatch"] = True
        if self._batch_size:
            cmd["batchSize"] = (
                self._batch_size + 1 if self._batch_size == self._limit else self._batch_size
            )
        if self._hint is not None:
            cmd["hint"] = (
                self._hint if isinstance(self._hint, str) else dict(sort_spec(self._hint) or [])
            )
        if self._max_time_ms is not None:
            cmd["maxTimeMS"] = self._max_time_ms
        if self._comment is not None:
            cmd["comment"] = self._comment
        if self._collation is not None:
            cmd["collation"] = self._collation
        if self._allow_disk_use is not None:
            cmd["allowDiskUse"] = self._allow_disk_use
        if self._let is not None:
            cmd["let"] = self._let
        return cmd

    async def _execute(self) -> None:
        coll = self._collection
        await asyncio.sleep(0)
        reporter = coll.reporter
        with coll.lock:
            decoded, op = reporter.begin("find", self._command(), coll.database_name)
            self._op = op
            try:
                # mongomock adds _id to the projection it is given: pass a copy
                projection = dict(decoded["projection"]) if decoded.get("projection") else None
                sort = sort_spec(decoded.get("sort"))
                raw: list[dict[str, Any]]
                if decoded.get("collation") is not None:
                    raw = list(
                        coll.delegate.find(
                            decoded["filter"],
                            projection=projection,
                            skip=self._skip,
                            limit=abs(self._limit),
                            sort=sort,
                            collation=decoded["collation"],
                        )
                    )
                else:  # stored documents: encoded below, under the lock (finds.py)
                    raw = find_documents(
                        coll.delegate, decoded["filter"], projection, self._skip,
                        abs(self._limit), sort,
                    )  # fmt: skip
            except Exception as exc:
                reporter.fail(op, exc)
                raise
            limit = abs(self._limit) or None
            single = self._limit < 0
            first = self._batch_size or DEFAULT_FIRST_BATCH
            if limit is not None:
                first = min(first, limit)
            following = self._batch_size or None
            if self._batch_size or limit:
                self._get_more_batch_size = self._batch_size or limit
            self._set_results(raw, first, following, single)
            reporter.finish(op, event_reply=self.first_reply)

    async def distinct(self, key: str) -> list[Any]:
        return await self._collection.distinct(key, self._filter)

    async def explain(self) -> dict[str, Any]:
        raise NotImplementedError("explain() is not available on the embedded backend")
