"""Gemini `{"system_instruction": ..., "contents": [...]}` <-> mindstore messages.

`client.models.generate_content(model=..., contents=p["contents"],
config={"system_instruction": p["system_instruction"]})` sends `p = to_gemini(messages)`;
`from_gemini(payload)` imports a request body (other keys are ignored).

| Gemini | mindstore |
|---|---|
| `system_instruction` (a `Content`, or a string) | one `SystemMessage` |
| `user` content | `UserMessage`; a content with `functionResponse` parts is one `ToolMessage` |
| `model` content | `AssistantMessage` |
| `{"text"}` / `{"text", "thought": true}` | `TextPart` / `ReasoningPart` |
| `inlineData` / `fileData` | `ImagePart`, `AudioPart`, `VideoPart` by MIME type; else `FilePart` / `DocumentPart` |
| `functionCall` (`name`, `args`, `id`) | `ToolCallPart` |
| `functionResponse` (`name`, `response`, `id`) | `ToolResultPart` (`response` -> `result`) |

Gemini often leaves call ids out: a call then gets a generated id and its response is paired
with the earliest open call of the same name; the generated id is not written back.
`thoughtSignature` (which Gemini needs back with function calls) and any other part field
are kept in the stash. On export consecutive user-side messages form one content (all
responses to a turn's calls together, as the API requires) and every system message joins
`system_instruction`. A result that is not an object is sent as `{"result": text}`
(`{"error": text}` when it is an error). snake_case spellings (`function_call`,
`inline_data`, ...) are read too and given back as they came.
"""  # noqa: E501 - a mapping table reads best one row a line

from __future__ import annotations

import mimetypes
from collections.abc import Mapping, Sequence
from typing import Any

from mindstore.formats.checks import as_args, as_dict, as_list, as_name, as_str, fail, shown
from mindstore.formats.conversation import (
    finished,
    group_turns,
    result_text,
    settle,
    turn_message,
)
from mindstore.formats.media import inline_image
from mindstore.formats.outgoing import outgoing, refused_by_gemini
from mindstore.formats.stash import diff, patch, read_entry, with_entry
from mindstore.model.base import JSON, new_id
from mindstore.model.messages import (
    AnyMessage,
    MessageBase,
    SystemMessage,
)
from mindstore.model.parts import (
    AudioPart,
    DocumentPart,
    FilePart,
    ImagePart,
    MediaRef,
    ReasoningPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    UnknownPart,
    VideoPart,
)

FORMAT = "gemini"
SYSTEM_KEYS = ("system_instruction", "systemInstruction")


def _get(data: Mapping[str, Any], camel: str, snake: str) -> Any:
    return data.get(camel) if camel in data else data.get(snake)


# -- import -----------------------------------------------------------------------------


def from_gemini(payload: Mapping[str, Any]) -> list[AnyMessage]:
    """Typed mindstore messages from a Gemini `generateContent` request body.

    Args:
        payload: The body: `system_instruction` (optional) and `contents`.

    Returns:
        Typed messages ready for `tasks.add_messages`, in order.

    Raises:
        ValidationError: A malformed payload, naming where (e.g. `messages[2].content`).
    """
    body = as_dict(payload, "payload")
    out: list[AnyMessage] = []
    key = next((k for k in SYSTEM_KEYS if body.get(k) is not None), None)
    if key is not None:
        system = SystemMessage(content=_system_parts(body[key], key))
        delta = diff({key: body[key]}, {SYSTEM_KEYS[0]: _render_system([system])})
        system.metadata = with_entry(None, FORMAT, {"delta": delta})
        out.append(system)
    pending: dict[str, list[str]] = {}  # tool name -> open call ids, oldest first
    previous: str | None = None
    for index, raw in enumerate(as_list(body.get("contents"), "contents")):
        path = f"contents[{index}]"
        content = as_dict(raw, path)
        role = content.get("role", "user")
        if role not in ("user", "model", "function", "tool"):
            raise fail(f"{path}.role", f"expected user or model, got {shown(role)}")
        parts = [
            _import_part(as_dict(part, f"{path}.parts[{i}]"), f"{path}.parts[{i}]", pending)
            for i, part in enumerate(as_list(content.get("parts", []), f"{path}.parts"))
        ]
        side = "model" if role == "model" else "user"
        message = turn_message(parts, assistant=side == "model")
        delta = diff(content, _render_content(side, [message]))
        message.metadata = with_entry(None, FORMAT, {"delta": delta, "new_turn": side == previous})
        previous = side
        out.append(message)
    return finished(settle(out))


