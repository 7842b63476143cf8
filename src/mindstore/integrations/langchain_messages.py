"""LangChain messages <-> typed mindstore messages, lossless (shared by the LangChain and
LangGraph integrations; imports `langchain_core`).

| LangChain | mindstore |
|---|---|
| `HumanMessage` | `UserMessage` |
| `SystemMessage` | `SystemMessage` |
| `AIMessage` (`content`, `tool_calls`, `usage_metadata`, `response_metadata`'s `model_name`) | `AssistantMessage`: `TextPart`s, `ReasoningPart`s (`reasoning` / `thinking` blocks), a `ToolCallPart` per tool call, `Usage`, `model_id` |
| `ToolMessage` (`tool_call_id`, `content`, `status`) | `ToolMessage` with one `ToolResultPart` (`status="error"` -> `is_error`) |
| `ChatMessage` | by its role (user, assistant, system; anything else a user message) |
| other content blocks (images, files, provider blocks) | kept verbatim (an unknown part) |

Tool calls become real calls, so the store tracks them: a call stays in the task header's
open calls until its `ToolMessage` is stored. What LangChain says beyond the typed model
(`additional_kwargs`, `response_metadata`, `artifact`, an id, a message class) is kept as
the difference from the canonical rendering in the message's metadata under `langchain`
(the same guarded difference the formats use), so `to_langchain(from_langchain(m)) == m`.
`from_langchain(..., check=True)` proves it for each message through a BSON round trip and
raises `ValidationError` when a message holds something a document cannot (a Python object
in `additional_kwargs`, a tuple): the LangGraph saver then keeps that value as a blob.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import bson
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.messages import (
    SystemMessage as LCSystemMessage,
)
from langchain_core.messages import (
    ToolMessage as LCToolMessage,
)

from mindstore.errors import ValidationError
from mindstore.formats.conversation import settle
from mindstore.formats.stash import diff, patch, read_entry, with_entry
from mindstore.ids import is_name
from mindstore.model.base import new_id
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    MessageBase,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
    parse_message,
)
from mindstore.model.messages import (
    message_to_dict as stored_form,
)
from mindstore.model.parts import ReasoningPart, TextPart, ToolCallPart, ToolResultPart, UnknownPart
from mindstore.model.storage_form import escape_keys, unescape_keys

FORMAT = "langchain"
BLOCK = "langchain_block"
"""The part type of a content block kept verbatim (never a type mindstore parses)."""
ROLES: dict[str, type[MessageBase]] = {
    "user": UserMessage,
    "human": UserMessage,
    "assistant": AssistantMessage,
    "ai": AssistantMessage,
    "system": SystemMessage,
}


def from_langchain(
    messages: Sequence[BaseMessage],
    *,
    keep_ids: bool = True,
    check: bool = False,
    names: Mapping[str, str] | None = None,
    ids: Sequence[str | None] | None = None,
) -> list[AnyMessage]:
    """Typed mindstore messages for LangChain messages (see the module doc).

    Args:
        messages: LangChain `BaseMessage`s.
        keep_ids: A LangChain id becomes the message id (once per call); otherwise, and for
            messages without one, the message gets a fresh id (the LangChain id is kept in
            the difference either way).
        check: Refuse what would not come back equal from `to_langchain`.
        names: Tool names of calls stored earlier, by call id, for results whose call is
            not in `messages`.
        ids: The message id of each message (None in a place: decided by `keep_ids`).

    Returns:
        mindstore messages, ready for `tasks.add_messages`.

    Raises:
        ValidationError: Not a LangChain message, `ids` of another length, or (with
            `check`) a message that would not come back equal.
    """
    out: list[AnyMessage] = []
    used: set[str] = set()
    if ids is not None and len(ids) != len(messages):
        raise ValidationError("ids: one per message")
    for index, message in enumerate(messages):
        if not isinstance(message, BaseMessage):
            raise ValidationError(
                f"messages[{index}]: expected a LangChain message, got {type(message).__name__}"
            )
        lc_id = message.id
        named = ids[index] if ids is not None else None
        if named is not None:
            message_id = named
        elif keep_ids and isinstance(lc_id, str) and is_name(lc_id) and lc_id not in used:
            message_id = lc_id
            used.add(lc_id)
        else:
            message_id = new_id()
        out.append(_convert(message, message_id))
    settle(out)
    for stored in out:
        for part in stored.content:
            if (
                isinstance(part, ToolResultPart)
                and not part.tool_name
                and part.tool_call_id in (names or {})
            ):
                part.tool_name = (names or {})[part.tool_call_id]
    for index, (given, converted) in enumerate(zip(messages, out, strict=True)):
        original = _jsonable(message_to_dict(given))
        if isinstance(converted, MessageBase):
            converted.metadata = with_entry(
                None, FORMAT, {"delta": diff(original, _render(converted))}
            )
        if check:
            _check(given, converted, index)
    return out


def to_langchain(messages: Sequence[AnyMessage]) -> list[BaseMessage]:
    """LangChain messages for mindstore messages: the ones this module stored come back
    exactly; other user, assistant, system and tool messages in their canonical form;
    bookkeeping messages (configs, entries, compression markers) are left out.

    Args:
        messages: mindstore messages.

    Returns:
        LangChain `BaseMessage`s.
    """
    rendered = []
    for message in messages:
        if not isinstance(message, (UserMessage, AssistantMessage, SystemMessage, ToolMessage)):
            continue
        rendered.append(patch(_render(message), read_entry(message.metadata, FORMAT).get("delta")))
    return list(messages_from_dict(rendered))


# -- import ---------------------------------------------------------------------------


def _convert(message: BaseMessage, message_id: str) -> AnyMessage:
    if isinstance(message, AIMessage):
        parts = _blocks(message.content)
        for call in message.tool_calls:
            call_id = call.get("id")
            parts.append(
                ToolCallPart(
                    tool_call_id=call_id
                    if isinstance(call_id, str) and is_name(call_id)
                    else new_id(),
                    tool_name=str(call.get("name") or ""),
                    args=dict(call.get("args") or {}),
                )
            )
        return AssistantMessage(
            id=message_id,
            content=parts,
            status="completed",
            usage=_usage(message),
            model_id=model_of(message),
        )
    if isinstance(message, LCToolMessage):
        call_id = message.tool_call_id
        result = ToolResultPart(
            tool_call_id=call_id if isinstance(call_id, str) and is_name(call_id) else new_id(),
            tool_name=message.name or "",
            result=message.content,
            is_error=message.status == "error",
        )
        return ToolMessage(id=message_id, content=[result])
    if isinstance(message, LCSystemMessage):
        return SystemMessage(id=message_id, content=_blocks(message.content))
    if isinstance(message, HumanMessage):
        return UserMessage(id=message_id, content=_blocks(message.content))
    if isinstance(message, ChatMessage):
        cls = ROLES.get(message.role, UserMessage)
        built = cls(id=message_id, content=_blocks(message.content))
        if isinstance(built, AssistantMessage):
            built.status = "completed"
        return built  # type: ignore[return-value]  # every ROLES class is a member of AnyMessage
    raise ValidationError(f"unsupported LangChain message type {type(message).__name__}")


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [TextPart(text=content)] if content else []
    parts: list[Any] = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            parts.append(TextPart(text=block))
        elif (
            isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ):
            parts.append(TextPart(text=block["text"]))
        elif (
            isinstance(block, dict)
            and block.get("type") == "thinking"
            and isinstance(block.get("thinking"), str)
        ):
            signature = block.get("signature")
            parts.append(
                ReasoningPart(
                    reasoning=block["thinking"],
                    signature=signature if isinstance(signature, str) else None,
                )
            )
        elif (
            isinstance(block, dict)
            and block.get("type") == "reasoning"
            and isinstance(block.get("reasoning"), str)
        ):
            parts.append(ReasoningPart(reasoning=block["reasoning"]))
        else:
            parts.append(UnknownPart.model_validate({"type": BLOCK, "block": block}))
    return parts


def model_of(message: AIMessage) -> str | None:
    """The model that wrote a reply, as the provider reported it: `response_metadata`'s
    `model_name` (OpenAI, Google, most providers), else its `model` (Anthropic, Ollama)."""
    metadata = message.response_metadata or {}
    for key in ("model_name", "model"):
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _usage(message: AIMessage) -> Usage | None:
    usage = message.usage_metadata
    if not usage:
        return None
    given = usage.get("input_token_details") or {}
    produced = usage.get("output_token_details") or {}
    return Usage(
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read_tokens=int(given.get("cache_read") or 0),
        cache_write_tokens=int(given.get("cache_creation") or 0),
        reasoning_tokens=int(produced.get("reasoning") or 0),
    )


# -- export ---------------------------------------------------------------------------


def _render(message: AnyMessage) -> dict[str, Any]:
    """The canonical LangChain dict of a typed message (what a difference is taken against)."""
    content = _content(
        [p for p in message.content if not isinstance(p, (ToolCallPart, ToolResultPart))]
    )
    lc: BaseMessage
    if isinstance(message, AssistantMessage):
        calls = [
            {"name": p.tool_name, "args": p.args, "id": p.tool_call_id, "type": "tool_call"}
            for p in message.content
            if isinstance(p, ToolCallPart)
        ]
        lc = AIMessage(
            content=content,
            tool_calls=calls,
            id=message.id,
            usage_metadata=_usage_metadata(message.usage),
        )
    elif isinstance(message, ToolMessage):
        results = [p for p in message.content if isinstance(p, ToolResultPart)]
        first = results[0] if results else ToolResultPart(tool_call_id="", tool_name="")
        value = first.result if isinstance(first.result, (str, list)) else str(first.result)
        lc = LCToolMessage(
            content=value,
            tool_call_id=first.tool_call_id,
            id=message.id,
            name=first.tool_name or None,
            status="error" if first.is_error else "success",
        )
    elif isinstance(message, SystemMessage):
        lc = LCSystemMessage(content=content, id=message.id)
    else:
        lc = HumanMessage(content=content, id=message.id)
    rendered: dict[str, Any] = _jsonable(message_to_dict(lc))
    return rendered


def _content(parts: list[Any]) -> Any:
    if not parts:
        return ""
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    blocks: list[Any] = []
    for part in parts:
        if isinstance(part, TextPart):
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ReasoningPart):
            block: dict[str, Any] = {"type": "thinking", "thinking": part.reasoning}
            if part.signature is not None:
                block["signature"] = part.signature
            blocks.append(block)
        elif isinstance(part, UnknownPart) and part.raw.get("type") == BLOCK:
            blocks.append(part.raw.get("block"))
    return blocks


def _usage_metadata(usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    out: dict[str, Any] = {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
    given = {
        k: v
        for k, v in (
            ("cache_read", usage.cache_read_tokens),
            ("cache_creation", usage.cache_write_tokens),
        )
        if v
    }
    if given:
        out["input_token_details"] = given
    if usage.reasoning_tokens:
        out["output_token_details"] = {"reasoning": usage.reasoning_tokens}
    return out


def _jsonable(value: Any) -> Any:
    """Plain containers (a LangChain dict may hold tuples from a provider; lists here)."""
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    return value


def _check(original: BaseMessage, converted: AnyMessage, index: int) -> None:
    """Refuse a message that would not come back equal once stored as a document."""
    try:
        stored = bson.decode(bson.encode(escape_keys(stored_form(converted))))
        back = to_langchain([parse_message(unescape_keys(stored))])
    except Exception as exc:
        raise ValidationError(
            f"messages[{index}]: not storable as a document ({type(exc).__name__})"
        ) from None
    if back != [original]:
        raise ValidationError(f"messages[{index}]: would not round-trip through the store")
