"""The agent-graph format's state reducers, as pure functions over message lists.

A reducer merges a node's output into graph state. They are the building blocks agent
frameworks use to keep a working context, and `remove_tool_messages` is what the
message-count context manager uses to shed finished tool traffic.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Protocol, TypeVar

from mindstore.compression.toolpairs import call_ids, role_of
from mindstore.model.messages import AnyMessage


class _HasId(Protocol):
    @property
    def id(self) -> Hashable: ...


T = TypeVar("T", bound=_HasId)


def _unique_by_id(left: Sequence[T], right: Sequence[T]) -> list[T]:
    seen = {item.id for item in left}
    merged = list(left)
    for item in right:
        key = item.id
        if key not in seen:
            seen.add(key)
            merged.append(item)
    return merged


def add_messages(left: Sequence[AnyMessage], right: Sequence[AnyMessage]) -> list[AnyMessage]:
    """`left` then the messages of `right` whose id is not there yet."""
    return _unique_by_id(left, right)


def append_items(left: Sequence[Any], right: Sequence[Any]) -> list[Any]:
    """Like `add_messages`, for any items with an `.id`."""
    return _unique_by_id(left, right)


def replace_messages(left: Sequence[AnyMessage], right: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The new list wins; the old one is ignored."""
    return list(right)


def remove_tool_messages(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """Drop completed tool sequences: an assistant message with tool calls, the tool
    results right after it, and only when an assistant message without tool calls follows.

    Incomplete sequences (no results yet, or results but no final answer yet) are kept
    whole, so a conversation in the middle of a tool round stays intact.
    """
    kept: list[AnyMessage] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        if call_ids(message):
            end = index + 1
            while end < len(messages) and role_of(messages[end]) == "tool":
                end += 1
            complete = (
                end > index + 1
                and end < len(messages)
                and role_of(messages[end]) == "assistant"
                and not call_ids(messages[end])
            )
            if complete:
                index = end  # the final answer is kept by the next iteration
                continue
        kept.append(message)
        index += 1
    return kept
