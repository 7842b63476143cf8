"""What crosses the (imaginary) wire: BSON round trips, sizes, argument shapes, batches.

The embedded backend never talks to a server, yet it must fail, convert and count as if it
did: a command is encoded as pymongo would send it (so what BSON cannot carry fails here
too, and its size is what the recorder reports) and decoded as the server would see it
(naive UTC datetimes, tuples as lists); documents come back through BSON again, aware in
`datetime.timezone.utc`. Everything here is pure: no mongomock, no I/O.
"""

from __future__ import annotations

import datetime as _dt
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import bson
from bson.codec_options import CodecOptions
from bson.int64 import Int64

__all__ = [
    "DEFAULT_FIRST_BATCH",
    "IN_CODEC_OPTIONS",
    "MAX_BATCH_BYTES",
    "OUT_CODEC_OPTIONS",
    "array_extra",
    "as_returned",
    "cursor_reply",
    "cursor_reply_size",
    "new_cursor_id",
    "plan_batches",
    "projection_spec",
    "returned_value",
    "size_of",
    "sort_spec",
    "to_server",
]

#: How the server sees what the driver sends: naive UTC datetimes, plain dicts.
IN_CODEC_OPTIONS: CodecOptions[dict[str, Any]] = CodecOptions(document_class=dict, tz_aware=False)
#: How documents come back: aware datetimes in `datetime.timezone.utc`.
OUT_CODEC_OPTIONS: CodecOptions[dict[str, Any]] = CodecOptions(
    document_class=dict, tz_aware=True, tzinfo=_dt.UTC
)

#: First batch of a cursor when no batch size is given (server default).
DEFAULT_FIRST_BATCH = 101
#: A reply carries at most this many bytes of documents.
MAX_BATCH_BYTES = 16 * 1024 * 1024

_UTC = _dt.UTC
#: Cursor ids of open embedded cursors (only their BSON size matters: always an int64).
_CURSOR_IDS = itertools.count(1 << 40)


def new_cursor_id() -> int:
    """A fresh id for a cursor that stays open on the (imaginary) server."""
    return next(_CURSOR_IDS)


def to_server(command: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """Encode a command as pymongo would; return (what the server decodes, size)."""
    raw = bson.encode(command)
    return bson.decode(raw, codec_options=IN_CODEC_OPTIONS), len(raw)


def _aware(value: Any) -> Any:
    """Pure-Python fallback of the tz normalisation (for values BSON cannot carry)."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            return value.replace(tzinfo=_UTC)
        return value.astimezone(_UTC)
    if isinstance(value, dict):
        return {k: _aware(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_aware(v) for v in value]
    return value


def as_returned(doc: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """A returned document as the driver would hand it over, and its BSON size."""
    try:
        raw = bson.encode(doc)
    except Exception:
        return _aware(dict(doc)), 0
    return bson.decode(raw, codec_options=OUT_CODEC_OPTIONS), len(raw)


def returned_value(value: Any) -> Any:
    """A single returned value (not a document) as the driver would hand it over."""
    if value is None:
        return None
    return as_returned({"v": value})[0]["v"]


def size_of(doc: Mapping[str, Any]) -> int:
    """BSON size of a document; 0 for one BSON cannot encode (sizes are best effort)."""
    try:
        return len(bson.encode(doc))
    except Exception:
        return 0


def array_extra(sizes: Iterable[int]) -> int:
    """Bytes that documents of the given sizes add to an (initially empty) BSON array."""
    return sum(2 + len(str(i)) + s for i, s in enumerate(sizes))


def sort_spec(key_or_list: Any, direction: Any = None) -> list[tuple[str, Any]] | None:
    """pymongo's accepted sort specs -> [(key, direction)] (None for no sort)."""
    if key_or_list is None:
        return None
    if direction is not None:
        return [(key_or_list, direction)]
    if isinstance(key_or_list, str):
        return [(key_or_list, 1)]
    items: list[tuple[str, Any]]
    if isinstance(key_or_list, Mapping):
        items = list(key_or_list.items())
    else:
        items = []
        for item in key_or_list:
            if isinstance(item, str):
                items.append((item, 1))
            else:
                key, value = item
                items.append((key, value))
    return items or None


def projection_spec(projection: Any) -> dict[str, Any] | None:
    """pymongo's accepted projections (a mapping or a list of names) -> a mapping."""
    if projection is None:
        return None
    if isinstance(projection, Mapping):
        return dict(projection)
    if isinstance(projection, str):
        raise TypeError("projection must be a mapping or a list of field names")
    return {name: 1 for name in projection}


def cursor_reply(batch_key: str, cursor_id: int, ns: str, batch: list[Any]) -> dict[str, Any]:
    """The reply a server sends with a cursor batch (``firstBatch`` or ``nextBatch``)."""
    return {"cursor": {batch_key: batch, "id": Int64(cursor_id), "ns": ns}, "ok": 1.0}


def cursor_reply_size(batch_key: str, cursor_id: int, ns: str, sizes: Sequence[int]) -> int:
    """BSON size of `cursor_reply` for documents of these sizes, without encoding them."""
    return size_of(cursor_reply(batch_key, cursor_id, ns, [])) + array_extra(sizes)


def plan_batches(
    sizes: Sequence[int], first: int | None, following: int | None, single: bool
) -> list[int]:
    """End offsets of the batches a server would return for documents of these sizes.

    `first`/`following`: documents per batch (None: no count limit, only 16 MiB).
    """
    n = len(sizes)
    if n == 0:
        return [0]
    if single:
        return [n]
    ends: list[int] = []
    start = 0
    limit = first
    while start < n:
        end, total = start, 0
        while end < n and (limit is None or end - start < limit):
            if end > start and total + sizes[end] > MAX_BATCH_BYTES:
                break
            total += sizes[end]
            end += 1
        ends.append(end)
        start = end
        limit = following
    return ends
