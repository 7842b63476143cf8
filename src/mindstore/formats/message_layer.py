"""The message-layer format <-> mindstore messages.

The message layer is a list of messages `{"role", "contents", "id", "timestamp"}` whose
contents are `TextContent` (`content`), `ImageContent` (`images`), `AudioContent`
(`audio`), `ThinkingContent` (`content`, `signature`), `ToolCallContent` (`id`, `name`,
`kind`, `args`) and `ToolResultContent` (`id`, `content`, `is_error`, `metadata`,
`terminate`). Assistant messages add `usage`, `stop_reason` and `error`; besides the four
roles a model sees there are `custom` (with `custom_type`), `branch_summary` and
`compaction_summary`.

| message layer | mindstore |
|---|---|
| `id`, `timestamp` | `id`, `started_ts` |
| `system` / `user` / `assistant` / `tool` | `SystemMessage` / `UserMessage` / `AssistantMessage` / `ToolMessage` (a user message with tool results is a `ToolMessage`) |
| `custom`, `branch_summary`, `compaction_summary` | `InformationalMessage`: an `InformationalPart` naming the role (`informational_type`; `custom_type` in `additional_data`; summaries `is_visible_ai`) followed by the contents' parts |
| `TextContent` | `TextPart` |
| `ImageContent` | one `ImagePart` per image (a URL as a `MediaRef`, base64 inline) |
| `AudioContent` | `AudioPart` (clips as given) |
| `ThinkingContent` | `ThinkingPart` |
| `ToolCallContent` | `ToolCallPart` (`kind` kept) |
| `ToolResultContent` | `ToolResultPart` (`content` -> `result`; `metadata`, `terminate` kept) |
| `usage` | `Usage` (rolled up by the store) |
| `stop_reason`, `error` | `status` (`error` -> error, `aborted` -> interrupted), `error_message` |

This is a storage format, not a model request: `terminate` and a result's `metadata` are
kept both ways (the provider exports strip them). Image bytes are stored as base64 and
given back as bytes; PIL images cannot be stored and are refused.
"""  # noqa: E501 - a mapping table reads best one row a line

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError as PydanticError

from mindstore.formats.checks import as_dict, as_list, as_name, as_str, fail, shown
from mindstore.formats.conversation import Built, import_each, result_text, settle
from mindstore.formats.media import sniff_mime
from mindstore.formats.stash import patch, read_entry
from mindstore.model.base import JSON, now_ts
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    InformationalMessage,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from mindstore.model.parts import (
    AudioPart,
    ImagePart,
    InformationalPart,
    MediaRef,
    ReasoningPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    UnknownPart,
)

FORMAT = "message_layer"
SUMMARY_ROLES = ("branch_summary", "compaction_summary")
EXTRA_ROLES = ("custom", *SUMMARY_ROLES)
_URL_PREFIXES = ("http://", "https://")


# -- import -----------------------------------------------------------------------------


def from_message_layer(messages: Sequence[Mapping[str, Any]]) -> list[AnyMessage]:
    """Typed mindstore messages from message-layer messages (see the module doc and
    docs/glossary.md: the message-layer format is a provider-neutral message list of
    `TextContent`, `ToolCallContent` and `ThinkingContent` blocks).

    Args:
        messages: The message-layer messages (dicts).

    Returns:
        Typed messages ready for `tasks.add_messages`, in order.

    Raises:
        ValidationError: A malformed payload, naming where (e.g. `messages[2].content`).
    """
    return settle(import_each(messages, FORMAT, _import_message, _render))


