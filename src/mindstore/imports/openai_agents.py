"""`openai-agents`: an OpenAI Agents SDK `SQLiteSession` database file.

Every session of the file (`agent_sessions`, and any session id its `agent_messages`
name) is read with the SDK's own `SQLiteSession.get_items()`, and written as one
`MindstoreSession` of the same session id: the items, in order, as the JSON the SDK
stored. What the SDK does not return (a row whose JSON does not parse, which `get_items`
skips; the rows' `created_at`) is not carried.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable
from typing import Any

from agents.memory.sqlite_session import SQLiteSession

from mindstore.imports.driver import Conversation, UnreadableSource, prefix_rest, text_source
from mindstore.imports.mongo_sources import MongoSource
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
