"""Read-side mind-map semantics over a list of messages with materialized scopes.

These are the reference computations: the repository computes the same things with
aggregation pipelines, and property tests hold the two to each other.

Levels (fixing the Mind Map): the current level is the innermost task entry that has no exit
yet. The messages of a sub-task S are its entry message, then every message whose
`scope` is S except the entries of S's own children (their messages are one level down),
then S's exit if it has one. The root level is every message with no scope, except
entries of sub-tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mindstore.model.base import Timestamp, to_ms
from mindstore.model.messages import AnyMessage


def _role(message: AnyMessage) -> str | None:
    return getattr(message, "role", None)


def level_messages(messages: Sequence[AnyMessage], scope: str | None) -> list[AnyMessage]:
    """Messages of the level `scope` (None = root), entry and exit included."""
    return [
        message
        for message in messages
        if (message.id == scope and scope is not None and _role(message) == "taskentry")
        or (message.scope == scope and _role(message) != "taskentry")
    ]


def level_boundaries(
    messages: Sequence[AnyMessage], scope: str | None
) -> tuple[int | None, int | None]:
    """(entry index, exit index or None) of a level; the root is (0, None)."""
    if scope is None:
        return 0, None
    entry_index = exit_index = None
    for index, message in enumerate(messages):
        role = _role(message)
        if role == "taskentry" and message.id == scope:
            entry_index = index
        elif role == "taskexit" and message.scope == scope:
            exit_index = index
    return entry_index, exit_index


@dataclass(frozen=True)
class SubTaskSpan:
    """One sub-task of a task: where it starts and ends, how deep, how big, how long."""

    entry_id: str
    entry_index: int
    exit_index: int | None
    depth: int
    parent_scope: str | None
    message_count: int
    started_ts: Timestamp
    finished_ts: Timestamp | None

    @property
    def duration(self) -> float | None:
        """Seconds from entry to exit, to the millisecond (the timestamps' precision)."""
        return None if self.finished_ts is None else to_ms(self.finished_ts - self.started_ts)


def sub_task_spans(messages: Sequence[AnyMessage]) -> list[SubTaskSpan]:
    """Every sub-task in entry order; `message_count` counts the level's own messages
    (entry and exit included, children's messages not)."""
    spans: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for index, message in enumerate(messages):
        role = _role(message)
        if role == "taskentry":
            spans[message.id] = {
                "entry_index": index,
                "exit_index": None,
                "depth": message.depth + 1,
                "parent_scope": message.scope,
                "count": 1,
                "started_ts": message.started_ts,
                "finished_ts": None,
            }
            order.append(message.id)
        scope = message.scope
        if scope is not None and scope in spans and role != "taskentry":
            spans[scope]["count"] += 1
            if role == "taskexit":
                spans[scope]["exit_index"] = index
                spans[scope]["finished_ts"] = message.started_ts
    return [
        SubTaskSpan(
            entry_id=entry_id,
            entry_index=span["entry_index"],
            exit_index=span["exit_index"],
            depth=span["depth"],
            parent_scope=span["parent_scope"],
            message_count=span["count"],
            started_ts=span["started_ts"],
            finished_ts=span["finished_ts"],
        )
        for entry_id, span in ((key, spans[key]) for key in order)
    ]
