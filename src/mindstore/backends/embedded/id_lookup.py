"""Reads by `_id` without scanning the collection (embedded backend).

mongomock finds the documents of every read, count, update, delete and find-and-modify
the same way, in `Collection._iter_documents(filter)`: it runs its generic matcher on every
stored document. Almost every read mindstore sends names one task, dialog node or payload
by `_id`, so a read cost time in proportion to the whole collection: building a dialog tree
of 1,000 nodes ran the matcher three million times.

mongomock's store (`CollectionStore`) already is a dict keyed by `_id`. When a filter
pins `_id` to one plain value (a str, int, float, bool, `Int64` or `ObjectId`) or
`{"$in": [plain values]}`, and every key before `_id` is a top-level field equal to a plain
value or None (mindstore puts the tenant first), the documents whose `_id` equals one of
the values are taken from the store directly and only they are given to mongomock's own
`filter_applies` with the whole filter; everything else runs mongomock's scan unchanged.
The wrapper sits on `Collection._iter_documents` (installed once per process, `install`),
the one place every mongomock operation finds its documents, so find, find_one, counts,
an aggregation's leading `$match` (run as a find), updates mindstore's fast update path
does not take, deletes and find-and-modify all use it, and the result copies, sorting,
projection and skip/limit stay mongomock's own code.

Why the results are mongomock's, exactly:

* Equality. For a plain value, mongomock's matcher compares ``doc["_id"] == value`` (or,
  for an array `_id`, looks inside it). Python's dict finds a key that is ``==`` to the
  value with the same hash, and for the key types of `SAFE_KEY_TYPES` a key that is
  ``==`` to a plain value always has its hash (1, 1.0, True and Int64(1) are one key to
  both; "1" is another).
* The key is the `_id`. mongomock refuses an update that changes `_id` (to an unequal
  value) and puts the document back under ``snapshot["_id"]``; for the safe key types
  that is the key itself. Other `_id`s are not their key: a datetime's key keeps its
  microseconds, a tuple's document holds a list, an embedded document's key is a
  `hashdict`; after a refused update of such an `_id` the changed document can even stay
  under the old key. So a store that ever held a key of another type is marked once
  (`CollectionStore.__setitem__` is wrapped) and always scanned. mindstore's `_id`s are
  strings.
* NaN. A NaN value is never looked up (it equals nothing, but a dict, and mongomock's
  `$in`, find the same NaN object by identity).
* Order. The scan yields documents in the store's insertion order; so does this: more
  than one document found (`$in`) is put in store order, by the position each key took
  when it entered the store (`StoreOrder`, kept by the wrapped `__setitem__` and
  `__delitem__`, rebuilt from the store when it was replaced or does not add up), not by
  walking the whole collection.
* Errors and laziness. The scan tests the keys of the filter in order and stops at the
  first that fails: on a document whose `_id` does not match it evaluates at most the keys
  before `_id`, which are plain top-level equalities that cannot raise (a dotted path can:
  a negative array index on an empty array), so skipping those documents changes
  nothing; the found documents get the whole filter, lazily, as the scan's generator
  would. The same holds for the empty document mongomock tests an empty collection's
  filter with.
* State. The documents are read from the store at the call, as the scan takes its list.

The switch is per client (`EmbeddedClient.fast_reads`, `register`): a mongomock client
that no `EmbeddedClient` owns is never affected. The tests run both paths on generated
collections, filters and writes and compare results, errors, order and stored documents.
"""

from __future__ import annotations

import math
import uuid
import weakref
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from bson import Binary, MaxKey, MinKey, ObjectId
from bson.int64 import Int64
from mongomock import filtering as _untyped_filtering

from mindstore.backends.embedded.once import once

__all__ = ["SAFE_KEY_TYPES", "ReadSwitch", "install", "lookup_keys", "register"]

# mongomock carries no annotations: typed aliases of the few names used here
_filter_applies: Callable[[Any, Any], bool] = getattr(_untyped_filtering, "filter_applies")  # noqa: B009

