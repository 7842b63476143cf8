"""MongoDB sources: a database and collection, given as a URI or as a client.

On the command line a MongoDB source is a URI naming the database in its path and the
collection after ``#``: ``mongodb://host/chat_history#message_store``. In the API it may
also be a `MongoSource` holding a client the caller opened (what the tests do with an
in-memory client). Either way the frameworks' own readers are given the client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pymongo import AsyncMongoClient, MongoClient
from pymongo.errors import ConfigurationError, InvalidURI, PyMongoError
from pymongo.uri_parser import parse_uri

from mindstore.imports.errors import UnreadableSource

__all__ = ["MongoSource", "is_mongo", "mongo_source", "require_collection"]

SELECTION_MS = 5000
"""How long to wait for a server before the source is called unreadable."""


@dataclass(frozen=True)
class MongoSource:
    """A MongoDB collection to import from: an open client, a database and a collection
    name. The client is the one the source's library takes: a `pymongo.MongoClient` for
    LangChain's history and LangGraph's saver, an `AsyncMongoClient` for the OpenAI
    Agents session (or a client with the same interface)."""

    client: Any
    database: str
    collection: str

    def __str__(self) -> str:
        return f"mongodb database {self.database!r} collection {self.collection!r}"


def is_mongo(source: str | MongoSource) -> bool:
    """A MongoDB source (a `MongoSource` or a MongoDB URI), not a file or SQL URL."""
    return isinstance(source, MongoSource) or source.startswith(("mongodb://", "mongodb+srv://"))


def mongo_source(
    kind: str, source: str | MongoSource, default_collection: str, *, asynchronous: bool = False
) -> MongoSource:
    """`source` as a `MongoSource`; a URI is parsed (database from its path, collection
    after ``#``, else `default_collection`) and a client opened on it (an
    `AsyncMongoClient` when `asynchronous`)."""
    if isinstance(source, MongoSource):
        return source
    uri, _, collection = source.partition("#")
    if not uri.startswith(("mongodb://", "mongodb+srv://")):
        raise UnreadableSource(
            kind, source, "not a MongoDB URI (mongodb://host/DATABASE#COLLECTION)"
        )
    try:
        database = parse_uri(uri)["database"]
    except (InvalidURI, ConfigurationError, ValueError) as error:
        raise UnreadableSource(kind, source, f"not a MongoDB URI ({error})") from None
    if not database:
        raise UnreadableSource(kind, source, "the URI names no database (mongodb://host/DATABASE)")
    try:
        client: MongoClient[dict[str, Any]] | AsyncMongoClient[dict[str, Any]]
        if asynchronous:
            client = AsyncMongoClient(uri, serverSelectionTimeoutMS=SELECTION_MS)
        else:
            client = MongoClient(uri, serverSelectionTimeoutMS=SELECTION_MS)
    except PyMongoError as error:
        raise UnreadableSource(kind, source, f"cannot connect ({error})") from None
    return MongoSource(client, database, collection or default_collection)


def require_collection(kind: str, source: MongoSource, fields: tuple[str, ...]) -> None:
    """The collection exists and its first document has `fields`; else `UnreadableSource`."""
    database = source.client[source.database]
    try:
        if source.collection not in database.list_collection_names():
            raise UnreadableSource(kind, str(source), "no such collection")
        first = database[source.collection].find_one({})
    except PyMongoError as error:
        raise UnreadableSource(kind, str(source), f"cannot read ({error})") from None
    missing = [name for name in fields if first is not None and name not in first]
    if missing:
        raise UnreadableSource(
            kind, str(source), f"documents lack {', '.join(missing)}: not a {kind} collection"
        )
