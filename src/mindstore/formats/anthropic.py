"""Anthropic Messages `{"system": ..., "messages": [...]}` <-> mindstore messages.

`client.messages.create(model=..., max_tokens=..., **to_anthropic(messages))` sends a
conversation; `from_anthropic(payload)` imports one (other request keys are ignored).

| Anthropic | mindstore |
|---|---|
| `system` (a string or text blocks) | one `SystemMessage` |
| `user` turn | `UserMessage`; a turn with `tool_result` blocks is one `ToolMessage` (results and the rest, in order) |
| `assistant` turn | `AssistantMessage` |
| `text` | `TextPart` |
| `image` (base64, url, file source) | `ImagePart` (inline base64 with its media type, or a `MediaRef`) |
| `document` (base64, url, file source) | `DocumentPart` |
| `tool_use` | `ToolCallPart` (`input` -> `args`) |
| `tool_result` (`content`, `is_error`) | `ToolResultPart` (text -> `result`; blocks -> `tool_result_contents`) |
| `thinking` (`signature`) | `ReasoningPart` (`reasoning`, `signature`) |
| `redacted_thinking` | `RedactedThinkingPart` |

On export, consecutive user-side messages (user, tool, visible informational) form one user
turn, so parallel results answered one by one still follow their calls in one turn, as the
API requires; every system message joins the top-level `system`. Reasoning without a
signature cannot be sent back (the API verifies it) and is left out. Canonical form:
content is a string when a turn is exactly one text, `is_error` appears only when true,
`system` only when there is one.
"""  # noqa: E501 - a mapping table reads best one row a line

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mindstore.formats.checks import as_args, as_dict, as_list, as_name, as_str, fail, shown
from mindstore.formats.conversation import (
    finished,
    group_turns,
    result_text,
    settle,
    text_parts,
    turn_message,
)
from mindstore.formats.media import inline_image, sniff_mime
from mindstore.formats.outgoing import NO_OUTPUT, outgoing, refused_by_anthropic
from mindstore.formats.stash import diff, patch, read_entry, with_entry
from mindstore.model.base import JSON
from mindstore.model.messages import (
    AnyMessage,
    MessageBase,
    SystemMessage,
)
from mindstore.model.parts import (
    DocumentPart,
    FilePart,
    ImagePart,
    MediaRef,
    ReasoningPart,
    RedactedThinkingPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultContent,
    ToolResultPart,
    UnknownPart,
)

FORMAT = "anthropic"


# -- import -----------------------------------------------------------------------------


def from_anthropic(payload: Mapping[str, Any]) -> list[AnyMessage]:
    """Typed mindstore messages from an Anthropic Messages request body.

    Args:
        payload: The body: `system` (optional) and `messages`.

    Returns:
        Typed messages ready for `tasks.add_messages`, in order.

    Raises:
        ValidationError: A malformed payload, naming where (e.g. `messages[2].content`).
    """
    body = as_dict(payload, "payload")
    out: list[AnyMessage] = []
    if body.get("system") is not None:
        system = SystemMessage(content=text_parts(body["system"], "system"))
        blocks = isinstance(body["system"], list) and not isinstance(_render_system([system]), list)
        delta = diff({"system": body["system"]}, {"system": _render_system([system], blocks)})
        system.metadata = with_entry(None, FORMAT, {"delta": delta, "blocks": blocks})
        out.append(system)
    previous: str | None = None
    for index, raw in enumerate(as_list(body.get("messages"), "messages")):
        path = f"messages[{index}]"
        turn = as_dict(raw, path)
        role = turn.get("role")
        if role not in ("user", "assistant"):
            raise fail(f"{path}.role", f"expected user or assistant, got {shown(role)}")
        parts = _import_content(turn.get("content"), f"{path}.content")
        message = turn_message(parts, assistant=role == "assistant")
        content = turn.get("content")
        blocks = isinstance(content, list) and isinstance(
            _render_turn(role, [message])["content"], str
        )
        delta = diff(turn, _render_turn(role, [message], blocks))
        entry = {"delta": delta, "new_turn": role == previous, "blocks": blocks}
        message.metadata = with_entry(None, FORMAT, entry)
        previous = role
        out.append(message)
    return finished(settle(out))


def _import_content(content: Any, path: str) -> list[Any]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    return [_import_block(raw, f"{path}[{i}]") for i, raw in enumerate(as_list(content, path))]