def _import_message(data: Mapping[str, Any], path: str) -> tuple[Built, JSON]:
    role = data.get("role")
    entry: JSON = {}
    parts: list[Any] = []
    for position, raw in enumerate(as_list(data.get("contents", []), f"{path}.contents")):
        parts.extend(_import_content(raw, f"{path}.contents[{position}]", entry, len(parts)))
    fields: JSON = {"content": parts}
    if "id" in data:
        fields["id"] = as_name(data["id"], f"{path}.id")
    timestamp = data.get("timestamp")
    if isinstance(timestamp, (int, float)) and not isinstance(timestamp, bool):
        fields["started_ts"] = timestamp
    if role == "system":
        return SystemMessage(**fields), entry
    if role in ("user", "tool"):
        has_results = any(isinstance(part, ToolResultPart) for part in parts)
        cls = ToolMessage if role == "tool" or has_results else UserMessage
        return cls(**fields), entry
    if role == "assistant":
        return _import_assistant(data, path, fields), entry
    if role in EXTRA_ROLES:
        marker = InformationalPart(
            informational_type=role,
            is_visible_ai=role in SUMMARY_ROLES,
            is_visible_ui=True,
            additional_data={"custom_type": data.get("custom_type")} if role == "custom" else None,
        )
        return InformationalMessage(**{**fields, "content": [marker, *parts]}), entry
    expected = "system, user, assistant, tool, " + ", ".join(EXTRA_ROLES)
    raise fail(f"{path}.role", f"expected one of {expected}, got {shown(role)}")


def _import_assistant(data: Mapping[str, Any], path: str, fields: JSON) -> AssistantMessage:
    usage = None
    if data.get("usage") is not None:
        try:
            usage = Usage.model_validate(as_dict(data["usage"], f"{path}.usage"))
        except PydanticError as exc:
            raise fail(f"{path}.usage", f"invalid usage: {exc.errors()[0]['msg']}") from exc
    stop_reason = data.get("stop_reason")
    error = data.get("error") or None
    if error is not None:
        as_str(error, f"{path}.error")
    status = {"error": "error", "aborted": "interrupted"}.get(stop_reason, "completed")  # type: ignore[arg-type]
    return AssistantMessage(**fields, usage=usage, status=status, error_message=error)


def _import_content(raw: Any, path: str, entry: JSON, offset: int) -> list[Any]:
    item = as_dict(raw, path)
    kind = item.get("type")
    if kind == "text":
        return [TextPart(text=as_str(item.get("content", ""), f"{path}.content"))]
    if kind == "image":
        images = as_list(item.get("images", []), f"{path}.images")
        if images:
            entry.setdefault("image_groups", []).append(len(images))
        return [
            _import_image(image, f"{path}.images[{i}]", entry, offset + i)
            for i, image in enumerate(images)
        ]
    if kind == "audio":
        return [AudioPart(audio=as_list(item.get("audio", []), f"{path}.audio"))]
    if kind == "thinking":
        return [
            ThinkingPart(
                content=as_str(item.get("content", ""), f"{path}.content"),
                signature=as_str(item.get("signature", ""), f"{path}.signature"),
            )
        ]
    if kind == "tool_call":
        args = item.get("args", {})
        return [ToolCallPart(tool_call_id=as_name(item.get("id"), f"{path}.id"),
                             tool_name=as_str(item.get("name", ""), f"{path}.name"),
                             kind=item.get("kind"), args=dict(as_dict(args, f"{path}.args")),
                             is_loading=True)]  # fmt: skip
    if kind == "tool_result":
        metadata = item.get("metadata", {})
        return [
            ToolResultPart(
                tool_call_id=as_name(item.get("id"), f"{path}.id"),
                tool_name="",
                result=item.get("content", ""),
                is_error=bool(item.get("is_error", False)),
                metadata=dict(as_dict(metadata, f"{path}.metadata")),
                terminate=bool(item.get("terminate", False)),
            )
        ]
    return [UnknownPart.model_validate(dict(item))]


def _import_image(image: Any, path: str, entry: JSON, position: int) -> ImagePart:
    if isinstance(image, str):
        if image.startswith(_URL_PREFIXES):
            return ImagePart(media=MediaRef(kind="url", url=image))
        return ImagePart(image=image)
    if isinstance(image, (bytes, bytearray)):
        encoded = base64.b64encode(bytes(image)).decode("ascii")
        entry.setdefault("bytes_images", []).append(position)
        return ImagePart(image=encoded, mime_type=sniff_mime(encoded))
    raise fail(path, f"expected a URL, base64 text or bytes, got {type(image).__name__}")


# -- export -----------------------------------------------------------------------------


