"""OpenAI Responses input items <-> mindstore messages.

`client.responses.create(model=..., input=to_responses(messages))` sends a conversation;
`from_responses(items)` imports an `input` list (or a stored response's `output`).

| Responses item | mindstore |
|---|---|
| `message` (`user` / `system` / `developer`): `input_text`, `input_image`, `input_file` | `UserMessage` / `SystemMessage`: `TextPart`, `ImagePart`, `FilePart` / `DocumentPart` |
| consecutive `reasoning`, assistant `message`, `function_call` (and other `*_call`) items | one `AssistantMessage`: `ReasoningPart`, `TextPart`s, `ToolCallPart`s (other calls kept verbatim) |
| `reasoning` (`summary`, `encrypted_content`) | `ReasoningPart` (summaries joined by a blank line, `signature` = `encrypted_content`) |
| `function_call` (`call_id`, `name`, `arguments`) | `ToolCallPart` |
| `function_call_output` (`call_id`, `output`) | `ToolMessage` with one `ToolResultPart` |

One model turn is one assistant message here, however many items the API split it into;
the items' ids, order and part counts are kept in the stash so the turn is given back item
by item. A message item's id becomes the message id. Reasoning can only be sent back as
the item it came from (the API needs its `rs_` id), so reasoning from elsewhere is left
out. An assistant text without an item id is sent as an easy input message (content as
one string). Images need a `detail`: `"auto"` unless the import said otherwise.
"""  # noqa: E501 - a mapping table reads best one row a line

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mindstore.formats.checks import as_dict, as_list, as_name, as_str, fail, shown
from mindstore.formats.conversation import (
    Built,
    content_parts,
    dump_args,
    finished,
    load_args,
    result_text,
    settle,
)
from mindstore.formats.media import (
    data_url,
    image_file_id,
    image_from_url,
    image_url,
    parse_data_url,
)
from mindstore.formats.outgoing import outgoing, refused_by_openai
from mindstore.formats.stash import diff, patch, read_entry, with_entry
from mindstore.model.base import JSON, new_id
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    MessageBase,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from mindstore.model.parts import (
    DocumentPart,
    FilePart,
    ImagePart,
    MediaRef,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultContent,
    ToolResultPart,
    UnknownPart,
)

FORMAT = "responses"
SUMMARY_SEPARATOR = "\n\n"
INPUT_ROLES = ("user", "system", "developer")


def _kind(item: Mapping[str, Any]) -> str | None:
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return kind if isinstance(kind, str) else None


def _assistant_side(item: Mapping[str, Any], kind: str | None) -> bool:
    if kind == "message":
        return item.get("role") == "assistant"
    return kind in ("reasoning", "function_call") or (kind or "").endswith("_call")


# -- import -----------------------------------------------------------------------------


def from_responses(items: Sequence[Mapping[str, Any]]) -> list[AnyMessage]:
    """Typed mindstore messages from Responses input items (see the module doc).

    Args:
        items: The `input` items (dicts).

    Returns:
        Typed messages ready for `tasks.add_messages`, in order.

    Raises:
        ValidationError: A malformed payload, naming where (e.g. `messages[2].content`).
    """
    out: list[AnyMessage] = []
    group: AssistantMessage | None = None
    descriptors: list[JSON] = []
    used: set[str] = set()

    def close() -> None:
        nonlocal group, descriptors
        if group is not None:
            group.metadata = with_entry(None, FORMAT, {"items": descriptors})
            out.append(group)
        group, descriptors = None, []

    for index, raw in enumerate(as_list(items, "input")):
        path = f"input[{index}]"
        item = as_dict(raw, path)
        kind = _kind(item)
        item_id = item.get("id")
        if item_id is not None:
            as_name(item_id, f"{path}.id")
        if _assistant_side(item, kind):
            if group is None:
                group = AssistantMessage(id=_fresh(item_id, used))
            parts = _import_assistant_item(item, kind, path)
            rendered = _render_item(kind, parts, item_id)
            descriptor: JSON = {
                "kind": kind,
                "parts": len(parts),
                "id": item_id,
                "delta": diff(item, rendered),
            }
            descriptors.append({k: v for k, v in descriptor.items() if v not in (None, {})})
            group.content.extend(parts)
            continue
        close()
        if kind == "message":
            role = item.get("role")
            if role not in INPUT_ROLES:
                raise fail(
                    f"{path}.role",
                    f"expected user, system, developer or assistant, got {shown(role)}",
                )
            cls = SystemMessage if role in ("system", "developer") else UserMessage
            message: Built = cls(
                id=_fresh(item_id, used),
                content=_input_parts(item.get("content"), f"{path}.content"),
            )
        elif kind == "function_call_output":
            message = ToolMessage(id=_fresh(item_id, used), content=[_import_output(item, path)])
        else:
            message = UserMessage(
                id=_fresh(item_id, used), content=[UnknownPart.model_validate(dict(item))]
            )
        verbatim = kind not in ("message", "function_call_output")
        message.metadata = with_entry(None, FORMAT, {"verbatim": verbatim})
        blocks = isinstance(item.get("content"), list) and isinstance(
            _render(message)[0].get("content"), str
        )
        delta = diff(item, _render(message, blocks)[0])
        message.metadata = with_entry(
            None, FORMAT, {"delta": delta, "verbatim": verbatim, "blocks": blocks}
        )
        out.append(message)
    close()
    return finished(settle(out))


