"""Running an aggregation pipeline on mongomock without copying every document first.

mongomock's aggregate copies every document of the collection, then its `$match` walks
each whole document to patch datetimes before comparing: an analytics report over one
tenant paid for copying every message of every tenant. A leading `$match` (and an
inclusion `$project` right after it) is run as a `find` instead, which filters first and
copies only the projected fields of the matching documents, with the same result for the
filters mindstore sends. A `$match` holding a datetime keeps mongomock's own path, whose
datetime handling differs from `find`'s.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

import mongomock.aggregate
import mongomock.filtering

from .collection_base import MockCollection
from .finds import find_documents

__all__ = ["run_pipeline"]


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
        and all(
            isinstance(k, str) and not k.startswith("$") and v in (1, True)
            for k, v in projection.items()
        )
    )


#: Expression operators whose value is the stored value itself (or its length), however
#: datetimes are held: a `$project` of only these reads stored documents uncopied.
_VALUE_OPERATORS = frozenset({"$slice", "$size"})


def _reads_values(expression: Any) -> bool:
    """`expression` is a number, a field path, or `_VALUE_OPERATORS` over such."""
    if isinstance(expression, (int, float)):  # bool included
        return True
    if isinstance(expression, str):
        return expression.startswith("$") and not expression.startswith("$$")
    if isinstance(expression, Mapping) and len(expression) == 1:
        ((name, arguments),) = expression.items()
        if name not in _VALUE_OPERATORS:
            return False
        listed = arguments if isinstance(arguments, list) else [arguments]
        return all(_reads_values(argument) for argument in listed)
    return False


def _is_value_projection(stage: Any) -> bool:
    """A `$project` stage that includes, excludes, or computes `_reads_values` only."""
    if set(stage) != {"$project"} or not isinstance(stage["$project"], Mapping):
        return False
    return all(isinstance(k, str) and not k.startswith("$") and _reads_values(v)
               for k, v in stage["$project"].items())  # fmt: skip


def run_pipeline(
    collection: MockCollection, pipeline: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """mongomock's aggregate, with a leading `$match` (and an inclusion `$project` right
    after it) run as a `find` (see the module docstring). A pipeline of only those gives
    the stored documents themselves (without a projection) or mongomock's uncopied
    projections (`finds.find_documents`), and one `$project` of stored values after the
    `$match` (`_is_value_projection`: `tasks.ends()`'s slices) runs over the stored
    documents: encode the results before letting go of the lock."""
    stages = list(pipeline)
    if not stages or set(stages[0]) != {"$match"} or _holds_datetime(stages[0]["$match"]):
        if stages and set(stages[0]) == {"$match"}:
            # a server refuses a bad filter (`$in` of a non-array, ...) whatever the data;
            # mongomock's aggregate would only find out at its first document
            mongomock.filtering.filter_applies(stages[0]["$match"], {})  # type: ignore[no-untyped-call]
        return list(collection.aggregate(stages))
    query = stages.pop(0)["$match"]
    projection = None
    if stages and set(stages[0]) == {"$project"} and _is_inclusion(stages[0]["$project"]):
        projection = stages.pop(0)["$project"]
    process = mongomock.aggregate.process_pipeline
    if not stages:  # the caller encodes them under the lock (finds.py)
        return find_documents(collection, query, projection, 0, 0, None)
    if projection is None and len(stages) == 1 and _is_value_projection(stages[0]):
        # new documents holding stored values: encoded under the lock too
        stored = find_documents(collection, query, None, 0, 0, None)
        return list(process(stored, collection.database, stages, None))  # type: ignore[no-untyped-call]
    documents = list(collection.find(query, projection))
    processed = process(documents, collection.database, stages, None)  # type: ignore[no-untyped-call]
    return list(processed)
