"""`openai-agents`: an OpenAI Agents SDK `SQLiteSession` database file, or the SDK's
`MongoDBSession` collections (a MongoDB URI ``mongodb://host/agents#agent_messages``, or
a `MongoSource` holding an `AsyncMongoClient`).

Every session (the file's `agent_sessions`, and any session id its `agent_messages`
name; the same two collections in MongoDB) is read with the SDK's own `get_items()`,
and written as one `MindstoreSession` of the same session id: the items, in order, as
the JSON the SDK stored. What the SDK does not return (a row whose JSON does not parse,
which `get_items` skips; the rows' `created_at`, the MongoDB batches' boundaries) is not
carried.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable
from typing import Any

from agents.memory.sqlite_session import SQLiteSession
from pymongo.errors import PyMongoError

from mindstore.imports.driver import Conversation, UnreadableSource, prefix_rest, text_source
from mindstore.imports.mongo_sources import MongoSource, is_mongo, mongo_source
from mindstore.imports.sqlite_files import require_tables, sqlite_file
from mindstore.integrations.openai_agents import MindstoreSession
from mindstore.store import TenantStore

__all__ = ["KIND", "OpenAIAgentsKind"]

SESSIONS, MESSAGES = "agent_sessions", "agent_messages"
TABLES = {SESSIONS: {"session_id"}, MESSAGES: {"id", "session_id", "message_data"}}


class OpenAIAgentsKind:
    name = "openai-agents"
    owns = False
    owner_fields: tuple[str, ...] = ("session_id",)

    async def read(self, given: str | MongoSource) -> list[Conversation]:
        if is_mongo(given):
            return await self._read_mongo(given)
        source = text_source(self.name, given)
        path = sqlite_file(self.name, source)
        require_tables(self.name, path, TABLES)
        connection = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
        try:
            ids = sorted({row[0] for row in connection.execute(
                f"SELECT session_id FROM {SESSIONS} UNION SELECT session_id FROM {MESSAGES}"
            )})  # fmt: skip
        finally:
            connection.close()
        conversations = []
        for session_id in ids:
            if not isinstance(session_id, str):
                raise UnreadableSource(self.name, source, f"session id {session_id!r} is not text")
            session = SQLiteSession(session_id, str(path))
            try:
                items = await session.get_items()
            finally:
                session.close()
            conversations.append(Conversation(
                id=session_id, canonical=items, counts={"messages": len(items)},
                fields={"session_id": session_id},
            ))  # fmt: skip
        return conversations

    def writer(self, view: TenantStore) -> SessionWriter:
        return SessionWriter(view)

    async def _read_mongo(self, given: str | MongoSource) -> list[Conversation]:
        """Every session of the SDK's `MongoDBSession` collections, read with it. The
        collection named is the messages one; the sessions collection is beside it
        (`MONGO_SESSIONS`, or the name before a comma: ``#agent_sessions,agent_messages``)."""
        from agents.extensions.memory.mongodb_session import MongoDBSession

        where = mongo_source(self.name, given, MESSAGES, asynchronous=True)
        sessions, _, messages = where.collection.rpartition(",")
        sessions = sessions or SESSIONS
        database = where.client[where.database]
        try:
            names = await database.list_collection_names()
            if messages not in names:
                raise UnreadableSource(self.name, str(where), f"no {messages!r} collection")
            first = await database[messages].find_one({})
            if first is not None and not {"session_id", "message_data"} <= set(first):
                raise UnreadableSource(
                    self.name, str(where), f"{messages!r} is not a MongoDBSession collection"
                )
            ids = set(await database[messages].distinct("session_id"))
            if sessions in names:
                ids |= set(await database[sessions].distinct("session_id"))
        except PyMongoError as error:
            raise UnreadableSource(self.name, str(where), f"cannot read ({error})") from None
        conversations = []
        for session_id in sorted(ids, key=str):
            if not isinstance(session_id, str):
                raise UnreadableSource(self.name, str(where), f"session id {session_id!r}")
            session = MongoDBSession(
                session_id, client=where.client, database=where.database,
                sessions_collection=sessions, messages_collection=messages,
            )  # fmt: skip
            items = await session.get_items()
            conversations.append(Conversation(
                id=session_id, canonical=items, counts={"messages": len(items)},
                fields={"session_id": session_id},
            ))  # fmt: skip
        return conversations


class SessionWriter:
    def __init__(self, view: TenantStore) -> None:
        self.view = view

    async def served(self, conversation: Conversation) -> Any:
        return await MindstoreSession(conversation.id, self.view).get_items()

    async def write(self, conversation: Conversation, step: Callable[[str], None]) -> Counter[str]:
        session = MindstoreSession(conversation.id, self.view)
        rest = prefix_rest(await session.get_items(), conversation.canonical,
                           f"openai-agents session {conversation.id!r}")  # fmt: skip
        if rest:
            await session.add_items(rest)  # one atomic write: a crash leaves all or none
            step("messages")
        return Counter(messages=len(rest))


KIND = OpenAIAgentsKind()
