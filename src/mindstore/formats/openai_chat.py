"""OpenAI Chat Completions messages <-> mindstore messages.

`to_openai_chat(messages)` gives the `messages` argument of
`client.chat.completions.create(...)`; `from_openai_chat(messages)` imports such a list.

| Chat Completions | mindstore |
|---|---|
| `system` / `developer` message | `SystemMessage` (text parts; `developer` kept in the stash) |
| `user` message: `text`, `image_url`, `input_audio`, `file` parts | `UserMessage`: `TextPart`, `ImagePart`, `AudioPart`, `FilePart` / `DocumentPart` (file id) |
| `assistant` message: content, `tool_calls` | `AssistantMessage`: `TextPart`s, one `ToolCallPart` per call |
| `tool` message | `ToolMessage` with one `ToolResultPart` (name from its call) |
| `name` | `MessageBase.name` |

Canonical form: content is a string when the message is exactly one text, else a list of
parts; an assistant message always has `content` (null without text) and `tool_calls` only
when it calls tools; arguments are compact JSON. Anything else (`detail`, `refusal`, a
list with one text part, unknown part types) is kept in the stash and given back as it was.
A tool message carries only text: images in a tool result, and user content stored with
results, follow as a user message.
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
    text_block,
    text_parts,
)
from mindstore.formats.media import data_url, image_from_url, image_url, parse_data_url
from mindstore.formats.outgoing import outgoing, refused_by_openai
from mindstore.formats.stash import diff, patch, read_entry, with_entry
from mindstore.model.base import JSON
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    MessageBase,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from mindstore.model.parts import (
    AudioPart,
    DocumentPart,
    FilePart,
    ImagePart,
    MediaRef,
    TextPart,
    ToolCallPart,
    ToolResultContent,
    ToolResultPart,
)

FORMAT = "openai_chat"


# -- import -----------------------------------------------------------------------------


def from_openai_chat(messages: Sequence[Mapping[str, Any]]) -> list[AnyMessage]:
    """Typed mindstore messages from a Chat Completions `messages` list.

    Tool calls become `ToolCallPart`s, answered by the `ToolMessage`s that follow, so the
    store tracks them; what the format says beyond the typed parts is kept in each message's
    `metadata["openai_chat"]` and given back by `to_openai_chat`.

    Args:
        messages: The request's `messages` (dicts).

    Returns:
        Typed messages ready for `tasks.add_messages`, in order.

    Raises:
        ValidationError: A malformed payload, naming where (e.g. `messages[2].content`).

    Example:
        ```python
        messages = from_openai_chat(body["messages"])
        await acme.tasks.add_messages(task.id, messages)
        ```
    """
    out: list[AnyMessage] = []
    for index, raw in enumerate(as_list(messages, "messages")):
        path = f"messages[{index}]"
        data = as_dict(raw, path)
        message = _import_message(data, path)
        blocks = isinstance(data.get("content"), list) and not isinstance(
            _render(message)[0].get("content"), list
        )
        delta = diff(data, _render(message, blocks)[0])
        message.metadata = with_entry(message.metadata, FORMAT, {"delta": delta, "blocks": blocks})
        out.append(message)
    return finished(settle(out))


def _import_message(data: Mapping[str, Any], path: str) -> Built:
    role = data.get("role")
    name = data.get("name")
    if name is not None:
        as_str(name, f"{path}.name")
    if role in ("system", "developer"):
        return SystemMessage(content=text_parts(data.get("content"), f"{path}.content"), name=name)
    if role == "user":
        return UserMessage(content=_user_parts(data.get("content"), f"{path}.content"), name=name)
    if role == "assistant":
        parts: list[Any] = []
        content = data.get("content")
        if content is not None:
            parts.extend(text_parts(content, f"{path}.content"))
        for position, call in enumerate(
            as_list(data.get("tool_calls") or [], f"{path}.tool_calls")
        ):
            parts.append(_import_call(call, f"{path}.tool_calls[{position}]"))
        return AssistantMessage(content=parts, name=name)
    if role == "tool":
        call_id = as_name(data.get("tool_call_id"), f"{path}.tool_call_id")
        content = data.get("content")
        result = ToolResultPart(tool_call_id=call_id, tool_name="", result="")
        if isinstance(content, str):
            result.result = content
        else:
            texts = text_parts(content, f"{path}.content")
            result.tool_result_contents = [
                ToolResultContent(type="text", text=p.text)
                for p in texts
                if isinstance(p, TextPart)
            ]
        return ToolMessage(content=[result])
    raise fail(
        f"{path}.role", f"expected system, developer, user, assistant or tool, got {shown(role)}"
    )


def _user_parts(content: Any, path: str) -> list[Any]:
    return content_parts(content, path, _user_block)


def _user_block(block: Mapping[str, Any], where: str) -> Any | None:
    kind = block.get("type")
    if kind == "image_url":
        url = as_str(
            as_dict(block.get("image_url"), f"{where}.image_url").get("url"),
            f"{where}.image_url.url",
        )
        return image_from_url(url)
    if kind == "input_audio":
        audio = as_dict(block.get("input_audio"), f"{where}.input_audio")
        data = as_str(audio.get("data"), f"{where}.input_audio.data")
        audio_format = as_str(audio.get("format"), f"{where}.input_audio.format")
        return AudioPart(audio=[data], mime_type=f"audio/{audio_format}")
    if kind == "file":
        return _import_file(as_dict(block.get("file"), f"{where}.file"), f"{where}.file")
    return text_block(block, where)


def _import_file(file: Mapping[str, Any], path: str) -> Any:
    filename = file.get("filename")
    if file.get("file_data") is not None:
        text = as_str(file.get("file_data"), f"{path}.file_data")
        parsed = parse_data_url(text)
        mime, data = parsed if parsed is not None else ("", text)
        return FilePart(data=data, mime_type=mime or "application/octet-stream", filename=filename)
    file_id = as_str(file.get("file_id"), f"{path}.file_id", empty=False)
    return DocumentPart(media=MediaRef(kind="file_id", file_id=file_id, filename=filename))


def _import_call(raw: Any, path: str) -> ToolCallPart:
    call = as_dict(raw, path)
    if call.get("type", "function") != "function":
        raise fail(
            f"{path}.type", f"only function tool calls are supported, got {shown(call.get('type'))}"
        )
    function = as_dict(call.get("function"), f"{path}.function")
    return ToolCallPart(
        tool_call_id=as_name(call.get("id"), f"{path}.id"),
        tool_name=as_str(function.get("name"), f"{path}.function.name"),
        args=load_args(as_str(function.get("arguments", "{}"), f"{path}.function.arguments")),
    )


# -- export -----------------------------------------------------------------------------


def to_openai_chat(messages: Sequence[AnyMessage]) -> list[JSON]:
    """The Chat Completions `messages` for these mindstore messages (see the module doc).

    Args:
        messages: mindstore messages (e.g. `await tasks.messages(task_id)` or a
            `ContextWindow`).

    Returns:
        The `messages` list of a request.

    Example:
        ```python
        recent = await acme.tasks.tail(task.id, 20)
        client.chat.completions.create(model="gpt-4o", messages=to_openai_chat(recent))
        ```
    """
    out: list[JSON] = []
    for message in outgoing(messages, FORMAT, blank=refused_by_openai):  # redacted: placeholders
        entry = read_entry(message.metadata, FORMAT)
        if not message.content and not entry:
            continue  # an empty (e.g. still loading) turn: the API refuses empty messages
        rendered = _render(message, bool(entry.get("blocks")))
        if rendered:
            rendered[0] = patch(rendered[0], entry.get("delta"))
        out.extend(m for m in rendered if not _empty(m))
    return out


def _empty(message: JSON) -> bool:
    """An empty turn, never sent (not even one imported that way): nothing this format can
    carry (say, only reasoning), or only empty text. A tool message is a result, never
    empty."""
    if message.get("role") == "tool" or message.get("tool_calls"):
        return False
    content = message.get("content")
    if isinstance(content, list):
        return all(block.get("type") == "text" and block.get("text") == "" for block in content)
    return content in (None, "")


def _render(message: MessageBase, blocks: bool = False) -> list[JSON]:
    """Canonical Chat Completions messages of one mindstore message (a tool message may
    give several: one per result, then a user message with anything else it carries).
    `blocks` keeps a lone text as a list of parts, as the import found it."""
    named = {"name": message.name} if message.name is not None else {}
    if isinstance(message, SystemMessage):
        return [
            {"role": "system", "content": _content(_texts(message.content), "", blocks), **named}
        ]
    if isinstance(message, AssistantMessage):
        rendered: JSON = {
            "role": "assistant",
            "content": _content(_texts(message.content), None, blocks),
        }
        calls = [_render_call(p) for p in message.content if isinstance(p, ToolCallPart)]
        if calls:
            rendered["tool_calls"] = calls
        return [{**rendered, **named}]
    if isinstance(message, ToolMessage):
        out: list[JSON] = []
        extra: list[JSON] = []
        for part in message.content:
            if isinstance(part, ToolResultPart):
                out.append(
                    {"role": "tool", "tool_call_id": part.tool_call_id, "content": _result(part)}
                )
                extra.extend(_result_images(part))
            else:
                extra.extend(_render_user_part(part))
        if extra:
            out.append({"role": "user", "content": extra})
        return out
    parts = [block for part in message.content for block in _render_user_part(part)]
    return [{"role": "user", "content": _content(parts, [], blocks), **named}]


def _texts(parts: Sequence[Any]) -> list[JSON]:
    return [{"type": "text", "text": p.text} for p in parts if isinstance(p, TextPart)]


def _content(blocks: list[JSON], empty: Any, as_list: bool = False) -> Any:
    """A string for exactly one text, the parts otherwise (`empty` when there are none)."""
    if as_list:
        return blocks
    if not blocks:
        return empty
    if len(blocks) == 1 and blocks[0].get("type") == "text":
        return blocks[0]["text"]
    return blocks


def _render_user_part(part: Any) -> list[JSON]:
    if isinstance(part, TextPart):
        return [{"type": "text", "text": part.text}]
    if isinstance(part, ImagePart):
        url = image_url(part)
        return [{"type": "image_url", "image_url": {"url": url}}] if url else []
    if isinstance(part, AudioPart):
        audio_format = (part.mime_type or "audio/wav").split("/")[-1]
        return [
            {"type": "input_audio", "input_audio": {"data": clip, "format": audio_format}}
            for clip in part.audio
            if isinstance(clip, str) and not clip.startswith("file:")
        ]
    if isinstance(part, FilePart):
        file: JSON = {"file_data": data_url(part.mime_type, part.data)}
        if part.filename is not None:
            file["filename"] = part.filename
        return [{"type": "file", "file": file}]
    if isinstance(part, DocumentPart) and part.media.file_id:
        file = {"file_id": part.media.file_id}
        if part.media.filename is not None:
            file["filename"] = part.media.filename
        return [{"type": "file", "file": file}]
    return []


def _render_call(part: ToolCallPart) -> JSON:
    return {
        "id": part.tool_call_id,
        "type": "function",
        "function": {"name": part.tool_name, "arguments": dump_args(part.args)},
    }


def _result(part: ToolResultPart) -> Any:
    texts = [c.text for c in part.tool_result_contents if c.type == "text" and c.text is not None]
    if texts:
        return [{"type": "text", "text": text} for text in texts]
    return result_text(part)


def _result_images(part: ToolResultPart) -> list[JSON]:
    return [
        {
            "type": "image_url",
            "image_url": {"url": data_url(c.mime_type or "image/png", c.image_data)},
        }
        for c in part.tool_result_contents
        if c.type == "image" and c.image_data
    ]
