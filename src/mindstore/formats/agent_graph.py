"""The agent-graph format <-> mindstore messages.

An agent-graph message is `{"message_id", "role", "content": [blocks], "delta",
"tools_calls", "reasoning", "timestamp", "metadata", "usages", "raw"}` with `role` one of
user / assistant / system / tool and typed content blocks.

| agent graph | mindstore |
|---|---|
| `message_id` (string or integer) | `id` (kept; an integer comes back as an integer) |
| `timestamp` (epoch seconds; ISO text and datetimes are read too) | `started_ts` |
| `metadata` | `metadata` |
| `usages` (`TokenUsages`) | `usage` (`prompt_tokens` -> `input_tokens`, `completion_tokens` -> `output_tokens`, cache creation / read -> cache write / read, `reasoning_tokens`) |
| `text` block (`annotations`) | `TextPart` |
| `image` / `audio` / `video` / `document` / `data` blocks | `ImagePart` / `AudioPart` / `VideoPart` / `DocumentPart` / `DataPart` (same `MediaRef`) |
| `tool_call` / `remote_tool_call` (`id`, `name`, `args`, `tool_type`) | `ToolCallPart` (`tool_type` -> `kind`) |
| `tool_result` (`call_id`, `output`, `is_error`, `status`) | `ToolResultPart` (`output` -> `result`) in a `ToolMessage` |
| `reasoning` (`summary`, `details`) | `ReasoningPart` (`summary` -> `reasoning`) |
| `annotation`, `error` blocks | `AnnotationPart`, `ErrorPart` |
| `tools_calls` (raw provider calls) | kept; a call found only there also becomes a `ToolCallPart` so it is tracked |

The canonical form is the full dump of the agent-graph model (every field, defaults
included); a payload that leaves defaults out, or adds fields, comes back exactly as given.
A reasoning signature and a result's `terminate` flag have no place in this format.
"""  # noqa: E501 - a mapping table reads best one row a line

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import ValidationError as PydanticError