def _system_parts(system: Any, path: str) -> list[Any]:
    if isinstance(system, str):
        return [TextPart(text=system)]
    parts: list[Any] = []
    for position, raw in enumerate(
        as_list(as_dict(system, path).get("parts", []), f"{path}.parts")
    ):
        part = as_dict(raw, f"{path}.parts[{position}]")
        if isinstance(part.get("text"), str):
            parts.append(TextPart(text=part["text"]))
        else:
            parts.append(UnknownPart.model_validate(dict(part)))
    return parts


def _import_part(part: Mapping[str, Any], path: str, pending: dict[str, list[str]]) -> Any:
    call = _get(part, "functionCall", "function_call")
    if call is not None:
        call = as_dict(call, f"{path}.functionCall")
        name = as_str(call.get("name"), f"{path}.functionCall.name")
        call_id = as_name(call["id"], f"{path}.functionCall.id") if call.get("id") else new_id()
        pending.setdefault(name, []).append(call_id)
        return ToolCallPart(
            tool_call_id=call_id,
            tool_name=name,
            args=as_args(call.get("args", {}), f"{path}.functionCall.args"),
        )
    response = _get(part, "functionResponse", "function_response")
    if response is not None:
        response = as_dict(response, f"{path}.functionResponse")
        name = as_str(response.get("name"), f"{path}.functionResponse.name")
        if response.get("id"):
            call_id = as_name(response["id"], f"{path}.functionResponse.id")
            if call_id in pending.get(name, []):
                pending[name].remove(call_id)
        else:
            queue = pending.get(name) or []
            call_id = queue.pop(0) if queue else new_id()
        result = response.get("response", {})
        return ToolResultPart(
            tool_call_id=call_id,
            tool_name=name,
            result=dict(as_dict(result, f"{path}.functionResponse.response")),
        )
    if "text" in part:
        text = as_str(part["text"], f"{path}.text")
        return ReasoningPart(reasoning=text) if part.get("thought") is True else TextPart(text=text)
    inline = _get(part, "inlineData", "inline_data")
    if inline is not None:
        inline = as_dict(inline, f"{path}.inlineData")
        mime = as_str(_get(inline, "mimeType", "mime_type"), f"{path}.inlineData.mimeType")
        return _media_part(
            MediaRef(
                kind="data",
                data_base64=as_str(inline.get("data"), f"{path}.inlineData.data"),
                mime_type=mime,
            )
        )
    file = _get(part, "fileData", "file_data")
    if file is not None:
        file = as_dict(file, f"{path}.fileData")
        uri = as_str(_get(file, "fileUri", "file_uri"), f"{path}.fileData.fileUri")
        mime = _get(file, "mimeType", "mime_type")
        return _media_part(
            MediaRef(kind="url", url=uri, mime_type=mime if isinstance(mime, str) else None)
        )
    return UnknownPart.model_validate(dict(part))


def _media_part(media: MediaRef) -> Any:
    """The typed part for inline data or a file by MIME type."""
    family = (media.mime_type or "").split("/")[0]
    if family == "image":
        if media.kind == "data":
            return ImagePart(image=media.data_base64 or "", mime_type=media.mime_type)
        return ImagePart(media=media)
    if family == "audio":
        if media.kind == "data":
            return AudioPart(audio=[media.data_base64 or ""], mime_type=media.mime_type)
        return AudioPart(media=media)
    if family == "video":
        return VideoPart(media=media)
    if media.kind == "data":
        return FilePart(
            data=media.data_base64 or "", mime_type=media.mime_type or "application/octet-stream"
        )
    return DocumentPart(media=media)


