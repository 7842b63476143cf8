"""`langchain-mongodb`: LangChain's `MongoDBChatMessageHistory` documents.

One document per message, ``{SessionId: <session>, History: <JSON of message_to_dict>}``
(the library's default field names). Every session id of the collection is read with
the library's own `MongoDBChatMessageHistory(...).messages` (documents in the order the
server returns them, as the library reads them) and added to
`MindstoreChatMessageHistory` of the same session id in one write.

Not carried: nothing the library returns is lost; documents' other fields (the library
writes none) are not read.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict
from langchain_mongodb.chat_message_histories import MongoDBChatMessageHistory
from pymongo.errors import PyMongoError

from mindstore.imports.driver import Conversation, UnreadableSource, prefix_rest
from mindstore.imports.mongo_sources import MongoSource, mongo_source, require_collection
from mindstore.integrations.langchain import MindstoreChatMessageHistory
from mindstore.store import TenantStore

__all__ = ["KIND", "LangChainMongoKind"]

SESSION_KEY, HISTORY_KEY = "SessionId", "History"
DEFAULT_COLLECTION = "message_store"


def dumped(messages: list[BaseMessage]) -> list[Any]:
    return [message_to_dict(message) for message in messages]


class LangChainMongoKind:
    name = "langchain-mongodb"
    owns = False
    owner_fields: tuple[str, ...] = ("session_id",)

    async def read(self, source: str | MongoSource) -> list[Conversation]:
        where = mongo_source(self.name, source, DEFAULT_COLLECTION)
        require_collection(self.name, where, (SESSION_KEY, HISTORY_KEY))
        collection = where.client[where.database][where.collection]
        try:
            ids = collection.distinct(SESSION_KEY)
        except PyMongoError as error:
            raise UnreadableSource(self.name, str(where), f"cannot read ({error})") from None
        conversations = []
        for session_id in sorted(ids, key=str):
            if not isinstance(session_id, str):
                raise UnreadableSource(
                    self.name, str(where), f"session id {session_id!r} is not text"
                )
            history = MongoDBChatMessageHistory(
                None, session_id, where.database, where.collection, client=where.client,
                create_index=False,
            )  # fmt: skip
            try:
                messages = history.messages
            except (ValueError, KeyError, TypeError, json.JSONDecodeError) as error:
                raise UnreadableSource(
                    self.name, str(where), f"session {session_id!r}: {error}"
                ) from None
            conversations.append(Conversation(
                id=session_id, canonical=dumped(messages), counts={"messages": len(messages)},
                payload=messages, fields={"session_id": session_id},
            ))  # fmt: skip
        return conversations

    def writer(self, view: TenantStore) -> HistoryWriter:
        return HistoryWriter(view)


class HistoryWriter:
    def __init__(self, view: TenantStore) -> None:
        self.view = view

    async def served(self, conversation: Conversation) -> Any:
        history = MindstoreChatMessageHistory(conversation.id, self.view)
        return dumped(await history.aget_messages())

    async def write(self, conversation: Conversation, step: Callable[[str], None]) -> Counter[str]:
        history = MindstoreChatMessageHistory(conversation.id, self.view)
        stored = dumped(await history.aget_messages())
        rest = prefix_rest(stored, conversation.canonical,
                           f"langchain-mongodb session {conversation.id!r}")  # fmt: skip
        if rest:
            await history.aadd_messages(conversation.payload[len(stored) :])
            step("messages")
        return Counter(messages=len(rest))


KIND = LangChainMongoKind()
