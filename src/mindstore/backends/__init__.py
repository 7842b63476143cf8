"""Backends: the embedded store (mongomock behind pymongo's async API) or MongoDB.

``backend = await open_backend(uri)`` -> `Backend` with `.database` (what Beanie and the
repositories use), `.kind` ("embedded" | "mongodb") and `.recorder` (bytes and round trips
of every command, comparable across both kinds).

The embedded classes and the snapshot functions are imported on first use (module
``__getattr__``): importing them loads mongomock, which a user of a real server never
needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .connection import (
    DEFAULT_DATABASE,
    ENV_URI,
    MEMORY_URI,
    Backend,
    InMemoryStoreWarning,
    connect,
    open_backend,
    redact_uri,
)
from .recorder import CommandLog, CommandRecorder, RecordedCommand, RecorderListener, bson_size

if TYPE_CHECKING:
    from .embedded import (
        EmbeddedClient,
        EmbeddedCollection,
        EmbeddedCommandCursor,
        EmbeddedCursor,
        EmbeddedDatabase,
        EmbeddedSession,
    )
    from .snapshot import load_snapshot, save_snapshot

#: Names loaded on first access, and the module each comes from.
_LAZY = {
    "EmbeddedClient": ".embedded",
    "EmbeddedCollection": ".embedded",
    "EmbeddedCommandCursor": ".embedded",
    "EmbeddedCursor": ".embedded",
    "EmbeddedDatabase": ".embedded",
    "EmbeddedSession": ".embedded",
    "load_snapshot": ".snapshot",
    "save_snapshot": ".snapshot",
}

__all__ = [
    "DEFAULT_DATABASE",
    "ENV_URI",
    "MEMORY_URI",
    "Backend",
    "CommandLog",
    "CommandRecorder",
    "EmbeddedClient",
    "EmbeddedCollection",
    "EmbeddedCommandCursor",
    "EmbeddedCursor",
    "EmbeddedDatabase",
    "EmbeddedSession",
    "InMemoryStoreWarning",
    "RecordedCommand",
    "RecorderListener",
    "bson_size",
    "connect",
    "load_snapshot",
    "open_backend",
    "redact_uri",
    "save_snapshot",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
