"""ADK events <-> mindstore messages, and the keys an ADK session service stores under (pure).

One event is one message. The event's `content` (a Gemini `Content`) becomes typed parts
through the Gemini format (`mindstore.formats.gemini`): text, thinking (`thought` text as a
`ReasoningPart`), media, function calls as `ToolCallPart`s the task header tracks and
function responses as a `ToolMessage` answering them. A model turn is an
`AssistantMessage` carrying the event's usage (`usage_metadata`) and model
(`model_version`), so `acme.analytics` counts it; an event without content is an
`InformationalMessage`.

Everything else the event says (id, author, invocation id, actions and their state delta,
timestamps, grounding, transcriptions, ...) is kept beside the parts, in the message's
metadata under ``adk``: the event's JSON without its content, plus the Gemini format's
difference between the content and its canonical rendering (`mindstore.formats.stash`).
`event_of(message)` renders the parts back and re-applies both, so the event read back is
equal to the one appended; `message_for` checks exactly that before anything is written,
and keeps the content verbatim beside the parts (still typed where it converts) when the
check fails. A redacted part comes back as the Gemini export's placeholder.

Keys: a session's task id, and the task ids of the shared state registers (one per app,
one per app and user), are ``_:adk-…:`` + 32 hex digits of a BLAKE2b digest over the JSON
of the names, so any ids ADK accepts (`check_adk_id`: 1-512 characters, no control
characters) name a task; a user id that is a name (`mindstore.ids`) is its own owner,
another maps to ``_:adk-o:<digest>``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from google.adk.events.event import Event
from google.genai import types

from mindstore.errors import ValidationError
from mindstore.formats.gemini import from_gemini, to_gemini
from mindstore.formats.stash import read_entry, with_entry
from mindstore.ids import is_name
from mindstore.integrations._derived_ids import derived_id
from mindstore.integrations.conversation_ids import check_conversation_id
from mindstore.model.base import JSON
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    InformationalMessage,
    MessageBase,
    Usage,
    UserMessage,
)
from mindstore.model.roles import check_role_content

FORMAT = "adk"
MARKER = {"integration": "adk"}
Scope = Literal["app", "user"]


# -- ids and keys --------------------------------------------------------------------------


def check_adk_id(value: Any, what: str) -> str:
    """An app name, user id or session id: 1-512 characters without control characters
    (`ValidationError` naming `what` otherwise)."""
    return check_conversation_id(value, what)


def _key(kind: str, *names: str) -> str:
    text = json.dumps(list(names), ensure_ascii=True)
    return f"_:adk-{kind}:" + hashlib.blake2b(text.encode("ascii"), digest_size=16).hexdigest()


def session_task_id(app_name: str, user_id: str, session_id: str) -> str:
    """The task that holds one ADK session."""
    return _key("s", app_name, user_id, session_id)


def register_task_id(scope: Scope, app_name: str, user_id: str | None = None) -> str:
    """The task that holds an app's (`app:`) or a user's (`user:`) state."""
    return _key("a", app_name) if scope == "app" else _key("u", app_name, user_id or "")


def owner_of(user_id: str) -> str:
    """The mindstore owner of an ADK user: the id itself when it is a name (and does not
    look like a mapped one), else ``_:adk-o:<digest>``."""
    if is_name(user_id) and not user_id.startswith("_:"):
        return user_id
    return _key("o", user_id)


def slot_id(task_id: str, slot: int) -> str:
    """The id of a task's `slot`-th message. Writers of one slot name the same id, so the
    store's exactly-once guard lets one of them in: a compare-and-swap on the history."""
    return derived_id(FORMAT, task_id, str(slot))


# -- events -> messages --------------------------------------------------------------------


def _dump_event(event: Event) -> JSON:
    """The event's JSON without its content (`None` fields left out when that is exact)."""
    for exclude_none in (True, False):
        text = event.model_dump_json(exclude={"content"}, exclude_none=exclude_none)
        if Event.model_validate_json(text).model_dump(exclude={"content"}) == event.model_dump(
            exclude={"content"}
        ):
            break
    dumped: JSON = json.loads(text)
    return dumped


def _typed(content: types.Content) -> tuple[AnyMessage, JSON] | None:
    """The typed message for a content, with the format's own entry; None when the
    Gemini format does not take it."""
    dumped = content.model_dump(mode="json", by_alias=True, exclude_none=True)
    try:
        converted = from_gemini({"contents": [dumped]})
        if len(converted) != 1 or not isinstance(converted[0], MessageBase):
            return None
        message = converted[0]
        check_role_content(message)  # e.g. a thought in a user turn: no typed home
    except ValidationError:
        return None
    return message, read_entry(message.metadata, "gemini")