def _fresh(item_id: Any, used: set[str]) -> str:
    """The item's id as the message id (once per payload), else a new id."""
    if isinstance(item_id, str) and item_id not in used:
        used.add(item_id)
        return item_id
    return new_id()


def _import_assistant_item(item: Mapping[str, Any], kind: str | None, path: str) -> list[Any]:
    if kind == "reasoning":
        summary = as_list(item.get("summary", []), f"{path}.summary")
        texts = [as_str(as_dict(s, f"{path}.summary[{i}]").get("text"), f"{path}.summary[{i}].text")
                 for i, s in enumerate(summary)]  # fmt: skip
        signature = item.get("encrypted_content")
        return [
            ReasoningPart(
                reasoning=SUMMARY_SEPARATOR.join(texts),
                signature=signature if isinstance(signature, str) else None,
            )
        ]
    if kind == "function_call":
        return [
            ToolCallPart(
                tool_call_id=as_name(item.get("call_id"), f"{path}.call_id"),
                tool_name=as_str(item.get("name"), f"{path}.name"),
                args=load_args(as_str(item.get("arguments", "{}"), f"{path}.arguments")),
            )
        ]
    if kind == "message":
        content = item.get("content")
        if isinstance(content, str):
            return [TextPart(text=content)]
        parts: list[Any] = []
        for position, raw in enumerate(as_list(content, f"{path}.content")):
            block = as_dict(raw, f"{path}.content[{position}]")
            if block.get("type") in ("output_text", "input_text"):
                parts.append(
                    TextPart(text=as_str(block.get("text"), f"{path}.content[{position}].text"))
                )
            else:
                parts.append(UnknownPart.model_validate(dict(block)))
        return parts
    return [UnknownPart.model_validate(dict(item))]


def _input_parts(content: Any, path: str) -> list[Any]:
    return content_parts(content, path, _input_block)


def _input_block(block: Mapping[str, Any], where: str) -> Any | None:
    kind = block.get("type")
    if kind in ("input_text", "output_text"):
        return TextPart(text=as_str(block.get("text"), f"{where}.text"))
    if kind == "input_image" and isinstance(block.get("image_url"), str):
        return image_from_url(block["image_url"])
    if kind == "input_image" and isinstance(block.get("file_id"), str):
        return ImagePart(media=MediaRef(kind="file_id", file_id=block["file_id"]))
    if kind == "input_file" and isinstance(block.get("file_data"), str):
        parsed = parse_data_url(block["file_data"])
        mime, data = parsed if parsed is not None else ("", block["file_data"])
        return FilePart(
            data=data, mime_type=mime or "application/octet-stream", filename=block.get("filename")
        )
    if kind == "input_file" and isinstance(block.get("file_id") or block.get("file_url"), str):
        media = (MediaRef(kind="file_id", file_id=block["file_id"]) if block.get("file_id")
                 else MediaRef(kind="url", url=block["file_url"]))  # fmt: skip
        media.filename = block.get("filename")
        return DocumentPart(media=media)
    return None