#: Filter values looked up directly (equality with them is plain Python ``==``).
PLAIN_VALUE_TYPES: frozenset[type] = frozenset({str, int, float, bool, Int64, ObjectId})

#: Stored key types for which the document's `_id` stays the key (mongomock stores
#: ``data["_id"]`` as the key and a copy of the document with datetimes truncated, tuples
#: made lists and an empty `Timestamp` filled in, so those kinds of `_id` differ from their
#: key) and for which ``key == plain value`` implies equal hashes, so a dict lookup finds
#: exactly what mongomock's equality finds. Unhashable values cannot be keys at all.
SAFE_KEY_TYPES: frozenset[type] = frozenset(
    {str, int, float, bool, Int64, ObjectId, bytes, Binary, uuid.UUID, MinKey, MaxKey, type(None)}
)


@dataclass(slots=True)
class ReadSwitch:
    """Whether one client's reads by `_id` use the store lookup (changeable any time)."""

    on: bool = True


# mongomock server store (one per mongomock client) -> its owner's switch
_SWITCHES: weakref.WeakKeyDictionary[object, ReadSwitch] = weakref.WeakKeyDictionary()
# collection stores that ever held a key outside SAFE_KEY_TYPES (always scanned)
_IRREGULAR: weakref.WeakSet[object] = weakref.WeakSet()
_MISSING = object()


@dataclass(slots=True)
class StoreOrder:
    """Where each key of one collection store stands in its insertion order.

    A dict keeps a key where it first entered (replacing a value does not move it; a
    deleted key that comes back goes last), so a counter taken when a key enters orders
    the keys as the store iterates them. Valid for one `documents` dict (a dropped
    collection gets a new one)."""

    documents: Any
    positions: dict[Any, int]
    next: int

    @classmethod
    def of(cls, documents: Any) -> StoreOrder:
        return cls(documents, {key: n for n, key in enumerate(documents)}, len(documents))

    def valid_for(self, documents: Any) -> bool:
        return self.documents is documents and len(self.positions) == len(documents)


class _ReadWriteLock(Protocol):
    def reader(self) -> AbstractContextManager[object]: ...


class CollectionStore(Protocol):
    """What the lookup uses of a mongomock `CollectionStore` (mongomock has no types): its
    read lock, its documents keyed by `_id` in stored order, its TTL sweep."""

    _rwlock: _ReadWriteLock
    _documents: MutableMapping[Any, dict[str, Any]]

    def _remove_expired_documents(self) -> None: ...


# collection store -> the order of its keys (made at the first lookup of several keys)
_ORDERS: weakref.WeakKeyDictionary[object, StoreOrder] = weakref.WeakKeyDictionary()


def _order(store: object, documents: Any) -> StoreOrder:
    """The store's `StoreOrder`, rebuilt from `documents` when missing or stale."""
    order = _ORDERS.get(store)
    if order is None or not order.valid_for(documents):
        order = _ORDERS[store] = StoreOrder.of(documents)
    return order


def _plain(value: Any) -> bool:
    kind = type(value)
    return kind in PLAIN_VALUE_TYPES and not (kind is float and math.isnan(value))


def _harmless(key: Any, value: Any) -> bool:
    """A filter key that the scan may evaluate on every document without effect: it can
    raise nothing (a top-level field equal to a plain value or None; `$comment`)."""
    if key == "$comment":
        return True
    if type(key) is not str or not key or key[0] == "$" or "." in key:
        return False  # a dotted path can raise (a negative array index on an empty array)
    return type(value) in PLAIN_VALUE_TYPES or value is None