def _import_block(raw: Any, path: str) -> Any:
    block = as_dict(raw, path)
    kind = block.get("type")
    if kind == "text":
        return TextPart(text=as_str(block.get("text"), f"{path}.text"))
    if kind == "image":
        return _import_image(as_dict(block.get("source"), f"{path}.source"), f"{path}.source")
    if kind == "document":
        media = _import_source(as_dict(block.get("source"), f"{path}.source"), f"{path}.source")
        return (
            DocumentPart(media=media)
            if media is not None
            else UnknownPart.model_validate(dict(block))
        )
    if kind == "tool_use":
        return ToolCallPart(
            tool_call_id=as_name(block.get("id"), f"{path}.id"),
            tool_name=as_str(block.get("name"), f"{path}.name"),
            args=as_args(block.get("input", {}), f"{path}.input"),
        )
    if kind == "tool_result":
        return _import_result(block, path)
    if kind == "thinking":
        return ReasoningPart(
            reasoning=as_str(block.get("thinking"), f"{path}.thinking"),
            signature=as_str(block.get("signature"), f"{path}.signature"),
        )
    if kind == "redacted_thinking":
        return RedactedThinkingPart(data=as_str(block.get("data"), f"{path}.data"))
    return UnknownPart.model_validate(dict(block))


def _import_source(source: Mapping[str, Any], path: str) -> MediaRef | None:
    kind = source.get("type")
    if kind == "base64":
        return MediaRef(
            kind="data",
            data_base64=as_str(source.get("data"), f"{path}.data"),
            mime_type=as_str(source.get("media_type"), f"{path}.media_type"),
        )
    if kind == "url":
        return MediaRef(kind="url", url=as_str(source.get("url"), f"{path}.url"))
    if kind == "file":
        return MediaRef(kind="file_id", file_id=as_str(source.get("file_id"), f"{path}.file_id"))
    return None


def _import_image(source: Mapping[str, Any], path: str) -> Any:
    media = _import_source(source, path)
    if media is None:
        return UnknownPart.model_validate({"type": "image", "source": dict(source)})
    if media.kind == "data":
        return ImagePart(image=media.data_base64 or "", mime_type=media.mime_type)
    return ImagePart(media=media)


def _import_result(block: Mapping[str, Any], path: str) -> ToolResultPart:
    part = ToolResultPart(
        tool_call_id=as_name(block.get("tool_use_id"), f"{path}.tool_use_id"),
        tool_name="",
        result="",
        is_error=bool(block.get("is_error", False)),
    )
    content = block.get("content", "")
    if isinstance(content, str):
        part.result = content
        return part
    for position, raw in enumerate(as_list(content, f"{path}.content")):
        where = f"{path}.content[{position}]"
        item = as_dict(raw, where)
        if item.get("type") == "text":
            text = as_str(item.get("text"), f"{where}.text")
            part.tool_result_contents.append(ToolResultContent(type="text", text=text))
        elif item.get("type") == "image":
            media = _import_source(
                as_dict(item.get("source"), f"{where}.source"), f"{where}.source"
            )
            if media is not None and media.kind == "data":
                part.tool_result_contents.append(
                    ToolResultContent(
                        type="image", image_data=media.data_base64, mime_type=media.mime_type
                    )
                )
    return part


# -- export -----------------------------------------------------------------------------


def to_anthropic(messages: Sequence[AnyMessage]) -> JSON:
    """The `system` and `messages` of an Anthropic Messages request (see the module doc).

    Args:
        messages: mindstore messages (e.g. `await tasks.messages(task_id)` or a
            `ContextWindow`).

    Returns:
        `{"system": ..., "messages": [...]}` (`system` only when there is one).
    """
    # redacted parts as placeholders; a message with nothing this format carries (only
    # unsigned reasoning, say) is left out before turns form, so its neighbours merge
    sent = outgoing(messages, FORMAT, _carries, blank=refused_by_anthropic)
    systems, turns = group_turns(sent, FORMAT, "assistant")
    out: JSON = {}
    if systems:
        first = read_entry(systems[0].metadata, FORMAT)
        system = patch(
            {"system": _render_system(systems, bool(first.get("blocks")))}, first.get("delta")
        )
        if (kept := _filled(system["system"])) is not None:
            out["system"] = kept
    rendered = [
        patch(_render_turn(role, group, bool(entry.get("blocks"))), entry.get("delta"))
        for role, group, entry in turns
    ]
    # The API refuses empty content and empty text blocks, even where an import had them
    out["messages"] = [
        {**turn, "content": content}
        for turn in rendered
        if (content := _filled(turn.get("content"))) is not None
    ]
    return out


