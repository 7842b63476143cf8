"""bulk_write on an embedded collection, one mongomock call per operation.

pymongo >= 4.11 passes ``sort=`` to mongomock's bulk builder, which rejects it, so each
`InsertOne`/`UpdateOne`/`UpdateMany`/`ReplaceOne`/`DeleteOne`/`DeleteMany` is run here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import Any

from bson import ObjectId
from pymongo.errors import BulkWriteError, InvalidOperation, PyMongoError
from pymongo.operations import (
    DeleteMany,
    DeleteOne,
    InsertOne,
    ReplaceOne,
    UpdateMany,
    UpdateOne,
)
from pymongo.results import BulkWriteResult

from .codec import sort_spec
from .writes import Writes

__all__ = ["BulkWrites"]

#: One operation of a bulk write: (kind, statement, index in the request list, request).
_Statement = tuple[str, Any, int, Any]


class BulkWrites(Writes):
    """pymongo's bulk_write, grouped into commands as pymongo groups them."""

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
        ops: list[_Statement] = []
        for index, request in enumerate(requests):
            kind, statement = self._bulk_statement(request)
            ops.append((kind, statement, index, request))
        runs: list[list[_Statement]] = []
        if ordered:
            for item in ops:
                if runs and runs[-1][0][0] == item[0]:
                    runs[-1].append(item)
                else:
                    runs.append([item])
        else:
            for kind in ("insert", "update", "delete"):
                run = [item for item in ops if item[0] == kind]
                if run:
                    runs.append(run)
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
                stmt["arrayFilters"] = list(op._array_filters or [])
            if opt("_sort") is not None:
                stmt["sort"] = dict(sort_spec(op._sort) or [])
            return "update", stmt
        if isinstance(op, ReplaceOne):
            stmt = {"q": op._filter, "u": op._doc}
            if opt("_upsert") is not None:
                stmt["upsert"] = op._upsert
            if opt("_collation") is not None:
                stmt["collation"] = op._collation
            if opt("_sort") is not None:
                stmt["sort"] = dict(sort_spec(op._sort) or [])
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
        run: list[_Statement],
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
        with self.lock:
            decoded, op = self._begin(kind, cmd)
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
                        deleted = sync.delete_one(q) if stmt["limit"] else sync.delete_many(q)
                        result["nRemoved"] += deleted.deleted_count
                        n += deleted.deleted_count
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
                    self._fail(op, exc)
                    raise
            reply: dict[str, Any] = {"n": n}
            if kind == "update":
                reply["nModified"] = n_modified
                if upserted:
                    reply["upserted"] = upserted
            reply["ok"] = 1.0
            if result["writeErrors"]:
                op.record.error = result["writeErrors"][-1]["errmsg"]
            self._finish(op, reply)
        return stop
