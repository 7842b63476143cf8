"""Writes of an embedded collection: inserts, updates, replacements, deletes.

Each statement runs on mongomock synchronously and under the client's lock, i.e.
atomically, as a single-document write is on a server: no other coroutine of the loop
and no other thread runs between its filter and its change (`EmbeddedClient`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

from bson import ObjectId
from pymongo.results import (
    DeleteResult,
    InsertManyResult,
    InsertOneResult,
    UpdateResult,
)

from .codec import sort_spec
from .collection_base import CollectionBase
from .fast_update import fast_update

__all__ = ["Writes"]


class Writes(CollectionBase):
    """pymongo's single-command write methods."""

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
        with self.lock:
            decoded, op = self._begin("insert", cmd)
            try:
                self._sync.insert_one(decoded["documents"][0])
            except Exception as exc:
                self._fail(op, exc)
                raise
            self._finish(op, {"n": 1, "ok": 1.0})
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
        with self.lock:
            decoded, op = self._begin("insert", cmd)
            try:
                self._sync.insert_many(decoded["documents"], ordered=ordered)
            except Exception as exc:
                self._fail(op, exc)
                raise
            self._finish(op, {"n": len(docs), "ok": 1.0})
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
        """Run one update statement on mongomock (synchronously, under the client's lock,
        i.e. atomically).

        A statement of the shape mindstore sends (one `_id`, `$set`/`$unset`/`$inc` on
        disjoint paths) runs without copying the document (`fast_update`), with the same
        results; anything else, or with ``fast_updates`` off, runs mongomock's update."""
        sync = self._sync
        if not (replace or sort or array_filters is not None or collation is not None) and (
            self._database.fast_updates
        ):
            fast = fast_update(sync, q, u, upsert=upsert)
            if fast is not None:
                return fast
        if sort and not multi:
            target = sync.find_one(q, {"_id": 1}, sort=sort_spec(sort))
            if target is not None:
                q = {"_id": target["_id"]}
        extra: dict[str, Any] = {}
        if collation is not None:
            extra["collation"] = collation
        result: UpdateResult
        if replace:
            result = sync.replace_one(q, u, upsert=upsert)
            return result
        if array_filters is not None:
            extra["array_filters"] = array_filters
        if multi:
            result = sync.update_many(q, u, upsert=upsert, **extra)
        else:
            result = sync.update_one(q, u, upsert=upsert, **extra)
        return result

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
            stmt["sort"] = dict(sort_spec(sort) or [])
        cmd: dict[str, Any] = {"update": self._name, "ordered": True, "updates": [stmt]}
        if let is not None:
            cmd["let"] = let
        if comment is not None:
            cmd["comment"] = comment
        with self.lock:
            decoded, op = self._begin("update", cmd)
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
                self._fail(op, exc)
                raise
            self._finish(op, self._update_reply(result))
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
        with self.lock:
            decoded, op = self._begin("delete", cmd)
            q = decoded["deletes"][0]["q"]
            try:
                result: DeleteResult = (
                    self._sync.delete_many(q) if multi else self._sync.delete_one(q)
                )
            except Exception as exc:
                self._fail(op, exc)
                raise
            self._finish(op, {"n": result.deleted_count, "ok": 1.0})
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
