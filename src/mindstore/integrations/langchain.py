"""An async LangChain chat history (`BaseChatMessageHistory`) stored as a mindstore task.

`MindstoreChatMessageHistory(session_id, store.scoped(tenant, owner=...))` keeps one task
per session (`task_id_for(session_id)`, tenant and owner from the view). Messages are stored
typed (`mindstore.integrations.langchain_messages`), not as JSON strings: an `AIMessage`'s
tool calls are `ToolCallPart`s the task header tracks until their `ToolMessage` arrives, a
`ToolMessage` names its tool, usage rolls up into the task and into analytics. Reading gives
back exactly the messages that were added.

`aget_messages`, `aadd_messages` and `aclear` are native async (one read, one atomic write,
one delete). The sync `messages`, `add_messages` and `clear` run them (see `_sync`): from a
worker thread while the store's loop runs, or in a script with no loop running.

`aadd_messages` is exactly once: a retried call stores nothing new (the store's append
treats a call naming stored message ids as a replay), because each message's id is a
function of the call (`call_ids`): derived from the call's messages when one of them has a
LangChain id (a chat model's reply always has one), else the ids the previous call of
this history object got when it passed the same message objects, else fresh ones.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Sequence

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, message_to_dict
from langchain_core.messages import ToolMessage as LCToolMessage

from mindstore.errors import NotFound, ValidationError
from mindstore.integrations._session import SessionTasks, TaskSession
from mindstore.integrations._sync import current_loop, run_sync
from mindstore.integrations.langchain_messages import from_langchain, to_langchain
from mindstore.model.base import new_id
from mindstore.operations import operations, through
from mindstore.protocols import TenantView

MARKER = {"integration": "langchain"}


@operations("langchain", resilience=through("_repository"))
class MindstoreChatMessageHistory(TaskSession, BaseChatMessageHistory):
    """A chat history kept in one mindstore task; see the module doc."""

    MARKER = MARKER

    def __init__(
        self,
        session_id: str,
        store: TenantView,
        *,
        owner: str | None = None,
        title: str | None = None,
    ) -> None:
        TaskSession.__init__(self, session_id, store, owner=owner, title=title)
        self._loop = current_loop()
        self._last: tuple[list[BaseMessage], list[str], str] | None = None

    # ------------------------------------------------------------------ async
    async def aget_messages(self) -> list[BaseMessage]:
        """The history's messages, as LangChain messages.

        Returns:
            `BaseMessage`s, oldest first (`[]` before the first add).
        """
        try:
            return to_langchain(await self._tasks.messages(self.session_id))
        except NotFound:
            return []

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append LangChain messages, all in one atomic write; a message that cannot be stored is
        refused before it.

        Args:
            messages: LangChain `BaseMessage`s.

        Raises:
            ValidationError: A message that cannot be stored (nothing is written).
        """
        if isinstance(messages, (str, bytes, BaseMessage)) or not isinstance(messages, Sequence):
            raise ValidationError("messages must be a list of LangChain messages")
        if not messages:
            return
        messages = list(messages)
        ids = self._call_ids(messages)
        from_langchain(messages, check=True, ids=ids)  # refuse before any write

        async def write(tasks: SessionTasks) -> None:
            names: dict[str, str] = {}
            if any(isinstance(message, LCToolMessage) and not message.name for message in messages):
                header = await tasks.header(self.session_id)
                names = {ref.id: ref.name for ref in header.open_tool_calls}
            converted = from_langchain(messages, check=True, names=names, ids=ids)
            await tasks.add_messages(self.session_id, converted)

        await self._write(write)

    def _call_ids(self, messages: list[BaseMessage]) -> list[str]:
        """The message ids of one `aadd_messages` call (see the module doc)."""
        ids, fingerprint = call_ids(messages)
        if ids is not None:
            return ids
        last = self._last
        if (
            last is not None
            and len(last[0]) == len(messages)
            and all(a is b for a, b in zip(last[0], messages, strict=True))
            and last[2] == fingerprint
        ):
            return last[1]
        fresh = [new_id() for _ in messages]
        self._last = (messages, fresh, fingerprint)
        return fresh

    async def aclear(self) -> None:
        """Forget every message: the history's task is deleted."""
        self._exists = False
        with contextlib.suppress(NotFound):
            await self._tasks.delete(self.session_id)

    # ------------------------------------------------------------------ sync
    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The history's messages (the sync form of `aget_messages`; from a running event loop,
        use `aget_messages`).

        Returns:
            `BaseMessage`s, oldest first.

        Raises:
            RuntimeError: Read from a running event loop.
        """
        return run_sync(self.aget_messages(), self._loop, "MindstoreChatMessageHistory.messages")

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """The sync form of `aadd_messages`.

        Args:
            messages: LangChain `BaseMessage`s.

        Raises:
            RuntimeError: Called from a running event loop.
            ValidationError: A message that cannot be stored.
        """
        run_sync(
            self.aadd_messages(messages), self._loop, "MindstoreChatMessageHistory.add_messages"
        )

    def clear(self) -> None:
        """The sync form of `aclear`.

        Raises:
            RuntimeError: Called from a running event loop.
        """
        run_sync(self.aclear(), self._loop, "MindstoreChatMessageHistory.clear")


def call_ids(messages: Sequence[BaseMessage]) -> tuple[list[str] | None, str]:
    """(ids derived from the call, when a message in it has a LangChain id; the call's
    fingerprint). Two calls get the same ids only when they hold the same messages, ids
    included, in the same order: a retry, never a new exchange (a model's reply is new)."""
    dumped = json.dumps(
        [message_to_dict(message) for message in messages],
        sort_keys=True,
        separators=(",", ":"),
        default=repr,
        ensure_ascii=False,
    )
    fingerprint = hashlib.blake2b(dumped.encode("utf-8", "surrogatepass"), digest_size=16)
    digest = fingerprint.hexdigest()
    if not any(isinstance(message.id, str) and message.id for message in messages):
        return None, digest
    return [f"lc-{digest}-{index}" for index in range(len(messages))], digest
