"""`llamaindex`: LlamaIndex's `SQLAlchemyChatStore` (a SQLAlchemy URL).

The source is the URL, with ``#TABLE`` after it when the database holds more than one
table of the store's layout (`id`, `key`, `timestamp`, `role`, `status`, `data`). Every
key (`get_keys`) becomes the same chat of `MindstoreChatStore`: its archived messages
(`get_messages(key, ARCHIVED)`) are added archived, then its active ones, each list in
one atomic write, as `ChatMessage`s with their blocks and `additional_kwargs`.

Not carried: each row's `timestamp` (the store orders by it but never returns it; the
order is kept), and a row the store marked otherwise than active or archived.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store.base_db import MessageStatus
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from mindstore.errors import Conflict
from mindstore.imports.driver import Conversation, UnreadableSource, prefix_rest, text_source
from mindstore.imports.mongo_sources import MongoSource
from mindstore.imports.sql_sources import open_checked
from mindstore.integrations.llamaindex import MindstoreChatStore
from mindstore.store import TenantStore

__all__ = ["KIND", "LlamaIndexKind"]

LAYOUT = {"id", "key", "timestamp", "role", "status", "data"}
STATUSES = (MessageStatus.ARCHIVED, MessageStatus.ACTIVE)
"""The order a chat's messages are written in: the archived ones are its oldest."""


def dumped(messages: list[ChatMessage]) -> list[Any]:
    return [message.model_dump(mode="json") for message in messages]


class LlamaIndexKind:
    name = "llamaindex"
    owns = False
    owner_fields: tuple[str, ...] = ("key",)

    async def read(self, given: str | MongoSource) -> list[Conversation]:
        source = text_source(self.name, given)
        url, _, table = source.partition("#")
        engine, found = await open_checked(self.name, url, {})
        try:
            tables = sorted(name for name, columns in found.items() if columns >= LAYOUT)
            if table and table not in tables:
                raise UnreadableSource(self.name, source, f"no chat table {table!r}")
            if not table:
                if len(tables) != 1:
                    listed = ", ".join(tables) or "none"
                    raise UnreadableSource(
                        self.name, source,
                        f"name one chat table as URL#TABLE (chat tables: {listed})",
                    )  # fmt: skip
                table = tables[0]
            chats = SQLAlchemyChatStore(table_name=table, async_engine=engine)
            conversations = []
            for key in sorted(await chats.get_keys()):
                read = {s.value: await chats.get_messages(key, status=s) for s in STATUSES}
                conversations.append(Conversation(
                    id=key, canonical={s: dumped(m) for s, m in read.items()},
                    counts={"messages": sum(len(m) for m in read.values())}, payload=read,
                    fields={"key": key},
                ))  # fmt: skip
        finally:
            await engine.dispose()
        return conversations

    def writer(self, view: TenantStore) -> ChatWriter:
        return ChatWriter(view)


class ChatWriter:
    def __init__(self, view: TenantStore) -> None:
        self.chats = MindstoreChatStore(view)

    async def served(self, conversation: Conversation) -> Any:
        return {
            s.value: dumped(await self.chats.get_messages(conversation.id, status=s))
            for s in STATUSES
        }

    async def write(self, conversation: Conversation, step: Callable[[str], None]) -> Counter[str]:
        stored = await self.served(conversation)
        what = f"llamaindex chat {conversation.id!r}"
        rests = {
            s.value: prefix_rest(stored[s.value], conversation.canonical[s.value], what)
            for s in STATUSES
        }
        if rests[MessageStatus.ARCHIVED.value] and stored[MessageStatus.ACTIVE.value]:
            raise Conflict(  # an import writes the archived ones first: another chat
                f"llamaindex chat {conversation.id!r}: mindstore holds active messages and "
                "fewer archived ones than the source; nothing was written"
            )
        written: Counter[str] = Counter()
        for status in STATUSES:
            count = len(rests[status.value])
            if count:
                messages = conversation.payload[status.value][-count:]
                await self.chats.add_messages(conversation.id, messages, status=status)
                written["messages"] += count
                step(status.value)
        return written


KIND = LlamaIndexKind()
