"""What every format shares about a conversation as a whole.

* **Exports to a model** (`model_messages`): only what the model must see. System, user,
  assistant and tool messages go; an informational message goes only when one of its
  parts is `is_visible_ai` (as user text); task configs, entries and exits, compression
  markers and unknown messages are bookkeeping and never leave the store this way.
* **Imports** (`settle`): provider payloads pair a result with its call by id only. Once a
  whole payload is converted, each result gets its call's tool name and each answered call
  is marked answered (`is_loading` and `is_approval_pending` false), as `answer_tool_call`
  would have left it; unanswered calls stay open, so the store tracks them.
* **Tool results as text** (`result_text`): what a provider that wants a string gets. A
  result's `terminate` flag and `metadata` are for the agent, not the model: never sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from mindstore.formats.checks import as_dict, as_list, as_str
from mindstore.formats.stash import diff, read_entry, with_entry
from mindstore.model.base import JSON
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    InformationalMessage,
    MessageBase,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from mindstore.model.parts import (
    InformationalPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    UnknownPart,
)

Built = SystemMessage | UserMessage | AssistantMessage | ToolMessage | InformationalMessage
"""The messages an import builds (all of them typed: never an unknown message)."""


def turn_message(parts: list[Any], *, assistant: bool) -> Built:
    """The message one provider turn imports as: the model's side is an assistant
    message; on the user's side, a turn that carries a tool result is a tool message."""
    if assistant:
        return AssistantMessage(content=parts)
    if any(isinstance(part, ToolResultPart) for part in parts):
        return ToolMessage(content=parts)
    return UserMessage(content=parts)


def content_parts(
    content: Any, path: str, read: Callable[[Mapping[str, Any], str], Any | None]
) -> list[Any]:
    """A message's content as parts: a string is one text part; each block of a list is
    the part `read` makes of it (given its path, ``content[i]``, for errors), or is kept
    verbatim as an `UnknownPart` where `read` makes none."""
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[Any] = []
    for position, raw in enumerate(as_list(content, path)):
        where = f"{path}[{position}]"
        block = as_dict(raw, where)
        part = read(block, where)
        parts.append(UnknownPart.model_validate(dict(block)) if part is None else part)
    return parts


def text_block(block: Mapping[str, Any], path: str) -> TextPart | None:
    """A ``{"type": "text"}`` block as a text part (None for any other block)."""
    if block.get("type") != "text":
        return None
    return TextPart(text=as_str(block.get("text"), f"{path}.text"))


def text_parts(content: Any, path: str) -> list[Any]:
    """Text content as parts: a string, or `text_block`s (any other block verbatim)."""
    return content_parts(content, path, text_block)


def import_each(
    messages: Sequence[Mapping[str, Any]],
    fmt: str,
    read: Callable[[Mapping[str, Any], str], tuple[Built, JSON]],
    render: Callable[[Built, JSON], JSON],
) -> list[AnyMessage]:
    """The messages `read` builds from a list of one message a dict (each with its path,
    ``messages[i]``, for errors), each stashing the entry `read` returns plus the `diff`
    between the dict and what `render` makes of the message, so an export gives the
    dict back (formats/stash.py)."""
    out: list[AnyMessage] = []
    for index, raw in enumerate(as_list(messages, "messages")):
        path = f"messages[{index}]"
        data = as_dict(raw, path)
        message, entry = read(data, path)
        delta = diff(data, render(message, entry))
        message.metadata = with_entry(message.metadata, fmt, {**entry, "delta": delta})
        out.append(message)
    return out


def model_messages(messages: Sequence[AnyMessage]) -> Iterator[MessageBase]:
    """The messages a model may see, in order (see the module docstring)."""
    for message in messages:
        if isinstance(message, (SystemMessage, UserMessage, AssistantMessage, ToolMessage)):
            yield message
        elif isinstance(message, InformationalMessage) and visible_informational(message):
            yield UserMessage(
                id=message.id,
                task_id=message.task_id,
                started_ts=message.started_ts,
                content=informational_text_parts(message),
            )


Turn = tuple[str, list[MessageBase], JSON]
"""(side, messages merged into one provider turn, the stashed import entry of its first message)."""


