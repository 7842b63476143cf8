"""`EmbeddedDatabase`: pymongo's `AsyncDatabase` surface over a mongomock database."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any, Protocol

from bson.codec_options import CodecOptions
from bson.int64 import Int64
from pymongo.errors import CollectionInvalid

from .codec import OUT_CODEC_OPTIONS, as_returned
from .collection import EmbeddedCollection
from .collection_base import MockDatabase
from .cursors import EmbeddedCommandCursor
from .reporting import CommandReporter

__all__ = ["ClientHandle", "EmbeddedDatabase"]


class ClientHandle(Protocol):
    """What a database needs from its client."""

    @property
    def delegate(self) -> Any: ...

    @property
    def reporter(self) -> CommandReporter: ...

    @property
    def fast_updates(self) -> bool: ...

    @property
    def lock(self) -> threading.RLock: ...


class EmbeddedDatabase:
    """pymongo `AsyncDatabase` surface over a mongomock database."""

    def __init__(self, client: ClientHandle, name: str) -> None:
        self._client = client
        self._name = name
        self._sync: MockDatabase = client.delegate.get_database(name)
        self._collections: dict[str, EmbeddedCollection] = {}

    @property
    def name(self) -> str:
        return self._name

    @property
    def client(self) -> ClientHandle:
        return self._client

    @property
    def codec_options(self) -> CodecOptions[dict[str, Any]]:
        return OUT_CODEC_OPTIONS

    @property
    def delegate(self) -> MockDatabase:
        """The synchronous mongomock database."""
        return self._sync

    @property
    def reporter(self) -> CommandReporter:
        """Where this database's commands are reported (the client's)."""
        return self._client.reporter

    @property
    def fast_updates(self) -> bool:
        """Whether updates of mindstore's shape skip mongomock's copies (the client's)."""
        return self._client.fast_updates

    @property
    def lock(self) -> threading.RLock:
        """The client's command lock (`EmbeddedClient`: threads share one client)."""
        return self._client.lock

    def with_options(self, *args: Any, **kwargs: Any) -> EmbeddedDatabase:
        return self

    def get_collection(self, name: str, *args: Any, **kwargs: Any) -> EmbeddedCollection:
        if not isinstance(name, str):
            raise TypeError("name must be an instance of str")
        with self.lock:
            coll = self._collections.get(name)
            if coll is None:
                coll = self._collections[name] = EmbeddedCollection(self, name)
        return coll

    def forget_collection(self, name: str) -> None:
        """Drop the cached wrapper of `name` (after a rename), not the collection."""
        self._collections.pop(name, None)

    def __getitem__(self, name: str) -> EmbeddedCollection:
        return self.get_collection(name)

    def __getattr__(self, name: str) -> EmbeddedCollection:
        if name.startswith("_"):
            raise AttributeError(
                f"EmbeddedDatabase has no attribute {name!r}. To access the {name} "
                f"collection, use database[{name!r}]."
            )
        return self.get_collection(name)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EmbeddedDatabase):
            return NotImplemented
        return self._client is other._client and self._name == other._name

    def __hash__(self) -> int:
        return hash((id(self._client), self._name))

    def __repr__(self) -> str:
        return f"EmbeddedDatabase({self._name!r})"

    def __bool__(self) -> bool:
        raise NotImplementedError(
            "Database objects do not implement truth value testing or bool(). "
            "Please compare with None instead: database is not None"
        )

    async def list_collection_names(
        self,
        session: Any = None,
        filter: Mapping[str, Any] | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> list[str]:
        """Accepts (and drops) `authorizedCollections`/`nameOnly`, which Beanie passes."""
        await asyncio.sleep(0)
        kwargs.pop("authorizedCollections", None)
        kwargs.pop("nameOnly", None)
        cmd: dict[str, Any] = {
            "listCollections": 1,
            "cursor": {},
            "nameOnly": True,
            "authorizedCollections": True,
        }
        if filter is not None:
            cmd["filter"] = filter
        with self.lock:
            _, op = self.reporter.begin("listCollections", cmd, self._name, wire=False)
            names: list[str] = self._sync.list_collection_names(filter=filter)
            reply = {
                "cursor": {
                    "firstBatch": [{"name": n, "type": "collection"} for n in names],
                    "id": Int64(0),
                    "ns": f"{self._name}.$cmd.listCollections",
                },
                "ok": 1.0,
            }
            self.reporter.finish(op, reply)
        return names

    async def list_collections(
        self,
        session: Any = None,
        filter: Mapping[str, Any] | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> EmbeddedCommandCursor:
        await asyncio.sleep(0)
        with self.lock:
            names = self._sync.list_collection_names(filter=filter)
        docs = [
            {"name": n, "type": "collection", "options": {}, "info": {"readOnly": False}}
            for n in names
        ]
        return EmbeddedCommandCursor(None, f"{self._name}.$cmd.listCollections", docs, None)

    async def create_collection(
        self,
        name: str,
        codec_options: Any = None,
        read_preference: Any = None,
        write_concern: Any = None,
        read_concern: Any = None,
        session: Any = None,
        check_exists: bool | None = True,
        **kwargs: Any,
    ) -> EmbeddedCollection:
        await asyncio.sleep(0)
        with self.lock:
            if check_exists and name in self._sync.list_collection_names():
                raise CollectionInvalid(f"collection {name} already exists")
            _, op = self.reporter.begin("create", {"create": name}, self._name, wire=False)
            if name not in self._sync.list_collection_names():
                self._sync.create_collection(name)
            self.reporter.finish(op, {"ok": 1.0})
            return self.get_collection(name)

    async def drop_collection(
        self,
        name_or_collection: Any,
        session: Any = None,
        comment: Any = None,
        encrypted_fields: Any = None,
    ) -> dict[str, Any]:
        await asyncio.sleep(0)
        name = getattr(name_or_collection, "name", name_or_collection)
        if not isinstance(name, str):
            raise TypeError("name_or_collection must be an instance of str or a collection")
        with self.lock:
            _, op = self.reporter.begin("drop", {"drop": name}, self._name, wire=False)
            self._sync.drop_collection(name)
            reply = {"ns": f"{self._name}.{name}", "nIndexesWas": 1, "ok": 1.0}
            self.reporter.finish(op, reply)
        return reply

    async def command(
        self,
        command: Any,
        value: Any = 1,
        check: bool = True,
        allowable_errors: Any = None,
        read_preference: Any = None,
        codec_options: Any = None,
        session: Any = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        await asyncio.sleep(0)
        if isinstance(command, str):
            cmd: dict[str, Any] = {command: value}
        else:
            cmd = dict(command)
        cmd.update(kwargs)
        name = next(iter(cmd)) if cmd else ""
        with self.lock:
            _, op = self.reporter.begin(name, cmd, self._name, wire=False)
            try:
                reply = self._run_command(name.lower(), cmd)
            except Exception as exc:
                self.reporter.fail(op, exc)
                raise
            self.reporter.finish(op, reply)
        return as_returned(reply)[0]

    def _run_command(self, lname: str, cmd: dict[str, Any]) -> dict[str, Any]:
        """The reply to a database command: the few mindstore and Beanie send are answered
        here as a server would; anything else goes to mongomock (synchronously, so that it
        runs under the client's lock)."""
        if lname in ("ping", "hello", "ismaster"):
            if lname == "ping":
                return {"ok": 1.0}
            return {
                "isWritablePrimary": True,
                "ismaster": True,
                "maxBsonObjectSize": 16777216,
                "maxMessageSizeBytes": 48000000,
                "maxWriteBatchSize": 100000,
                "ok": 1.0,
            }
        if lname == "buildinfo":
            return dict(self._sync.client.server_info())
        if lname == "listcollections":
            names = self._sync.list_collection_names(filter=cmd.get("filter"))
            return {
                "cursor": {
                    "firstBatch": [{"name": n, "type": "collection"} for n in names],
                    "id": 0,
                    "ns": f"{self._name}.$cmd.listCollections",
                },
                "ok": 1.0,
            }
        if lname == "dbstats":
            colls = self._sync.list_collection_names()
            objects = sum(self._sync.get_collection(c).estimated_document_count() for c in colls)
            return {"db": self._name, "collections": len(colls), "objects": objects, "ok": 1.0}
        reply: dict[str, Any] = self._sync.command(cmd)
        return reply

    async def aggregate(self, pipeline: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "database-level aggregate is not available on the embedded backend"
        )

    async def dereference(self, dbref: Any, session: Any = None, **kwargs: Any) -> Any:
        if dbref.database is not None and dbref.database != self._name:
            raise ValueError("trying to dereference a DBRef that points to another database")
        return await self.get_collection(dbref.collection).find_one({"_id": dbref.id})

    async def watch(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("change streams are not available on the embedded backend")
