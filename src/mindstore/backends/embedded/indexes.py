"""Indexes of an embedded collection (``partialFilterExpression`` is kept, unlike mongomock's)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import mongomock.helpers
from pymongo import IndexModel

from .codec import sort_spec
from .collection_base import CollectionBase
from .cursors import EmbeddedCommandCursor

__all__ = ["Indexes"]


class Indexes(CollectionBase):
    """pymongo's index methods."""

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
        with self.lock:
            decoded, op = self._begin("createIndexes", cmd)
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
                self._fail(op, exc)
                raise
            after = len(list(sync.list_indexes()))
            self._finish(
                op,
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
            keys = sort_spec(index_or_name) or []
            name = mongomock.helpers.gen_index_name(keys)  # type: ignore[no-untyped-call]
        cmd: dict[str, Any] = {"dropIndexes": self._name, "index": name}
        with self.lock:
            _, op = self._begin("dropIndexes", cmd)
            try:
                self._sync.drop_index(name)
            except Exception as exc:
                self._fail(op, exc)
                raise
            self._finish(op, {"nIndexesWas": 2, "ok": 1.0})

    async def drop_indexes(self, session: Any = None, comment: Any = None, **kwargs: Any) -> None:
        await asyncio.sleep(0)
        with self.lock:
            _, op = self._begin("dropIndexes", {"dropIndexes": self._name, "index": "*"})
            self._sync.drop_indexes()
            self._finish(op, {"nIndexesWas": 1, "ok": 1.0})

    async def list_indexes(self, session: Any = None, comment: Any = None) -> EmbeddedCommandCursor:
        await asyncio.sleep(0)
        with self.lock:
            _, op = self._begin("listIndexes", {"listIndexes": self._name, "cursor": {}})
            docs = list(self._sync.list_indexes())
            cursor = EmbeddedCommandCursor(self, self.full_name, docs, op)
            self._finish(op, event_reply=cursor.first_reply)
        return cursor

    async def index_information(self, session: Any = None, comment: Any = None) -> dict[str, Any]:
        cursor = await self.list_indexes()
        info: dict[str, Any] = {}
        async for index in cursor:
            index = dict(index)
            index["key"] = list(index["key"].items())
            info[index.pop("name")] = index
        return info