def _filled(content: Any) -> Any:
    """`content` without the text blocks the API refuses; None when nothing is left."""
    if isinstance(content, str):
        return None if refused_by_anthropic(content) else content
    if not isinstance(content, list):
        return content
    kept = [block for block in content if not _refused_block(block)]
    return kept or None


def _refused_block(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
        and refused_by_anthropic(block["text"])
    )


def _render_system(systems: Sequence[SystemMessage], as_blocks: bool = False) -> Any:
    blocks = [
        {"type": "text", "text": p.text}
        for m in systems
        for p in m.content
        if isinstance(p, TextPart)
    ]
    if len(blocks) == 1 and not as_blocks:
        return blocks[0]["text"]
    return blocks


def _render_turn(role: str, group: Sequence[MessageBase], as_blocks: bool = False) -> JSON:
    """One turn; content is a string for a lone text unless `as_blocks` (as imported)."""
    blocks = [
        block for message in group for part in message.content for block in _render_part(part)
    ]
    if len(blocks) == 1 and blocks[0]["type"] == "text" and not as_blocks:
        return {"role": role, "content": blocks[0]["text"]}
    return {"role": role, "content": blocks}


def _render_source(media: MediaRef | None, inline: tuple[str, str] | None) -> JSON | None:
    if inline is not None:
        return {"type": "base64", "media_type": inline[0], "data": inline[1]}
    if media is None:
        return None
    if media.data_base64:
        return {"type": "base64", "media_type": media.mime_type or sniff_mime(media.data_base64),
                "data": media.data_base64}  # fmt: skip
    if media.url:
        return {"type": "url", "url": media.url}
    if media.file_id:
        return {"type": "file", "file_id": media.file_id}
    return None


def _carries(message: MessageBase) -> bool:
    return any(_render_part(part) for part in message.content)


def _render_part(part: Any) -> list[JSON]:
    if isinstance(part, TextPart):
        return [{"type": "text", "text": part.text}]
    if isinstance(part, ImagePart):
        source = _render_source(part.media, inline_image(part) if part.image else None)
        return [{"type": "image", "source": source}] if source else []
    if isinstance(part, DocumentPart):
        source = _render_source(part.media, None)
        return [{"type": "document", "source": source}] if source else []
    if isinstance(part, FilePart):
        return [
            {
                "type": "document",
                "source": {"type": "base64", "media_type": part.mime_type, "data": part.data},
            }
        ]
    if isinstance(part, ToolCallPart):
        return [
            {
                "type": "tool_use",
                "id": part.tool_call_id,
                "name": part.tool_name,
                "input": part.args,
            }
        ]
    if isinstance(part, ToolResultPart):
        block: JSON = {
            "type": "tool_result",
            "tool_use_id": part.tool_call_id,
            "content": _result(part),
        }
        if part.is_error:
            block["is_error"] = True
        return [block]
    if isinstance(part, ReasoningPart) and part.signature:
        return [{"type": "thinking", "thinking": part.reasoning, "signature": part.signature}]
    if isinstance(part, ThinkingPart) and part.signature:
        return [{"type": "thinking", "thinking": part.content, "signature": part.signature}]
    if isinstance(part, RedactedThinkingPart):
        return [{"type": "redacted_thinking", "data": part.data}]
    return []


def _result(part: ToolResultPart) -> Any:
    """The result's content. The API refuses a blank text block anywhere, and an empty
    content on an error result: an error without text is sent as `NO_OUTPUT`."""
    empty = NO_OUTPUT if part.is_error else ""
    if not part.tool_result_contents:
        text = result_text(part)
        return empty if refused_by_anthropic(text) else text
    blocks: list[JSON] = []
    for content in part.tool_result_contents:
        if content.type == "text" and content.text and not refused_by_anthropic(content.text):
            blocks.append({"type": "text", "text": content.text})
        elif content.type == "image" and content.image_data:
            mime = content.mime_type or sniff_mime(content.image_data)
            blocks.append(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": mime, "data": content.image_data},
                }
            )
    return blocks or empty