def lookup_keys(filter: Any) -> list[Any] | None:
    """The `_id` values to look up for `filter`, or None when it must be scanned.

    The filter has a top-level `_id` equal to a plain value or `{"$in": [plain, ...]}`
    (a list), and every key before `_id` is harmless (`_harmless`): mindstore's filters
    put the tenant first (`{"tenant": t, "_id": key, ...}`)."""
    if type(filter) is not dict or "_id" not in filter:
        return None
    for key, value in filter.items():
        if key == "_id":
            break
        if not _harmless(key, value):
            return None
    value = filter["_id"]
    if _plain(value):
        return [value]
    if type(value) is dict and len(value) == 1:
        values = value.get("$in")
        if type(values) is list and all(_plain(item) for item in values):
            return values
    return None


def _found(store: CollectionStore, keys: list[Any]) -> list[dict[str, Any]]:
    """The stored documents under `keys`, each once, in the store's order."""
    with store._rwlock.reader():
        documents = store._documents
        found: dict[int, tuple[Any, Any]] = {}  # each document once, with a key it is under
        for key in keys:
            document = documents.get(key, _MISSING)
            if document is not _MISSING:
                found[id(document)] = (key, document)
        if len(found) < 2:
            return [document for _, document in found.values()]
        order = _order(store, documents)
        try:
            ranked = sorted((order.positions[key], n) for n, (key, _) in enumerate(found.values()))
        except KeyError:  # the store changed without its wrappers: count again
            order = _ORDERS[store] = StoreOrder.of(documents)
            ranked = sorted((order.positions[key], n) for n, (key, _) in enumerate(found.values()))
        listed = list(found.values())
        return [listed[n][1] for _, n in ranked]


def _iter_found(
    filter: dict[str, Any], documents: list[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    return (document for document in documents if _filter_applies(filter, document))


def _lookup(
    store: CollectionStore, filter: dict[str, Any], keys: list[Any]
) -> Iterator[Any] | None:
    """mongomock's `_iter_documents(filter)` through the store's keys; None: scan.

    On an empty collection the scan first applies the filter to an empty document (its
    validation); that stops at the missing `_id` at the latest and cannot raise before it
    (`lookup_keys`), so there is nothing to repeat here."""
    if store in _IRREGULAR:
        return None
    store._remove_expired_documents()  # TTL indexes, as every read of the store does
    return _iter_found(filter, _found(store, keys))


@once
def install() -> None:
    """Wrap mongomock's `Collection._iter_documents` (the lookup) and
    `CollectionStore.__setitem__` (marking stores with other key types), once: on the
    classes, so every collection uses it, whenever it was created."""
    from mongomock import collection as _untyped_collection
    from mongomock import store as _untyped_store

    Collection: Any = _untyped_collection.Collection
    CollectionStore: Any = _untyped_store.CollectionStore
    original_iter = Collection._iter_documents
    original_set = CollectionStore.__setitem__
    original_delete = CollectionStore.__delitem__

    def _iter_documents(self: Any, filter: Any) -> Any:
        keys = lookup_keys(filter)
        if keys is not None:
            switch = _SWITCHES.get(self.database.client._store)
            if switch is not None and switch.on:
                found = _lookup(self._store, filter, keys)
                if found is not None:
                    return found
        return original_iter(self, filter)

    def __setitem__(self: Any, key: Any, value: Any) -> None:
        if type(key) not in SAFE_KEY_TYPES:
            _IRREGULAR.add(self)
        order = _ORDERS.get(self)
        documents = self._documents
        new = order is not None and order.documents is documents and key not in documents
        original_set(self, key, value)
        if new and order is not None:  # entered last, as in the dict
            order.positions[key] = order.next
            order.next += 1

    def __delitem__(self: Any, key: Any) -> None:
        original_delete(self, key)
        order = _ORDERS.get(self)
        if order is not None:
            order.positions.pop(key, None)

    Collection._iter_documents = _iter_documents
    CollectionStore.__setitem__ = __setitem__
    CollectionStore.__delitem__ = __delitem__


def register(sync_client: Any, on: bool = True) -> ReadSwitch:
    """Install the wrappers and give the mongomock client `sync_client` a switch (kept
    for as long as the client's store lives)."""
    install()
    switch = ReadSwitch(on)
    _SWITCHES[sync_client._store] = switch
    return switch
