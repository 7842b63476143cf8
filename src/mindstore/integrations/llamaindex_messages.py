"""LlamaIndex `ChatMessage`s <-> mindstore messages, and a chat's statuses (pure, no I/O).

A `ChatMessage` is a role, a list of blocks and `additional_kwargs`. Stored, it is typed:

* `assistant` (and `model`, `chatbot`) is an `AssistantMessage`, `system` and `developer` a
  `SystemMessage`, a `tool` message holding only text and naming its call
  (`additional_kwargs["tool_call_id"]`, as the agents write it) a `ToolMessage` answering
  that call, any other (`user`, `function`, ...) a `UserMessage`;
* each text block is a `TextPart`, each tool call block a `ToolCallPart` (so the task's
  header tracks the call until its result is stored); any other block (image, audio,
  ...) is kept verbatim as an unknown part of type `llamaindex_block`, in its place;
* usage and model, when the message carries them in `additional_kwargs` (`prompt_tokens`,
  `completion_tokens`, `model`, as LlamaIndex's OpenAI-style LLMs report them), are the
  assistant message's `usage` and `model_id`, so analytics count them.

What the typed message does not hold (the role's spelling, `additional_kwargs`, a block's
extra fields) is kept in the message's metadata under `llamaindex` as the difference from
the canonical rendering (`mindstore.formats.stash`), so `to_chat(from_chat(m)) == m`.

Statuses. A task is append-only, so a chat's statuses are compression checkpoints the
store appends (`status_marker`): one that archives lists the archived messages (LlamaIndex's
`ARCHIVED`: out of the active queue, kept for memory blocks and history), one that deletes
lists the deleted ones (redacted too, so their content is gone). `chat_view` reads them
back: each chat message with its stored index and status, in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from llama_index.core.base.llms.types import ChatMessage

from mindstore.errors import ValidationError
from mindstore.formats.conversation import result_text
from mindstore.formats.stash import diff, patch, read_entry, with_entry
from mindstore.ids import is_name
from mindstore.integrations._tool_args import tool_args
from mindstore.model.base import new_id
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    CompressionMessage,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from mindstore.model.parts import TextPart, ToolCallPart, ToolResultPart, UnknownPart

FORMAT = "llamaindex"
BLOCK = "llamaindex_block"
"""The part type of a LlamaIndex block kept verbatim (never a type mindstore parses)."""
ASSISTANT_ROLES = ("assistant", "model", "chatbot")
SYSTEM_ROLES = ("system", "developer")
Status = Literal["active", "archived", "deleted"]
STRATEGY = "llamaindex"
"""The strategy name of the checkpoints that record statuses."""


def from_chat(message: Any, where: str = "message", calls: set[str] | None = None) -> AnyMessage:
    """The typed mindstore message of one `ChatMessage` (see the module doc).

    `calls` holds the ids of the task's open tool calls (updated here): a call block whose
    id is open already, and a tool message for a call that is not open, stay verbatim, so
    any sequence LlamaIndex accepts is stored (the header tracks what pairs up).

    Raises:
        ValidationError: Not a `ChatMessage`, naming `where`.
    """
    if not isinstance(message, ChatMessage):
        raise ValidationError(f"{where}: expected a ChatMessage, got {type(message).__name__}")
    open_calls = set() if calls is None else calls
    original = message.model_dump(mode="json")
    role = str(original.get("role"))
    parts: list[Any] = []
    for block in original.get("blocks") or []:
        if block.get("block_type") == "text" and isinstance(block.get("text"), str):
            parts.append(TextPart(text=block["text"]))
        elif (
            _is_call(block) and role in ASSISTANT_ROLES and block["tool_call_id"] not in open_calls
        ):
            open_calls.add(block["tool_call_id"])
            parts.append(
                ToolCallPart(
                    tool_call_id=block["tool_call_id"],
                    tool_name=block["tool_name"],
                    args=tool_args(block.get("tool_kwargs")),
                )
            )
        else:
            parts.append(UnknownPart.model_validate({"type": BLOCK, "block": block}))
    extra = original.get("additional_kwargs") or {}
    call_id = extra.get("tool_call_id")
    stored: AnyMessage
    if role == "tool" and call_id in open_calls and all(isinstance(p, TextPart) for p in parts):
        open_calls.discard(call_id)
        result = ToolResultPart(
            tool_call_id=call_id,
            tool_name=str(extra.get("name") or ""),
            result="".join(p.text for p in parts),
        )
        stored = ToolMessage(id=new_id(), content=[result])
    elif role in ASSISTANT_ROLES:
        stored = AssistantMessage(
            id=new_id(), content=parts, status="completed", **_usage(original)
        )
    elif role in SYSTEM_ROLES:
        stored = SystemMessage(id=new_id(), content=parts)
    else:
        stored = UserMessage(id=new_id(), content=parts)
    stored.metadata = with_entry(None, FORMAT, {"delta": diff(original, _render(stored))})
    return stored


def _is_call(block: dict[str, Any]) -> bool:
    return (
        block.get("block_type") == "tool_call"
        and is_name(block.get("tool_call_id"))
        and isinstance(block.get("tool_name"), str)
        and bool(block["tool_name"])
    )


def _usage(original: dict[str, Any]) -> dict[str, Any]:
    extra = original.get("additional_kwargs") or {}
    found: dict[str, Any] = {}
    tokens_in, tokens_out = extra.get("prompt_tokens"), extra.get("completion_tokens")
    if isinstance(tokens_in, int) or isinstance(tokens_out, int):
        found["usage"] = Usage(
            input_tokens=tokens_in if isinstance(tokens_in, int) and tokens_in > 0 else 0,
            output_tokens=tokens_out if isinstance(tokens_out, int) and tokens_out > 0 else 0,
        )
    if isinstance(extra.get("model"), str) and extra["model"]:
        found["model_id"] = extra["model"]
    return found


def _render(message: AnyMessage) -> dict[str, Any]:
    """The canonical `ChatMessage` dump of a stored message."""
    if isinstance(message, ToolMessage):
        results = [p for p in message.content if isinstance(p, ToolResultPart)]
        first = results[0] if results else None
        return {
            "role": "tool",
            "additional_kwargs": {
                "tool_call_id": first.tool_call_id if first else "",
                "name": first.tool_name if first else "",
            },
            "blocks": [{"block_type": "text", "text": result_text(p)} for p in results],
        }
    if isinstance(message, AssistantMessage):
        role = "assistant"
    elif isinstance(message, SystemMessage):
        role = "system"
    else:
        role = "user"
    blocks: list[Any] = []
    for part in message.content:
        if isinstance(part, TextPart):
            blocks.append({"block_type": "text", "text": part.text})
        elif isinstance(part, ToolCallPart):
            blocks.append(
                {
                    "block_type": "tool_call",
                    "tool_call_id": part.tool_call_id,
                    "tool_name": part.tool_name,
                    "tool_kwargs": part.args,
                }
            )
        elif isinstance(part, UnknownPart) and part.raw.get("type") == BLOCK:
            blocks.append(dict(part.raw.get("block") or {}))
    return {"role": role, "additional_kwargs": {}, "blocks": blocks}


def to_chat(message: AnyMessage) -> ChatMessage:
    """The `ChatMessage` of a stored message: exactly the one `from_chat` was given; other
    user, assistant and system messages canonically."""
    entry = read_entry(getattr(message, "metadata", None), FORMAT)
    return ChatMessage.model_validate(patch(_render(message), entry.get("delta")))


def is_chat(message: AnyMessage) -> bool:
    """A message a LlamaIndex chat shows (user, assistant, system, tool)."""
    return isinstance(message, (UserMessage, AssistantMessage, SystemMessage, ToolMessage))


def status_marker(status: Status, messages: Sequence[tuple[int, AnyMessage]]) -> Marker:
    """What the checkpoint recording `status` for these (index, message) pairs holds."""
    ids = [m.id for _, m in messages]
    indexes = [i for i, _ in messages]
    return Marker(
        start=min(indexes), end=max(indexes), ids=ids, metadata={FORMAT: {"status": status}}
    )


@dataclass(frozen=True)
class Marker:
    """The fields of a status checkpoint (`tasks.add_compression_message`)."""

    start: int
    end: int
    ids: list[str]
    metadata: dict[str, Any]


@dataclass(frozen=True)
class Entry:
    """One chat message of a task: its stored index, its status and itself."""

    index: int
    status: Status
    message: AnyMessage


def chat_view(stored: Sequence[AnyMessage]) -> list[Entry]:
    """The chat messages of a task in order, with their statuses (see the module doc)."""
    marked: dict[str, Status] = {}
    for message in stored:
        if isinstance(message, CompressionMessage):
            for part in message.compression_parts():
                status = read_entry(part.metadata, FORMAT).get("status")
                if status in ("archived", "deleted"):
                    for message_id in part.compressed_message_ids:
                        if marked.get(message_id) != "deleted":
                            marked[message_id] = status
    return [
        Entry(index, marked.get(message.id, "active"), message)
        for index, message in enumerate(stored)
        if is_chat(message)
    ]
