"""Sub-task verbs: an entry (with the call its exit will answer) and an exit (with that
answer), each one `Plan` so a reader never sees half of either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mindstore.errors import (
    InvalidTransition,
    ValidationError,
    WrongType,
)
from mindstore.ids import derived_name
from mindstore.model.base import later_ts, new_id
from mindstore.model.header import TaskHeader, ToolCallRef
from mindstore.model.messages import (
    InformationalMessage,
    TaskConfigMessage,
    TaskEntryMessage,
    TaskExitMessage,
)
from mindstore.model.parts import (
    ImagePart,
    InformationalPart,
    TaskConfigPart,
    TaskEntryPart,
    TaskExitPart,
    TextPart,
    ToolResultContent,
)
from mindstore.model.plans.core import (
    Plan,
    Planner,
    resolve_ts,
    typed_errors,
)
from mindstore.model.plans.messages import (
    answer_call,
    build_human_message,
    build_tool_result_message,
)
from mindstore.model.specs import ToolResultSpec
from mindstore.validation import check_text


@typed_errors
def plan_add_task_entry(
    header: TaskHeader,
    task_id: str,
    task_description: Sequence[TextPart | ImagePart | InformationalPart],
    initial_task_config: TaskConfigPart,
    entry_id: str | None = None,
    timestamp: float | None = None,
    trigger_call_id: str | None = None,
    **kw: Any,
) -> Plan:
    """The Mind Map's `add_task_entry`: entry, config, hidden user context, informational
    parts. The entry records the open call it answers at its exit (`choose_trigger`, or
    `trigger_call_id` when the caller names it)."""
    if isinstance(task_description, (str, bytes)) or not isinstance(task_description, Sequence):
        raise WrongType("task_description must be a list of parts")
    description = list(task_description)
    for part in description:
        if not isinstance(part, (TextPart, ImagePart, InformationalPart)):
            raise ValidationError(
                "task description parts must be text, image or informational, "
                f"got {type(part).__name__}"
            )
    if not isinstance(initial_task_config, TaskConfigPart):
        raise WrongType("initial_task_config must be a TaskConfigPart")
    planner = Planner(header, task_id, **kw)
    entry_ts = resolve_ts(timestamp, planner.now)
    entry = TaskEntryMessage(
        id=entry_id or new_id(),
        task_id=task_id,
        started_ts=entry_ts,
        finished_ts=entry_ts,
        content=[
            # set only when named: a set trigger_call_id (even None) marks a recorded trigger
            TaskEntryPart(initial_task_config=initial_task_config, initial_context=description,
                          trigger_call_id=trigger_call_id)
            if trigger_call_id
            else TaskEntryPart(initial_task_config=initial_task_config, initial_context=description)
        ],
    )  # fmt: skip
    planner.append(entry)
    ts = later_ts(entry_ts, 1)

    def named(what: str) -> str:  # named by the entry: a retry from anywhere writes the same
        return derived_name(entry_id, what) if entry_id else new_id()

    planner.append(
        TaskConfigMessage(
            id=named("config"),
            task_id=task_id,
            started_ts=ts,
            finished_ts=ts,
            content=[initial_task_config],
        )
    )
    texts = [part.text for part in description if isinstance(part, TextPart)]
    images = [part for part in description if isinstance(part, ImagePart)]
    if texts or images:
        user = build_human_message(task_id, texts, images, True, later_ts(entry_ts, 2),
                                   named("context"))  # fmt: skip
        if user is not None:
            planner.append(user)
    infos = [part for part in description if isinstance(part, InformationalPart)]
    for position, part in enumerate(infos):
        ts = later_ts(entry_ts, 3 + position)
        planner.append(
            InformationalMessage(
                task_id=task_id,
                started_ts=ts,
                finished_ts=ts,
                id=named(f"informational {position}"),
                content=[
                    InformationalPart(
                        is_visible_ai=part.is_visible_ai,
                        is_visible_ui=part.is_visible_ui,
                        informational_type=part.informational_type or "context",
                        details=part.details or "",
                        additional_data=part.additional_data,
                    )
                ],
            )
        )
    return planner.finish(entry)


def find_exit_trigger(header: TaskHeader) -> ToolCallRef | None:
    """The tool call a sub-task exit answers, with the Mind Map's priorities.

    1. In the message right before the entry: the last unanswered call of a task-entry tool
       (names from the sub-task's config), else the last call of any tool.
    2. Otherwise the latest unanswered task-entry tool call anywhere before the entry.
    """
    frame = header.scope_stack[-1]
    names = set(frame.entry_tools)
    by_name = [
        ref for ref in header.open_tool_calls if ref.index < frame.index and ref.name in names
    ]
    just_before = [ref for ref in by_name if ref.index == frame.index - 1]
    if just_before:
        return max(just_before, key=lambda ref: ref.part)
    if frame.fallback is not None:
        return frame.fallback
    if by_name:
        return max(by_name, key=lambda ref: (ref.index, ref.part))
    return None


@typed_errors
def plan_add_task_exit(
    header: TaskHeader,
    task_id: str,
    handoff_description: Sequence[TextPart | ImagePart],
    payload_key: str = "task_result",
    timestamp: float | None = None,
    exit_id: str | None = None,
    result_message_id: str | None = None,
    **kw: Any,
) -> Plan:
    """The Mind Map `add_task_exit`: the exit plus, if a trigger is found, its answer.

    Result is `(exit_message, tool_message_or_None)`. The whole thing is one write, so a
    reader never sees an exited sub-task whose triggering call is still loading.
    """
    if not header.scope_stack:
        raise InvalidTransition("task exit at the root level: no sub-task is open")
    check_text(payload_key, "payload_key", empty=False)
    if isinstance(handoff_description, (str, bytes)) or not isinstance(
        handoff_description, Sequence
    ):
        raise WrongType("handoff_description must be a list of parts")
    handoff = list(handoff_description)
    for part in handoff:
        if not isinstance(part, (TextPart, ImagePart)):
            raise ValidationError(f"handoff parts must be text or image, got {type(part).__name__}")
    frame = header.scope_stack[-1]
    if frame.trigger_recorded:  # decided at the entry; already answered -> nothing to answer
        trigger = header.open_call(frame.trigger.id) if frame.trigger is not None else None
    else:  # an entry written before triggers were recorded: the Mind Map's search
        trigger = find_exit_trigger(header)
    planner = Planner(header, task_id, **kw)
    exit_ts = resolve_ts(timestamp, planner.now)
    exit_message = TaskExitMessage(
        id=exit_id or new_id(),
        task_id=task_id,
        started_ts=exit_ts,
        finished_ts=exit_ts,
        content=[
            TaskExitPart(handoff_description=handoff, tool_call_id=trigger.id if trigger else None)
        ],
    )
    if trigger is None:
        planner.append(exit_message)
        return planner.finish((exit_message, None))
    text = "".join(part.text for part in handoff if isinstance(part, TextPart))
    contents = [
        ToolResultContent(type="image", image_data=part.image, mime_type=part.mime_type)
        for part in handoff
        if isinstance(part, ImagePart)
    ]
    if text:
        contents.append(ToolResultContent(type="text", text=text))
    if result_message_id is None and exit_id:  # named by the exit: a retry writes the same
        result_message_id = derived_name(exit_id, "answer")
    answer = ToolResultSpec(tool_result_contents=tuple(contents), has_feedback=True,
                            message_id=result_message_id)  # fmt: skip
    tool_message = build_tool_result_message(
        task_id, trigger.id, trigger.name,
        {payload_key: text, "status": "completed", "message": text},
        answer, later_ts(exit_ts, 1),
    )  # fmt: skip
    exit_part = exit_message.content[0]
    assert isinstance(exit_part, TaskExitPart)  # built just above
    exit_part.answer_id = tool_message.id
    planner.append(exit_message)
    # The fallback trigger may already be answered: closing it again is a no-op.
    answer_call(planner, trigger, tool_message, False)
    return planner.finish((exit_message, tool_message))
