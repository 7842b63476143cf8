"""The OpenAI Agents SDK's `Session`, stored as a mindstore task.

`MindstoreSession(session_id, store.scoped(tenant, owner=...))` is one task per session
(task id = `mindstore.integrations.task_id_for(session_id)`: the session id itself when it
is a valid task id, else a deterministic mapping; tenant and owner from the view). Each
Responses input item is one typed mindstore message (`mindstore.formats.from_responses`):
a user item a `UserMessage`, a `function_call` an `AssistantMessage` holding a
`ToolCallPart` (tracked in the header until its `function_call_output` arrives as a
`ToolMessage`), reasoning a `ReasoningPart`. Whatever the item says beyond the typed model
is kept in the message's metadata, so `get_items()` gives back exactly the items that were
added, byte for byte as their JSON (what `SQLiteSession` stores; a value JSON cannot hold is
refused with `WrongType`, a `TypeError` like the SDK's), whatever their shape: an empty
turn, an item without a `type`, an encrypted envelope. Each item's typed message is checked
before it is written to read back as exactly the item (`stored_item`); one that would not
is kept whole instead. What the provider exports leave out (`to_responses` drops empty
turns) is an export rule and never applies to a session's own items.

Behaviour matches the SDK's `SQLiteSession` for the same calls: `get_items(limit=N)` is
exactly the latest N items (the Runner itself leaves out a tool result whose call fell
outside the window; `drop_orphans` does it for direct callers), `session_settings` is
converted and checked as the SDK does (a dict becomes `SessionSettings`, an unknown key is
refused). `pop_item` is `tasks.retract_last`: one guarded write, exactly once under
concurrency, the call a popped result answered open again.

`add_items` is exactly-once: each item's message id is derived from the batch's content
and the message the batch follows (`batch_ids`), so a call retried with the same items,
while they are still the session's latest, stores nothing new (one read of the session's
last messages before the write tells which message that is). Item ids cannot serve:
user items have none, and Chat Completions models give every item the same placeholder.
Usage and model of each model response come through `UsageHooks`
(`mindstore.integrations.openai_agents_usage`).
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from agents.items import ModelResponse
from agents.memory.session_settings import SessionSettings
from pydantic import ValidationError as PydanticError

from mindstore.errors import Conflict, InvalidTransition, NotFound, ValidationError, WrongType
from mindstore.formats import from_responses
from mindstore.formats.conversation import settle
from mindstore.formats.responses import stored_responses
from mindstore.formats.stash import read_entry
from mindstore.integrations._derived_ids import derived_id, digest
from mindstore.integrations._key_order import in_order, key_order
from mindstore.integrations._session import SessionTasks, TaskSession
from mindstore.integrations.openai_agents_usage import Reported, UsageHooks, attribute, reported
from mindstore.model.base import JSON
from mindstore.model.messages import (
    AnyMessage,
    MessageBase,
    ToolMessage,
    UserMessage,
    parse_message,
)
from mindstore.model.parts import ToolResultPart, UnknownPart
from mindstore.model.plans.redaction import redaction_of
from mindstore.operations import current, operations, through
from mindstore.protocols import TenantView
from mindstore.validation import check_int

__all__ = ["MindstoreSession", "SessionInfo", "UsageHooks", "drop_orphans", "session_settings_of"]

MARKER = {"integration": "openai-agents"}
"""Task metadata of a session's task: `list_sessions` lists only these."""
ENTRY = "openai-agents"
"""Where a message keeps what the session needs beside the format's entry: the item's key
order (`key_order`), when its typed form renders the keys in another order."""
WHOLE = "openai_agents_item"
"""The part type of an item kept whole (never a type mindstore parses)."""
POP_ATTEMPTS = 200
UNNAMED_POP = (
    "pop_item names no item: retried from this process it is exactly-once (the store keeps "
    "which message it removed), retried from another one it may remove two"
)
"""What `Unavailable` says of a `pop_item`."""


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


