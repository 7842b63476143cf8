"""Duplicate-key errors that say which key, as a server's do.

mongomock raises ``DuplicateKeyError("E11000 Duplicate Key Error", 11000)`` with no
details. A server's error names the index and carries ``keyPattern`` and ``keyValue`` in
its details, which `bulk_write` copies into its ``writeErrors`` and a caller reads to tell
which constraint it hit. `install()` wraps mongomock's two unique checks once per process
(`Collection._ensure_uniques`, the secondary unique indexes, and `Collection._insert`, the
``_id``) so that every duplicate carries them; what is stored, and when a duplicate is
refused, stay mongomock's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mongomock import DuplicateKeyError
from mongomock import collection as _untyped_collection
from mongomock import helpers as _untyped_helpers

__all__ = ["duplicate_key_error", "install"]

_helpers: Any = _untyped_helpers
_installed = False


def duplicate_key_error(
    namespace: str, index: str, pattern: Mapping[str, Any], value: Mapping[str, Any]
) -> DuplicateKeyError:
    """The error a server raises for a duplicate of `value` in the unique index `index`."""
    shown = ", ".join(f"{key}: {value[key]!r}" for key in value)
    message = (
        f"E11000 duplicate key error collection: {namespace} index: {index} dup key: {{ {shown} }}"
    )
    details = {
        "code": 11000,
        "errmsg": message,
        "keyPattern": dict(pattern),
        "keyValue": dict(value),
    }
    return DuplicateKeyError(message, 11000, details)


def _ensure_uniques(self: Any, new_data: Any) -> None:
    """mongomock's check of the unique indexes (`new_data` is already in the store), with
    the index that refused it named in the error."""
    for name, index in self._store.indexes.items():
        if not index.get("unique"):
            continue
        keys = index.get("key")
        found: dict[str, Any] = {}
        for key, _direction in keys:
            try:
                found[key] = _helpers.get_value_by_dot(new_data, key)
            except KeyError:
                found[key] = None
        if index.get("sparse") and all(value is None for value in found.values()):
            continue
        query: dict[str, Any] = found
        partial = index.get("partialFilterExpression")
        if partial is not None:
            query = {"$and": [partial, found]}
        if len(list(self._iter_documents(query))) > 1:
            raise duplicate_key_error(self.full_name, name, dict(keys), found)


def install() -> None:
    """Wrap mongomock's unique checks (idempotent)."""
    global _installed
    if _installed:
        return
    Collection: Any = _untyped_collection.Collection
    original_insert = Collection._insert

    def _insert(self: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original_insert(self, data, *args, **kwargs)
        except DuplicateKeyError as exc:
            if exc.details or not isinstance(data, Mapping):
                raise
            # no details: mongomock's own `_id` check
            raise duplicate_key_error(
                self.full_name, "_id_", {"_id": 1}, {"_id": data.get("_id")}
            ) from None

    Collection._ensure_uniques = _ensure_uniques
    Collection._insert = _insert
    _installed = True
