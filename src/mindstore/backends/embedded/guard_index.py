"""Exactly-once guards in constant time: the strings an array field holds, per document.

The guard `{"messages.id": {"$ne": id}}` asks whether any element of `messages` has that
id. On a task of 10,000 messages, reading the field from every sub-document costs several
milliseconds (the sub-documents are scattered in memory): once the fast path stopped
copying the document, it was most of an append's cost. An `ArrayIndex` keeps, for one
stored document and one guarded path `array.field`, how many times each string occurs
there, so the guard is a set lookup.

Exactness. An index is used only while nothing but the fast path has touched its document:

* the fast path updates it for every path it sets under the array (`Pending`), and drops
  it when a change is not a plain string (a sub-document, an array);
* mongomock changes stored documents in place only in `Collection._update` (every update,
  replace, find-and-modify and bulk write) and removes them in `Collection._delete`; both
  are wrapped (once per process, `_install`) to drop every index of their collection first;
* on every use the index checks that the key still holds the same document object, the
  same array object, of the same length.

Only arrays of at least `MIN_LENGTH` elements whose field values are all of simple types
(strings, numbers, dates, ids, missing) are indexed; others are scanned every time. At most
`MAX_PER_COLLECTION` documents per collection are indexed (oldest dropped first).
"""

from __future__ import annotations

import datetime as _dt
import weakref
from collections import Counter
from collections.abc import Iterable
from typing import Any

from bson import ObjectId
from bson.int64 import Int64
from mongomock import filtering as _untyped_filtering

from mindstore.backends.embedded.once import once

__all__ = ["MIN_LENGTH", "ArrayIndex", "Pending", "candidate_values", "lookup"]

#: mongomock's marker for a missing field (a candidate value of its matcher)
NOTHING: Any = getattr(_untyped_filtering, "NOTHING")  # noqa: B009 - untyped module

#: Shorter arrays are scanned: the scan costs less than keeping an index.
MIN_LENGTH = 256
MAX_PER_COLLECTION = 32
#: Values that never equal a string unless they are one (hashable, plain equality).
SIMPLE_TYPES: frozenset[type] = frozenset(
    {str, int, float, bool, type(None), _dt.datetime, ObjectId, Int64, type(NOTHING)}
)
_NO_ELEMENT = object()  # past the end of the array, or an element that is not a document

# collection store (mongomock's per-collection storage) -> {(document key, path): index}
_INDEXES: weakref.WeakKeyDictionary[object, dict[tuple[Any, str], ArrayIndex]] = (
    weakref.WeakKeyDictionary()
)


def candidate_values(array: list[Any], field: str) -> list[Any]:
    """What mongomock's matcher compares for `array.field`: the field of every
    sub-document, `NOTHING` where it is missing; elements that are not documents give
    nothing."""
    return [item.get(field, NOTHING) for item in array if isinstance(item, dict)]


def _element_value(array: list[Any], index: int, field: str) -> Any:
    if index >= len(array) or not isinstance(array[index], dict):
        return _NO_ELEMENT
    return array[index].get(field, NOTHING)


class ArrayIndex:
    """The strings found at `array.field` in one stored document."""

    __slots__ = ("array", "counts", "doc", "field", "head", "length")

    def __init__(self, doc: dict[str, Any], head: str, field: str, counts: Counter[str]) -> None:
        self.doc = doc
        self.head = head
        self.field = field
        self.array: list[Any] = doc[head]
        self.length = len(self.array)
        self.counts = counts

    def valid_for(self, doc: Any) -> bool:
        return (
            doc is self.doc
            and doc.get(self.head) is self.array
            and (len(self.array) == self.length)
        )

    def holds_any(self, strings: Iterable[str]) -> bool:
        counts = self.counts
        return any(s in counts for s in strings)


def _drop_all(store: object) -> None:
    _INDEXES.pop(store, None)


@once
def _install() -> None:
    """Wrap mongomock's in-place writers so that they drop their collection's indexes."""
    from mongomock import collection as _untyped_collection

    Collection: Any = _untyped_collection.Collection
    original_update = Collection._update
    original_delete = Collection._delete

    def _update(self: Any, *args: Any, **kwargs: Any) -> Any:
        _drop_all(self._store)
        return original_update(self, *args, **kwargs)

    def _delete(self: Any, *args: Any, **kwargs: Any) -> Any:
        _drop_all(self._store)
        return original_delete(self, *args, **kwargs)

    Collection._update = _update
    Collection._delete = _delete


def lookup(store: object, key: Any, doc: dict[str, Any], path: str) -> ArrayIndex | None:
    """The valid index of `path` ("array.field") in the document stored under `key`,
    built now if the array is long enough and its values simple; else None."""
    head, _, field = path.partition(".")
    entries = _INDEXES.get(store)
    if entries is not None:
        entry = entries.get((key, path))
        if entry is not None:
            if entry.valid_for(doc):
                return entry
            del entries[(key, path)]
    array = doc.get(head)
    if type(array) is not list or len(array) < MIN_LENGTH:
        return None
    values = candidate_values(array, field)
    if not set(map(type, values)) <= SIMPLE_TYPES:
        return None
    _install()
    counts = Counter(value for value in values if type(value) is str)
    entry = ArrayIndex(doc, head, field, counts)
    if entries is None:
        entries = _INDEXES.setdefault(store, {})
    while len(entries) >= MAX_PER_COLLECTION:
        del entries[next(iter(entries))]
    entries[(key, path)] = entry
    return entry


def indexes_of(store: object, key: Any, doc: dict[str, Any]) -> list[ArrayIndex]:
    """The valid indexes of the document stored under `key`."""
    entries = _INDEXES.get(store)
    if not entries:
        return []
    found = []
    for (entry_key, path), entry in list(entries.items()):
        if entry_key == key:
            if entry.valid_for(doc):
                found.append(entry)
            else:
                del entries[(entry_key, path)]
    return found


def forget(store: object, key: Any) -> None:
    """Drop every index of the document stored under `key`."""
    entries = _INDEXES.get(store)
    if entries:
        for entry_key in [k for k in entries if k[0] == key]:
            del entries[entry_key]


class Pending:
    """One index across one update: the values of the elements the update touches, taken
    before it runs (`Pending(...)`) and after (`commit`)."""

    def __init__(
        self, store: object, key: Any, index: ArrayIndex, paths: Iterable[tuple[str, ...]]
    ) -> None:
        self.store = store
        self.key = key
        self.index = index
        self.drop = False
        self.touched: dict[int, Any] = {}
        for parts in paths:
            if parts[0] != index.head:
                continue
            position = parts[1] if len(parts) > 1 else ""
            if len(parts) == 1 or not (position.isascii() and position.isdigit()):
                self.drop = True  # the array itself is replaced or removed
                return
            if len(parts) == 2 or parts[2] == index.field:
                if len(parts) > 3:
                    self.drop = True  # a value under the field changes in place
                    return
                element = int(position)
                self.touched[element] = _element_value(index.array, element, index.field)

    def commit(self) -> None:
        """Bring the index up to date with the applied update (or drop it)."""
        index = self.index
        if not self.drop:
            counts = index.counts
            for element, old in self.touched.items():
                new = _element_value(index.array, element, index.field)
                if new is not _NO_ELEMENT and type(new) not in SIMPLE_TYPES:
                    self.drop = True
                    break
                if type(old) is str:
                    counts[old] -= 1
                    if counts[old] <= 0:
                        del counts[old]
                if type(new) is str:
                    counts[new] += 1
            index.length = len(index.array)
        if self.drop:
            forget(self.store, self.key)
