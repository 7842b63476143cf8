"""Empty BSON timestamps (``Timestamp(0, 0)``) stored as given, as a server stores them.

mongomock replaces an empty timestamp anywhere in a document it is handed (nested values,
update operands and filters included) with the current time. A MongoDB server replaces
one only in a top-level field of an inserted document (not `_id`); a value nested in a
message, as user data is, is stored as sent. mindstore never writes a top-level
timestamp, so the embedded backend keeps every empty timestamp as it is: a message that
holds one reads back, backs up and restores byte for byte on both backends.

`install()` wraps mongomock's document normaliser (idempotent); the wrapper leaves empty
timestamps alone and hands everything else to mongomock's own, whose recursion comes back
through the wrapper for nested values.
"""

from __future__ import annotations

from typing import Any

from bson.timestamp import Timestamp
from mongomock import helpers as _untyped_helpers

__all__ = ["install"]

_helpers: Any = _untyped_helpers


def install() -> None:
    """Make mongomock keep empty timestamps (once per process)."""
    normalise = _helpers.patch_datetime_awareness_in_document
    if getattr(normalise, "_mindstore_keeps_empty_timestamps", False):
        return

    def keep_empty_timestamps(value: Any) -> Any:
        if isinstance(value, Timestamp) and not value.time and not value.inc:
            return value
        return normalise(value)

    keep_empty_timestamps._mindstore_keeps_empty_timestamps = True  # type: ignore[attr-defined]
    _helpers.patch_datetime_awareness_in_document = keep_empty_timestamps
