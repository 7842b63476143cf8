"""`EmbeddedClient`: pymongo's `AsyncMongoClient` surface over an in-memory mongomock store.

Each client is its own store. It owns the `CommandReporter` its databases and collections
report every command to (and through it the optional `CommandRecorder`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import mongomock
from bson.codec_options import CodecOptions
from pymongo import monitoring

from ..recorder import CommandRecorder
from ..wire import LISTENER_TYPES
from . import duplicate_keys, id_lookup
from .codec import OUT_CODEC_OPTIONS
from .database import EmbeddedDatabase
from .reporting import CommandReporter, registered_listeners

__all__ = ["EmbeddedClient", "EmbeddedSession"]


class EmbeddedSession:
    """Stand-in for `AsyncClientSession`: accepted everywhere, no transactions."""

    def __init__(self, client: EmbeddedClient) -> None:
        self.client = client
        self.has_ended = False
        self.in_transaction = False

    async def __aenter__(self) -> EmbeddedSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.end_session()

    async def end_session(self) -> None:
        self.has_ended = True

    def start_transaction(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "the embedded backend (mongomock) has no transactions; mindstore's writes are "
            "single-document atomic updates and must not need them"
        )

    async def with_transaction(self, *args: Any, **kwargs: Any) -> Any:
        self.start_transaction()


class EmbeddedClient:
    """pymongo `AsyncMongoClient` surface over ``mongomock.MongoClient(tz_aware=True)``.

    Each client is its own in-memory store. `recorder` (optional) receives a
    `RecordedCommand` for every operation. `event_listeners`, as pymongo's: command
    listeners (and those registered with `pymongo.monitoring.register`) receive an event
    per command (see `reporting`); server, heartbeat, topology and pool listeners are
    accepted and never called, as there is no server, topology or pool to watch.
    `fast_updates` (default True; may be changed at any time): updates of the shape
    mindstore sends run without mongomock's whole-document copies (`fast_update`); False
    runs every update mongomock's own way (benchmarks and tests compare the two).
    `fast_reads` (default True; may be changed at any time): a read, count, update, delete
    or find-and-modify whose filter starts with `_id` equal to one plain value (or `$in` a
    list of them) takes the documents from the store by key instead of testing every
    document (`id_lookup`); False runs mongomock's scan for every filter.

    Threads: one client may serve several event loops in several threads at once (a store
    shared by sync callers, each running its calls in a loop of its own). mongomock is
    plain Python with no locking of its own around a command: a guarded update tests its
    filter and then changes the stored document in place (`fast_update` and mongomock's
    own update alike), the exactly-once guard's index (`guard_index`) and the command
    reporter are shared, and another thread may run between any two bytecodes. Two
    threads could then both match `version: 5` and both write, and one append would be
    lost. So every command runs its mongomock part, and reports itself, under the
    client's `lock`: what one event loop gets for free (no other coroutine runs inside a
    command, which never suspends in between) now holds across threads too. One lock per
    client, not per database, because the databases of a client share its mongomock
    store and its reporter. It is never held across an `await`.
    """

    kind = "embedded"

    def __init__(
        self,
        *,
        recorder: CommandRecorder | None = None,
        default_database: str = "mindstore",
        event_listeners: Sequence[Any] | None = None,
        fast_updates: bool = True,
        fast_reads: bool = True,
    ) -> None:
        listeners = list(event_listeners or [])
        for listener in listeners:
            if not isinstance(listener, LISTENER_TYPES):
                raise TypeError(
                    f"listeners must be pymongo monitoring listeners, not {type(listener).__name__}"
                )
        commands = [item for item in listeners if isinstance(item, monitoring.CommandListener)]
        self.lock = threading.RLock()
        """Held around every command's synchronous part (see the class doc); re-entrant
        because a command may create a collection or database wrapper, which takes it too."""
        self.reporter = CommandReporter(recorder, [*registered_listeners(), *commands])
        self._default_database = default_database
        id_lookup.install()
        duplicate_keys.install()
        self._sync: Any = mongomock.MongoClient(tz_aware=True)
        self._reads = id_lookup.register(self._sync, fast_reads)
        self._databases: dict[str, EmbeddedDatabase] = {}
        self._closed = False
        self.fast_updates = fast_updates

    @property
    def fast_reads(self) -> bool:
        """Whether reads that pin `_id` look the documents up by key (`id_lookup`)."""
        return self._reads.on

    @fast_reads.setter
    def fast_reads(self, on: bool) -> None:
        self._reads.on = bool(on)

    @property
    def recorder(self) -> CommandRecorder | None:
        """The recorder every command is reported to (None: none is kept)."""
        return self.reporter.recorder

    @recorder.setter
    def recorder(self, recorder: CommandRecorder | None) -> None:
        self.reporter.recorder = recorder

    @property
    def delegate(self) -> Any:
        """The synchronous mongomock client this wraps (no recording, no BSON round trip)."""
        return self._sync

    @property
    def sync_client(self) -> Any:
        """The synchronous mongomock client (the same as `delegate`)."""
        return self._sync

    @property
    def codec_options(self) -> CodecOptions[dict[str, Any]]:
        return OUT_CODEC_OPTIONS

    @property
    def address(self) -> tuple[str, int]:
        return ("embedded", 0)

    def get_database(self, name: str | None = None, *args: Any, **kwargs: Any) -> EmbeddedDatabase:
        name = name or self._default_database
        with self.lock:
            db = self._databases.get(name)
            if db is None:
                db = self._databases[name] = EmbeddedDatabase(self, name)
        return db

    def get_default_database(
        self, default: str | None = None, *args: Any, **kwargs: Any
    ) -> EmbeddedDatabase:
        return self.get_database(self._default_database or default)

    def __getitem__(self, name: str) -> EmbeddedDatabase:
        return self.get_database(name)

    def __getattr__(self, name: str) -> EmbeddedDatabase:
        if name.startswith("_"):
            raise AttributeError(
                f"EmbeddedClient has no attribute {name!r}. To access the {name} "
                f"database, use client[{name!r}]."
            )
        return self.get_database(name)

    def __repr__(self) -> str:
        return "EmbeddedClient()"

    def append_metadata(self, driver_info: Any) -> None:
        """Beanie 2 calls this on pymongo >= 4.14 clients; nothing to do here."""

    def start_session(self, *args: Any, **kwargs: Any) -> EmbeddedSession:
        return EmbeddedSession(self)

    async def server_info(self, session: Any = None) -> dict[str, Any]:
        await asyncio.sleep(0)
        with self.lock:
            return dict(self._sync.server_info())

    async def list_database_names(self, session: Any = None, comment: Any = None) -> list[str]:
        await asyncio.sleep(0)
        with self.lock:
            return list(self._sync.list_database_names())

    async def drop_database(
        self, name_or_database: Any, session: Any = None, comment: Any = None
    ) -> None:
        await asyncio.sleep(0)
        name = getattr(name_or_database, "name", name_or_database)
        with self.lock:
            self._sync.drop_database(name)

    async def close(self) -> None:
        self._closed = True

    aclose = close

    async def __aenter__(self) -> EmbeddedClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
