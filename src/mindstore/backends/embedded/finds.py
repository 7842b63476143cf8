"""A find on mongomock whose results the embedded backend copies once, not three times.

mongomock's `find` hands out copies: each matching document copied field by field
(`_copy_only_fields`: the whole document without a projection), then copied again to
make its datetimes aware. The embedded backend then encodes every result to BSON and
decodes it (`codec.as_returned`: its size for the recorder, and the values a driver would
hand over), which is a copy of its own, in C. Reading a task of 2,000 messages copied
every message three times, twice in Python.

`find_documents` is mongomock's `find` up to the results: the same checks of the filter,
the same filter normalisation, the same documents (`Collection._iter_documents`, so the
lookup by `_id` applies), the same sort, skip and limit, no results where an `IndexError`
arose (a negative array index in a filter: mongomock's cursor takes it for the end); only
without the copy for aware datetimes and, without a projection, without the field-by-field
copy: it returns the stored documents themselves. The caller must encode them
(`codec.as_returned`) before it lets go of the collection's lock, and never hand them
out: the encoded form is what a driver returns, with the same bytes (a naive stored
datetime and its aware UTC copy encode alike; BSON has no tuple, and dict subclasses
encode as dicts).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

from mongomock import collection as _untyped_collection
from mongomock import filtering as _untyped_filtering
from mongomock import helpers as _untyped_helpers

from .collection_base import MockCollection

__all__ = ["find_documents"]

_collection: Any = _untyped_collection
_filtering: Any = _untyped_filtering
_helpers: Any = _untyped_helpers


def _sort_key(key: str, document: Any) -> Any:
    return _filtering.resolve_sort_key(key, document)


def _stored_dataset(collection: MockCollection, spec: Any, sort: Any) -> Iterator[Any]:
    """mongomock's `Collection._get_dataset` without the copy of each document."""
    dataset: Iterator[Any] = collection._iter_documents(spec)  # mongomock's walk, uncopied
    if sort:
        if isinstance(sort, dict):
            sort = sort.items()
        for sort_key, sort_direction in reversed(sort):
            if sort_key == "$natural":
                if sort_direction < 0:
                    dataset = iter(reversed(list(dataset)))
                continue
            if sort_key.startswith("$"):
                raise NotImplementedError(
                    f"Sorting by {sort_key} is not implemented in mongomock yet"
                )
            dataset = iter(
                sorted(
                    dataset,
                    key=functools.partial(_sort_key, sort_key),
                    reverse=sort_direction < 0,
                )
            )
    return dataset


def find_documents(
    collection: MockCollection,
    filter: Mapping[str, Any] | None,
    projection: dict[str, Any] | None,
    skip: int,
    limit: int,
    sort: Any,
) -> list[dict[str, Any]]:
    """What ``list(collection.find(filter, projection, skip, limit, sort=sort))`` lists,
    before its copies: stored documents themselves when `projection` is None (encode them
    under the lock, never hand them out; see the module docstring). `limit` >= 0."""
    spec = filter
    if spec is None:
        spec = {}
    _collection.validate_is_mapping("filter", spec)
    spec = _helpers.patch_datetime_awareness_in_document(spec)
    try:
        if projection is None:
            results = list(_stored_dataset(collection, spec, sort))
        else:
            results = list(collection._get_dataset(spec, sort, projection, dict))  # mongomock's
    except IndexError:  # mongomock's cursor takes it for the end of the results
        return []
    results = results[skip:]
    if limit:
        results = results[:limit]
    return results
