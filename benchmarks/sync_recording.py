"""A recording wrapper for synchronous mongomock clients (the peers' drivers are sync).

LangGraph's checkpointer and LangChain's chat history take a sync `MongoClient`. On a real
server the pymongo command listener (`RecorderListener`) counts their commands; on the
embedded backend this wrapper builds the same command documents pymongo would send for
the calls they make (insert, update, find, count, ...) and records their BSON sizes into
the same `CommandRecorder`, so figures compare across peers and backends.

Shim (documented in the results): pymongo >= 4.11 passes `sort=` to bulk `UpdateOne`,
which mongomock rejects; `bulk_write` here drops a `sort` of None. The benchmarked calls
(`put`, `get_tuple`, `add_message`, `messages`) do not use bulk writes.
"""

from __future__ import annotations

from typing import Any, Mapping

import mongomock

from mindstore.backends.recorder import CommandRecorder, RecordedCommand, bson_size

REPLY_OVERHEAD = 40  # {"ok": 1.0, "n": ..} or a cursor envelope


class RecordingCollection:
    def __init__(self, collection: mongomock.Collection, recorder: CommandRecorder) -> None:
        self._c = collection
        self._r = recorder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._c, name)

    def _record(self, name: str, command: dict[str, Any], received: int, n: int = 0, **fields: Any) -> None:
        command = {name: self._c.name, **command, "$db": self._c.database.name}
        self._r.record(RecordedCommand(name=name, collection=self._c.name, bytes_sent=bson_size(command),
                                       bytes_received=received + REPLY_OVERHEAD, n_returned=n, **fields))  # fmt: skip

    def insert_one(self, document: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        result = self._c.insert_one(document, *args, **kwargs)
        self._record("insert", {"ordered": True, "documents": [document]}, 0, documents=[document])
        return result

    def insert_many(self, documents: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        documents = list(documents)
        result = self._c.insert_many(documents, *args, **kwargs)
        self._record("insert", {"ordered": True, "documents": documents}, 0, statements=len(documents))
        return result

    def update_one(self, filter: dict[str, Any], update: Any, upsert: bool = False, **kwargs: Any) -> Any:
        result = self._c.update_one(filter, update, upsert=upsert)
        statement = {"q": filter, "u": update, "multi": False, "upsert": upsert}
        self._record("update", {"ordered": True, "updates": [statement]}, 0, filter=filter, update=update)
        return result

    def replace_one(self, filter: dict[str, Any], replacement: Any, upsert: bool = False, **kwargs: Any) -> Any:
        result = self._c.replace_one(filter, replacement, upsert=upsert)
        statement = {"q": filter, "u": replacement, "multi": False, "upsert": upsert}
        self._record("update", {"ordered": True, "updates": [statement]}, 0, filter=filter)
        return result

    def bulk_write(self, requests: list[Any], *args: Any, **kwargs: Any) -> Any:
        for request in requests:  # the documented mongomock shim: drop sort=None
            if getattr(request, "_sort", "absent") is None:
                del request._sort
        return self._c.bulk_write(requests, *args, **kwargs)

    def find(self, filter: Mapping[str, Any] | None = None, projection: Any = None, **kwargs: Any) -> list[dict[str, Any]]:
        filter = dict(filter or {})
        cursor = self._c.find(filter, projection, **{k: v for k, v in kwargs.items() if k in {"skip", "limit", "sort"}})
        documents = list(cursor)
        command: dict[str, Any] = {"filter": filter}
        for key in ("sort", "skip", "limit"):
            if kwargs.get(key) is not None:
                command[key] = dict(kwargs[key]) if key == "sort" else kwargs[key]
        self._record("find", command, sum(bson_size(d) for d in documents), n=len(documents), filter=filter)
        return documents

    def find_one(self, filter: Mapping[str, Any] | None = None, *args: Any, **kwargs: Any) -> Any:
        found = self.find(filter, *args, limit=1, **kwargs)
        return found[0] if found else None

    def count_documents(self, filter: Mapping[str, Any], **kwargs: Any) -> int:
        n = self._c.count_documents(filter, **kwargs)
        pipeline = [{"$match": filter}, {"$group": {"_id": 1, "n": {"$sum": 1}}}]
        self._record("aggregate", {"pipeline": pipeline, "cursor": {}}, 30, n=1, pipeline=pipeline)
        return n


class RecordingDatabase:
    def __init__(self, database: mongomock.Database, recorder: CommandRecorder) -> None:
        self._d = database
        self._r = recorder

    def __getitem__(self, name: str) -> RecordingCollection:
        return RecordingCollection(self._d[name], self._r)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self[name]


class RecordingClient:
    """`client[db][collection]` like pymongo's `MongoClient`, recording every call."""

    def __init__(self, client: mongomock.MongoClient, recorder: CommandRecorder) -> None:
        self._client = client
        self._r = recorder

    def __getitem__(self, name: str) -> RecordingDatabase:
        return RecordingDatabase(self._client[name], self._r)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)