@operations("openai_agents", resilience=through("_repository"))
class MindstoreSession(TaskSession):
    """A `Session` (OpenAI Agents SDK) kept in one mindstore task; see the module doc."""

    session_settings: SessionSettings | None = None
    MARKER = MARKER

    def __init__(
        self,
        session_id: str,
        store: TenantView,
        *,
        owner: str | None = None,
        title: str | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
    ) -> None:
        TaskSession.__init__(self, session_id, store, owner=owner, title=title)
        self.session_settings = session_settings_of(session_settings)
        self._reported: list[Reported] = []
        self._acknowledged: tuple[str, object, str] = ("", None, "")
        """What the last `add_items` of this object that returned stored: its last message's
        id, the list it was given and that list's digest. The same items again right after
        it, in another list, are said again (stored); the same list again is a retry."""

    # ------------------------------------------------------------------ the protocol
    async def get_items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The session's items, oldest first (the SDK's `Session.get_items`).

        Args:
            limit: Only the latest `limit` items (None: `session_settings.limit`, else all).

        Returns:
            The items as the SDK's input items (dicts).

        Raises:
            ValidationError: A limit below 0.
        """
        wanted = limit if limit is not None else session_settings_of(self.session_settings).limit
        if wanted is not None:
            check_int(wanted, "limit")
        try:
            if wanted is None:
                return session_items(await self._tasks.messages(self.session_id))
            if wanted == 0:
                return []
            return await self._latest(wanted)
        except NotFound:
            return []

    async def add_items(self, items: list[Any]) -> None:
        """Store items: one message per item, all in one atomic write (refused whole if one
        cannot be stored). Exactly once: a retry (the same items again right after
        themselves, unless this object's call with them returned and they come in a new
        list: then they were said again, and are stored) stores nothing.

        Each item is stored as its JSON says it, as `SQLiteSession` stores `json.dumps(item)`:
        `get_items()` gives back `json.loads(json.dumps(item))` (keys strings, tuples lists),
        byte for byte, whatever its shape: an item the Responses format cannot type (no
        `type`, an unknown one, a malformed call) is kept whole (`kept_whole`). The
        session's task is created on the first write, with the session's owner and title.

        Args:
            items: The SDK's input items (dicts of JSON values).

        Raises:
            WrongType: A value JSON cannot hold (a `TypeError`, as `SQLiteSession` raises).
            ValidationError: An item that is not an object, or that the store cannot hold
                (nothing is written).
        """
        if isinstance(items, (str, bytes, dict)) or not isinstance(items, Sequence):
            raise ValidationError("items must be a list of Responses input items")
        if not items:
            return
        given = items
        items = [as_json(item, f"items[{index}]") for index, item in enumerate(items)]
        messages: list[AnyMessage] = []
        sources: list[Any] = []  # the item each message came from (one message per item)
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise ValidationError(
                    f"items[{index}]: expected an object (a Responses input item), "
                    f"got {type(item).__name__}"
                )
            try:
                converted = from_responses([item])
            except ValidationError:  # not an item the format types: stored as it came
                converted = [kept_whole(item)]
            messages.extend(converted)
            sources.extend([item] * len(converted))
        settle(messages)
        batch = digest(items)
        taken, self._reported = self._reported, []
        try:
            attribute(sources, messages, taken)

            last = ""

            async def write(tasks: SessionTasks) -> None:
                nonlocal last
                before = await tasks.tail(self.session_id, len(messages) + 1)
                acknowledged, same_list, same_digest = self._acknowledged
                repeat = (
                    bool(before)
                    and before[-1].id == acknowledged
                    and not (same_list is given and same_digest == batch)
                )
                if not repeat and stored_already(before, batch, len(messages)):
                    last = before[-1].id
                    return  # a retry of a call that was stored: nothing new
                ids = batch_ids(before[-1].id if before else "", batch, len(messages))
                for message, message_id in zip(messages, ids, strict=True):
                    if isinstance(message, MessageBase):
                        message.id = message_id
                await self._name_results(tasks, messages)
                stored = [stored_item(m, item) for m, item in zip(messages, sources, strict=True)]
                await tasks.add_messages(self.session_id, stored)
                last = ids[-1]

            await self._write(write)
            self._acknowledged = (last, given, batch)
        except BaseException:
            self._reported = taken + self._reported  # not stored: the retry attributes them
            raise

    def record_response(self, response: ModelResponse, *, model: str | None = None) -> None:
        """Keep a model response's usage and model until `add_items` stores its output, so the
        assistant messages carry tokens and cost (`UsageHooks` calls this from `on_llm_end`).

        Args:
            response: The SDK's `ModelResponse`.
            model: The model name, when the response does not say it.
        """
        self._reported.append(reported(response, model))

    async def pop_item(self) -> dict[str, Any] | None:
        """Remove and return the latest item (one guarded `retract_last`): exactly the last
        item added, whatever it holds.

        Returns:
            The item, or None when the session is empty.

        Raises:
            InvalidTransition: The last message was not written by the session (it holds
                several items, or none), or a retract cannot undo it (a task config).
        """
        running = current()
        if running is not None:
            running.note = UNNAMED_POP
        for _ in range(POP_ATTEMPTS):
            try:
                tail = await self._tasks.tail(self.session_id, 1)
            except NotFound:
                return None
            if not tail:
                return None
            items = session_items(tail)
            if len(items) != 1:
                raise InvalidTransition(
                    f"pop_item: the last message of session {self.session_id!r} holds "
                    f"{len(items)} items "
                    "(it was not written by the session); remove it with tasks.retract_last"
                )
            try:
                removed = await self._tasks.retract_last(self.session_id, expected_id=tail[0].id)
            except InvalidTransition:
                continue  # appended to meanwhile: look again
            except NotFound:
                return None
            if removed is None:
                continue  # popped by someone else meanwhile
            popped = session_items([removed])  # a retry's: what its lost attempt removed
            if popped:
                return popped[0]
        raise Conflict(f"pop_item: session {self.session_id!r} kept changing under us")

    async def clear_session(self) -> None:
        """Forget every item: the session's task is deleted; the next add starts afresh."""
        self._exists = False
        self._acknowledged = ("", None, "")
        with contextlib.suppress(NotFound):
            await self._tasks.delete(self.session_id)

    # ------------------------------------------------------------------ listing
    @staticmethod
    async def list_sessions(
        store: TenantView, *, owner: str | None = None, limit: int = 50
    ) -> list[SessionInfo]:
        """The sessions of a view (one owner's on an owner-scoped view), most recently active
        first, with their age (since created) and idle time (since last written).

        Args:
            store: A `TenantStore` (`store.scoped(tenant)`, optionally with an owner).
            owner: Only this owner's sessions.
            limit: At most this many (1 to 1,000).

        Returns:
            `SessionInfo`s.

        Raises:
            ValidationError: A bad owner or limit.
        """
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
    async def _name_results(self, tasks: SessionTasks, messages: list[AnyMessage]) -> None:
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
        header = await tasks.header(self.session_id)
        for part in unnamed:
            ref = header.open_call(part.tool_call_id)
            if ref is not None:
                part.tool_name = ref.name

    async def _latest(self, wanted: int) -> list[dict[str, Any]]:
        """The latest `wanted` items: read the tail, widen once more if messages gave no item."""
        count = wanted
        while True:
            messages = await self._tasks.tail(self.session_id, count)
            items = session_items(messages)
            if len(items) >= wanted or len(messages) < count:
                break
            count *= 2
        return items[-wanted:]


