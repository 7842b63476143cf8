"""LlamaIndex chat stores kept in mindstore tasks: `MindstoreChatStore`, an `AsyncDBChatStore`
(what `Memory` runs on), and `MindstoreLegacyChatStore`, a `BaseChatStore` for older code.

A chat store key is a conversation id (`conversation_ids`): the chat is the task
`task_id_for(key)`, created on the first write with the view's owner, the key as given in
its metadata (`conversation_id`), listed back by `get_keys`. Each `ChatMessage` is one typed
message (`llamaindex_messages`: roles, text, usage and model for analytics; everything else
kept so it comes back exactly).

The task is append-only, so nothing renumbers: a message's index is its stored index for
life (`delete_message(key, idx)` of the async store takes it; the legacy store takes the
position in the list it returned, as `SimpleChatStore` does). Statuses are compression
checkpoints appended to the task: `archive_oldest_messages` records the messages it moves
out of the active queue (`MessageStatus.ARCHIVED`, still read by `get_messages(status=
ARCHIVED)` and by memory blocks); a delete records the messages it deletes and redacts
them (`tasks.redact`: the content is gone, a tombstone keeps the task's shape). Each
checkpoint's id is derived from what it records, so a retried archive or delete stores
nothing new. `set_messages` replaces the chat: the task is deleted and created again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.storage.chat_store.base import BaseChatStore
from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore, MessageStatus

from mindstore.errors import Conflict, NotFound, ValidationError
from mindstore.integrations._derived_ids import derived_id
from mindstore.integrations._session import conversations_of, scoped_owner
from mindstore.integrations._sync import current_loop, run_sync
from mindstore.integrations.conversation_ids import task_id_for
from mindstore.integrations.llamaindex_messages import (
    FORMAT,
    STRATEGY,
    Entry,
    Status,
    chat_view,
    from_chat,
    status_marker,
    to_chat,
)
from mindstore.model.messages import AnyMessage
from mindstore.protocols import ChatView

MARKER = {"integration": "llamaindex"}
"""Task metadata of a chat store's task: `get_keys` lists only these."""
CONVERSATION_KEY = "conversation_id"


def _status(value: Any, what: str = "status") -> Status | None:
    if value is None:
        return None
    try:
        return "active" if MessageStatus(value) is MessageStatus.ACTIVE else "archived"
    except ValueError:
        raise ValidationError(f"invalid {what}: expected a MessageStatus, got {value!r}") from None


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"invalid {what}: expected an integer >= 0, got {value!r}")
    return value


def _checked(key: str, messages: Any, calls: set[str] | None = None) -> list[AnyMessage]:
    """The stored form of `messages` after the open tool calls `calls` (a bad key or
    message: `ValidationError`)."""
    task_id_for(key, "key")
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise ValidationError("invalid messages: expected a list of ChatMessage")
    return [from_chat(m, f"messages[{i}]", calls) for i, m in enumerate(messages)]


