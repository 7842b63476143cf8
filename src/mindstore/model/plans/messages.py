"""Verbs that append messages: plain messages, configs, human, system and assistant turns,
tool results and answers, informational and compression messages. Each takes the header
and returns a `Plan`; timestamps are epoch seconds: the caller's as given, else the write's
`now` (to the millisecond, `mindstore.model.base.now_ts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mindstore.errors import (
    NoConfigForTurn,
    UnknownToolCall,
    ValidationError,
)
from mindstore.model.base import JSON, Timestamp, new_id
from mindstore.model.header import TaskHeader, ToolCallRef
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    CompressionMessage,
    InformationalMessage,
    SystemMessage,
    TaskConfigMessage,
    ToolMessage,
    UserMessage,
)
from mindstore.model.parts import (
    CompressionPart,
    ImagePart,
    InformationalPart,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from mindstore.model.plans.core import (
    Patch,
    Plan,
    Planner,
    check_message_id,
    resolve_ts,
    typed_errors,
)
from mindstore.model.specs import ToolResultSpec
from mindstore.validation import (
    check_bool,
    check_int,
    check_optional_json,
    check_text,
)


@typed_errors
def plan_add_message(header: TaskHeader, task_id: str, message: AnyMessage, **kw: Any) -> Plan:
    planner = Planner(header, task_id, **kw)
    return planner.finish(planner.append(message))


@typed_errors
def plan_add_messages(
    header: TaskHeader, task_id: str, messages: Sequence[AnyMessage], **kw: Any
) -> Plan:
    planner = Planner(header, task_id, **kw)
    return planner.finish([planner.append(message) for message in messages])


@typed_errors
def plan_add_task_config(
    header: TaskHeader,
    task_id: str,
    part: TaskConfigPart,
    timestamp: float | None = None,
    **kw: Any,
) -> Plan:
    if not isinstance(part, TaskConfigPart):
        raise ValidationError(f"part must be a TaskConfigPart, got {type(part).__name__}")
    planner = Planner(header, task_id, **kw)
    ts = resolve_ts(timestamp, planner.now)
    message = TaskConfigMessage(task_id=task_id, started_ts=ts, finished_ts=ts, content=[part])
    return planner.finish(planner.append(message))


def build_human_message(
    task_id: str,
    text: str | Sequence[str] | None,
    images: Sequence[ImagePart] | None,
    is_ui_hidden: bool,
    ts: Timestamp,
    message_id: str | None = None,
) -> UserMessage | None:
    content: list[Any] = []
    if isinstance(text, str):
        content.append(TextPart(text=check_text(text, "text")))
    elif isinstance(text, (list, tuple)):
        content.extend(TextPart(text=check_text(t, "text item")) for t in text)
    elif text is not None:
        raise ValidationError(
            f"text must be a string or a list of strings, got {type(text).__name__}"
        )
    if images is not None:
        if not isinstance(images, (list, tuple)):
            raise ValidationError("images must be a list of ImagePart")
        for image in images:
            if not isinstance(image, ImagePart):
                raise ValidationError(f"images must hold ImagePart, got {type(image).__name__}")
            content.append(image)
    check_bool(is_ui_hidden, "is_ui_hidden")
    if not content:
        return None
    return UserMessage(
        id=message_id or new_id(),
        task_id=task_id,
        content=content,
        started_ts=ts,
        is_ui_hidden=is_ui_hidden,
    )


@typed_errors
def plan_add_human_message(
    header: TaskHeader,
    task_id: str,
    text: str | Sequence[str] | None = None,
    images: Sequence[ImagePart] | None = None,
    is_ui_hidden: bool = False,
    timestamp: float | None = None,
    message_id: str | None = None,
    **kw: Any,
) -> Plan:
    """The Mind Map: a human message with no text and no image writes nothing (result None)."""
    planner = Planner(header, task_id, **kw)
    message = build_human_message(
        task_id, text, images, is_ui_hidden, resolve_ts(timestamp, planner.now), message_id
    )
    return planner.finish(planner.append(message) if message is not None else None)


@typed_errors
def plan_add_system_message(
    header: TaskHeader,
    task_id: str,
    text: str,
    message_id: str | None = None,
    timestamp: float | None = None,
    **kw: Any,
) -> Plan:
    check_text(text, "text")
    planner = Planner(header, task_id, **kw)
    ts = resolve_ts(timestamp, planner.now)
    message = SystemMessage(
        id=message_id or new_id(),
        task_id=task_id,
        started_ts=ts,
        finished_ts=ts,
        content=[TextPart(text=text)],
    )
    return planner.finish(planner.append(message))


@typed_errors
def plan_add_assistant_message(
    header: TaskHeader,
    task_id: str,
    message_id: str | None = None,
    timestamp: float | None = None,
    **kw: Any,
) -> Plan:
    """An empty, loading assistant message whose model comes from the current config."""
    model_name = header.current_model_name()
    if model_name is None:
        raise NoConfigForTurn(
            "no task configuration found: add a task config before an assistant message"
        )
    planner = Planner(header, task_id, **kw)
    message = AssistantMessage(
        id=message_id or new_id(),
        task_id=task_id,
        started_ts=resolve_ts(timestamp, planner.now),
        status="loading",
        model_id=model_name,
    )
    return planner.finish(planner.append(message))


def build_tool_result_message(
    task_id: str,
    tool_call_id: str,
    tool_name: str,
    result: Any,
    spec: ToolResultSpec,
    ts: Timestamp,
) -> ToolMessage:
    """The ToolMessage of one tool result (both `add_tool_result_message` and the answers)."""
    check_message_id(tool_call_id, "tool_call_id")
    check_text(tool_name, "tool_name")
    part = ToolResultPart(
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        result=result,
        observer_results=list(spec.observer_results),
        is_error=spec.is_error,
        is_approved=spec.is_approved,
        is_loading=spec.is_loading,
        has_feedback=spec.has_feedback,
        tool_result_contents=list(spec.tool_result_contents),
        error=spec.error_message if spec.is_error else None,
        terminate=spec.terminate,
        metadata=dict(spec.metadata),
    )
    return ToolMessage(
        id=spec.message_id or new_id(),
        task_id=task_id,
        started_ts=ts,
        finished_ts=ts,
        content=[part],
    )


@typed_errors
def plan_add_tool_result_message(
    header: TaskHeader, task_id: str, tool_call_id: str, tool_name: str, result: Any,
    spec: ToolResultSpec, **kw: Any,
) -> Plan:  # fmt: skip
    planner = Planner(header, task_id, **kw)
    message = build_tool_result_message(
        task_id, tool_call_id, tool_name, result, spec, resolve_ts(spec.timestamp, planner.now)
    )
    return planner.finish(planner.append(message))


@typed_errors
def plan_add_informational_message(
    header: TaskHeader,
    task_id: str,
    informational_type: str,
    details: str,
    is_visible_ai: bool = False,
    is_visible_ui: bool = False,
    additional_data: JSON | list[JSON] | None = None,
    timestamp: float | None = None,
    message_id: str | None = None,
    **kw: Any,
) -> Plan:
    check_text(informational_type, "informational_type")
    check_text(details, "details")
    check_bool(is_visible_ai, "is_visible_ai")
    check_bool(is_visible_ui, "is_visible_ui")
    if additional_data is not None and not isinstance(additional_data, (dict, list)):
        raise ValidationError("additional_data must be a dict or a list of dicts")
    planner = Planner(header, task_id, **kw)
    ts = resolve_ts(timestamp, planner.now)
    message = InformationalMessage(
        id=message_id or new_id(),
        task_id=task_id,
        started_ts=ts,
        finished_ts=ts,
        content=[
            InformationalPart(
                is_visible_ai=is_visible_ai,
                is_visible_ui=is_visible_ui,
                informational_type=informational_type,
                details=details,
                additional_data=additional_data,
            )
        ],
    )
    return planner.finish(planner.append(message))


def compression_ids(compressed_message_ids: Any, kept_message_ids: Any) -> set[str]:
    """The distinct message ids a checkpoint refers to (each must name a stored message)."""
    ids: set[str] = set()
    for name, values in (("compressed_message_ids", compressed_message_ids),
                         ("kept_message_ids", kept_message_ids)):  # fmt: skip
        if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
            raise ValidationError(f"{name} must be a list of message ids")
        ids.update(check_message_id(value, f"{name} item") for value in values)
    return ids


def check_compression_marker(
    header: TaskHeader,
    start_idx: Any,
    end_idx: Any,
    reason: Any,
    strategies: Any,
    compressed_message_ids: Any,
    kept_message_ids: Any,
    cache: Any,
    metadata: Any,
) -> None:
    """A checkpoint must describe a real range of this task: indexes inside the history,
    start <= end, and ids in the name alphabet (the store also checks that they exist)."""
    check_int(start_idx, "start_idx", maximum=max(header.seq - 1, 0))
    check_int(end_idx, "end_idx", maximum=max(header.seq - 1, 0))
    if start_idx > end_idx:
        raise ValidationError(f"start_idx {start_idx} is after end_idx {end_idx}")
    check_text(reason, "reason")
    if isinstance(strategies, (str, bytes)) or not isinstance(strategies, (list, tuple)):
        raise ValidationError("strategies must be a list of strings")
    for value in strategies:
        check_text(value, "strategies item")
    compression_ids(compressed_message_ids, kept_message_ids)
    check_optional_json(cache, "cache", max_bytes=1024 * 1024)
    check_optional_json(metadata, "metadata", max_bytes=1024 * 1024)


@typed_errors
def plan_add_compression_message(
    header: TaskHeader,
    task_id: str,
    start_idx: int,
    end_idx: int,
    reason: str,
    strategies: Sequence[str],
    compressed_message_ids: Sequence[str],
    kept_message_ids: Sequence[str],
    cache: JSON | None = None,
    metadata: JSON | None = None,
    timestamp: float | None = None,
    message_id: str | None = None,
    **kw: Any,
) -> Plan:
    check_compression_marker(header, start_idx, end_idx, reason, strategies,
                             compressed_message_ids, kept_message_ids, cache, metadata)  # fmt: skip
    planner = Planner(header, task_id, **kw)
    ts = resolve_ts(timestamp, planner.now)
    message = CompressionMessage(
        id=message_id or new_id(),
        task_id=task_id,
        started_ts=ts,
        finished_ts=ts,
        content=[
            CompressionPart(
                start_message_idx=start_idx,
                end_message_idx=end_idx,
                reason=reason,
                strategies=list(strategies or []),
                compressed_message_ids=list(compressed_message_ids or []),
                kept_message_ids=list(kept_message_ids or []),
                cache=dict(cache) if cache is not None else {},
                metadata=metadata,
            )
        ],
    )
    return planner.finish(planner.append(message))


def answer_call(
    planner: Planner,
    ref: ToolCallRef,
    tool_message: ToolMessage,
    is_loading: bool,
) -> ToolMessage:
    """Flip the call part's flags (the Mind Map `answer_tool_call`) and append the result."""
    if ref.index < planner.base:
        for name, value in (("is_loading", is_loading), ("is_approval_pending", False)):
            planner.patches.append(
                Patch(ref.index, ref.message_id, f"content.{ref.part}.{name}", value)
            )
    else:  # the call was appended in this same write
        call_message = planner.appended[ref.index - planner.base]
        part = call_message.content[ref.part]
        assert isinstance(part, ToolCallPart), "a ToolCallRef points at a tool call part"
        part.is_loading, part.is_approval_pending = is_loading, False
    planner.append(tool_message)
    return tool_message


@typed_errors
def plan_answer_tool_call(
    header: TaskHeader, task_id: str, tool_call_id: str, result: Any, spec: ToolResultSpec,
    **kw: Any,
) -> Plan:  # fmt: skip
    """Answer an open tool call: one update flips its flags and appends the ToolMessage.

    The patch is guarded by the id of the message holding the call, so a stale index can
    never patch the wrong message.
    """
    ref = header.open_call(tool_call_id)
    if ref is None:
        raise UnknownToolCall(
            f"no open tool call with id {tool_call_id!r} (unknown or already answered)"
        )
    planner = Planner(header, task_id, **kw)
    message = build_tool_result_message(
        task_id, tool_call_id, ref.name, result, spec, resolve_ts(spec.timestamp, planner.now)
    )
    answer_call(planner, ref, message, spec.is_loading)
    return planner.finish(message)
