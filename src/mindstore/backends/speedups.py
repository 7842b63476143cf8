"""Make mongomock's document copies cheaper (embedded backend only).

mongomock deep-copies the whole document several times on every update (to snapshot it
for rollback and to hand out results). `copy.deepcopy` is general and slow: for the JSON-
shaped documents mindstore stores, a structural copy of dicts and lists that shares
immutable leaves is several times faster and gives the same result. Only mongomock's own
reference to the `copy` module is replaced; nothing else in the process is affected.
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


_installed = False


def install() -> None:
    """Idempotently point mongomock's collection module at the structural copy."""
    global _installed
    if _installed:
        return
    import mongomock.collection

    mongomock.collection.copy = SimpleNamespace(  # type: ignore[attr-defined]
        deepcopy=structural_deepcopy, copy=_copy.copy
    )
    _installed = True