def _import_output(item: Mapping[str, Any], path: str) -> ToolResultPart:
    part = ToolResultPart(
        tool_call_id=as_name(item.get("call_id"), f"{path}.call_id"), tool_name="", result=""
    )
    output = item.get("output", "")
    if isinstance(output, str):
        part.result = output
        return part
    for position, raw in enumerate(as_list(output, f"{path}.output")):
        block = as_dict(raw, f"{path}.output[{position}]")
        if block.get("type") == "input_text" and isinstance(block.get("text"), str):
            part.tool_result_contents.append(ToolResultContent(type="text", text=block["text"]))
        elif block.get("type") == "input_image" and isinstance(block.get("image_url"), str):
            parsed = parse_data_url(block["image_url"])
            if parsed is not None:
                part.tool_result_contents.append(
                    ToolResultContent(
                        type="image", image_data=parsed[1], mime_type=parsed[0] or None
                    )
                )
    return part


# -- export -----------------------------------------------------------------------------


def to_responses(messages: Sequence[AnyMessage]) -> list[JSON]:
    """Responses `input` items for these mindstore messages (see the module doc).

    Args:
        messages: mindstore messages (e.g. `await tasks.messages(task_id)` or a
            `ContextWindow`).

    Returns:
        The `input` items of a request.
    """
    # an empty turn (nothing this format carries, or only empty text) is never sent, not
    # even one imported that way
    return _items(outgoing(messages, FORMAT, blank=refused_by_openai), sent=True)


def stored_responses(messages: Sequence[AnyMessage]) -> list[JSON]:
    """The Responses items these messages hold, as they were imported: what a store of
    items (the OpenAI Agents session) reads back.

    `to_responses` is what a model is sent, and leaves out what the API refuses (an empty
    turn, an item with nothing it carries): that is an export rule, and never applies to
    the items a caller stored. Redacted content reads as the exports' placeholders.

    Args:
        messages: mindstore messages.

    Returns:
        Every item they hold, in order.
    """
    return _items(outgoing(messages, FORMAT), sent=False)


def _items(messages: Sequence[MessageBase], *, sent: bool) -> list[JSON]:
    """The items of messages `outgoing` gave (`sent`: without empty turns)."""
    out: list[JSON] = []
    for message in messages:  # redacted: placeholders
        entry = read_entry(message.metadata, FORMAT)
        if not message.content and not entry:
            continue
        rendered = _render(message, bool(entry.get("blocks")))
        if rendered and not isinstance(message, AssistantMessage):
            rendered[0] = patch(rendered[0], entry.get("delta"))
        out.extend(item for item in rendered if not (sent and _empty(item)))
    return out


def _empty(item: JSON) -> bool:
    if item.get("type", "message") != "message" or item.get("role") == "assistant":
        return False
    content = item.get("content")
    if isinstance(content, list):
        return all(b.get("type") == "input_text" and b.get("text") == "" for b in content)
    return content in (None, "")


def _render(message: MessageBase, blocks: bool = False) -> list[JSON]:
    """Canonical items of one message (`blocks`: a lone text stays a list of parts)."""
    if isinstance(message, AssistantMessage):
        return _render_assistant(message)
    if isinstance(message, ToolMessage):
        out: list[JSON] = []
        extra: list[JSON] = []
        for part in message.content:
            if isinstance(part, ToolResultPart):
                out.append(
                    {
                        "type": "function_call_output",
                        "call_id": part.tool_call_id,
                        "output": _output(part),
                    }
                )
            else:
                extra.extend(_render_input_part(part))
        if extra:
            out.append({"type": "message", "role": "user", "content": extra})
        return out
    if read_entry(message.metadata, FORMAT).get("verbatim"):
        return [p.to_dict() for p in message.content if isinstance(p, UnknownPart)][:1]
    role = "system" if isinstance(message, SystemMessage) else "user"
    parts = [block for part in message.content for block in _render_input_part(part)]
    if len(parts) == 1 and parts[0]["type"] == "input_text" and not blocks:
        return [{"type": "message", "role": role, "content": parts[0]["text"]}]
    return [{"type": "message", "role": role, "content": parts}]