def message_for(
    event: Event, message_id: str, entry: JSON | None = None, *, typed: bool = True
) -> AnyMessage:
    """The message that stores `event` (see the module doc).

    Args:
        event: The ADK event (`partial` events are never stored).
        message_id: The message's id.
        entry: More to keep in the message's ``adk`` entry (slot, session state).
        typed: False: no typed parts, the content kept verbatim (for a history that refuses
            the typed message).

    Returns:
        The message, checked to give `event` back exactly.
    """
    kept: JSON = {**(entry or {}), "event": _dump_event(event)}
    message: AnyMessage | None = None
    converted = _typed(event.content) if typed and event.content is not None else None
    if converted is not None:
        message, gemini = converted
        kept["content"] = {"gemini": gemini}
    if message is None:
        message = InformationalMessage()
        if event.content is not None:  # nothing typed: the content as it came
            kept["content"] = {"raw": event.content.model_dump(mode="json", exclude_none=True)}
    if not isinstance(message, MessageBase):  # `_typed` gives typed messages only
        raise ValidationError(f"event {event.id!r}: its content made an untyped message")
    message.id = message_id
    message.metadata = adk_metadata(kept)
    if isinstance(message, AssistantMessage):
        message.status = "completed"
        message.model_id = event.model_version
        _usage(message, event.usage_metadata)
    if event.error_message:
        message.error_message = event.error_message[:4096]
    if event.content is not None and event_of(message).content != event.content:
        # what the parts cannot say exactly: the content verbatim beside them
        kept["content"]["raw"] = event.content.model_dump(mode="json", exclude_none=True)
        message.metadata = adk_metadata(kept)
    return message


def _usage(
    message: AssistantMessage, usage: types.GenerateContentResponseUsageMetadata | None
) -> None:
    if usage is None:
        return
    message.tokens_in = usage.prompt_token_count or 0
    message.tokens_out = usage.candidates_token_count or 0
    message.cache_reads = usage.cached_content_token_count or 0
    message.usage = Usage(
        input_tokens=message.tokens_in,
        output_tokens=message.tokens_out,
        cache_read_tokens=message.cache_reads,
        reasoning_tokens=usage.thoughts_token_count or 0,
    )


# -- messages -> events --------------------------------------------------------------------


def adk_metadata(entry: JSON) -> JSON:
    """A message's metadata holding the ``adk`` entry (kept whole: a slot 0 or an empty state
    is data here, which the formats' `with_entry` would leave out)."""
    return {FORMAT: entry}


def entry_of(message: AnyMessage) -> JSON:
    """The message's ``adk`` entry ({} for a message this service did not write)."""
    return read_entry(getattr(message, "metadata", None), FORMAT)


def is_event(message: AnyMessage) -> bool:
    """True for a message that stores an event."""
    return "event" in entry_of(message)


def event_of(message: AnyMessage) -> Event:
    """The event `message` stores (`message_for`'s inverse).

    A message redacted whole has lost the event's own fields with its metadata: it reads
    as an event of the message's id and time, by ``user`` (a user message) or
    ``redacted``, with the Gemini export's placeholder content."""
    entry = entry_of(message)
    if "event" not in entry:
        return _redacted(message)
    dumped = dict(entry["event"])
    content = entry.get("content") or {}
    if "raw" in content:
        dumped["content"] = content["raw"]
    elif "gemini" in content and isinstance(message, MessageBase):
        shown = message.model_copy()
        shown.metadata = with_entry(None, "gemini", content["gemini"])
        contents = to_gemini([shown]).get("contents") or [{"role": _side(message), "parts": []}]
        dumped["content"] = types.Content.model_validate(contents[0]).model_dump(
            mode="json", exclude_none=True
        )
    return Event.model_validate_json(json.dumps(dumped))


def _redacted(message: AnyMessage) -> Event:
    if not isinstance(message, MessageBase):
        return Event(author="redacted")
    contents = to_gemini([message]).get("contents") or []
    return Event(
        id=message.id,
        author="user" if isinstance(message, UserMessage) else "redacted",
        timestamp=float(message.started_ts),
        content=types.Content.model_validate(contents[0]) if contents else None,
    )


def _side(message: AnyMessage) -> str:
    return "model" if isinstance(message, AssistantMessage) else "user"


def timestamp_of(message: AnyMessage) -> float:
    """The stored event's timestamp (or a register's or a session's creation time)."""
    entry = entry_of(message)
    if "event" in entry:
        return float(entry["event"]["timestamp"])
    if "created" in entry:
        return float(entry["created"])
    return float(getattr(message, "started_ts", 0.0))  # redacted whole
