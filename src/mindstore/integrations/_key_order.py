"""The key order of JSON objects (pure): what puts a rendering's keys back in the order a
caller wrote them.

A store of items gives each item back byte for byte as its JSON (`json.dumps(item)`), as a
SQLite session does; a typed message renders the item's keys in its format's canonical
order. `key_order` records the difference (only where there is one, so usually nothing)
and `in_order` re-applies it. Keys are kept as values (lists), never as document keys, so
any key a caller uses (`$`-prefixed, dotted) is safe to store.
"""

from __future__ import annotations

from typing import Any

from mindstore.model.base import JSON

Order = JSON
"""`{"keys": [the object's keys in order], "at": [[key or index, nested Order], ...]}`,
each part left out when it has nothing to say."""


def key_order(original: Any, rendered: Any) -> Order | None:
    """What `in_order` needs to give `rendered` the key order of `original`, at every level
    (None: it has it already). Values that differ otherwise are not its business."""
    order: Order = {}
    if isinstance(original, dict) and isinstance(rendered, dict):
        if list(original) != list(rendered):
            order["keys"] = list(original)
        nested = [
            [key, inner]
            for key, value in original.items()
            if key in rendered and (inner := key_order(value, rendered[key])) is not None
        ]
    elif isinstance(original, list) and isinstance(rendered, list):
        nested = [
            [index, inner]
            for index, (value, shown) in enumerate(zip(original, rendered, strict=False))
            if (inner := key_order(value, shown)) is not None
        ]
    else:
        return None
    if nested:
        order["at"] = nested
    return order or None


def in_order(value: Any, order: Order | None) -> Any:
    """`value` with the key order `key_order` recorded (keys it did not list keep their
    place after the listed ones; a malformed record changes nothing)."""
    if not isinstance(order, dict) or not order:
        return value
    at = order.get("at")
    nested = (
        [pair for pair in at if isinstance(pair, list) and len(pair) == 2]
        if isinstance(at, list)
        else []
    )
    if isinstance(value, dict):
        result = dict(value)
        for key, inner in nested:
            if isinstance(key, str) and key in result:
                result[key] = in_order(result[key], inner)
        keys = order.get("keys")
        if isinstance(keys, list):
            listed = [key for key in keys if isinstance(key, str) and key in result]
            named = set(listed)
            result = {
                **{key: result[key] for key in listed},
                **{key: item for key, item in result.items() if key not in named},
            }
        return result
    if isinstance(value, list):
        items = list(value)
        for index, inner in nested:
            if type(index) is int and 0 <= index < len(items):
                items[index] = in_order(items[index], inner)
        return items
    return value
