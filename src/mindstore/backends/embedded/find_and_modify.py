"""findAndModify on an embedded collection: find_one_and_update/replace/delete."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from pymongo import ReturnDocument

from .codec import as_returned, projection_spec, size_of, sort_spec
from .collection_base import CollectionBase

__all__ = ["FindAndModify"]


class FindAndModify(CollectionBase):
    """pymongo's find_one_and_* methods: one findAndModify command each."""

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
        proj = projection_spec(projection)
        if proj is not None:
            cmd["fields"] = proj
        sort_list = sort_spec(sort)
        if sort is not None:
            cmd["sort"] = dict(sort_list or [])
        if upsert is not None:
            cmd["upsert"] = upsert
        if array_filters is not None:
            cmd["arrayFilters"] = list(array_filters)
        if comment is not None:
            cmd["comment"] = comment
        with self.lock:
            decoded, op = self._begin("findAndModify", cmd)
            sync = self._sync
            try:
                q = decoded["query"]
                fields = dict(decoded["fields"]) if decoded.get("fields") else None
                s = sort_spec(decoded.get("sort"))
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
                self._fail(op, exc)
                raise
            out, size = as_returned(value) if value is not None else (None, 0)
            leo: dict[str, Any] = {"n": 1 if (value is not None or upserted) else 0}
            if not remove:
                leo["updatedExisting"] = value is not None and not upserted
            reply_size = size_of({"lastErrorObject": leo, "value": None, "ok": 1.0})
            if out is not None:
                reply_size += size  # a document instead of null (which has no payload bytes)
                op.record.n_returned = 1
            self._finish(
                op,
                reply_size,
                event_reply=lambda: {"lastErrorObject": leo, "value": out, "ok": 1.0},
            )
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
