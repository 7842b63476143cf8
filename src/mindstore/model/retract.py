"""Retracting the last message of a task: what the header becomes, decided without I/O.

Appending folds a message into the header (`Planner.append`); retracting unfolds the last
one. The repository reads the header with the task's last two messages (a `$slice`), asks
`plan_retract` for the new header, and applies it with one update guarded by the header
`version` and the retracted message's id, which truncates the array (`$push` with an empty
`$each` and `$slice: seq - 1`) and sets the changed header fields. A replay, or a
concurrent retract that won, matches nothing, so a message is retracted exactly once.

What the header loses with the message:

* `seq` and `size_bytes` (the stored document's exact BSON size), and its usage;
* the tool calls it opened (an assistant message's unanswered calls are dropped from
  `open_tool_calls`);
* the calls it answered (a tool message's results): such a call is open again, unless
  another stored result still answers it, so the next `answer_tool_call` can answer it;
* a sub-task it entered (a task entry is the innermost scope frame: popped);
* the tail, which becomes the previous message (as stored: appending the retracted
  message finished it, unless the history was imported as it was).

Task exits and task configs are refused (`InvalidTransition`): undoing them would need
the exited frame or the previous configuration, which the header no longer holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mindstore.errors import InvalidTransition
from mindstore.model.header import Tail, TaskHeader, ToolCallRef
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    TaskConfigMessage,
    TaskEntryMessage,
    TaskExitMessage,
    ToolMessage,
)
from mindstore.model.parts import ToolCallPart, ToolResultPart
from mindstore.model.plans import message_usage


@dataclass
class RetractPlan:
    """The retracted message (its stored form) and the header without it."""

    index: int
    message: AnyMessage
    header_before: TaskHeader
    header: TaskHeader
    reopened: list[str] = field(default_factory=list)


def answered_calls(message: AnyMessage) -> list[str]:
    """The tool-call ids a message answers (a tool message's results), in order."""
    if not isinstance(message, ToolMessage):
        return []
    seen: list[str] = []
    for part in message.content:
        if isinstance(part, ToolResultPart) and part.tool_call_id not in seen:
            seen.append(part.tool_call_id)
    return seen


def check_retractable(header: TaskHeader, message: AnyMessage) -> None:
    """Refuse what a retract cannot undo from the header alone."""
    if isinstance(message, TaskExitMessage):
        raise InvalidTransition(
            "retract_last cannot retract a task exit: the sub-task it closed is not in the header"
        )
    if isinstance(message, TaskConfigMessage):
        raise InvalidTransition(
            "retract_last cannot retract a task config: "
            "the previous configuration is not in the header"
        )
    if isinstance(message, TaskEntryMessage) and (
        not header.scope_stack or header.scope_stack[-1].entry_id != message.id
    ):
        raise InvalidTransition("retract_last: the task entry is not the innermost open sub-task")


def reopened_calls(
    call_ids: Sequence[str], rows: Sequence[Mapping[str, Any]], retracted_index: int
) -> list[ToolCallRef]:
    """The calls to open again, from the stored messages that mention them.

    `rows` are `{"index": i, "message": message}` for every stored message holding a call
    or a result with one of `call_ids` (the repository's lookup). A call is re-opened when
    it is stored before the retracted message and no other result (outside the retracted
    message) answers it.
    """
    answered_elsewhere: set[str] = set()
    found: dict[str, ToolCallRef] = {}
    for row in rows:
        index = int(row["index"])
        message = row["message"]
        if index == retracted_index:
            continue
        if isinstance(message, ToolMessage):
            for part in message.content:
                if isinstance(part, ToolResultPart) and part.tool_call_id in call_ids:
                    answered_elsewhere.add(part.tool_call_id)
        elif isinstance(message, AssistantMessage) and index < retracted_index:
            for position, part in enumerate(message.content):
                if isinstance(part, ToolCallPart) and part.tool_call_id in call_ids:
                    found.setdefault(part.tool_call_id, ToolCallRef(
                        id=part.tool_call_id, name=part.tool_name, index=index, part=position,
                        message_id=message.id,
                    ))  # fmt: skip
    return [found[i] for i in call_ids if i in found and i not in answered_elsewhere]


def plan_retract(
    header: TaskHeader,
    message: AnyMessage,
    stored_size: int,
    previous: AnyMessage | None,
    reopen: Sequence[ToolCallRef] = (),
) -> RetractPlan:
    """The header once the last message (`message`, stored in `stored_size` BSON bytes)
    is gone; `previous` is the message before it (None when it was the only one) and
    `reopen` the calls it answered that are open again (`reopened_calls`)."""
    if header.seq == 0 or header.tail is None:
        raise InvalidTransition("retract_last: the task has no message")
    index = header.seq - 1
    if header.tail.id != message.id:
        raise InvalidTransition(f"retract_last: message {message.id!r} is not the last message")
    check_retractable(header, message)
    after = header.model_copy(deep=True)
    after.seq = index
    after.size_bytes = max(0, header.size_bytes - stored_size)
    after.usage = header.usage.plus(message_usage(message), sign=-1)
    if isinstance(message, TaskEntryMessage):
        after.scope_stack.pop()
    calls = [ref for ref in after.open_tool_calls if ref.index != index]
    open_ids = {ref.id for ref in calls}
    reopened = [ref for ref in reopen if ref.id not in open_ids and ref.index < index]
    after.open_tool_calls = sorted([*calls, *reopened], key=lambda ref: (ref.index, ref.part))
    if previous is None or index == 0:
        after.tail = None
    else:
        role = previous.role if isinstance(previous.role, str) else None
        after.tail = Tail(index=index - 1, id=previous.id, role=role,
                          started_ts=getattr(previous, "started_ts", 0) or 0,
                          finished=getattr(previous, "finished_ts", None) is not None)  # fmt: skip
    return RetractPlan(index=index, message=message, header_before=header, header=after,
                       reopened=[ref.id for ref in reopened])  # fmt: skip


def retract_update(
    plan: RetractPlan, *, key: str, tenant: str, version: int, now: Any,
    changed: Mapping[str, Any], sealed: int = 0,
) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
    """(filter, update): truncate the array by one under the version and id guards.

    `$push` with an empty `$each` and `$slice: n` keeps the first n elements (the portable
    way to shorten an array); `changed` holds the header fields to set. The two touch
    disjoint paths (`messages` and top-level header fields). A paged task's array holds
    the messages from `sealed` on, so positions are counted from there.
    """
    position = plan.index - sealed
    query = {"_id": key, "tenant": tenant, "version": version,
             f"messages.{position}.id": plan.message.id}  # fmt: skip
    sets = {**changed, "updated_at": now, "version": version + 1}
    # `patched`: a message went, so a seal that read the open page before must not land
    return query, {"$push": {"messages": {"$each": [], "$slice": position}}, "$set": sets,
                   "$inc": {"patched": 1}}  # fmt: skip
