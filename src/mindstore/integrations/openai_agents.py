"""The OpenAI Agents SDK's `Session`, stored as a mindstore task.

`MindstoreSession(session_id, store.scoped(tenant, owner=...))` is one task per session
(task id = session id, tenant and owner from the view). Each Responses input item is one
typed mindstore message (`mindstore.formats.from_responses`): a user item a `UserMessage`,
a `function_call` an `AssistantMessage` holding a `ToolCallPart` (tracked in the header
until its `function_call_output` arrives as a `ToolMessage`), reasoning a `ReasoningPart`.
Whatever the item says beyond the typed model is kept in the message's metadata, so
`get_items()` gives back exactly the items that were added.

Behaviour matches the SDK's `SQLiteSession` for the same calls, with one deliberate
difference: `get_items(limit=N)` never starts with a `function_call_output` whose
`function_call` fell outside the window (a model API refuses such an input), so it may
return fewer than N items. `pop_item` is `tasks.retract_last`: one guarded write, exactly
once under concurrency, the call a popped result answered open again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from agents.memory.session_settings import SessionSettings, resolve_session_limit

from mindstore.errors import Conflict, InvalidTransition, NotFound, ValidationError
from mindstore.formats import from_responses, to_responses
from mindstore.formats.conversation import settle
from mindstore.integrations._session import TaskSession
from mindstore.model.base import new_id
from mindstore.model.messages import AnyMessage, MessageBase, ToolMessage
from mindstore.model.parts import ToolResultPart
from mindstore.validation import check_int

MARKER = {"integration": "openai-agents"}
"""Task metadata of a session's task: `list_sessions` lists only these."""
POP_ATTEMPTS = 200


@dataclass(frozen=True)
class SessionInfo:
    """One stored session, for listings: when it started and when it was last written."""

    session_id: str
    owner: str | None
    title: str | None
    created_at: datetime
    updated_at: datetime
    age: timedelta
    idle: timedelta
    items: int


class MindstoreSession(TaskSession):
    """A `Session` (OpenAI Agents SDK) kept in one mindstore task; see the module doc."""

    session_settings: SessionSettings | None = None
    MARKER = MARKER

    def __init__(
        self,
        session_id: str,
        store: Any,
        *,
        owner: str | None = None,
        title: str | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        TaskSession.__init__(self, session_id, store, owner=owner, title=title)
        self.session_settings = session_settings or SessionSettings()

    # ------------------------------------------------------------------ the protocol
    async def get_items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Oldest first; `limit=N`: the latest N, never starting with an orphaned tool result."""
        wanted = resolve_session_limit(limit, self.session_settings)
        if wanted is not None:
            check_int(wanted, "limit")
        try:
            if wanted is None:
                return to_responses(await self._tasks.messages(self.session_id))
            if wanted == 0:
                return []
            return await self._latest(wanted)
        except NotFound:
            return []

    async def add_items(self, items: list[Any]) -> None:
        """One message per item, all in one atomic write (refused whole if one is malformed)."""
        if isinstance(items, (str, bytes, dict)) or not isinstance(items, Sequence):
            raise ValidationError("items must be a list of Responses input items")
        if not items:
            return
        messages: list[AnyMessage] = []
        for index, item in enumerate(items):
            try:
                converted = from_responses([item])
            except ValidationError as exc:
                raise ValidationError(f"items[{index}]: {exc}") from None
            for message in converted:
                if isinstance(message, MessageBase):
                    message.id = new_id()
            messages.extend(converted)
        settle(messages)

        async def write() -> None:
            await self._name_results(messages)
            await self._tasks.add_messages(self.session_id, messages)

        await self._write(write)

    async def pop_item(self) -> dict[str, Any] | None:
        """Remove and return the latest item (None when the session is empty)."""
        for _ in range(POP_ATTEMPTS):
            try:
                tail = await self._tasks.tail(self.session_id, 1)
            except NotFound:
                return None
            if not tail:
                return None
            items = to_responses(tail)
            if len(items) > 1:
                raise InvalidTransition(
                    f"pop_item: the last message of session {self.session_id!r} holds "
                    f"{len(items)} items "
                    "(it was not written by the session); remove it with tasks.retract_last"
                )
            try:
                removed = await self._tasks.retract_last(self.session_id, expected_id=tail[0].id)
            except InvalidTransition:
                if not items:
                    raise  # a message a retract cannot undo (a task config or exit)
                continue  # appended to meanwhile: look again
            except NotFound:
                return None
            if removed is None:
                continue  # popped by someone else meanwhile
            if items:
                return items[0]
        raise Conflict(f"pop_item: session {self.session_id!r} kept changing under us")

    async def clear_session(self) -> None:
        """Forget every item (the session's task is deleted; the next add starts afresh)."""
        self._exists = False
        with contextlib.suppress(NotFound):
            await self._tasks.delete(self.session_id)

    # ------------------------------------------------------------------ listing
    @staticmethod
    async def list_sessions(
        store: Any, *, owner: str | None = None, limit: int = 50
    ) -> list[SessionInfo]:
        """The sessions of a view (one owner's on an owner-scoped view), most recently
        active first, with their age (since created) and idle time (since last written)."""
        check_int(limit, "limit", minimum=1, maximum=1000)
        now = datetime.now(UTC)
        found: list[SessionInfo] = []
        cursor: str | None = None
        while len(found) < limit:
            page = await store.tasks.list(
                owner=owner, limit=min(1000, max(limit, 50)), cursor=cursor
            )
            for record in page.items:
                if (record.metadata or {}).get("integration") != MARKER["integration"]:
                    continue
                found.append(
                    SessionInfo(
                        session_id=MindstoreSession.listed_id(record),
                        owner=record.owner,
                        title=record.title,
                        created_at=record.created_at,
                        updated_at=record.updated_at,
                        age=now - record.created_at,
                        idle=now - record.updated_at,
                        items=record.seq,
                    )
                )
                if len(found) == limit:
                    break
            cursor = page.next_cursor
            if cursor is None:
                break
        return found

    # ------------------------------------------------------------------ helpers
    async def _name_results(self, messages: list[AnyMessage]) -> None:
        """A result answering a call stored by an earlier `add_items` gets the call's name."""
        unnamed = [
            part
            for message in messages
            if isinstance(message, ToolMessage)
            for part in message.content
            if isinstance(part, ToolResultPart) and not part.tool_name
        ]
        if not unnamed:
            return
        header = await self._tasks.header(self.session_id)
        for part in unnamed:
            ref = header.open_call(part.tool_call_id)
            if ref is not None:
                part.tool_name = ref.name

    async def _latest(self, wanted: int) -> list[dict[str, Any]]:
        """The latest `wanted` items: read the tail, widen once more if messages gave no item."""
        count = wanted
        while True:
            messages = await self._tasks.tail(self.session_id, count)
            items = to_responses(messages)
            if len(items) >= wanted or len(messages) < count:
                break
            count *= 2
        return drop_orphans(items[-wanted:])


def drop_orphans(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Leading tool results whose call is not in the window are left out."""
    calls = {item.get("call_id") for item in items if item.get("type") == "function_call"}
    start = 0
    while (
        start < len(items)
        and items[start].get("type") == "function_call_output"
        and items[start].get("call_id") not in calls
    ):
        start += 1
    return items[start:]
