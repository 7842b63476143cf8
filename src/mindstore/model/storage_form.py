"""The stored form of a message: reversible key escaping and exact BSON sizes.

Tool schemas and tool arguments are user JSON: they contain keys like `$ref`, `$schema`
or `a.b`, which MongoDB update operators and mongomock treat as operators or paths. Such
keys are escaped on the way in and restored on the way out, reversibly, so what the caller
stored is exactly what the caller reads back.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

import bson

from mindstore.errors import ValidationError

KEY_MARK = "\u00a7"  # '§' marks an escaped key; genuine '§'-prefixed keys are escaped too
DERIVED_KEY = KEY_MARK + "derived"
"""Lists the store's own fields added to an unknown-role message. No caller key can be
stored under this name: an escaped key is the mark plus a percent-quoted *unsafe* key, and
`derived` is safe, so `escape_keys` never produces it."""
CHUNKS_KEY = KEY_MARK + "more"
"""A streamed text or reasoning part's later chunks, in order, stored beside its text field
(`{"type": "text", "text": "Hel", "\u00a7more": ["lo", " world"]}` reads as "Hello world"):
a stream appends each write's delta with `$push` instead of sending the text so far again
(model/streaming.py). Readers join them (`model.stored_read`). Like `DERIVED_KEY`, no
escaped caller key is spelled so (`more` is a safe key)."""


def _key_is_safe(key: str) -> bool:
    return not (key.startswith(("$", KEY_MARK)) or "." in key or "\x00" in key)


def escape_key(key: str) -> str:
    if _key_is_safe(key):
        return key
    return KEY_MARK + quote(key, safe="")


def unescape_key(key: str) -> str:
    return unquote(key[len(KEY_MARK) :]) if key.startswith(KEY_MARK) else key


def escape_keys(value: Any) -> Any:
    """Copy `value` with every unsafe dict key escaped (lists and tuples walked too)."""
    if isinstance(value, dict):
        return {
            (escape_key(k) if isinstance(k, str) else k): escape_keys(v) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [escape_keys(v) for v in value]
    return value


def unescape_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            (unescape_key(k) if isinstance(k, str) else k): unescape_keys(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [unescape_keys(v) for v in value]
    return value


def bson_size(document: dict[str, Any]) -> int:
    """Encoded size of a document; un-encodable values are a caller error."""
    try:
        return len(bson.encode(document))
    except (bson.errors.InvalidDocument, OverflowError, TypeError, UnicodeEncodeError) as exc:
        raise ValidationError(f"value cannot be stored in MongoDB: {str(exc)[:200]}") from None


def value_size(value: Any) -> int:
    """Bytes a value takes inside a document, excluding its key and type byte."""
    # {"": value} encodes as 4 (length) + 1 (type) + 1 (empty key) + value + 1 (end).
    return bson_size({"": value}) - 7


def element_size(key: str, value: Any) -> int:
    """Bytes of one `key: value` element: type byte, key cstring, value."""
    return 1 + len(key.encode()) + 1 + value_size(value)