# -- export -----------------------------------------------------------------------------


def to_gemini(messages: Sequence[AnyMessage]) -> JSON:
    """`system_instruction` and `contents` of a Gemini request (see the module doc).

    Args:
        messages: mindstore messages (e.g. `await tasks.messages(task_id)` or a
            `ContextWindow`).

    Returns:
        `{"system_instruction": ..., "contents": [...]}`.
    """
    # redacted parts as placeholders; a message with nothing this format carries is left
    # out before contents form, so its neighbours merge
    sent = outgoing(messages, FORMAT, _carries, blank=refused_by_gemini)
    systems, turns = group_turns(sent, FORMAT, "model")
    out: JSON = {}
    if systems:
        delta = read_entry(systems[0].metadata, FORMAT).get("delta")
        out.update(patch({SYSTEM_KEYS[0]: _render_system(systems)}, delta))
    rendered = [
        (patch(_render_content(side, group), entry.get("delta")), entry)
        for side, group, entry in turns
    ]
    # the API refuses a content without parts (imported ones are given back as they came)
    out["contents"] = [content for content, entry in rendered if entry or content["parts"]]
    return out


def _render_system(systems: Sequence[SystemMessage]) -> JSON:
    return {
        "parts": [{"text": p.text} for m in systems for p in m.content if isinstance(p, TextPart)]
    }


def _render_content(side: str, group: Sequence[MessageBase]) -> JSON:
    return {
        "role": side,
        "parts": [block for m in group for part in m.content for block in _render_part(part)],
    }


def _render_media(media: MediaRef | None, fallback_mime: str) -> list[JSON]:
    if media is None:
        return []
    if media.data_base64:
        return [
            {
                "inlineData": {
                    "mimeType": media.mime_type or fallback_mime,
                    "data": media.data_base64,
                }
            }
        ]
    if media.url:
        mime = media.mime_type or mimetypes.guess_type(media.url)[0] or fallback_mime
        return [{"fileData": {"mimeType": mime, "fileUri": media.url}}]
    return []


def _carries(message: MessageBase) -> bool:
    return any(_render_part(part) for part in message.content)


def _render_part(part: Any) -> list[JSON]:
    if isinstance(part, TextPart):
        return [{"text": part.text}]
    if isinstance(part, ReasoningPart):
        return [{"text": part.reasoning, "thought": True}]
    if isinstance(part, ThinkingPart):
        return [{"text": part.content, "thought": True}]
    if isinstance(part, ImagePart):
        inline = inline_image(part) if part.image else None
        if inline is not None:
            return [{"inlineData": {"mimeType": inline[0], "data": inline[1]}}]
        return _render_media(part.media, "image/png")
    if isinstance(part, AudioPart):
        mime = part.mime_type or "audio/wav"
        clips = [{"inlineData": {"mimeType": mime, "data": clip}} for clip in part.audio
                 if isinstance(clip, str) and not clip.startswith("file:")]  # fmt: skip
        return clips or _render_media(part.media, mime)
    if isinstance(part, VideoPart):
        return _render_media(part.media, "video/mp4")
    if isinstance(part, DocumentPart):
        return _render_media(part.media, "application/pdf")
    if isinstance(part, FilePart):
        return [{"inlineData": {"mimeType": part.mime_type, "data": part.data}}]
    if isinstance(part, ToolCallPart):
        return [
            {"functionCall": {"name": part.tool_name, "args": part.args, "id": part.tool_call_id}}
        ]
    if isinstance(part, ToolResultPart):
        response = {"name": part.tool_name, "response": _response(part), "id": part.tool_call_id}
        return [{"functionResponse": response}]
    return []


def _response(part: ToolResultPart) -> JSON:
    if isinstance(part.result, dict) and not part.tool_result_contents:
        return part.result
    return {"error" if part.is_error else "result": result_text(part)}