class Chats:
    """The chats of one tenant view: the operations both stores share (async)."""

    def __init__(self, view: ChatView, owner: str | None = None) -> None:
        self.view = view
        self.owner = scoped_owner(view, owner)

    async def entries(self, key: str) -> list[Entry]:
        """The chat's messages with their statuses, deleted ones included (`[]`: none)."""
        try:
            stored = await self.view.tasks.messages(task_id_for(key, "key"))
        except NotFound:
            return []
        return chat_view(stored)

    async def read(
        self, key: str, status: Status | None, offset: int = 0, limit: int | None = None
    ) -> list[ChatMessage]:
        shown = [
            e
            for e in await self.entries(key)
            if e.status != "deleted" and (status is None or e.status == status)
        ]
        end = None if limit is None else offset + limit
        return [to_chat(e.message) for e in shown[offset:end]]

    async def append(self, key: str, messages: Sequence[ChatMessage], status: Status) -> None:
        """Append messages (creating the chat's task with them on first use); archived ones
        are recorded as such right after."""
        task_id = task_id_for(key, "key")
        _checked(key, messages)  # before any read
        tasks = self.view.tasks
        try:  # which calls a tool message can answer (one projected read)
            calls = {ref.id for ref in (await tasks.header(task_id)).open_tool_calls}
        except NotFound:
            calls = set()
        converted = _checked(key, messages, calls)
        if not converted:
            return
        try:
            await tasks.add_messages(task_id, converted)
        except NotFound:
            try:
                await tasks.create(
                    task_id=task_id,
                    owner=self.owner,
                    metadata={**MARKER, CONVERSATION_KEY: key},
                    messages=converted,
                )
            except Conflict:  # created meanwhile: a racing writer
                await tasks.get(task_id)  # NotFound if it is another owner's
                await tasks.add_messages(task_id, converted)
        if status == "archived":
            ids = {m.id for m in converted}
            fresh = [e for e in await self.entries(key) if e.message.id in ids]
            await self.mark(key, "archived", fresh)

    async def mark(self, key: str, status: Status, entries: Sequence[Entry]) -> None:
        """Record `status` for these messages in one checkpoint (a delete also redacts)."""
        if not entries:
            return
        task_id = task_id_for(key, "key")
        marker = status_marker(status, [(e.index, e.message) for e in entries])
        await self.view.tasks.add_compression_message(
            task_id,
            marker.start,
            marker.end,
            f"{FORMAT} {status}",
            [STRATEGY],
            marker.ids,
            [],
            metadata=marker.metadata,
            message_id=derived_id(FORMAT, status, *marker.ids),
        )
        if status == "deleted":
            for entry in entries:
                await self.view.tasks.redact(task_id, entry.message.id, reason="deleted")

    async def delete(self, key: str, picked: Sequence[Entry]) -> list[ChatMessage]:
        """Delete these messages; they are returned as they were."""
        gone = [to_chat(e.message) for e in picked]
        await self.mark(key, "deleted", picked)
        return gone

    async def drop(self, key: str) -> bool:
        """Delete the chat's task (False: there was none)."""
        try:
            return await self.view.tasks.delete(task_id_for(key, "key"))
        except NotFound:
            return False

    async def keys(self) -> list[str]:
        """The keys of the view's chats (another integration's tasks are left out)."""
        return await conversations_of(self.view, MARKER["integration"])


