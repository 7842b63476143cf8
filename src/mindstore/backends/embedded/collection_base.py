"""What every part of an embedded collection shares: identity, delegates, reporting.

`EmbeddedCollection` is assembled from one mixin per concern (reads, writes,
find-and-modify, bulk writes, indexes), each built on `CollectionBase`. A collection knows
its database only through `DatabaseHandle`, so the collection modules never import the
database module (which creates collections).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Protocol, TypeAlias

from bson.codec_options import CodecOptions

from .codec import OUT_CODEC_OPTIONS
from .reporting import CommandReporter, Operation, ReplySource

__all__ = [
    "CollectionBase",
    "DatabaseHandle",
    "MockCollection",
    "MockDatabase",
]

#: mongomock's synchronous classes. Their annotations describe pymongo's classes (which
#: mongomock imitates), not mongomock's own, so they are not a usable static type.
MockCollection: TypeAlias = Any
MockDatabase: TypeAlias = Any


class DatabaseHandle(Protocol):
    """What a collection needs from its database."""

    @property
    def name(self) -> str: ...

    @property
    def delegate(self) -> MockDatabase: ...

    @property
    def reporter(self) -> CommandReporter: ...

    @property
    def fast_updates(self) -> bool: ...

    @property
    def lock(self) -> threading.RLock: ...

    def get_collection(self, name: str) -> Any: ...

    def forget_collection(self, name: str) -> None: ...

    async def drop_collection(self, name_or_collection: Any) -> dict[str, Any]: ...


class CollectionBase:
    """pymongo `AsyncCollection` identity over a mongomock collection."""

    def __init__(self, database: DatabaseHandle, name: str) -> None:
        self._database = database
        self._name = name
        self._sync: MockCollection = database.delegate.get_collection(name)

    # -- identity
    @property
    def name(self) -> str:
        return self._name

    @property
    def full_name(self) -> str:
        return f"{self._database.name}.{self._name}"

    @property
    def database(self) -> DatabaseHandle:
        return self._database

    @property
    def database_name(self) -> str:
        return self._database.name

    @property
    def codec_options(self) -> CodecOptions[dict[str, Any]]:
        return OUT_CODEC_OPTIONS

    @property
    def delegate(self) -> MockCollection:
        """The synchronous mongomock collection (no recording, no BSON round trip)."""
        return self._sync

    @property
    def reporter(self) -> CommandReporter:
        """Where this collection's commands are reported (the client's)."""
        return self._database.reporter

    @property
    def lock(self) -> threading.RLock:
        """Held around each command's mongomock part and its report (`EmbeddedClient`)."""
        return self._database.lock

    # -- reporting
    def _begin(self, name: str, command: dict[str, Any]) -> tuple[dict[str, Any], Operation]:
        """Encode the command as sent; return what the server decodes and its operation."""
        return self.reporter.begin(name, command, self._database.name)

    def _finish(
        self,
        op: Operation,
        reply: Mapping[str, Any] | int | None = None,
        *,
        event_reply: ReplySource = None,
    ) -> None:
        self.reporter.finish(op, reply, event_reply=event_reply)

    def _fail(self, op: Operation, exc: BaseException) -> None:
        self.reporter.fail(op, exc)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CollectionBase):
            return NotImplemented
        return self._database == other._database and self._name == other._name

    def __hash__(self) -> int:
        return hash((self._database.name, self._name))

    def __repr__(self) -> str:
        return f"EmbeddedCollection({self.full_name!r})"

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"'EmbeddedCollection' object {self._name!r} is not callable")

    def __bool__(self) -> bool:
        raise NotImplementedError(
            "Collection objects do not implement truth value testing or bool(). "
            "Please compare with None instead: collection is not None"
        )