def to_message_layer(messages: Sequence[AnyMessage]) -> list[JSON]:
    """Message-layer messages for these mindstore messages; bookkeeping messages (task
    configs, entries, exits, compression markers, other informational messages) and parts
    the layer has no content for are left out.

    Args:
        messages: mindstore messages (e.g. `await tasks.messages(task_id)` or a
            `ContextWindow`).

    Returns:
        The message-layer messages.
    """
    out: list[JSON] = []
    for message in messages:
        if not isinstance(
            message,
            (SystemMessage, UserMessage, AssistantMessage, ToolMessage, InformationalMessage),
        ):
            continue
        if isinstance(message, InformationalMessage) and _extra_role(message) is None:
            continue
        entry = read_entry(message.metadata, FORMAT)
        out.append(patch(_render(message, entry), entry.get("delta")))
    return out


def _extra_role(message: InformationalMessage) -> InformationalPart | None:
    first = message.content[0] if message.content else None
    if isinstance(first, InformationalPart) and first.informational_type in EXTRA_ROLES:
        return first
    return None


def _render(message: Built, entry: Mapping[str, Any]) -> JSON:
    parts = list(message.content)
    rendered: JSON = {"role": message.role}
    marker: InformationalPart | None = None
    if isinstance(message, InformationalMessage):
        marker = _extra_role(message)
        assert marker is not None  # callers pass only the layer's own roles
        rendered["role"] = marker.informational_type
        parts = parts[1:]
    rendered["contents"] = _render_contents(parts, entry, offset=len(message.content) - len(parts))
    rendered["id"] = message.id
    rendered["timestamp"] = message.started_ts if message.started_ts is not None else now_ts()
    if isinstance(message, AssistantMessage):
        usage = message.usage or Usage()
        rendered["usage"] = usage.model_dump(exclude={"reasoning_tokens"})
        rendered["stop_reason"] = _stop_reason(message)
        rendered["error"] = message.error_message or ""
    if marker is not None and marker.informational_type == "custom":
        data = marker.additional_data if isinstance(marker.additional_data, dict) else {}
        rendered["custom_type"] = data.get("custom_type")
    return rendered


def _stop_reason(message: AssistantMessage) -> str:
    if message.status == "error":
        return "error"
    if message.status == "interrupted":
        return "aborted"
    return "toolUse" if message.tool_calls() else "stop"


def _render_contents(parts: list[Any], entry: Mapping[str, Any], offset: int) -> list[JSON]:
    groups = list(entry.get("image_groups") or [])
    as_bytes = set(entry.get("bytes_images") or [])
    contents: list[JSON] = []
    position = 0
    while position < len(parts):
        part = parts[position]
        if isinstance(part, ImagePart):
            run = 1
            while position + run < len(parts) and isinstance(parts[position + run], ImagePart):
                run += 1
            size = min(groups.pop(0), run) if groups else run
            images = [_render_image(p, offset + position + i in as_bytes)
                      for i, p in enumerate(parts[position:position + size])]  # fmt: skip
            contents.append({"type": "image", "images": images})
            position += max(size, 1)
            continue
        contents.extend(_render_part(part))
        position += 1
    return contents


def _render_image(part: ImagePart, as_bytes: bool) -> Any:
    if part.image:
        return base64.b64decode(part.image) if as_bytes else part.image
    if part.media is not None:
        return part.media.url or part.media.data_base64 or ""
    return ""


def _render_part(part: Any) -> list[JSON]:
    if isinstance(part, TextPart):
        return [{"type": "text", "content": part.text}]
    if isinstance(part, AudioPart):
        return [{"type": "audio", "audio": list(part.audio)}]
    if isinstance(part, ThinkingPart):
        return [{"type": "thinking", "content": part.content, "signature": part.signature}]
    if isinstance(part, ReasoningPart):
        return [{"type": "thinking", "content": part.reasoning, "signature": part.signature or ""}]
    if isinstance(part, ToolCallPart):
        return [
            {
                "type": "tool_call",
                "id": part.tool_call_id,
                "name": part.tool_name,
                "kind": part.kind,
                "args": part.args,
            }
        ]
    if isinstance(part, ToolResultPart):
        content = (
            part.result
            if isinstance(part.result, str) and not part.tool_result_contents
            else result_text(part)
        )
        return [
            {
                "type": "tool_result",
                "id": part.tool_call_id,
                "content": content,
                "is_error": part.is_error,
                "metadata": part.metadata,
                "terminate": part.terminate,
            }
        ]
    return []
