"""Make mongomock's document copies cheaper (embedded backend only).

mongomock deep-copies the whole document several times on every update (to snapshot it
for rollback and to hand out results). `copy.deepcopy` is general and slow: for the JSON-
shaped documents mindstore stores, a structural copy of dicts and lists that shares
immutable leaves is several times faster and gives the same result. Only mongomock's own
references to the `copy` module are replaced; nothing else in the process is affected.

Its `$unwind` deep-copies the whole input document, array included, once per array
element: unwinding a task of n messages costs O(n^2). Analytics unwind every message of
every task, so `$unwind` is replaced by a linear version with the same output: the
document is copied without the array once, then once per element with that element.
"""

from __future__ import annotations

import copy as _copy
import datetime
import decimal
import uuid
from types import SimpleNamespace
from typing import Any

import bson

_IMMUTABLE: frozenset[type] = frozenset(
    {
        str, int, float, bool, type(None), bytes, datetime.datetime, datetime.date,
        decimal.Decimal, uuid.UUID, bson.ObjectId, bson.Int64, bson.Decimal128,
        bson.Timestamp, bson.MinKey, bson.MaxKey,
    }
)  # fmt: skip


def structural_deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
    kind = type(value)
    if kind is dict:
        return {key: structural_deepcopy(item) for key, item in value.items()}
    if kind is list:
        return [structural_deepcopy(item) for item in value]
    if kind in _IMMUTABLE:
        return value
    return _copy.deepcopy(value, memo)


def _unwind_stage(
    in_collection: list[dict[str, Any]], _database: Any, options: Any
) -> list[dict[str, Any]]:
    """mongomock's `$unwind` semantics (preserveNullAndEmptyArrays, includeArrayIndex,
    non-array values as one element), copying the document without its array."""
    from mongomock import helpers as untyped_helpers

    helpers: Any = untyped_helpers  # mongomock's helpers carry no annotations

    if not isinstance(options, dict):
        options = {"path": options}
    path = options["path"]
    if not isinstance(path, str) or not path.startswith("$"):
        raise ValueError(
            "$unwind failed: exception: field path references must be prefixed with a '$' "
            f"'{path}'"
        )
    path = path[1:]
    preserve = options.get("preserveNullAndEmptyArrays")
    index_field = options.get("includeArrayIndex")
    parent_path, _, key = path.rpartition(".")
    unwound: list[dict[str, Any]] = []
    for doc in in_collection:
        try:
            value = helpers.get_value_by_dot(doc, path)
        except KeyError:
            if preserve:
                unwound.append(doc)
            continue
        if value is None or value == []:
            if preserve:
                if value == []:
                    doc = structural_deepcopy(doc)
                    helpers.delete_value_by_dot(doc, path)
                unwound.append(doc)
            continue
        items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
        parent = helpers.get_value_by_dot(doc, parent_path) if parent_path else doc
        parent[key] = None  # copy the document without the array, once
        try:
            skeleton = structural_deepcopy(doc)
        finally:
            parent[key] = value
        for index, item in items:
            new_doc = structural_deepcopy(skeleton)
            helpers.set_value_by_dot(new_doc, path, structural_deepcopy(item))
            if index_field:
                helpers.set_value_by_dot(new_doc, index_field, index)
            unwound.append(new_doc)
    return unwound


_installed = False


def install() -> None:
    """Idempotently point mongomock's collection module at the structural copy."""
    global _installed
    if _installed:
        return
    import mongomock.aggregate
    import mongomock.collection

    fast_copy = SimpleNamespace(deepcopy=structural_deepcopy, copy=_copy.copy)
    mongomock.collection.copy = fast_copy  # type: ignore[attr-defined,assignment]
    mongomock.aggregate.copy = fast_copy  # type: ignore[attr-defined,assignment]
    mongomock.aggregate._PIPELINE_HANDLERS["$unwind"] = _unwind_stage
    _installed = True
