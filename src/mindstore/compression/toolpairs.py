"""Tool call / tool result pairing: no view may keep one half of a pair without the other.

Provider APIs reject a tool result whose call is missing (and many reject an unanswered
call), so every place that cuts a history (compression rounds, context managers) moves
its cut with these helpers instead of cutting at an arbitrary message.
"""

from __future__ import annotations

from collections.abc import Sequence

from mindstore.model.messages import AnyMessage, AssistantMessage, ToolMessage
from mindstore.model.parts import ToolCallPart, ToolResultPart


def role_of(message: AnyMessage) -> str | None:
    return getattr(message, "role", None)


def call_ids(message: AnyMessage) -> list[str]:
    """Tool call ids an assistant message issues."""
    if not isinstance(message, AssistantMessage):
        return []
    return [p.tool_call_id for p in message.content if isinstance(p, ToolCallPart)]


def result_ids(message: AnyMessage) -> list[str]:
    """Tool call ids a tool message answers."""
    if not isinstance(message, ToolMessage):
        return []
    return [p.tool_call_id for p in message.content if isinstance(p, ToolResultPart)]


def safe_cut(messages: Sequence[AnyMessage], cut: int, floor: int = 0) -> int:
    """The largest index <= `cut` (and >= `floor`) such that keeping `messages[index:]`
    keeps the call of every tool result it keeps.

    Moving the cut earlier only keeps more, so the result is always safe to apply.
    """
    issued_at: dict[str, int] = {}
    for index, message in enumerate(messages):
        for call_id in call_ids(message):
            issued_at.setdefault(call_id, index)
    cut = max(min(cut, len(messages)), floor)
    while cut > floor:
        earliest = min(
            (issued_at[call_id]
             for message in messages[cut:]
             for call_id in result_ids(message)
             if call_id in issued_at and floor <= issued_at[call_id] < cut),
            default=None,
        )  # fmt: skip
        if earliest is None:
            break
        cut = earliest
    return cut


def drop_orphan_results(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """`messages` without tool results whose call is not among them."""
    issued = {call_id for message in messages for call_id in call_ids(message)}
    return [
        message
        for message in messages
        if not (role_of(message) == "tool" and not set(result_ids(message)) <= issued)
    ]