class MindstoreChatStore(AsyncDBChatStore):
    """An `AsyncDBChatStore` kept in mindstore tasks (see the module doc); give it to
    `Memory.from_defaults(chat_store=...)`.

    Args:
        view: A `TenantStore` (`store.scoped(tenant)`, optionally with an owner).
        owner: The owner new chats get (an owner-scoped view's own by default).
    """

    _chats: Chats = PrivateAttr()

    def __init__(self, view: ChatView, *, owner: str | None = None) -> None:
        super().__init__()
        self._chats = Chats(view, owner)

    def model_post_init(self, context: Any, /) -> None:
        """Pydantic's hook after construction (its private attributes are set up here).

        Args:
            context: Pydantic's validation context.
        """
        super().model_post_init(context)

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serializes this store under."""
        return "MindstoreChatStore"

    async def get_messages(
        self,
        key: str,
        status: MessageStatus | None = MessageStatus.ACTIVE,
        limit: int | None = None,
        offset: int | None = None,
    ) -> list[ChatMessage]:
        """The chat's messages of this status (None: active and archived), in order.

        Args:
            key: The chat (a conversation id).
            status: `ACTIVE`, `ARCHIVED`, or None for both.
            limit: At most this many.
            offset: Skip this many first.

        Returns:
            The messages, exactly as they were added.

        Raises:
            ValidationError: A bad key, status, limit or offset.
        """
        chosen = _status(status)
        start = _count(offset or 0, "offset")
        most = None if limit is None else _count(limit, "limit")
        return await self._chats.read(key, chosen, start, most)

    async def count_messages(
        self, key: str, status: MessageStatus | None = MessageStatus.ACTIVE
    ) -> int:
        """How many messages of this status the chat holds.

        Args:
            key: The chat (a conversation id).
            status: `ACTIVE`, `ARCHIVED`, or None for both.

        Returns:
            The count.

        Raises:
            ValidationError: A bad key or status.
        """
        chosen = _status(status)
        return sum(
            1
            for e in await self._chats.entries(key)
            if e.status != "deleted" and (chosen is None or e.status == chosen)
        )

    async def add_message(
        self, key: str, message: ChatMessage, status: MessageStatus = MessageStatus.ACTIVE
    ) -> None:
        """Append one message (the chat's task is created with it on first use).

        Args:
            key: The chat (a conversation id).
            message: A `ChatMessage`.
            status: `ACTIVE`, or `ARCHIVED` to store it archived.

        Raises:
            ValidationError: A bad key, message or status (nothing is written).
        """
        await self._chats.append(key, [message], _status(status) or "active")

    async def add_messages(
        self,
        key: str,
        messages: list[ChatMessage],
        status: MessageStatus = MessageStatus.ACTIVE,
    ) -> None:
        """Append messages in one atomic write.

        Args:
            key: The chat (a conversation id).
            messages: `ChatMessage`s.
            status: `ACTIVE`, or `ARCHIVED` to store them archived.

        Raises:
            ValidationError: A bad key, message or status (nothing is written).
        """
        await self._chats.append(key, messages, _status(status) or "active")

    async def set_messages(
        self,
        key: str,
        messages: list[ChatMessage],
        status: MessageStatus = MessageStatus.ACTIVE,
    ) -> None:
        """Replace the chat: its task is deleted and created again with these messages.

        Args:
            key: The chat (a conversation id).
            messages: `ChatMessage`s.
            status: Their status.

        Raises:
            ValidationError: A bad key, message or status (nothing is deleted).
        """
        chosen = _status(status) or "active"
        _checked(key, messages)  # before anything is deleted
        await self._chats.drop(key)
        await self._chats.append(key, messages, chosen)

    async def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Delete (and redact) the message stored at index `idx`: indexes never move.

        Args:
            key: The chat (a conversation id).
            idx: The message's stored index.

        Returns:
            The deleted message as it was; None when there is none (or it is deleted
            already).

        Raises:
            ValidationError: A bad key or index.
        """
        index = _count(idx, "idx")
        picked = [e for e in await self._chats.entries(key) if e.index == index]
        picked = [e for e in picked if e.status != "deleted"]
        return (await self._chats.delete(key, picked))[0] if picked else None

    async def delete_messages(self, key: str, status: MessageStatus | None = None) -> None:
        """Delete the chat (status None: its task), or (and redact) its messages of one
        status.

        Args:
            key: The chat (a conversation id).
            status: `ACTIVE`, `ARCHIVED`, or None for the whole chat.

        Raises:
            ValidationError: A bad key or status.
        """
        chosen = _status(status)
        if chosen is None:
            await self._chats.drop(key)
            return
        picked = [e for e in await self._chats.entries(key) if e.status == chosen]
        await self._chats.delete(key, picked)

    async def delete_oldest_messages(self, key: str, n: int) -> list[ChatMessage]:
        """Delete (and redact) the `n` oldest active messages.

        Args:
            key: The chat (a conversation id).
            n: How many.

        Returns:
            The deleted messages, as they were.

        Raises:
            ValidationError: A bad key or count.
        """
        count = _count(n, "n")
        active = [e for e in await self._chats.entries(key) if e.status == "active"]
        return await self._chats.delete(key, active[:count])

    async def archive_oldest_messages(self, key: str, n: int) -> list[ChatMessage]:
        """Move the `n` oldest active messages out of the active queue (`ARCHIVED`).

        Args:
            key: The chat (a conversation id).
            n: How many.

        Returns:
            The archived messages.

        Raises:
            ValidationError: A bad key or count.
        """
        count = _count(n, "n")
        active = [e for e in await self._chats.entries(key) if e.status == "active"]
        picked = active[:count]
        await self._chats.mark(key, "archived", picked)
        return [to_chat(e.message) for e in picked]

    async def get_keys(self) -> list[str]:
        """The keys of the view's chats."""
        return await self._chats.keys()


class MindstoreLegacyChatStore(BaseChatStore):
    """A `BaseChatStore` (the interface before `AsyncDBChatStore`) kept in mindstore tasks:
    the async methods, and sync ones for sync code (`_sync.run_sync`). A message's `idx` is
    its position in the list `get_messages` returns (what callers of this interface expect);
    statuses are not part of it, so archived messages are listed too.

    Args:
        view: A `TenantStore`.
        owner: The owner new chats get.
    """

    _chats: Chats = PrivateAttr()
    _loop: Any = PrivateAttr(default=None)

    def __init__(self, view: ChatView, *, owner: str | None = None) -> None:
        super().__init__()
        self._chats = Chats(view, owner)
        self._loop = current_loop()

    def model_post_init(self, context: Any, /) -> None:
        """Pydantic's hook after construction (its private attributes are set up here).

        Args:
            context: Pydantic's validation context.
        """
        super().model_post_init(context)

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serializes this store under."""
        return "MindstoreLegacyChatStore"

    async def aset_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """Replace the chat (its task is deleted and created again).

        Args:
            key: The chat (a conversation id).
            messages: `ChatMessage`s.

        Raises:
            ValidationError: A bad key or message (nothing is deleted).
        """
        _checked(key, messages)  # before anything is deleted
        await self._chats.drop(key)
        await self._chats.append(key, messages, "active")

    async def aget_messages(self, key: str) -> list[ChatMessage]:
        """The chat's messages (active and archived), in order.

        Args:
            key: The chat (a conversation id).

        Returns:
            The messages, exactly as they were added.
        """
        return await self._chats.read(key, None)

    async def async_add_message(
        self, key: str, message: ChatMessage, idx: int | None = None
    ) -> None:
        """Append a message.

        Args:
            key: The chat (a conversation id).
            message: A `ChatMessage`.
            idx: None, or the end of the list (the chat is append-only: another
                position is refused).

        Raises:
            ValidationError: A bad key, message or position.
        """
        if idx is not None:
            shown = [e for e in await self._chats.entries(key) if e.status != "deleted"]
            if _count(idx, "idx") != len(shown):
                raise ValidationError("invalid idx: a message is appended at the end only")
        await self._chats.append(key, [message], "active")

    async def adelete_messages(self, key: str) -> list[ChatMessage] | None:
        """Delete the chat (its task).

        Args:
            key: The chat (a conversation id).

        Returns:
            Its messages, or None when there was none.
        """
        gone = await self._chats.read(key, None)
        return gone if await self._chats.drop(key) else None

    async def adelete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Delete (and redact) the message at position `idx` of the list.

        Args:
            key: The chat (a conversation id).
            idx: Its position in the list `aget_messages` returns.

        Returns:
            The deleted message; None when there is none.

        Raises:
            ValidationError: A bad key or index.
        """
        index = _count(idx, "idx")
        shown = [e for e in await self._chats.entries(key) if e.status != "deleted"]
        if index >= len(shown):
            return None
        return (await self._chats.delete(key, [shown[index]]))[0]

    async def adelete_last_message(self, key: str) -> ChatMessage | None:
        """Delete (and redact) the last message.

        Args:
            key: The chat (a conversation id).

        Returns:
            The deleted message; None when the chat is empty.
        """
        shown = [e for e in await self._chats.entries(key) if e.status != "deleted"]
        return (await self._chats.delete(key, shown[-1:]))[0] if shown else None

    async def aget_keys(self) -> list[str]:
        """The keys of the view's chats."""
        return await self._chats.keys()

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """Sync `aset_messages`.

        Args:
            key: The chat (a conversation id).
            messages: `ChatMessage`s.
        """
        run_sync(self.aset_messages(key, messages), self._loop, "set_messages")

    def get_messages(self, key: str) -> list[ChatMessage]:
        """Sync `aget_messages`.

        Args:
            key: The chat (a conversation id).

        Returns:
            The messages.
        """
        return run_sync(self.aget_messages(key), self._loop, "get_messages")

    def add_message(self, key: str, message: ChatMessage, idx: int | None = None) -> None:
        """Sync `async_add_message`.

        Args:
            key: The chat (a conversation id).
            message: A `ChatMessage`.
            idx: None, or the end of the list.
        """
        run_sync(self.async_add_message(key, message, idx), self._loop, "add_message")

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        """Sync `adelete_messages`.

        Args:
            key: The chat (a conversation id).

        Returns:
            The deleted messages, or None.
        """
        return run_sync(self.adelete_messages(key), self._loop, "delete_messages")

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Sync `adelete_message`.

        Args:
            key: The chat (a conversation id).
            idx: Its position in the list.

        Returns:
            The deleted message, or None.
        """
        return run_sync(self.adelete_message(key, idx), self._loop, "delete_message")

    def delete_last_message(self, key: str) -> ChatMessage | None:
        """Sync `adelete_last_message`.

        Args:
            key: The chat (a conversation id).

        Returns:
            The deleted message, or None.
        """
        return run_sync(self.adelete_last_message(key), self._loop, "delete_last_message")

    def get_keys(self) -> list[str]:
        """Sync `aget_keys`."""
        return run_sync(self.aget_keys(), self._loop, "get_keys")
