"""Message ids derived from what a framework hands over, so that a retried save is a replay.

The store's writes are exactly-once when the caller names the message ids: an
`add_messages` repeated with the same ids matches nothing and returns what is stored
(docs/write-paths.md, "Id guards"). The frameworks hand over messages without ids the
store can use (pydantic-ai messages have none; Responses items may carry none, or the same
placeholder on every item), so each integration derives them from the messages
themselves: the same save, retried, names the same ids and stores nothing new.
Pure functions, no I/O.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def digest(value: Any) -> str:
    """A stable digest of a JSON-like value: keys sorted, text escaped; a value JSON cannot
    say is taken by its `repr` (stable for the values a save can store)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=repr)
    return hashlib.blake2b(text.encode("ascii"), digest_size=16).hexdigest()


def derived_id(*parts: str) -> str:
    """A message id (24 hex characters, in the name alphabet) for these parts, in order."""
    joined = "\x1f".join(parts).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(joined, digest_size=12).hexdigest()
