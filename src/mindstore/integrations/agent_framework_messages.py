"""Microsoft Agent Framework `Message`s <-> mindstore messages (pure, no I/O).

An Agent Framework message is a role and a list of contents. Stored, it is typed:

* `assistant` is an `AssistantMessage`: `text` contents are `TextPart`s, `text_reasoning`
  ones `ReasoningPart`s, each `function_call` a `ToolCallPart` (the task's header tracks
  it until its result is stored);
* `tool` holding only `function_result`s for open calls is a `ToolMessage` answering them;
* `system` is a `SystemMessage`, `user` (and any other role) a `UserMessage`;
* any other content (data, uri, usage, approval requests, hosted tools, ...), a call whose
  id is open already and a result for a call that is not open are kept verbatim as unknown
  parts of type `agent_framework_content`, in their place.

What the typed message does not hold (author, `message_id`, `additional_properties`, a
content's extra fields) is kept in the message's metadata under `agent_framework` as the
difference from the canonical rendering (`mindstore.formats.stash`), so
`to_message(from_message(m))` gives `m` back exactly (`Message.to_dict()` equal).
"""

from __future__ import annotations

from typing import Any

from agent_framework import Content, Message

from mindstore.errors import ValidationError
from mindstore.formats.conversation import result_text
from mindstore.formats.stash import diff, patch, read_entry, with_entry
from mindstore.ids import is_name
from mindstore.integrations._tool_args import tool_args
from mindstore.model.base import new_id
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from mindstore.model.parts import (
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    UnknownPart,
)

FORMAT = "agent_framework"
CONTENT = "agent_framework_content"
"""The part type of a content kept verbatim (never a type mindstore parses)."""


def from_message(
    message: Any,
    where: str = "message",
    calls: set[str] | None = None,
    *,
    message_id: str | None = None,
    usage: Usage | None = None,
    model: str | None = None,
) -> AnyMessage:
    """The typed mindstore message of one Agent Framework `Message` (see the module doc).

    Args:
        message: The message.
        where: Its name in error messages.
        calls: The ids of the task's open tool calls (updated here).
        message_id: The stored message's id (default: a fresh one).
        usage: The usage of the model turn this message ends (assistant messages).
        model: The model that wrote it (assistant messages).

    Raises:
        ValidationError: Not a `Message`, naming `where`.
    """
    if not isinstance(message, Message):
        raise ValidationError(f"{where}: expected a Message, got {type(message).__name__}")
    open_calls = set() if calls is None else calls
    original = message.to_dict()
    role = str(original.get("role"))
    parts: list[Any] = []
    for content in original.get("contents") or []:
        parts.append(_part(content, role, open_calls))
    stored: AnyMessage
    fresh = message_id or new_id()
    results = [p for p in parts if isinstance(p, ToolResultPart)]
    if role == "tool" and results and len(results) == len(parts):
        stored = ToolMessage(id=fresh, content=parts)
    elif role == "assistant":
        extra: dict[str, Any] = {}
        if usage is not None:
            extra["usage"] = usage
        if model:
            extra["model_id"] = model
        stored = AssistantMessage(id=fresh, content=parts, status="completed", **extra)
    elif role == "system":
        stored = SystemMessage(id=fresh, content=parts)
    else:
        stored = UserMessage(id=fresh, content=parts)
    if role == "tool" and not isinstance(stored, ToolMessage):
        # a result part only answers a call in a ToolMessage: keep this one verbatim
        stored.content = [_verbatim(c) for c in original.get("contents") or []]
        for result in results:
            open_calls.add(result.tool_call_id)
    stored.metadata = with_entry(None, FORMAT, {"delta": diff(original, _render(stored))})
    return stored


def _verbatim(content: dict[str, Any]) -> UnknownPart:
    return UnknownPart.model_validate({"type": CONTENT, "content": content})


def _part(content: dict[str, Any], role: str, open_calls: set[str]) -> Any:
    kind = content.get("type")
    if kind == "text" and isinstance(content.get("text"), str):
        return TextPart(text=content["text"])
    if kind == "text_reasoning" and isinstance(content.get("text"), str) and role == "assistant":
        return ReasoningPart(reasoning=content["text"])
    call_id = content.get("call_id")
    if kind == "function_call" and role == "assistant" and is_name(call_id):
        name = content.get("name")
        if call_id not in open_calls and isinstance(name, str) and name:
            open_calls.add(call_id)
            return ToolCallPart(
                tool_call_id=call_id, tool_name=name, args=tool_args(content.get("arguments"))
            )
    if kind == "function_result" and role == "tool" and call_id in open_calls:
        open_calls.discard(call_id)
        return ToolResultPart(tool_call_id=call_id, tool_name="", result=content.get("result"))
    return _verbatim(content)


def _render(message: AnyMessage) -> dict[str, Any]:
    """The canonical `Message.to_dict()` of a stored message."""
    role = "user"
    if isinstance(message, AssistantMessage):
        role = "assistant"
    elif isinstance(message, SystemMessage):
        role = "system"
    elif isinstance(message, ToolMessage):
        role = "tool"
    contents: list[Any] = []
    verbatim: dict[int, dict[str, Any]] = {}
    for part in getattr(message, "content", []):
        if isinstance(part, TextPart):
            contents.append(Content.from_text(part.text))
        elif isinstance(part, ReasoningPart):
            contents.append(Content.from_text_reasoning(text=part.reasoning))
        elif isinstance(part, ToolCallPart):
            contents.append(
                Content.from_function_call(
                    call_id=part.tool_call_id, name=part.tool_name, arguments=part.args
                )
            )
        elif isinstance(part, ToolResultPart):
            result = part.result if part.result is not None else result_text(part)
            contents.append(Content.from_function_result(call_id=part.tool_call_id, result=result))
        elif isinstance(part, UnknownPart) and part.raw.get("type") == CONTENT:
            verbatim[len(contents)] = dict(part.raw.get("content") or {})
            contents.append(Content.from_text(""))
    rendered = Message(role=role, contents=contents).to_dict()
    for position, raw in verbatim.items():
        rendered["contents"][position] = raw
    return rendered


def to_message(message: AnyMessage) -> Message:
    """The Agent Framework `Message` of a stored message: exactly the one `from_message` was
    given; other user, assistant, system and tool messages canonically."""
    entry = read_entry(getattr(message, "metadata", None), FORMAT)
    return Message.from_dict(patch(_render(message), entry.get("delta")))


def is_chat(message: AnyMessage) -> bool:
    """A message an agent's history holds (user, assistant, system, tool)."""
    return isinstance(message, (UserMessage, AssistantMessage, SystemMessage, ToolMessage))