def session_settings_of(value: SessionSettings | Mapping[str, Any] | None) -> SessionSettings:
    """`SessionSettings` from what a caller passed (as the SDK's sessions take it): a dict is
    converted, an unknown key refused naming it (`WrongType`, a `TypeError` as the SDK's), a
    bad value refused naming its field.

    Args:
        value: `SessionSettings`, a dict of its fields, or None (the defaults).

    Returns:
        The `SessionSettings`.

    Raises:
        WrongType: An unknown key or a value of the wrong type.
        ValidationError: A bad value.
    """
    if value is None:
        return SessionSettings()
    if isinstance(value, SessionSettings):
        settings = value
    elif isinstance(value, Mapping):
        known = [field.name for field in fields(SessionSettings) if field.init]
        unknown = sorted(str(key) for key in value if key not in known)
        if unknown:
            raise WrongType(
                f"session_settings: Unknown session settings: {', '.join(unknown)} "
                f"(known: {', '.join(known)})"
            )
        try:
            settings = SessionSettings(**value)
        except PydanticError as exc:
            problems = [
                f"session_settings.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                for e in exc.errors()
            ]
            raise ValidationError("; ".join(problems) or f"session_settings: {exc}") from None
    else:
        raise WrongType(
            f"session_settings must be a SessionSettings or a dict, got {type(value).__name__}"
        )
    if settings.limit is not None:
        check_int(settings.limit, "session_settings.limit")
    return settings


