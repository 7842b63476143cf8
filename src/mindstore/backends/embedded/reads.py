"""Reads of an embedded collection: find, aggregate, counts, distinct."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from .codec import as_returned, cursor_reply, cursor_reply_size, size_of
from .collection_base import CollectionBase
from .cursors import EmbeddedCommandCursor, EmbeddedCursor
from .pipeline import run_pipeline

__all__ = ["Reads"]


class Reads(CollectionBase):
    """pymongo's read methods: same parameters, same order, same results."""

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
        with self.lock:
            decoded, op = self._begin("aggregate", cmd)
            try:
                raw = run_pipeline(self._sync, decoded["pipeline"])
            except Exception as exc:
                self._fail(op, exc)
                raise
            cursor = EmbeddedCommandCursor(self, self.full_name, raw, op, batch_size)
            self._finish(op, event_reply=cursor.first_reply)
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
        with self.lock:
            decoded, op = self._begin("aggregate", cmd)
            try:
                extra: dict[str, Any] = {}
                if skip is not None:
                    extra["skip"] = skip
                if limit is not None:
                    extra["limit"] = limit
                if "maxTimeMS" in kwargs:
                    extra["maxTimeMS"] = kwargs["maxTimeMS"]
                n: int = self._sync.count_documents(decoded["pipeline"][0]["$match"], **extra)
            except Exception as exc:
                self._fail(op, exc)
                raise
            batch = [{"_id": 1, "n": n}] if n else []
            op.record.n_returned = len(batch)
            sizes = [size_of(d) for d in batch]
            self._finish(
                op,
                cursor_reply_size("firstBatch", 0, self.full_name, sizes),
                event_reply=lambda: cursor_reply("firstBatch", 0, self.full_name, batch),
            )
        return n

    async def estimated_document_count(self, comment: Any = None, **kwargs: Any) -> int:
        await asyncio.sleep(0)
        cmd: dict[str, Any] = {"count": self._name}
        if comment is not None:
            cmd["comment"] = comment
        with self.lock:
            _, op = self._begin("count", cmd)
            try:
                n: int = self._sync.estimated_document_count()
            except Exception as exc:
                self._fail(op, exc)
                raise
            self._finish(op, {"n": n, "ok": 1.0})
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
        with self.lock:
            decoded, op = self._begin("distinct", cmd)
            try:
                # through a find projected on the key: mongomock's own distinct copies
                # every whole matching document first (seconds over 100,000 messages)
                query = decoded.get("query")
                if key and not key.startswith("$"):
                    values = self._sync.find(query, {key: 1}).distinct(key)
                else:
                    values = self._sync.distinct(key, query)
            except Exception as exc:
                self._fail(op, exc)
                raise
            out: list[Any] = as_returned({"values": values})[0]["values"]
            self._finish(op, {"values": values, "ok": 1.0})
        return out
