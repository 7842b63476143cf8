"""The embedded backend: mongomock-motor behind pymongo's *async* API.

mindstore is written against pymongo's `AsyncMongoClient` / `AsyncDatabase` /
`AsyncCollection`. mongomock-motor (0.0.36) imitates motor, which differs in places, and
mongomock (4.3) lags pymongo 4.11+. `EmbeddedClient` -> `EmbeddedDatabase` ->
`EmbeddedCollection` give the pymongo async surface mindstore and Beanie 2.2 use, over
``mongomock_motor.AsyncMongoMockClient(tz_aware=True)``:

* ``await coll.aggregate(...)`` is a coroutine returning an async command cursor (motor
  returns the cursor itself; Beanie awaits it);
* ``list_collection_names(authorizedCollections=..., nameOnly=...)`` is accepted (Beanie);
* ``bulk_write`` runs each `InsertOne`/`UpdateOne`/`UpdateMany`/`ReplaceOne`/`DeleteOne`/
  `DeleteMany` itself: pymongo >= 4.11 passes ``sort=`` to mongomock's bulk builder, which
  rejects it. ``sort`` on `UpdateOne`/`ReplaceOne`/`update_one`/`replace_one` is honoured;
* ``create_indexes`` keeps ``partialFilterExpression`` (mongomock's drops it);
* ``session=`` is accepted and ignored (mongomock raises on any session); there are no
  transactions (`EmbeddedSession.start_transaction` raises);
* ``hint=`` is ignored (mongomock raises on it); it never changes results, only plans.

Fidelity. Every command goes through BSON as it would over the wire: the command document
pymongo would send is encoded (its size is what the `CommandRecorder` reports) and decoded
again before mongomock sees it, so a value pymongo cannot encode fails here too
(`bson.errors.InvalidDocument`), tuples become lists, and aware datetimes become naive UTC
(as the server stores them; this also avoids mongomock's naive/aware comparison errors in
pipelines). Returned documents are encoded (for `bytes_received`) and decoded with
``tz_aware=True, tzinfo=datetime.timezone.utc``: every datetime comes back aware, with
``tzinfo is datetime.timezone.utc`` (not mongomock's FixedOffset), as from
`open_backend`'s real client.

Every operation starts with ``await asyncio.sleep(0)``, and every getMore batch of a cursor
with another, so concurrent coroutines interleave between operations as they would over
a network; each mongomock operation itself then runs without yielding (it is atomic, as a
single-document write is on a server).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import itertools
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import Any

import bson
import mongomock
import mongomock.aggregate
import mongomock.helpers
from bson import ObjectId
from bson.codec_options import CodecOptions
from bson.int64 import Int64
from mongomock_motor import AsyncMongoMockClient
from pymongo import IndexModel, ReturnDocument
from pymongo.errors import (
    BulkWriteError,
    CollectionInvalid,
    InvalidOperation,
    PyMongoError,
)
from pymongo.operations import (
    DeleteMany,
    DeleteOne,
    InsertOne,
    ReplaceOne,
    UpdateMany,
    UpdateOne,
)
from pymongo.results import (
    BulkWriteResult,
    DeleteResult,
    InsertManyResult,
    InsertOneResult,
    UpdateResult,
)

from .recorder import (
    IGNORED_COMMANDS,
    CommandRecorder,
    RecordedCommand,
    describe_command,
)

try:  # private helper of mongomock-motor; applied by its own get_collection too
    from mongomock_motor.patches import _patch_collection_internals
except Exception:  # pragma: no cover

    def _patch_collection_internals(collection: Any) -> Any:
        return collection


__all__ = [
    "EmbeddedClient",
    "EmbeddedCollection",
    "EmbeddedCommandCursor",
    "EmbeddedCursor",
    "EmbeddedDatabase",
    "EmbeddedSession",
    "OUT_CODEC_OPTIONS",
]

#: How the server sees what the driver sends: naive UTC datetimes, plain dicts.
IN_CODEC_OPTIONS: CodecOptions = CodecOptions(document_class=dict, tz_aware=False)
#: How documents come back: aware datetimes in `datetime.timezone.utc`.
OUT_CODEC_OPTIONS: CodecOptions = CodecOptions(
    document_class=dict, tz_aware=True, tzinfo=_dt.timezone.utc
)

#: First batch of a cursor when no batch size is given (server default).
DEFAULT_FIRST_BATCH = 101
#: A reply carries at most this many bytes of documents.
MAX_BATCH_BYTES = 16 * 1024 * 1024

_UTC = _dt.timezone.utc
#: Cursor ids of open embedded cursors (only their BSON size matters: always an int64).
_CURSOR_IDS = itertools.count(1 << 40)


# --------------------------------------------------------------------------- helpers


def _wire(command: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """Encode a command as pymongo would; return (what the server decodes, size)."""
    raw = bson.encode(command)
    return bson.decode(raw, codec_options=IN_CODEC_OPTIONS), len(raw)


def _aware(value: Any) -> Any:
    """Pure-Python fallback of the tz normalisation (for values BSON cannot carry)."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            return value.replace(tzinfo=_UTC)
        return value.astimezone(_UTC)
    if isinstance(value, dict):
        return {k: _aware(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_aware(v) for v in value]
    return value


def _out(doc: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """A returned document as the driver would hand it over, and its BSON size."""
    try:
        raw = bson.encode(doc)
    except Exception:
        return _aware(dict(doc)), 0
    return bson.decode(raw, codec_options=OUT_CODEC_OPTIONS), len(raw)


def _out_value(value: Any) -> Any:
    if value is None:
        return None
    return _out({"v": value})[0]["v"]


def _size(doc: Mapping[str, Any]) -> int:
    try:
        return len(bson.encode(doc))
    except Exception:
        return 0


def _array_extra(sizes: Iterable[int]) -> int:
    """Bytes that documents of the given sizes add to an (initially empty) BSON array."""
    return sum(2 + len(str(i)) + s for i, s in enumerate(sizes))


def _sort_list(key_or_list: Any, direction: Any = None) -> list[tuple[str, Any]] | None:
    """pymongo's accepted sort specs -> [(key, direction)] (None for no sort)."""
    if key_or_list is None:
        return None
    if direction is not None:
        return [(key_or_list, direction)]
    if isinstance(key_or_list, str):
        return [(key_or_list, 1)]
    if isinstance(key_or_list, Mapping):
        items = list(key_or_list.items())
    else:
        items = []
        for item in key_or_list:
            if isinstance(item, str):
                items.append((item, 1))
            else:
                key, value = item
                items.append((key, value))
    return items or None


def _projection(projection: Any) -> dict[str, Any] | None:
    if projection is None:
        return None
    if isinstance(projection, Mapping):
        return dict(projection)
    if isinstance(projection, str):
        raise TypeError("projection must be a mapping or a list of field names")
    return {name: 1 for name in projection}


def _strip_session(kwargs: dict[str, Any]) -> None:
    kwargs.pop("session", None)


def _cursor_reply_size(batch_key: str, cursor_id: int, ns: str, sizes: Sequence[int]) -> int:
    envelope = {"cursor": {batch_key: [], "id": Int64(cursor_id), "ns": ns}, "ok": 1.0}
    return _size(envelope) + _array_extra(sizes)


def _plan_batches(
    sizes: Sequence[int], first: int | None, following: int | None, single: bool
) -> list[int]:
    """End offsets of the batches a server would return for documents of these sizes.

    `first`/`following`: documents per batch (None: no count limit, only 16 MiB).
    """
    n = len(sizes)
    if n == 0:
        return [0]
    if single:
        return [n]
    ends: list[int] = []
    start = 0
    limit = first
    while start < n:
        end, total = start, 0
        while end < n and (limit is None or end - start < limit):
            if end > start and total + sizes[end] > MAX_BATCH_BYTES:
                break
            total += sizes[end]
            end += 1
        ends.append(end)
        start = end
        limit = following
    return ends


class EmbeddedSession:
    """Stand-in for `AsyncClientSession`: accepted everywhere, no transactions."""

    def __init__(self, client: EmbeddedClient) -> None:
        self.client = client
        self.has_ended = False
        self.in_transaction = False

    async def __aenter__(self) -> EmbeddedSession:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.end_session()

    async def end_session(self) -> None:
        self.has_ended = True

    def start_transaction(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "the embedded backend (mongomock) has no transactions; mindstore's writes are "
            "single-document atomic updates and must not need them"
        )

    async def with_transaction(self, *args: Any, **kwargs: Any) -> Any:
        self.start_transaction()


# --------------------------------------------------------------------------- cursors


class _BatchedCursor:
    """Shared batching/accounting of find and command cursors."""

    def __init__(self, collection: EmbeddedCollection | None, ns: str) -> None:
        self._collection = collection
        self._ns = ns
        self._docs: list[dict[str, Any]] | None = None
        self._sizes: list[int] = []
        self._ends: list[int] = [0]
        self._batch = 0  # index of the last batch received
        self._pos = 0
        self._record: RecordedCommand | None = None
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
            doc, size = _out(d)
            docs.append(doc)
            sizes.append(size)
        self._docs, self._sizes = docs, sizes
        self._ends = _plan_batches(sizes, first, following, single)
        if len(self._ends) > 1:
            self._cursor_id = next(_CURSOR_IDS)
        if self._record is not None:
            first_sizes = sizes[: self._ends[0]]
            self._record.bytes_received += _cursor_reply_size(
                "firstBatch", self._cursor_id, self._ns, first_sizes
            )
            self._record.n_returned += len(first_sizes)

    async def _fetch_next_batch(self) -> None:
        """Account one getMore round trip (and yield to other coroutines)."""
        await asyncio.sleep(0)
        self._batch += 1
        start, end = self._ends[self._batch - 1], self._ends[self._batch]
        last = self._batch == len(self._ends) - 1
        if self._record is not None and self._collection is not None:
            cmd: dict[str, Any] = {
                "getMore": Int64(self._cursor_id),
                "collection": self._collection.name,
            }
            if self._get_more_batch_size:
                cmd["batchSize"] = self._get_more_batch_size
            cmd["$db"] = self._collection.database.name
            self._record.bytes_sent += _size(cmd)
            self._record.bytes_received += _cursor_reply_size(
                "nextBatch", 0 if last else self._cursor_id, self._ns, self._sizes[start:end]
            )
            self._record.round_trips += 1
            self._record.n_returned += end - start

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
    def collection(self) -> EmbeddedCollection | None:
        return self._collection

    @property
    def cursor_id(self) -> int:
        return self._cursor_id

    def __aiter__(self) -> _BatchedCursor:
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
        if open_on_server and self._record is not None and self._collection is not None:
            cmd = {
                "killCursors": self._collection.name,
                "cursors": [Int64(self._cursor_id)],
                "$db": self._collection.database.name,
            }
            self._record.bytes_sent += _size(cmd)
            self._record.bytes_received += _size(
                {
                    "cursorsKilled": [Int64(self._cursor_id)],
                    "cursorsNotFound": [],
                    "cursorsAlive": [],
                    "cursorsUnknown": [],
                    "ok": 1.0,
                }
            )
            self._record.round_trips += 1

    async def __aenter__(self) -> _BatchedCursor:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class EmbeddedCommandCursor(_BatchedCursor):
    """Like `AsyncCommandCursor`: returned by ``await aggregate(...)``, ``list_indexes()``."""

    def __init__(
        self,
        collection: EmbeddedCollection | None,
        ns: str,
        docs: Iterable[Mapping[str, Any]],
        record: RecordedCommand | None,
        batch_size: int | None = None,
    ) -> None:
        super().__init__(collection, ns)
        self._record = record
        self._get_more_batch_size = batch_size or None
        self._set_results(docs, batch_size or DEFAULT_FIRST_BATCH, batch_size or None)

    async def _execute(self) -> None:  # pragma: no cover - results set at creation
        return None

    def batch_size(self, batch_size: int) -> EmbeddedCommandCursor:
        self._get_more_batch_size = batch_size
        return self


class EmbeddedCursor(_BatchedCursor):
    """Like pymongo's `AsyncCursor`: built by `find()`, runs on first iteration."""

    def __init__(
        self,
        collection: EmbeddedCollection,
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
        self._proj = _projection(projection)
        if self._proj == {}:
            self._proj = {"_id": 1}  # pymongo sends an empty projection as {_id: 1}
        self._skip = skip
        self._limit = limit
        self._sort = _sort_list(sort)
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
        self._sort = _sort_list(key_or_list, direction)
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
        assert self._collection is not None
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
        self._record = None
        return self

    def _command(self) -> dict[str, Any]:
        """The find command pymongo would send (message._gen_find_command)."""
        assert self._collection is not None
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
                self._hint if isinstance(self._hint, str) else dict(_sort_list(self._hint) or [])
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
        assert coll is not None
        await asyncio.sleep(0)
        decoded, record = coll._begin("find", self._command())
        self._record = record
        try:
            kwargs: dict[str, Any] = {}
            if decoded.get("collation") is not None:
                kwargs["collation"] = decoded["collation"]
            sync_cursor = coll.delegate.find(
                decoded["filter"],
                # mongomock adds _id to the projection it is given: pass a copy
                projection=dict(decoded["projection"]) if decoded.get("projection") else None,
                skip=self._skip,
                limit=abs(self._limit),
                sort=_sort_list(decoded.get("sort")),
                **kwargs,
            )
            raw = list(sync_cursor)
        except Exception as exc:
            coll._fail(record, exc)
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
        coll._finish(record)

    async def distinct(self, key: str) -> list[Any]:
        assert self._collection is not None
        return await self._collection.distinct(key, self._filter)

    async def explain(self) -> dict[str, Any]:
        raise NotImplementedError("explain() is not available on the embedded backend")


# --------------------------------------------------------------------------- collection


def _holds_datetime(value: Any) -> bool:
    if isinstance(value, (_dt.datetime, _dt.date)):
        return True
    if isinstance(value, Mapping):
        return any(_holds_datetime(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_datetime(v) for v in value)
    return False


def _is_inclusion(projection: Any) -> bool:
    return (
        isinstance(projection, Mapping)
        and bool(projection)
        and all(isinstance(k, str) and not k.startswith("$") and v in (1, True) for k, v in projection.items())
    )


def _run_pipeline(collection: Any, pipeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """mongomock's aggregate, with a leading `$match` (and an inclusion `$project` right
    after it) run as a `find`.

    mongomock's aggregate copies every document of the collection, then its `$match`
    walks each whole document to patch datetimes before comparing: an analytics report
    over one tenant paid for copying every message of every tenant. `find` filters first
    and copies only the projected fields of the matching documents, with the same result
    for the filters mindstore sends (a `$match` holding a datetime keeps mongomock's own
    path, whose datetime handling differs from `find`'s).
    """
    stages = list(pipeline)
    if not stages or set(stages[0]) != {"$match"} or _holds_datetime(stages[0]["$match"]):
        return list(collection.aggregate(stages))
    query = stages.pop(0)["$match"]
    projection = None
    if stages and set(stages[0]) == {"$project"} and _is_inclusion(stages[0]["$project"]):
        projection = stages.pop(0)["$project"]
    documents = list(collection.find(query, projection))
    if not stages:
        return documents
    return list(mongomock.aggregate.process_pipeline(documents, collection.database, stages, None))


class EmbeddedCollection:
    """pymongo `AsyncCollection` surface over a mongomock collection."""

    def __init__(self, database: EmbeddedDatabase, name: str) -> None:
        self._database = database
        self._name = name
        self._motor = database.motor.get_collection(name)
        self._sync = _patch_collection_internals(database.delegate.get_collection(name))

    # -- identity
    @property
    def name(self) -> str:
        return self._name

    @property
    def full_name(self) -> str:
        return f"{self._database.name}.{self._name}"

    @property
    def database(self) -> EmbeddedDatabase:
        return self._database

    @property
    def codec_options(self) -> CodecOptions:
        return OUT_CODEC_OPTIONS

    @property
    def delegate(self) -> mongomock.Collection:
        """The synchronous mongomock collection (no recording, no BSON round trip)."""
        return self._sync

    @property
    def motor(self) -> Any:
        """The mongomock-motor collection this wraps."""
        return self._motor

    def with_options(self, *args: Any, **kwargs: Any) -> EmbeddedCollection:
        return self

    def __getitem__(self, name: str) -> EmbeddedCollection:
        return self._database.get_collection(f"{self._name}.{name}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EmbeddedCollection):
            return NotImplemented
        return self._database == other._database and self._name == other._name

    def __hash__(self) -> int:
        return hash((self._database.name, self._name))

    def __repr__(self) -> str:
        return f"EmbeddedCollection({self.full_name!r})"

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"'EmbeddedCollection' object {self._name!r} is not callable")

    def __bool__(self) -> bool:
        raise NotImplementedError(
            "Collection objects do not implement truth value testing or bool(). "
            "Please compare with None instead: collection is not None"
        )

    # -- recording
    @property
    def _recorder(self) -> CommandRecorder | None:
        return self._database.client.recorder

    def _begin(self, name: str, command: dict[str, Any]) -> tuple[dict[str, Any], RecordedCommand]:
        """Encode the command as sent; return what the server decodes and its record."""
        command = dict(command)
        command["$db"] = self._database.name
        decoded, size = _wire(command)
        record = RecordedCommand(
            name=name,
            database=self._database.name,
            bytes_sent=size,
            backend="embedded",
            **describe_command(name, decoded),
        )
        return decoded, record

    def _finish(
        self, record: RecordedCommand, reply: Mapping[str, Any] | int | None = None
    ) -> None:
        if isinstance(reply, int):
            record.bytes_received += reply
        elif reply is not None:
            record.bytes_received += _size(reply)
        recorder = self._recorder
        if recorder is not None:
            recorder.record(record)

    def _fail(self, record: RecordedCommand, exc: BaseException) -> None:
        record.error = f"{type(exc).__name__}: {exc}"
        code = getattr(exc, "code", None)
        record.bytes_received += _size({"ok": 0.0, "errmsg": str(exc), "code": code or 0})
        recorder = self._recorder
        if recorder is not None:
            recorder.record(record)

    # -- reads
    def find(
        self,
        filter: Mapping[str, Any] | None = None,
        projection: Any = None,
        skip: int = 0,
        limit: int = 0,
        no_cursor_timeout: bool = False,
        cursor_type: int = 0,
        sort: Any = None,
        allow_partial_results: bool = False,
        oplog_replay: bool = False,
        batch_size: int = 0,
        collation: Mapping[str, Any] | None = None,
        hint: Any = None,
        max_scan: Any = None,
        max_time_ms: int | None = None,
        max: Any = None,
        min: Any = None,
        return_key: bool = False,
        show_record_id: bool = False,
        snapshot: bool = False,
        comment: Any = None,
        session: Any = None,
        allow_disk_use: bool | None = None,
        let: Mapping[str, Any] | None = None,
    ) -> EmbeddedCursor:
        """Like pymongo's `find` (same parameters, same order); runs on first iteration."""
        unsupported = {
            "cursor_type": cursor_type,
            "max_scan": max_scan,
            "max": max,
            "min": min,
            "return_key": return_key,
            "show_record_id": show_record_id,
            "snapshot": snapshot,
            "oplog_replay": oplog_replay,
        }
        for key, value in unsupported.items():
            if value:
                raise NotImplementedError(
                    f"find({key}=...) is not supported by the embedded backend"
                )
        return EmbeddedCursor(
            self,
            filter,
            projection,
            skip,
            limit,
            sort,
            batch_size,
            collation,
            hint,
            max_time_ms,
            comment,
            allow_disk_use,
            let,
        )

    async def find_one(
        self, filter: Any = None, *args: Any, **kwargs: Any
    ) -> dict[str, Any] | None:
        if filter is not None and not isinstance(filter, Mapping):
            filter = {"_id": filter}
        cursor = self.find(filter, *args, **kwargs).limit(-1)
        try:
            return await cursor.next()
        except StopAsyncIteration:
            return None

    async def aggregate(
        self,
        pipeline: Sequence[Mapping[str, Any]],
        session: Any = None,
        let: Any = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> EmbeddedCommandCursor:
        await asyncio.sleep(0)
        if not isinstance(pipeline, list):
            if isinstance(pipeline, (tuple,)):
                pipeline = list(pipeline)
            else:
                raise TypeError("pipeline must be a list")
        batch_size = kwargs.pop("batchSize", None) or kwargs.pop("batch_size", None)
        cursor_opts: dict[str, Any] = {}
        if batch_size:
            cursor_opts["batchSize"] = batch_size
        cmd: dict[str, Any] = {"aggregate": self._name, "pipeline": pipeline, "cursor": cursor_opts}
        kwargs.pop("hint", None)
        for key, value in kwargs.items():
            cmd[{"allow_disk_use": "allowDiskUse", "max_time_ms": "maxTimeMS"}.get(key, key)] = (
                value
            )
        if let is not None:
            cmd["let"] = let
        if comment is not None:
            cmd["comment"] = comment
        decoded, record = self._begin("aggregate", cmd)
        try:
            raw = _run_pipeline(self._sync, decoded["pipeline"])
        except Exception as exc:
            self._fail(record, exc)
            raise
        cursor = EmbeddedCommandCursor(self, self.full_name, raw, record, batch_size)
        self._finish(record)
        return cursor

    async def aggregate_raw_batches(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("aggregate_raw_batches is not available on the embedded backend")

    async def count_documents(
        self, filter: Mapping[str, Any], session: Any = None, comment: Any = None, **kwargs: Any
    ) -> int:
        await asyncio.sleep(0)
        pipeline: list[dict[str, Any]] = [{"$match": filter}]
        skip = kwargs.pop("skip", None)
        limit = kwargs.pop("limit", None)
        if skip is not None:
            pipeline.append({"$skip": skip})
        if limit is not None:
            pipeline.append({"$limit": limit})
        pipeline.append({"$group": {"_id": 1, "n": {"$sum": 1}}})
        cmd: dict[str, Any] = {"aggregate": self._name, "pipeline": pipeline, "cursor": {}}
        kwargs.pop("hint", None)
        if comment is not None:
            cmd["comment"] = comment
        decoded, record = self._begin("aggregate", cmd)
        try:
            extra: dict[str, Any] = {}
            if skip is not None:
                extra["skip"] = skip
            if limit is not None:
                extra["limit"] = limit
            if "maxTimeMS" in kwargs:
                extra["maxTimeMS"] = kwargs["maxTimeMS"]
            n = self._sync.count_documents(decoded["pipeline"][0]["$match"], **extra)
        except Exception as exc:
            self._fail(record, exc)
            raise
        batch = [{"_id": 1, "n": n}] if n else []
        record.n_returned = len(batch)
        self._finish(
            record, _cursor_reply_size("firstBatch", 0, self.full_name, [_size(d) for d in batch])
        )
        return n

    async def estimated_document_count(self, comment: Any = None, **kwargs: Any) -> int:
        await asyncio.sleep(0)
        _strip_session(kwargs)
        cmd: dict[str, Any] = {"count": self._name}
        if comment is not None:
            cmd["comment"] = comment
        _, record = self._begin("count", cmd)
        try:
            n = self._sync.estimated_document_count()
        except Exception as exc:
            self._fail(record, exc)
            raise
        self._finish(record, {"n": n, "ok": 1.0})
        return n

    async def distinct(
        self,
        key: str,
        filter: Mapping[str, Any] | None = None,
        session: Any = None,
        comment: Any = None,
        hint: Any = None,
        **kwargs: Any,
    ) -> list[Any]:
        await asyncio.sleep(0)
        if not isinstance(key, str):
            raise TypeError("key must be an instance of str")
        cmd: dict[str, Any] = {"distinct": self._name, "key": key}
        if filter is not None:
            cmd["query"] = filter
        if comment is not None:
            cmd["comment"] = comment
        decoded, record = self._begin("distinct", cmd)
        try:
            values = self._sync.distinct(key, decoded.get("query"))
        except Exception as exc:
            self._fail(record, exc)
            raise
        out = _out({"values": values})[0]["values"]
        self._finish(record, {"values": values, "ok": 1.0})
        return out

    # -- single writes
    async def insert_one(
        self,
        document: MutableMapping[str, Any],
        bypass_document_validation: bool | None = None,
        session: Any = None,
        comment: Any = None,
    ) -> InsertOneResult:
        await asyncio.sleep(0)
        if not isinstance(document, MutableMapping):
            raise TypeError(
                "document must be an instance of dict, bson.son.SON, "
                "bson.raw_bson.RawBSONDocument, or a type that inherits from "
                "collections.MutableMapping"
            )
        if "_id" not in document:
            document["_id"] = ObjectId()
        cmd: dict[str, Any] = {"insert": self._name, "ordered": True, "documents": [document]}
        if comment is not None:
            cmd["comment"] = comment
        decoded, record = self._begin("insert", cmd)
        try:
            self._sync.insert_one(decoded["documents"][0])
        except Exception as exc:
            self._fail(record, exc)
            raise
        self._finish(record, {"n": 1, "ok": 1.0})
        return InsertOneResult(document["_id"], True)

    async def insert_many(
        self,
        documents: Iterable[MutableMapping[str, Any]],
        ordered: bool = True,
        bypass_document_validation: bool | None = None,
        session: Any = None,
        comment: Any = None,
    ) -> InsertManyResult:
        await asyncio.sleep(0)
        if isinstance(documents, Mapping) or not isinstance(documents, Iterable):
            raise TypeError("documents must be a non-empty list")
        docs = list(documents)
        if not docs:
            raise TypeError("documents must be a non-empty list")
        for doc in docs:
            if not isinstance(doc, MutableMapping):
                raise TypeError("documents must be a list of mutable mappings")
            if "_id" not in doc:
                doc["_id"] = ObjectId()
        cmd: dict[str, Any] = {"insert": self._name, "ordered": ordered, "documents": docs}
        if comment is not None:
            cmd["comment"] = comment
        decoded, record = self._begin("insert", cmd)
        try:
            self._sync.insert_many(decoded["documents"], ordered=ordered)
        except Exception as exc:
            self._fail(record, exc)
            raise
        self._finish(record, {"n": len(docs), "ok": 1.0})
        return InsertManyResult([d["_id"] for d in docs], True)

    def _apply_update(
        self,
        q: dict[str, Any],
        u: Any,
        *,
        multi: bool,
        upsert: bool,
        replace: bool = False,
        sort: Any = None,
        array_filters: Any = None,
        collation: Any = None,
    ) -> UpdateResult:
        """Run one update statement on mongomock (synchronously, i.e. atomically)."""
        sync = self._sync
        if sort and not multi:
            target = sync.find_one(q, {"_id": 1}, sort=_sort_list(sort))
            if target is not None:
                q = {"_id": target["_id"]}
        extra: dict[str, Any] = {}
        if collation is not None:
            extra["collation"] = collation
        if replace:
            return sync.replace_one(q, u, upsert=upsert)
        if array_filters is not None:
            extra["array_filters"] = array_filters
        if multi:
            return sync.update_many(q, u, upsert=upsert, **extra)
        return sync.update_one(q, u, upsert=upsert, **extra)

    @staticmethod
    def _update_reply(result: UpdateResult, index: int = 0) -> dict[str, Any]:
        raw = result.raw_result or {}
        reply: dict[str, Any] = {"n": raw.get("n", 0), "nModified": raw.get("nModified", 0)}
        if result.upserted_id is not None:
            reply["upserted"] = [{"index": index, "_id": result.upserted_id}]
        reply["ok"] = 1.0
        return reply

    async def _update(
        self,
        filter: Mapping[str, Any],
        update: Any,
        *,
        multi: bool,
        replace: bool,
        upsert: bool,
        sort: Any = None,
        array_filters: Any = None,
        collation: Any = None,
        let: Any = None,
        comment: Any = None,
    ) -> UpdateResult:
        await asyncio.sleep(0)
        if not isinstance(filter, Mapping):
            raise TypeError("filter must be an instance of dict, bson.son.SON, or Mapping")
        if replace:
            if not isinstance(update, Mapping):
                raise TypeError("replacement must be a mapping")
            if update and next(iter(update)).startswith("$"):
                raise ValueError("replacement can not include $ operators")
        else:
            if not update:
                raise ValueError("update cannot be empty")
            if isinstance(update, Mapping) and not next(iter(update)).startswith("$"):
                raise ValueError("update only works with $ operators")
        stmt: dict[str, Any] = {"q": filter, "u": update, "multi": multi, "upsert": upsert}
        if collation is not None:
            stmt["collation"] = collation
        if array_filters is not None:
            stmt["arrayFilters"] = list(array_filters)
        if sort is not None:
            stmt["sort"] = dict(_sort_list(sort) or [])
        cmd: dict[str, Any] = {"update": self._name, "ordered": True, "updates": [stmt]}
        if let is not None:
            cmd["let"] = let
        if comment is not None:
            cmd["comment"] = comment
        decoded, record = self._begin("update", cmd)
        s = decoded["updates"][0]
        try:
            result = self._apply_update(
                s["q"],
                s["u"],
                multi=multi,
                upsert=upsert,
                replace=replace,
                sort=s.get("sort"),
                array_filters=s.get("arrayFilters"),
                collation=s.get("collation"),
            )
        except Exception as exc:
            self._fail(record, exc)
            raise
        self._finish(record, self._update_reply(result))
        return result

    async def update_one(
        self,
        filter: Mapping[str, Any],
        update: Any,
        upsert: bool = False,
        bypass_document_validation: bool | None = None,
        collation: Any = None,
        array_filters: Any = None,
        hint: Any = None,
        session: Any = None,
        let: Any = None,
        sort: Any = None,
        comment: Any = None,
    ) -> UpdateResult:
        return await self._update(
            filter,
            update,
            multi=False,
            replace=False,
            upsert=upsert,
            sort=sort,
            array_filters=array_filters,
            collation=collation,
            let=let,
            comment=comment,
        )

    async def update_many(
        self,
        filter: Mapping[str, Any],
        update: Any,
        upsert: bool = False,
        array_filters: Any = None,
        bypass_document_validation: bool | None = None,
        collation: Any = None,
        hint: Any = None,
        session: Any = None,
        let: Any = None,
        comment: Any = None,
    ) -> UpdateResult:
        return await self._update(
            filter,
            update,
            multi=True,
            replace=False,
            upsert=upsert,
            array_filters=array_filters,
            collation=collation,
            let=let,
            comment=comment,
        )

    async def replace_one(
        self,
        filter: Mapping[str, Any],
        replacement: Mapping[str, Any],
        upsert: bool = False,
        bypass_document_validation: bool | None = None,
        collation: Any = None,
        hint: Any = None,
        session: Any = None,
        let: Any = None,
        sort: Any = None,
        comment: Any = None,
    ) -> UpdateResult:
        return await self._update(
            filter,
            replacement,
            multi=False,
            replace=True,
            upsert=upsert,
            sort=sort,
            collation=collation,
            let=let,
            comment=comment,
        )

    async def _delete(
        self,
        filter: Mapping[str, Any],
        *,
        multi: bool,
        collation: Any = None,
        let: Any = None,
        comment: Any = None,
    ) -> DeleteResult:
        await asyncio.sleep(0)
        if not isinstance(filter, Mapping):
            raise TypeError("filter must be an instance of dict, bson.son.SON, or Mapping")
        stmt: dict[str, Any] = {"q": filter, "limit": int(not multi)}
        if collation is not None:
            stmt["collation"] = collation
        cmd: dict[str, Any] = {"delete": self._name, "ordered": True, "deletes": [stmt]}
        if let is not None:
            cmd["let"] = let
        if comment is not None:
            cmd["comment"] = comment
        decoded, record = self._begin("delete", cmd)
        q = decoded["deletes"][0]["q"]
        try:
            result = self._sync.delete_many(q) if multi else self._sync.delete_one(q)
        except Exception as exc:
            self._fail(record, exc)
            raise
        self._finish(record, {"n": result.deleted_count, "ok": 1.0})
        return result

    async def delete_one(
        self,
        filter: Mapping[str, Any],
        collation: Any = None,
        hint: Any = None,
        session: Any = None,
        let: Any = None,
        comment: Any = None,
    ) -> DeleteResult:
        return await self._delete(
            filter, multi=False, collation=collation, let=let, comment=comment
        )

    async def delete_many(
        self,
        filter: Mapping[str, Any],
        collation: Any = None,
        hint: Any = None,
        session: Any = None,
        let: Any = None,
        comment: Any = None,
    ) -> DeleteResult:
        return await self._delete(filter, multi=True, collation=collation, let=let, comment=comment)

    async def _find_and_modify(
        self,
        filter: Mapping[str, Any],
        *,
        update: Any = None,
        replace: bool = False,
        remove: bool = False,
        projection: Any = None,
        sort: Any = None,
        upsert: bool | None = None,
        return_document: bool = ReturnDocument.BEFORE,
        array_filters: Any = None,
        let: Any = None,
        comment: Any = None,
    ) -> dict[str, Any] | None:
        await asyncio.sleep(0)
        if not isinstance(filter, Mapping):
            raise TypeError("filter must be an instance of dict, bson.son.SON, or Mapping")
        if not isinstance(return_document, bool):
            raise TypeError("return_document must be ReturnDocument.BEFORE or ReturnDocument.AFTER")
        cmd: dict[str, Any] = {"findAndModify": self._name, "query": filter, "new": return_document}
        if let is not None:
            cmd["let"] = let
        if remove:
            cmd["remove"] = True
        else:
            cmd["update"] = update
        proj = _projection(projection)
        if proj is not None:
            cmd["fields"] = proj
        sort_list = _sort_list(sort)
        if sort is not None:
            cmd["sort"] = dict(sort_list or [])
        if upsert is not None:
            cmd["upsert"] = upsert
        if array_filters is not None:
            cmd["arrayFilters"] = list(array_filters)
        if comment is not None:
            cmd["comment"] = comment
        decoded, record = self._begin("findAndModify", cmd)
        sync = self._sync
        try:
            q = decoded["query"]
            fields = dict(decoded["fields"]) if decoded.get("fields") else None
            s = _sort_list(decoded.get("sort"))
            if remove:
                value = sync.find_one_and_delete(q, projection=fields, sort=s)
                upserted = False
            else:
                # only an upsert needs to know whether a document matched (for the reply)
                before = sync.find_one(q, {"_id": 1}, sort=s) if upsert else True
                kwargs: dict[str, Any] = {}
                if decoded.get("arrayFilters") is not None:
                    kwargs["array_filters"] = decoded["arrayFilters"]
                method = sync.find_one_and_replace if replace else sync.find_one_and_update
                value = method(
                    q,
                    decoded["update"],
                    projection=fields,
                    sort=s,
                    upsert=bool(upsert),
                    return_document=return_document,
                    **kwargs,
                )
                upserted = before is None and bool(upsert)
        except Exception as exc:
            self._fail(record, exc)
            raise
        out, size = _out(value) if value is not None else (None, 0)
        leo: dict[str, Any] = {"n": 1 if (value is not None or upserted) else 0}
        if not remove:
            leo["updatedExisting"] = value is not None and not upserted
        reply_size = _size({"lastErrorObject": leo, "value": None, "ok": 1.0})
        if out is not None:
            reply_size += size  # a document instead of null (which has no payload bytes)
            record.n_returned = 1
        self._finish(record, reply_size)
        return out

    async def find_one_and_update(
        self,
        filter: Mapping[str, Any],
        update: Any,
        projection: Any = None,
        sort: Any = None,
        upsert: bool = False,
        return_document: bool = ReturnDocument.BEFORE,
        array_filters: Any = None,
        hint: Any = None,
        session: Any = None,
        let: Any = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> dict[str, Any] | None:
        if not update:
            raise ValueError("update cannot be empty")
        if isinstance(update, Mapping) and not next(iter(update)).startswith("$"):
            raise ValueError("update only works with $ operators")
        return await self._find_and_modify(
            filter,
            update=update,
            projection=projection,
            sort=sort,
            upsert=upsert,
            return_document=return_document,
            array_filters=array_filters,
            let=let,
            comment=comment,
        )

    async def find_one_and_replace(
        self,
        filter: Mapping[str, Any],
        replacement: Mapping[str, Any],
        projection: Any = None,
        sort: Any = None,
        upsert: bool = False,
        return_document: bool = ReturnDocument.BEFORE,
        hint: Any = None,
        session: Any = None,
        let: Any = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> dict[str, Any] | None:
        if replacement and next(iter(replacement)).startswith("$"):
            raise ValueError("replacement can not include $ operators")
        return await self._find_and_modify(
            filter,
            update=replacement,
            replace=True,
            projection=projection,
            sort=sort,
            upsert=upsert,
            return_document=return_document,
            let=let,
            comment=comment,
        )

    async def find_one_and_delete(
        self,
        filter: Mapping[str, Any],
        projection: Any = None,
        sort: Any = None,
        hint: Any = None,
        session: Any = None,
        let: Any = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> dict[str, Any] | None:
        return await self._find_and_modify(
            filter, remove=True, projection=projection, sort=sort, let=let, comment=comment
        )

    # -- bulk
    async def bulk_write(
        self,
        requests: Sequence[Any],
        ordered: bool = True,
        bypass_document_validation: bool | None = None,
        session: Any = None,
        comment: Any = None,
        let: Any = None,
    ) -> BulkWriteResult:
        """pymongo's bulk_write, one mongomock call per operation.

        Operations are grouped into insert/update/delete commands as pymongo does
        (consecutive runs when ordered; by kind, inserts then updates then deletes, when
        unordered); each command is one recorded round trip.
        """
        await asyncio.sleep(0)
        if not isinstance(requests, Iterable):
            raise TypeError("requests must be a list")
        requests = list(requests)
        if not requests:
            raise InvalidOperation("No operations to execute")
        ops: list[tuple[str, int, Any, dict[str, Any]]] = []
        for index, op in enumerate(requests):
            ops.append((*self._bulk_statement(op), index, op))  # type: ignore[arg-type]
        # (kind, statement, index, op)
        runs: list[list[tuple[str, Any, int, Any]]] = []
        if ordered:
            for item in ops:
                if runs and runs[-1][0][0] == item[0]:
                    runs[-1].append(item)  # type: ignore[arg-type]
                else:
                    runs.append([item])  # type: ignore[list-item]
        else:
            for kind in ("insert", "update", "delete"):
                run = [item for item in ops if item[0] == kind]
                if run:
                    runs.append(run)  # type: ignore[arg-type]
        result: dict[str, Any] = {
            "writeErrors": [],
            "writeConcernErrors": [],
            "nInserted": 0,
            "nUpserted": 0,
            "nMatched": 0,
            "nModified": 0,
            "nRemoved": 0,
            "upserted": [],
        }
        for run in runs:
            stop = await self._bulk_run(run, ordered, result, comment, let)
            if stop:
                break
        if result["writeErrors"]:
            raise BulkWriteError(result)
        return BulkWriteResult(result, True)

    @staticmethod
    def _bulk_statement(op: Any) -> tuple[str, dict[str, Any]]:
        def opt(name: str) -> Any:
            return getattr(op, name, None)

        if isinstance(op, InsertOne):
            doc = op._doc
            if isinstance(doc, MutableMapping) and "_id" not in doc:
                doc["_id"] = ObjectId()
            return "insert", doc
        if isinstance(op, (UpdateOne, UpdateMany)):
            stmt: dict[str, Any] = {
                "q": op._filter,
                "u": op._doc,
                "multi": isinstance(op, UpdateMany),
            }
            if opt("_upsert") is not None:
                stmt["upsert"] = op._upsert
            if opt("_collation") is not None:
                stmt["collation"] = op._collation
            if opt("_array_filters") is not None:
                stmt["arrayFilters"] = list(op._array_filters)
            if opt("_sort") is not None:
                stmt["sort"] = dict(_sort_list(op._sort) or [])
            return "update", stmt
        if isinstance(op, ReplaceOne):
            stmt = {"q": op._filter, "u": op._doc}
            if opt("_upsert") is not None:
                stmt["upsert"] = op._upsert
            if opt("_collation") is not None:
                stmt["collation"] = op._collation
            if opt("_sort") is not None:
                stmt["sort"] = dict(_sort_list(op._sort) or [])
            stmt["_replace"] = True  # marker, removed before encoding
            return "update", stmt
        if isinstance(op, (DeleteOne, DeleteMany)):
            stmt = {"q": op._filter, "limit": 1 if isinstance(op, DeleteOne) else 0}
            if opt("_collation") is not None:
                stmt["collation"] = op._collation
            return "delete", stmt
        raise TypeError(f"{op!r} is not a valid request")

    async def _bulk_run(
        self,
        run: list[tuple[str, Any, int, Any]],
        ordered: bool,
        result: dict[str, Any],
        comment: Any,
        let: Any,
    ) -> bool:
        """Send one insert/update/delete command of a bulk write; True to stop (ordered)."""
        kind = run[0][0]
        replace_flags = []
        statements = []
        for _, stmt, _, _ in run:
            if kind == "update":
                stmt = dict(stmt)
                replace_flags.append(bool(stmt.pop("_replace", False)))
            statements.append(stmt)
        field = {"insert": "documents", "update": "updates", "delete": "deletes"}[kind]
        cmd: dict[str, Any] = {kind: self._name, "ordered": ordered, field: statements}
        if let is not None and kind != "insert":
            cmd["let"] = let
        if comment is not None:
            cmd["comment"] = comment
        await asyncio.sleep(0)  # each command of a bulk write is one round trip
        decoded, record = self._begin(kind, cmd)
        n = 0
        n_modified = 0
        upserted: list[dict[str, Any]] = []
        stop = False
        sync = self._sync
        for pos, stmt in enumerate(decoded[field]):
            index = run[pos][2]
            try:
                if kind == "insert":
                    sync.insert_one(stmt)
                    result["nInserted"] += 1
                    n += 1
                elif kind == "delete":
                    q = stmt["q"]
                    res = sync.delete_one(q) if stmt["limit"] else sync.delete_many(q)
                    result["nRemoved"] += res.deleted_count
                    n += res.deleted_count
                else:
                    res = self._apply_update(
                        stmt["q"],
                        stmt["u"],
                        multi=stmt.get("multi", False),
                        upsert=bool(stmt.get("upsert")),
                        replace=replace_flags[pos],
                        sort=stmt.get("sort"),
                        array_filters=stmt.get("arrayFilters"),
                        collation=stmt.get("collation"),
                    )
                    if res.upserted_id is not None:
                        result["nUpserted"] += 1
                        entry = {"index": index, "_id": res.upserted_id}
                        result["upserted"].append(entry)
                        upserted.append({"index": pos, "_id": res.upserted_id})
                        n += 1
                    else:
                        result["nMatched"] += res.matched_count
                        result["nModified"] += res.modified_count
                        n += res.matched_count
                        n_modified += res.modified_count
            except PyMongoError as exc:
                details = getattr(exc, "details", None) or {}
                result["writeErrors"].append(
                    {
                        "index": index,
                        "code": getattr(exc, "code", None) or 2,
                        "errmsg": str(exc),
                        "keyValue": details.get("keyValue")
                        if isinstance(details, Mapping)
                        else None,
                        "op": run[pos][3],
                    }
                )
                if ordered:
                    stop = True
                    break
            except Exception as exc:
                self._fail(record, exc)
                raise
        reply: dict[str, Any] = {"n": n}
        if kind == "update":
            reply["nModified"] = n_modified
            if upserted:
                reply["upserted"] = upserted
        reply["ok"] = 1.0
        if result["writeErrors"]:
            record.error = result["writeErrors"][-1]["errmsg"]
        self._finish(record, reply)
        return stop

    # -- indexes
    async def create_index(
        self, keys: Any, session: Any = None, comment: Any = None, **kwargs: Any
    ) -> str:
        names = await self.create_indexes([IndexModel(keys, **kwargs)], comment=comment)
        return names[0]

    async def create_indexes(
        self, indexes: Sequence[IndexModel], session: Any = None, comment: Any = None, **kwargs: Any
    ) -> list[str]:
        await asyncio.sleep(0)
        models = list(indexes)
        for model in models:
            if not isinstance(model, IndexModel):
                raise TypeError(f"{model!r} is not an instance of pymongo.operations.IndexModel")
        cmd: dict[str, Any] = {
            "createIndexes": self._name,
            "indexes": [dict(m.document) for m in models],
        }
        if comment is not None:
            cmd["comment"] = comment
        decoded, record = self._begin("createIndexes", cmd)
        sync = self._sync
        existed = sync.name in sync.database.list_collection_names()
        before = len(list(sync.list_indexes())) if existed else 0
        names = []
        try:
            for spec in decoded["indexes"]:
                spec = dict(spec)
                keys = list(spec.pop("key").items())
                spec.pop("background", None)
                spec.pop("v", None)
                names.append(sync.create_index(keys, **spec))
        except Exception as exc:
            self._fail(record, exc)
            raise
        after = len(list(sync.list_indexes()))
        self._finish(
            record,
            {
                "numIndexesBefore": before or 1,
                "numIndexesAfter": after,
                "createdCollectionAutomatically": not existed,
                "ok": 1.0,
            },
        )
        return names

    async def drop_index(
        self, index_or_name: Any, session: Any = None, comment: Any = None, **kwargs: Any
    ) -> None:
        await asyncio.sleep(0)
        name = index_or_name
        if not isinstance(name, str):
            name = mongomock.helpers.gen_index_name(_sort_list(index_or_name) or [])
        cmd: dict[str, Any] = {"dropIndexes": self._name, "index": name}
        _, record = self._begin("dropIndexes", cmd)
        try:
            self._sync.drop_index(name)
        except Exception as exc:
            self._fail(record, exc)
            raise
        self._finish(record, {"nIndexesWas": 2, "ok": 1.0})

    async def drop_indexes(self, session: Any = None, comment: Any = None, **kwargs: Any) -> None:
        await asyncio.sleep(0)
        _, record = self._begin("dropIndexes", {"dropIndexes": self._name, "index": "*"})
        self._sync.drop_indexes()
        self._finish(record, {"nIndexesWas": 1, "ok": 1.0})

    async def list_indexes(self, session: Any = None, comment: Any = None) -> EmbeddedCommandCursor:
        await asyncio.sleep(0)
        _, record = self._begin("listIndexes", {"listIndexes": self._name, "cursor": {}})
        docs = list(self._sync.list_indexes())
        cursor = EmbeddedCommandCursor(self, self.full_name, docs, record)
        self._finish(record)
        return cursor

    async def index_information(self, session: Any = None, comment: Any = None) -> dict[str, Any]:
        cursor = await self.list_indexes()
        info: dict[str, Any] = {}
        async for index in cursor:
            index = dict(index)
            index["key"] = list(index["key"].items())
            info[index.pop("name")] = index
        return info

    # -- collection level
    async def drop(
        self, session: Any = None, comment: Any = None, encrypted_fields: Any = None
    ) -> None:
        await self._database.drop_collection(self._name)

    async def rename(self, new_name: str, session: Any = None, **kwargs: Any) -> EmbeddedCollection:
        await asyncio.sleep(0)
        self._sync.rename(new_name, **{k: v for k, v in kwargs.items() if k == "dropTarget"})
        self._database._collections.pop(self._name, None)
        self._database._collections.pop(new_name, None)
        return self._database.get_collection(new_name)

    async def options(self, session: Any = None, comment: Any = None) -> dict[str, Any]:
        await asyncio.sleep(0)
        return self._sync.options()

    async def watch(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("change streams are not available on the embedded backend")

    async def find_raw_batches(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("find_raw_batches is not available on the embedded backend")


# --------------------------------------------------------------------------- database


class EmbeddedDatabase:
    """pymongo `AsyncDatabase` surface over a mongomock database."""

    def __init__(self, client: EmbeddedClient, name: str) -> None:
        self._client = client
        self._name = name
        self._motor = client.delegate.get_database(name)
        self._sync = self._motor.delegate
        self._collections: dict[str, EmbeddedCollection] = {}

    @property
    def name(self) -> str:
        return self._name

    @property
    def client(self) -> EmbeddedClient:
        return self._client

    @property
    def codec_options(self) -> CodecOptions:
        return OUT_CODEC_OPTIONS

    @property
    def delegate(self) -> mongomock.Database:
        """The synchronous mongomock database."""
        return self._sync

    @property
    def motor(self) -> Any:
        """The mongomock-motor database this wraps."""
        return self._motor

    def with_options(self, *args: Any, **kwargs: Any) -> EmbeddedDatabase:
        return self

    def get_collection(self, name: str, *args: Any, **kwargs: Any) -> EmbeddedCollection:
        if not isinstance(name, str):
            raise TypeError("name must be an instance of str")
        coll = self._collections.get(name)
        if coll is None:
            coll = self._collections[name] = EmbeddedCollection(self, name)
        return coll

    def __getitem__(self, name: str) -> EmbeddedCollection:
        return self.get_collection(name)

    def __getattr__(self, name: str) -> EmbeddedCollection:
        if name.startswith("_"):
            raise AttributeError(
                f"EmbeddedDatabase has no attribute {name!r}. To access the {name} "
                f"collection, use database[{name!r}]."
            )
        return self.get_collection(name)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EmbeddedDatabase):
            return NotImplemented
        return self._client is other._client and self._name == other._name

    def __hash__(self) -> int:
        return hash((id(self._client), self._name))

    def __repr__(self) -> str:
        return f"EmbeddedDatabase({self._name!r})"

    def __bool__(self) -> bool:
        raise NotImplementedError(
            "Database objects do not implement truth value testing or bool(). "
            "Please compare with None instead: database is not None"
        )

    def _record(self, name: str, command: dict[str, Any], reply: Mapping[str, Any]) -> None:
        recorder = self._client.recorder
        if recorder is None or self._name == "admin" or name.lower() in IGNORED_COMMANDS:
            return
        command = {**command, "$db": self._name}
        recorder.record(
            RecordedCommand(
                name=name,
                database=self._name,
                bytes_sent=_size(command),
                bytes_received=_size(reply),
                backend="embedded",
                **describe_command(name, command),
            )
        )

    async def list_collection_names(
        self,
        session: Any = None,
        filter: Mapping[str, Any] | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> list[str]:
        """Accepts (and drops) `authorizedCollections`/`nameOnly`, which Beanie passes."""
        await asyncio.sleep(0)
        kwargs.pop("authorizedCollections", None)
        kwargs.pop("nameOnly", None)
        names = self._sync.list_collection_names(filter=filter)
        cmd: dict[str, Any] = {
            "listCollections": 1,
            "cursor": {},
            "nameOnly": True,
            "authorizedCollections": True,
        }
        if filter is not None:
            cmd["filter"] = filter
        self._record(
            "listCollections",
            cmd,
            {
                "cursor": {
                    "firstBatch": [{"name": n, "type": "collection"} for n in names],
                    "id": Int64(0),
                    "ns": f"{self._name}.$cmd.listCollections",
                },
                "ok": 1.0,
            },
        )
        return names

    async def list_collections(
        self,
        session: Any = None,
        filter: Mapping[str, Any] | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> EmbeddedCommandCursor:
        await asyncio.sleep(0)
        names = self._sync.list_collection_names(filter=filter)
        docs = [
            {"name": n, "type": "collection", "options": {}, "info": {"readOnly": False}}
            for n in names
        ]
        return EmbeddedCommandCursor(None, f"{self._name}.$cmd.listCollections", docs, None)

    async def create_collection(
        self,
        name: str,
        codec_options: Any = None,
        read_preference: Any = None,
        write_concern: Any = None,
        read_concern: Any = None,
        session: Any = None,
        check_exists: bool | None = True,
        **kwargs: Any,
    ) -> EmbeddedCollection:
        await asyncio.sleep(0)
        if check_exists and name in self._sync.list_collection_names():
            raise CollectionInvalid(f"collection {name} already exists")
        if name not in self._sync.list_collection_names():
            self._sync.create_collection(name)
        self._record("create", {"create": name}, {"ok": 1.0})
        return self.get_collection(name)

    async def drop_collection(
        self,
        name_or_collection: Any,
        session: Any = None,
        comment: Any = None,
        encrypted_fields: Any = None,
    ) -> dict[str, Any]:
        await asyncio.sleep(0)
        name = getattr(name_or_collection, "name", name_or_collection)
        if not isinstance(name, str):
            raise TypeError("name_or_collection must be an instance of str or a collection")
        self._sync.drop_collection(name)
        reply = {"ns": f"{self._name}.{name}", "nIndexesWas": 1, "ok": 1.0}
        self._record("drop", {"drop": name}, reply)
        return reply

    async def command(
        self,
        command: Any,
        value: Any = 1,
        check: bool = True,
        allowable_errors: Any = None,
        read_preference: Any = None,
        codec_options: Any = None,
        session: Any = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        await asyncio.sleep(0)
        if isinstance(command, str):
            cmd: dict[str, Any] = {command: value}
        else:
            cmd = dict(command)
        cmd.update(kwargs)
        name = next(iter(cmd)) if cmd else ""
        lname = name.lower()
        if lname in ("ping", "hello", "ismaster"):
            reply: dict[str, Any] = {"ok": 1.0}
            if lname != "ping":
                reply = {
                    "isWritablePrimary": True,
                    "ismaster": True,
                    "maxBsonObjectSize": 16777216,
                    "maxMessageSizeBytes": 48000000,
                    "maxWriteBatchSize": 100000,
                    "ok": 1.0,
                }
        elif lname == "buildinfo":
            reply = dict(self._sync.client.server_info())
        elif lname == "listcollections":
            names = self._sync.list_collection_names(filter=cmd.get("filter"))
            reply = {
                "cursor": {
                    "firstBatch": [{"name": n, "type": "collection"} for n in names],
                    "id": 0,
                    "ns": f"{self._name}.$cmd.listCollections",
                },
                "ok": 1.0,
            }
        elif lname == "dbstats":
            colls = self._sync.list_collection_names()
            objects = sum(self._sync.get_collection(c).estimated_document_count() for c in colls)
            reply = {"db": self._name, "collections": len(colls), "objects": objects, "ok": 1.0}
        else:
            reply = await self._motor.command(cmd)
        self._record(name, cmd, reply)
        return _out(reply)[0]

    async def aggregate(self, pipeline: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "database-level aggregate is not available on the embedded backend"
        )

    async def dereference(self, dbref: Any, session: Any = None, **kwargs: Any) -> Any:
        if dbref.database is not None and dbref.database != self._name:
            raise ValueError("trying to dereference a DBRef that points to another database")
        return await self.get_collection(dbref.collection).find_one({"_id": dbref.id})

    async def watch(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("change streams are not available on the embedded backend")


# --------------------------------------------------------------------------- client


class EmbeddedClient:
    """pymongo `AsyncMongoClient` surface over ``AsyncMongoMockClient(tz_aware=True)``.

    Each client is its own in-memory store. `recorder` (optional) receives a
    `RecordedCommand` for every operation.
    """

    kind = "embedded"

    def __init__(
        self, *, recorder: CommandRecorder | None = None, default_database: str = "mindstore"
    ) -> None:
        self.recorder = recorder
        self._default_database = default_database
        self._sync = mongomock.MongoClient(tz_aware=True)
        self._motor = AsyncMongoMockClient(mock_mongo_client=self._sync)
        self._databases: dict[str, EmbeddedDatabase] = {}
        self._closed = False

    @property
    def delegate(self) -> AsyncMongoMockClient:
        """The mongomock-motor client this wraps."""
        return self._motor

    @property
    def sync_client(self) -> mongomock.MongoClient:
        return self._sync

    @property
    def codec_options(self) -> CodecOptions:
        return OUT_CODEC_OPTIONS

    @property
    def address(self) -> tuple[str, int]:
        return ("embedded", 0)

    def get_database(self, name: str | None = None, *args: Any, **kwargs: Any) -> EmbeddedDatabase:
        name = name or self._default_database
        db = self._databases.get(name)
        if db is None:
            db = self._databases[name] = EmbeddedDatabase(self, name)
        return db

    def get_default_database(
        self, default: str | None = None, *args: Any, **kwargs: Any
    ) -> EmbeddedDatabase:
        return self.get_database(self._default_database or default)

    def __getitem__(self, name: str) -> EmbeddedDatabase:
        return self.get_database(name)

    def __getattr__(self, name: str) -> EmbeddedDatabase:
        if name.startswith("_"):
            raise AttributeError(
                f"EmbeddedClient has no attribute {name!r}. To access the {name} "
                f"database, use client[{name!r}]."
            )
        return self.get_database(name)

    def __repr__(self) -> str:
        return "EmbeddedClient()"

    def append_metadata(self, driver_info: Any) -> None:
        """Beanie 2 calls this on pymongo >= 4.14 clients; nothing to do here."""

    def start_session(self, *args: Any, **kwargs: Any) -> EmbeddedSession:
        return EmbeddedSession(self)

    async def server_info(self, session: Any = None) -> dict[str, Any]:
        await asyncio.sleep(0)
        return dict(self._sync.server_info())

    async def list_database_names(self, session: Any = None, comment: Any = None) -> list[str]:
        await asyncio.sleep(0)
        return list(self._sync.list_database_names())

    async def drop_database(
        self, name_or_database: Any, session: Any = None, comment: Any = None
    ) -> None:
        await asyncio.sleep(0)
        name = getattr(name_or_database, "name", name_or_database)
        self._sync.drop_database(name)

    async def close(self) -> None:
        self._closed = True

    aclose = close

    async def __aenter__(self) -> EmbeddedClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
