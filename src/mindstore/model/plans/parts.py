"""Part verbs: they change one stored message (text, reasoning, tool calls, the finish of
an assistant turn), which the caller supplies with its index.
"""

from __future__ import annotations

from typing import Any, TypeVar

from mindstore.errors import (
    InvalidTransition,
    ValidationError,
)
from mindstore.model.base import now_ts
from mindstore.model.header import TaskHeader
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    MessageBase,
    SystemMessage,
    Usage,
    UserMessage,
)
from mindstore.model.parts import (
    ReasoningPart,
    TextPart,
    ToolCallPart,
)
from mindstore.model.plans.core import (
    Plan,
    Planner,
    check_message_values,
    typed_errors,
)
from mindstore.validation import (
    check_number,
    check_optional_int,
    check_timestamp,
)

_Role = TypeVar("_Role", bound=MessageBase)


def _require_role(message: AnyMessage, allowed: tuple[type[_Role], ...], verb: str) -> _Role:
    """`message`, typed as one of the `allowed` roles; a typed error for any other role."""
    if not isinstance(message, allowed):
        role = getattr(message, "role", None)
        raise InvalidTransition(f"{verb} is not allowed on a {role} message")
    return message


@typed_errors
def plan_add_text_part(
    header: TaskHeader, task_id: str, index: int, message: AnyMessage, text: str, **kw: Any
) -> Plan:
    if not isinstance(text, str) or not text:
        raise ValidationError("text part must be a non-empty string")
    _require_role(message, (SystemMessage, UserMessage, AssistantMessage), "add_text_part")
    new = message.model_copy(deep=True)
    new.content.append(TextPart(text=text))
    paths: list[tuple[str, Any]] = [(f"content.{len(message.content)}", TextPart(text=text))]
    if isinstance(new, AssistantMessage) and new.status == "completed":
        new.status = "loading"
        paths.append(("status", "loading"))
    planner = Planner(header, task_id, **kw)
    planner.patch_message(index, message, new, paths)
    return planner.finish(new)


@typed_errors
def plan_add_reasoning_part(
    header: TaskHeader,
    task_id: str,
    index: int,
    message: AnyMessage,
    reasoning: str,
    signature: str | None = None,
    **kw: Any,
) -> Plan:
    if not isinstance(reasoning, str) or not reasoning:
        raise ValidationError("reasoning part must be a non-empty string")
    message = _require_role(message, (AssistantMessage,), "add_reasoning_part")
    planner = Planner(header, task_id, **kw)
    started = now_ts()
    new = message.model_copy(deep=True)
    paths: list[tuple[str, Any]] = []
    for position in range(len(new.content) - 1, -1, -1):
        part = new.content[position]
        if isinstance(part, ReasoningPart) and part.finished_ts is None:
            part.finished_ts = started
            paths.append((f"content.{position}.finished_ts", started))
            break
    part = ReasoningPart(reasoning=reasoning, signature=signature, started_ts=started)
    new.content.append(part)
    paths.append((f"content.{len(message.content)}", part))
    planner.patch_message(index, message, new, paths)
    return planner.finish(new)


@typed_errors
def plan_add_tool_call_part(
    header: TaskHeader,
    task_id: str,
    index: int,
    message: AnyMessage,
    tool_call: ToolCallPart,
    **kw: Any,
) -> Plan:
    if not isinstance(tool_call, ToolCallPart):
        raise ValidationError(f"expected a ToolCallPart, got {type(tool_call).__name__}")
    message = _require_role(message, (AssistantMessage,), "add_tool_call_part")
    planner = Planner(header, task_id, **kw)
    if any(isinstance(p, ToolCallPart) and p == tool_call for p in message.content):
        return planner.finish(message)  # this very call is in the message: a replay, no write
    new = message.model_copy(deep=True)
    paths: list[tuple[str, Any]] = []
    for position in range(len(new.content) - 1, -1, -1):
        part = new.content[position]
        if isinstance(part, ReasoningPart) and part.finished_ts is None:
            part.finished_ts = now_ts()
            paths.append((f"content.{position}.finished_ts", part.finished_ts))
            break
    position = len(message.content)
    new.content.append(tool_call)
    paths.append((f"content.{position}", tool_call))
    if new.status != "loading":
        new.status = "loading"
        paths.append(("status", "loading"))
    planner.patch_message(index, message, new, paths)
    planner.open_tool_call(tool_call, index, position, message.id)
    return planner.finish(new)


@typed_errors
def plan_finish_assistant_message(
    header: TaskHeader,
    task_id: str,
    index: int,
    message: AnyMessage,
    status: str = "completed",
    usage: Usage | None = None,
    tokens_in: int | None = None,
    tokens_out: int | None = None,
    cache_reads: int | None = None,
    cache_writes: int | None = None,
    cost: float | None = None,
    finished_ts: float | None = None,
    **kw: Any,
) -> Plan:
    """Close an assistant turn: status, usage and finish time; usage rolls up in the same write."""
    message = _require_role(message, (AssistantMessage,), "finish_assistant_message")
    if not isinstance(status, str) or status not in {
        "loading",
        "completed",
        "error",
        "interrupted",
    }:
        raise ValidationError(f"unknown assistant status {status!r}")
    planner = Planner(header, task_id, **kw)
    new = message.model_copy(deep=True)
    paths: list[tuple[str, Any]] = [("status", status)]
    new.status = status
    counts = {name: check_optional_int(value, name) for name, value in (
        ("tokens_in", tokens_in), ("tokens_out", tokens_out),
        ("cache_reads", cache_reads), ("cache_writes", cache_writes),
    )}  # fmt: skip
    if cost is not None:
        check_number(cost, "cost")
    check_timestamp(finished_ts, "finished_ts")
    if usage is not None and not isinstance(usage, Usage):
        raise ValidationError(f"usage must be a Usage, got {type(usage).__name__}")
    for name, value in (*counts.items(), ("cost", cost)):
        if value is not None:
            setattr(new, name, value)
            paths.append((name, value))
    if usage is not None:
        new.usage = usage
        paths.append(("usage", usage))
    check_message_values(new)
    if finished_ts is not None or new.finished_ts is None:
        new.finished_ts = finished_ts if finished_ts is not None else planner.now
        paths.append(("finished_ts", new.finished_ts))
    planner.patch_message(index, message, new, paths)
    return planner.finish(new)
