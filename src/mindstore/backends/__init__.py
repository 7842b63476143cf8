"""Backends: the embedded store (mongomock behind pymongo's async API) or MongoDB.

``backend = await open_backend(uri)`` -> `Backend` with `.database` (what Beanie and the
repositories use), `.kind` ("embedded" | "mongodb") and `.recorder` (bytes and round trips
of every command, comparable across both kinds).
"""

from .connection import (
    DEFAULT_DATABASE,
    ENV_URI,
    Backend,
    connect,
    open_backend,
    redact_uri,
)
from .embedded import (
    EmbeddedClient,
    EmbeddedCollection,
    EmbeddedCommandCursor,
    EmbeddedCursor,
    EmbeddedDatabase,
    EmbeddedSession,
)
from .recorder import (
    CommandLog,
    CommandRecorder,
    RecordedCommand,
    RecorderListener,
    bson_size,
)
from .snapshot import load_snapshot, save_snapshot

__all__ = [
    "DEFAULT_DATABASE",
    "ENV_URI",
    "Backend",
    "CommandLog",
    "CommandRecorder",
    "EmbeddedClient",
    "EmbeddedCollection",
    "EmbeddedCommandCursor",
    "EmbeddedCursor",
    "EmbeddedDatabase",
    "EmbeddedSession",
    "RecordedCommand",
    "RecorderListener",
    "bson_size",
    "connect",
    "load_snapshot",
    "open_backend",
    "redact_uri",
    "save_snapshot",
]