from mindstore.formats.checks import as_dict, as_int, as_list, as_name, as_str, fail, shown
from mindstore.formats.conversation import (
    Built,
    finished,
    import_each,
    load_args,
    result_text,
    settle,
    usage_of,
)
from mindstore.formats.stash import (
    FORMAT_KEYS,
    patch,
    read_entry,
    without_entries,
)
from mindstore.model.base import JSON, Model, now_ts
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from mindstore.model.parts import (
    AnnotationPart,
    AudioPart,
    DataPart,
    DocumentPart,
    ErrorPart,
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

FORMAT = "agent_graph"
ROLES = {
    "user": UserMessage,
    "assistant": AssistantMessage,
    "system": SystemMessage,
    "tool": ToolMessage,
}
M = TypeVar("M", bound=Model)


def _model(cls: type[M], value: Any, path: str) -> M:
    try:
        return cls.model_validate(as_dict(value, path))
    except PydanticError as exc:
        error = exc.errors()[0]
        where = ".".join(str(step) for step in error["loc"])
        raise fail(f"{path}.{where}" if where else path, error["msg"]) from exc


# -- import -----------------------------------------------------------------------------


def from_agent_graph(messages: Sequence[Mapping[str, Any]]) -> list[AnyMessage]:
    """Typed mindstore messages from agent-graph messages (see the module doc and
    docs/glossary.md: the agent-graph format is the message list of a graph-run agent, with
    content blocks, `message_id` and `TokenUsages`).

    Args:
        messages: The agent-graph messages (dicts).

    Returns:
        Typed messages ready for `tasks.add_messages`, in order.

    Raises:
        ValidationError: A malformed payload, naming where (e.g. `messages[2].content`).
    """
    return finished(settle(import_each(messages, FORMAT, _import_message, _render)))


def _import_message(data: Mapping[str, Any], path: str) -> tuple[Built, JSON]:
    role = data.get("role")
    if role not in ROLES:
        raise fail(f"{path}.role", f"expected user, assistant, system or tool, got {shown(role)}")
    parts = [
        _import_block(raw, f"{path}.content[{i}]", i)
        for i, raw in enumerate(as_list(data.get("content", []), f"{path}.content"))
    ]
    entry: JSON = {
        "remote": [
            i
            for i, raw in enumerate(data.get("content") or [])
            if isinstance(raw, Mapping) and raw.get("type") == "remote_tool_call"
        ]
    }
    derived = _derived_calls(data.get("tools_calls"), f"{path}.tools_calls", parts)
    if derived:
        entry["derived"] = list(range(len(parts), len(parts) + len(derived)))
        parts.extend(derived)
    cls = ROLES[role]
    if role == "user" and any(isinstance(part, ToolResultPart) for part in parts):
        cls = ToolMessage
    fields: JSON = {"content": parts}
    message_id = data.get("message_id")
    if isinstance(message_id, int) and not isinstance(message_id, bool):
        fields["id"] = str(message_id)
    elif message_id is not None:
        fields["id"] = as_name(message_id, f"{path}.message_id")
    started = _timestamp(data.get("timestamp"), f"{path}.timestamp")
    if started is not None:
        fields["started_ts"] = started
    metadata = data.get("metadata")
    if metadata is not None:
        fields["metadata"] = (
            without_entries(as_dict(metadata, f"{path}.metadata"), FORMAT_KEYS) or None
        )
    if data.get("usages") is not None:
        fields["usage"] = _import_usage(as_dict(data["usages"], f"{path}.usages"), f"{path}.usages")
    return cls(**fields), entry


def _timestamp(value: Any, path: str) -> int | float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError as exc:
            raise fail(
                path, f"expected epoch seconds or an ISO 8601 time, got {shown(value)}"
            ) from exc
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return aware.timestamp()
    raise fail(path, f"expected epoch seconds or an ISO 8601 time, got {shown(value)}")


def _import_usage(usages: Mapping[str, Any], path: str) -> Usage:
    def count(name: str, required: bool = False) -> int:
        if name not in usages and not required:
            return 0
        return as_int(usages.get(name), f"{path}.{name}")

    return Usage(
        input_tokens=count("prompt_tokens", True),
        output_tokens=count("completion_tokens", True),
        reasoning_tokens=count("reasoning_tokens"),
        cache_write_tokens=count("cache_creation_input_tokens"),
        cache_read_tokens=count("cache_read_input_tokens"),
    )


def _import_block(raw: Any, path: str, position: int) -> Any:
    block = as_dict(raw, path)
    kind = block.get("type")
    if kind == "text":
        return TextPart(text=as_str(block.get("text"), f"{path}.text"))
    if kind == "image":
        return ImagePart(media=_model(MediaRef, block.get("media"), f"{path}.media"),
                         alt_text=block.get("alt_text"), bbox=block.get("bbox"))  # fmt: skip
    if kind in ("audio", "video", "document", "data", "annotation", "error"):
        cls: Any = {
            "audio": AudioPart,
            "video": VideoPart,
            "document": DocumentPart,
            "data": DataPart,
            "annotation": AnnotationPart,
            "error": ErrorPart,
        }[kind]
        fields = {"kind": "citation", **block} if kind == "annotation" else dict(block)
        return _model(cls, fields, path)
    if kind in ("tool_call", "remote_tool_call"):
        tool_type = block.get("tool_type", "remote" if kind == "remote_tool_call" else None)
        return ToolCallPart(
            tool_call_id=as_name(block.get("id"), f"{path}.id"),
            tool_name=as_str(block.get("name"), f"{path}.name"),
            args=dict(as_dict(block.get("args", {}), f"{path}.args")),
            kind=tool_type,
        )
    if kind == "tool_result":
        return ToolResultPart(
            tool_call_id=as_name(block.get("call_id"), f"{path}.call_id"),
            tool_name="",
            result=block.get("output"),
            is_error=bool(block.get("is_error", False)),
        )
    if kind == "reasoning":
        return ReasoningPart(reasoning=as_str(block.get("summary"), f"{path}.summary"))
    return UnknownPart.model_validate(dict(block))


def _derived_calls(tools_calls: Any, path: str, parts: list[Any]) -> list[ToolCallPart]:
    """Calls listed only in the raw `tools_calls` (OpenAI or plain shape) become parts."""
    if tools_calls is None:
        return []
    known = {part.tool_call_id for part in parts if isinstance(part, ToolCallPart)}
    derived: list[ToolCallPart] = []
    for position, raw in enumerate(as_list(tools_calls, path)):
        call = as_dict(raw, f"{path}[{position}]")
        nested = call.get("function")
        function: Mapping[str, Any] = nested if isinstance(nested, Mapping) else call
        call_id = call.get("id")
        if not call_id or call_id in known:
            continue
        known.add(as_name(call_id, f"{path}[{position}].id"))
        name = function.get("name", "")
        args = function.get("arguments", function.get("args", {}))
        derived.append(
            ToolCallPart(
                tool_call_id=call_id,
                tool_name=name if isinstance(name, str) else "",
                args=load_args(args),
            )
        )
    return derived


# -- export -----------------------------------------------------------------------------


def to_agent_graph(messages: Sequence[AnyMessage]) -> list[JSON]:
    """Agent-graph messages for the system, user, assistant and tool messages given (the
    format has no role for the store's bookkeeping or informational messages).

    Args:
        messages: mindstore messages (e.g. `await tasks.messages(task_id)` or a
            `ContextWindow`).

    Returns:
        The agent-graph messages.
    """
    out: list[JSON] = []
    for message in messages:
        if isinstance(message, (SystemMessage, UserMessage, AssistantMessage, ToolMessage)):
            entry = read_entry(message.metadata, FORMAT)
            out.append(patch(_render(message, entry), entry.get("delta")))
    return out


def _render(message: Built, entry: Mapping[str, Any]) -> JSON:
    skip = set(entry.get("derived") or [])
    remote = set(entry.get("remote") or [])
    usage = usage_of(message)
    return {
        "message_id": message.id,
        "role": message.role,
        "content": [
            block
            for position, part in enumerate(message.content)
            if position not in skip
            for block in _render_part(part, position in remote)
        ],
        "delta": False,
        "tools_calls": None,
        "reasoning": None,
        "timestamp": message.started_ts if message.started_ts is not None else now_ts(),
        "metadata": without_entries(message.metadata, FORMAT_KEYS),
        "usages": _render_usage(usage) if usage is not None else None,
        "raw": None,
    }


def _render_usage(usage: Usage) -> JSON:
    return {
        "completion_tokens": usage.output_tokens,
        "prompt_tokens": usage.input_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "image_tokens": 0,
        "audio_tokens": 0,
    }


def _media(media: MediaRef | None) -> JSON | None:
    return media.to_dict() if media is not None else None


def _render_part(part: Any, remote: bool) -> list[JSON]:
    if isinstance(part, TextPart):
        return [{"type": "text", "text": part.text, "annotations": []}]
    if isinstance(part, ImagePart):
        media = part.media
        if media is None and part.image:
            media = MediaRef(kind="data", data_base64=part.image, mime_type=part.mime_type)
        if media is None:
            return []
        return [
            {"type": "image", "media": _media(media), "alt_text": part.alt_text, "bbox": part.bbox}
        ]
    if isinstance(part, AudioPart):
        if part.media is not None:
            medias = [part.media]
        else:
            medias = [
                MediaRef(kind="data", data_base64=clip, mime_type=part.mime_type)
                for clip in part.audio
                if isinstance(clip, str) and not clip.startswith("file:")
            ]
        return [
            {
                "type": "audio",
                "media": _media(media),
                "transcript": part.transcript,
                "sample_rate": part.sample_rate,
                "channels": part.channels,
            }
            for media in medias
        ]
    if isinstance(part, VideoPart):
        return [{"type": "video", "media": _media(part.media), "thumbnail": _media(part.thumbnail)}]
    if isinstance(part, DocumentPart):
        return [
            {
                "type": "document",
                "media": _media(part.media),
                "pages": part.pages,
                "excerpt": part.excerpt,
            }
        ]
    if isinstance(part, DataPart):
        return [{"type": "data", "mime_type": part.mime_type, "data_base64": part.data_base64,
                 "media": _media(part.media)}]  # fmt: skip
    if isinstance(part, ToolCallPart):
        kind = "remote_tool_call" if remote else "tool_call"
        return [{"type": kind, "id": part.tool_call_id, "name": part.tool_name, "args": part.args,
                 "tool_type": part.kind}]  # fmt: skip
    if isinstance(part, ToolResultPart):
        output = result_text(part) if part.tool_result_contents else part.result
        return [{"type": "tool_result", "call_id": part.tool_call_id, "output": output,
                 "is_error": part.is_error, "status": None}]  # fmt: skip
    if isinstance(part, ReasoningPart):
        return [{"type": "reasoning", "summary": part.reasoning, "details": None}]
    if isinstance(part, ThinkingPart):
        return [{"type": "reasoning", "summary": part.content, "details": None}]
    if isinstance(part, AnnotationPart):
        spans = [list(span) for span in part.spans] if part.spans is not None else None
        return [
            {
                "type": "annotation",
                "kind": part.kind,
                "refs": [ref.to_dict() for ref in part.refs],
                "spans": spans,
            }
        ]
    if isinstance(part, ErrorPart):
        return [{"type": "error", "message": part.message, "code": part.code, "data": part.data}]
    return []