def group_turns(
    messages: Sequence[AnyMessage], format_name: str, assistant_side: str
) -> tuple[list[SystemMessage], list[Turn]]:
    """The system messages, and the rest as provider turns (the model's side is
    `assistant_side`, everything else the user's).

    Providers that want alternating turns (Anthropic, Gemini) get consecutive messages of
    one side merged into one turn, unless a message carries its own stashed entry: it was
    one turn when it was imported, so it starts one again. Empty messages with no entry
    are left out.
    """
    systems: list[SystemMessage] = []
    turns: list[Turn] = []
    for message in model_messages(messages):
        if isinstance(message, SystemMessage):
            systems.append(message)
            continue
        entry = read_entry(message.metadata, format_name)
        if not message.content and not entry:
            continue
        side = assistant_side if isinstance(message, AssistantMessage) else "user"
        if turns and turns[-1][0] == side and not entry:
            turns[-1][1].append(message)
        else:
            turns.append((side, [message], entry))
    return systems, turns


def visible_informational(message: InformationalMessage) -> bool:
    return any(isinstance(p, InformationalPart) and p.is_visible_ai for p in message.content)


def informational_text_parts(message: InformationalMessage) -> list[Any]:
    """The text a model sees of a visible informational message: its text parts if it has
    any (a summary imported from another framework), else its visible parts' details."""
    texts = [part for part in message.content if isinstance(part, TextPart)]
    if texts:
        return texts
    return [
        TextPart(text=part.details)
        for part in message.content
        if isinstance(part, InformationalPart) and part.is_visible_ai and part.details
    ]


def usage_of(message: MessageBase) -> Usage | None:
    """The message's usage: its `usage`, else the flat counters of an assistant message."""
    if message.usage is not None:
        return message.usage
    if isinstance(message, AssistantMessage):
        counters = (
            message.tokens_in,
            message.tokens_out,
            message.cache_reads,
            message.cache_writes,
        )
        if any(counters):
            return Usage(
                input_tokens=message.tokens_in or 0,
                output_tokens=message.tokens_out or 0,
                cache_read_tokens=message.cache_reads or 0,
                cache_write_tokens=message.cache_writes or 0,
            )
    return None


# -- tool calls and results ---------------------------------------------------------


def dump_args(args: Any) -> str:
    """Tool arguments as the JSON string OpenAI's APIs carry (compact, key order kept)."""
    return json.dumps(args, ensure_ascii=False, separators=(",", ":"))


def load_args(arguments: Any) -> dict[str, Any]:
    """Arguments from their JSON string; `{}` when the model produced no JSON object
    (the exact string still round-trips through the format's stash)."""
    if isinstance(arguments, dict):
        return dict(arguments)
    if not isinstance(arguments, str):
        return {}
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def result_text(part: ToolResultPart) -> str:
    """A tool result as one string: its text contents, else its result (JSON unless it is
    already text), else its error."""
    texts = [c.text for c in part.tool_result_contents if c.type == "text" and c.text is not None]
    if texts:
        return "".join(texts)
    result = part.result
    if isinstance(result, str):
        text = result
    elif result is None or result == {}:
        text = ""
    else:
        text = json.dumps(result, ensure_ascii=False, default=str)
    if not text and part.is_error and part.error:
        return part.error
    return text


def settle(messages: list[AnyMessage]) -> list[AnyMessage]:
    """Name each result after its call and mark answered calls answered (in place)."""
    names: dict[str, str] = {}
    answered: set[str] = set()
    for message in messages:
        for part in getattr(message, "content", ()):
            if isinstance(part, ToolCallPart):
                names.setdefault(part.tool_call_id, part.tool_name)
            elif isinstance(part, ToolResultPart) and isinstance(message, ToolMessage):
                answered.add(part.tool_call_id)
                if not part.tool_name:
                    part.tool_name = names.get(part.tool_call_id, "")
    for message in messages:
        if isinstance(message, AssistantMessage):
            for part in message.content:
                if isinstance(part, ToolCallPart) and part.tool_call_id in answered:
                    part.is_loading = False
                    part.is_approval_pending = False
    return messages


def finished(messages: list[AnyMessage]) -> list[AnyMessage]:
    """Imported assistant turns are complete answers, not loading ones."""
    for message in messages:
        if isinstance(message, AssistantMessage) and message.status == "loading":
            message.status = "completed"
    return messages