def stored_item(message: AnyMessage, item: JSON) -> AnyMessage:
    """The message that stores `item`: its typed form (`message`, from `from_responses`)
    when that reads back from the store as exactly the item, byte for byte as JSON (its key
    order kept beside it when the format renders the keys in another order), else the item
    whole, in a part of the session's own type (`WHOLE`), so no shape of item is lost: one
    whose `type` is a mindstore part type, one the format renders another way.

    Args:
        message: The item's typed message.
        item: The item, as its JSON says it (`as_json`).

    Returns:
        The message to write.
    """
    if isinstance(message, MessageBase):
        try:
            back = stored_responses([parse_message(message.to_dict())])  # as a read sees it
        except (ValidationError, PydanticError, ValueError):  # a part that does not parse
            back = []
        if len(back) == 1:
            order = key_order(item, back[0])
            if json.dumps(in_order(back[0], order)) == json.dumps(item):
                if order is not None:
                    message.metadata = {**(message.metadata or {}), ENTRY: {"order": order}}
                return message
    return kept_whole(item, message.id)


def kept_whole(item: JSON, message_id: str | None = None) -> UserMessage:
    """A message keeping `item` whole, as data: never typed, never sent to a model by the
    exports (they send no part of an unknown type), given back by `session_items` as is."""
    kept = UserMessage(content=[UnknownPart.model_validate({"type": WHOLE, "item": item})])
    if message_id is not None:
        kept.id = message_id
    return kept


def session_items(messages: Sequence[AnyMessage]) -> list[JSON]:
    """The items a session's messages hold, in order: each message the session wrote holds
    exactly the item it was given (`stored_item`); a message written another way gives
    the items `stored_responses` reads in it (none for a task config or a note).

    Args:
        messages: The session task's messages.

    Returns:
        The items.
    """
    out: list[JSON] = []
    for message in messages:
        whole = _whole(message)
        if whole is not None:
            out.append(whole)
            continue
        items = stored_responses([message])
        order = read_entry(getattr(message, "metadata", None), ENTRY).get("order")
        if order is not None and len(items) == 1:
            items = [in_order(items[0], order)]
        out.extend(items)
    return out


def _whole(message: AnyMessage) -> JSON | None:
    """The item a message keeps whole (`stored_item`), unless it was redacted since."""
    if not isinstance(message, MessageBase) or redaction_of(message) is not None:
        return None
    if len(message.content) != 1 or not isinstance(message.content[0], UnknownPart):
        return None
    raw = message.content[0].raw
    item = raw.get("item")
    if raw.get("type") != WHOLE or not isinstance(item, dict):
        return None
    return copy.deepcopy(item)


def as_json(item: Any, where: str) -> Any:
    """The item as its JSON says it: what `SQLiteSession` stores (`json.dumps`) and gives back.

    Items are JSON (the Runner sends them to the model as such), so a value JSON cannot hold
    (a datetime, bytes, a set, an object) is refused as the SDK's session refuses it, rather
    than stored as something that would come back different; keys become strings and tuples
    lists, as they do in SQLite.

    Args:
        item: One item, as the caller passed it.
        where: Its place in the call (`items[3]`), for the error.

    Returns:
        `json.loads(json.dumps(item))`.

    Raises:
        WrongType: A value of a type JSON cannot hold.
        ValidationError: A value that refers to itself.
    """
    try:
        text = json.dumps(item)
    except TypeError as exc:
        raise WrongType(f"{where}: not JSON: {exc}") from None
    except ValueError as exc:  # a circular reference
        raise ValidationError(f"{where}: not JSON: {exc}") from None
    return json.loads(text)


def batch_ids(after: str, batch: str, count: int) -> list[str]:
    """The message ids of a batch of `count` items with digest `batch`, written after the
    message `after` ("" at the start of a session)."""
    return [derived_id("openai-agents", after, batch, str(i)) for i in range(count)]


def stored_already(before: list[AnyMessage], batch: str, count: int) -> bool:
    """Whether the session's last `count` messages are this batch, written by an earlier
    call (`before`: the session's last `count + 1` messages)."""
    if len(before) < count:
        return False
    after = before[-count - 1].id if len(before) > count else ""
    return [m.id for m in before[-count:]] == batch_ids(after, batch, count)


def drop_orphans(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Leave out leading tool results whose call is not in the window (what the Runner does to
    a limited history before the model sees it; for callers reading items themselves).

    Args:
        items: Items, oldest first (e.g. `await session.get_items(limit=20)`).

    Returns:
        The items without the orphaned leading results.
    """
    calls = {item.get("call_id") for item in items if item.get("type") == "function_call"}
    start = 0
    while (
        start < len(items)
        and items[start].get("type") == "function_call_output"
        and items[start].get("call_id") not in calls
    ):
        start += 1
    return items[start:]
