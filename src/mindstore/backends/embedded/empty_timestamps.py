"""Empty BSON timestamps (``Timestamp(0, 0)``) stored as given, as a server stores them.

mongomock replaces an empty timestamp anywhere in a document it is handed (nested values,
update operands and filters included) with the current time. A MongoDB server replaces
one only in a top-level field of an inserted document (not `_id`); a value nested in a
message, as user data is, is stored as sent. mindstore never writes a top-level
timestamp, so the embedded backend keeps every empty timestamp as it is: a message that
holds one reads back, backs up and restores byte for byte on both backends.

`install()` replaces mongomock's document normaliser
(`helpers.patch_datetime_awareness_in_document`, which every insert, update and filter
goes through) once per process with `normalise`:
mongomock's function with the empty timestamp left alone and with fewer steps per value
(a plain `dict`, a `list` and a value of a type the original returns unchanged are
handled first, by exact type; everything else takes the original's branches in its
order). mongomock's function tested every value against six types in turn and, wrapped,
went through two calls per nested value. Same results: tests/test_embedded_normalise.py
compares the two on generated documents.
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime
from typing import Any

from bson.int64 import Int64
from bson.objectid import ObjectId
from mongomock import helpers as _untyped_helpers

__all__ = ["ORIGINAL", "install", "normalise"]

_helpers: Any = _untyped_helpers

ORIGINAL: Any = _helpers.patch_datetime_awareness_in_document
"""mongomock's own normaliser, as it was before `install` (the tests compare)."""

#: Exact types the original returns unchanged (not a mapping, sequence, datetime or
#: timestamp; a subclass takes the general branches).
_UNCHANGED: frozenset[type] = frozenset({str, int, float, bool, type(None), bytes, ObjectId, Int64})


def normalise(value: Any) -> Any:
    """mongomock's `patch_datetime_awareness_in_document`, an empty timestamp kept as is:
    aware datetimes to naive UTC, every datetime to millisecond precision, mappings and
    sequences copied (tuples become lists, an `OrderedDict` stays one, another mapping
    becomes a dict)."""
    kind = type(value)
    if kind is dict:
        return {k: normalise(v) for k, v in value.items()}
    if kind in _UNCHANGED:
        return value
    if kind is list:
        return [normalise(item) for item in value]
    if isinstance(value, OrderedDict):
        return OrderedDict((k, normalise(v)) for k, v in value.items())
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [normalise(item) for item in value]
    if isinstance(value, datetime):
        mongo_us = (value.microsecond // 1000) * 1000
        if value.tzinfo:
            offset: Any = value.utcoffset()  # None raises below, as in the original
            return (value - offset).replace(tzinfo=None, microsecond=mongo_us)
        return value.replace(microsecond=mongo_us)
    # a Timestamp: an empty one is kept (mongomock put the current time there)
    return value


def install() -> None:
    """Make mongomock normalise with `normalise` (once per process)."""
    _helpers.patch_datetime_awareness_in_document = normalise