def _render_assistant(message: AssistantMessage) -> list[JSON]:
    """Item by item as imported (stash), then any later parts in canonical items."""
    parts = list(message.content)
    out: list[JSON] = []
    position = 0
    for descriptor in read_entry(message.metadata, FORMAT).get("items", []):
        count = int(descriptor.get("parts", 0))
        if position + count > len(parts):
            break
        chunk = parts[position : position + count]
        out.append(
            patch(
                _render_item(descriptor.get("kind"), chunk, descriptor.get("id")),
                descriptor.get("delta"),
            )
        )
        position += count
    texts: list[TextPart] = []
    for part in parts[position:]:
        if isinstance(part, TextPart):
            texts.append(part)
            continue
        if texts:
            out.append(_render_item("message", texts, None))
            texts = []
        if isinstance(part, ToolCallPart):
            out.append(_render_item("function_call", [part], None))
    if texts:
        out.append(_render_item("message", texts, None))
    return out


def _render_item(kind: str | None, parts: Sequence[Any], item_id: Any) -> JSON:
    """The canonical item for an item's parts (its id from the stash, if it had one)."""
    if kind == "reasoning" and len(parts) == 1 and isinstance(parts[0], ReasoningPart):
        part = parts[0]
        texts = part.reasoning.split(SUMMARY_SEPARATOR) if part.reasoning else []
        item: JSON = {
            "type": "reasoning",
            "id": item_id,
            "summary": [{"type": "summary_text", "text": text} for text in texts],
        }
        if part.signature is not None:
            item["encrypted_content"] = part.signature
        return item
    if kind == "function_call" and len(parts) == 1 and isinstance(parts[0], ToolCallPart):
        call = parts[0]
        item = {"type": "function_call", "call_id": call.tool_call_id, "name": call.tool_name,
                "arguments": dump_args(call.args)}  # fmt: skip
        return {**item, "id": item_id} if item_id is not None else item
    if kind == "message":
        texts = [p.text for p in parts if isinstance(p, TextPart)]
        if item_id is None:
            return {"type": "message", "role": "assistant", "content": "".join(texts)}
        content = [{"type": "output_text", "text": text, "annotations": []} for text in texts]
        return {
            "type": "message",
            "role": "assistant",
            "id": item_id,
            "status": "completed",
            "content": content,
        }
    if len(parts) == 1 and isinstance(parts[0], UnknownPart):
        return parts[0].to_dict()
    return {}


def _render_input_part(part: Any) -> list[JSON]:
    if isinstance(part, TextPart):
        return [{"type": "input_text", "text": part.text}]
    if isinstance(part, ImagePart):
        url = image_url(part)
        if url is not None:
            return [{"type": "input_image", "image_url": url, "detail": "auto"}]
        file_id = image_file_id(part)
        return [{"type": "input_image", "file_id": file_id, "detail": "auto"}] if file_id else []
    if isinstance(part, FilePart):
        block: JSON = {"type": "input_file", "file_data": data_url(part.mime_type, part.data)}
        return [{**block, "filename": part.filename} if part.filename is not None else block]
    if isinstance(part, DocumentPart):
        media = part.media
        if media.file_id:
            block = {"type": "input_file", "file_id": media.file_id}
        elif media.url:
            block = {"type": "input_file", "file_url": media.url}
        else:
            return []
        return [{**block, "filename": media.filename} if media.filename is not None else block]
    return []


def _output(part: ToolResultPart) -> Any:
    if not part.tool_result_contents:
        return result_text(part)
    blocks: list[JSON] = []
    for content in part.tool_result_contents:
        if content.type == "text" and content.text is not None:
            blocks.append({"type": "input_text", "text": content.text})
        elif content.type == "image" and content.image_data:
            url = data_url(content.mime_type or "image/png", content.image_data)
            blocks.append({"type": "input_image", "image_url": url, "detail": "auto"})
    return blocks
