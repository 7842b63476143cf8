"""The task header: the small summary of a task that every verb plans from.

A verb must never read the whole message list (a task may hold 10,000 messages). The
header holds just enough to decide what a verb writes: the next index (`seq`), the open
sub-task frames (innermost last), the open tool calls, the tail message's timing, the
model of the current configuration, the running size and the usage roll-ups. It is folded
forward by `Planner.append` message by message, so the in-memory `Task` and the stored
document derive it the same way.
"""

from __future__ import annotations

from enum import Enum

from pydantic import Field

from mindstore.model.base import Model


class TaskState(str, Enum):
    running = "running"
    completed = "completed"
    failed = "failed"
    paused = "paused"
    aborted = "aborted"
    resume_awaited = "resume_awaited"


ALLOWED_TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    TaskState.running: frozenset(
        {
            TaskState.completed,
            TaskState.failed,
            TaskState.paused,
            TaskState.aborted,
            TaskState.resume_awaited,
        }
    ),
    TaskState.paused: frozenset({TaskState.running, TaskState.aborted, TaskState.failed}),
    TaskState.resume_awaited: frozenset(
        {TaskState.running, TaskState.paused, TaskState.aborted, TaskState.failed}
    ),
    # A finished conversation can be continued (a follow-up question) or retried.
    TaskState.completed: frozenset({TaskState.running}),
    TaskState.failed: frozenset({TaskState.running, TaskState.aborted}),
    TaskState.aborted: frozenset(),
}


class ToolCallRef(Model):
    """Where a tool call part lives: message index and part index (both immutable)."""

    id: str
    name: str
    index: int
    part: int
    message_id: str = ""


class ScopeFrame(Model):
    """One open sub-task: its entry message and what its exit will need."""

    entry_id: str
    index: int
    model_name: str | None = None
    entry_tools: list[str] = Field(default_factory=list)
    # The last tool call of the message right before the entry: the Mind Map's fallback
    # trigger when no task-entry tool call is found by name (frames written before the
    # trigger was recorded at entry time).
    fallback: ToolCallRef | None = None
    # The open call that opened this sub-task, decided when the entry is written; the exit
    # answers exactly this call (None: it answers nothing).
    trigger: ToolCallRef | None = None
    trigger_recorded: bool = False


class Tail(Model):
    """The last message: enough to set its `finished_ts` when the next one arrives."""

    index: int
    id: str
    role: str | None = None
    started_ts: int | float = 0
    finished: bool = False


class UsageTotals(Model):
    tokens_in: int = 0
    tokens_out: int = 0
    cache_reads: int = 0
    cache_writes: int = 0
    cost: float = 0.0

    def plus(self, other: "UsageTotals", sign: int = 1) -> "UsageTotals":
        return UsageTotals(
            tokens_in=self.tokens_in + sign * other.tokens_in,
            tokens_out=self.tokens_out + sign * other.tokens_out,
            cache_reads=self.cache_reads + sign * other.cache_reads,
            cache_writes=self.cache_writes + sign * other.cache_writes,
            cost=round(self.cost + sign * other.cost, 10),
        )

    def is_zero(self) -> bool:
        return self == UsageTotals()


class TaskHeader(Model):
    seq: int = 0
    size_bytes: int = 0
    scope_stack: list[ScopeFrame] = Field(default_factory=list)
    open_tool_calls: list[ToolCallRef] = Field(default_factory=list)
    root_config_index: int | None = None
    root_model_name: str | None = None
    root_entry_tools: list[str] = Field(default_factory=list)
    last_config_index: int | None = None
    last_model_name: str | None = None
    tail: Tail | None = None
    usage: UsageTotals = Field(default_factory=UsageTotals)

    @property
    def level(self) -> int:
        return len(self.scope_stack)

    @property
    def current_scope(self) -> str | None:
        return self.scope_stack[-1].entry_id if self.scope_stack else None

    def current_model_name(self) -> str | None:
        """Model of the current level's config (the Mind Map `current_task_config`)."""
        if self.scope_stack:
            return self.scope_stack[-1].model_name
        if self.root_config_index is not None:
            return self.root_model_name
        return self.last_model_name

    def current_config_index(self) -> tuple[int, str] | None:
        """Where the current level's config is stored: (message index, 'entry'|'config')."""
        if self.scope_stack:
            return self.scope_stack[-1].index, "entry"
        if self.root_config_index is not None:
            return self.root_config_index, "config"
        if self.last_config_index is not None:
            return self.last_config_index, "config"
        return None

    def open_call(self, tool_call_id: str) -> ToolCallRef | None:
        for ref in self.open_tool_calls:
            if ref.id == tool_call_id:
                return ref
        return None


HEADER_FIELDS: tuple[str, ...] = tuple(TaskHeader.model_fields)
