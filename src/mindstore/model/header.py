"""The task header: the small summary of a task that every verb plans from.

A verb must never read the whole message list (a task may hold 10,000 messages). The
header holds just enough to decide what a verb writes: the next index (`seq`), the open
sub-task frames (innermost last), the open tool calls, the tail message's timing, the
model of the current configuration, the running size and the usage roll-ups. It is folded
forward by `Planner.append` message by message, so the in-memory `Task` and the stored
document derive it the same way.

The stored form (`stored_header` / `header_from_stored`) is smaller than the model, because
every append rewrites part of it and those bytes travel with every message:

* the tail is not stored: it describes the last message, which a header read fetches
  anyway (`$slice: -1`), so it is derived from that message (`tail_of`), and its index is
  `seq - 1`. A `tail` field left by an earlier version is ignored;
* sub-documents leave out the fields at their defaults (an empty `entry_tools`, a null
  `fallback`, a zero counter, ...): they read back the same;
* a sub-task frame names its `trigger` and `fallback` by the call id while the call is
  open (the call itself is in `open_tool_calls`), and a `fallback` that is the trigger
  (the usual case: the call right before the entry) as `fallback: true`; a frame with a
  trigger leaves out `trigger_recorded` (only a recorded entry has one), and leaves out its
  `model_name` when it is the task's `last_model_name` (the usual case for the innermost
  frame: its config is the last one; a frame whose model is unknown while the last one is
  known stores `model_name: null`). A write that changes `last_model_name` writes those
  frames' names out (the header's stored form changed: `updates.header_changes`);
* `usage` uses short keys (`in`, `out`, `cr`, `cw`, `cost`): an assistant turn sets three
  of them on every append. The long keys of an earlier version are read where no short
  one is stored;
* a tool call's `message_id` (the message holding it) is no longer recorded: the version
  guard already pins the array the plan was made from, and it was only the guard of the
  answer's flag patch. One found in an older document reads as empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from pydantic import Field

from mindstore.model.base import JSON, Model


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
    """Not recorded any more (see the module docstring); empty."""


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
    # The entry was stored without a trigger id, so folding the history takes the last call
    # of the message right before it as the trigger: a call streamed into that message
    # after the entry becomes the trigger here too. A trigger stored by id never moves.
    trigger_follows: bool = False


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

    def plus(self, other: UsageTotals, sign: int = 1) -> UsageTotals:
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
    # paged storage (docs/data-model.md "Paged messages"): messages [0, sealed) live in
    # `pages` sealed page documents, holding `sealed_bytes` of the `size_bytes`
    sealed: int = 0
    pages: int = 0
    sealed_bytes: int = 0
    id_filter_words: int = 0
    """Words in the task document's filter of sealed message ids (`model/id_filter.py`);
    0: none yet (a task sealed by an earlier version: replays are looked up in the pages)."""

    @property
    def open_count(self) -> int:
        """Messages in the task document's own array (the open page)."""
        return self.seq - self.sealed

    @property
    def open_bytes(self) -> int:
        """Stored bytes of the open page's messages."""
        return self.size_bytes - self.sealed_bytes

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
PAGING_FIELDS: tuple[str, ...] = ("sealed", "pages", "sealed_bytes", "id_filter_words")
"""Stored only once a task is paged (0 reads as absent), so unpaged documents keep their
shape."""
STORED_HEADER_FIELDS: tuple[str, ...] = tuple(name for name in HEADER_FIELDS if name != "tail")
"""The header fields a task document holds (the tail is derived from the last message)."""


def tail_of(index: int, message: Any) -> Tail:
    """The tail a header keeps for `message` stored at `index` (as `Planner.append` folds it)."""
    role = message.role
    return Tail(
        index=index,
        id=message.id,
        role=role if isinstance(role, str) else None,
        started_ts=message.started_ts,
        finished=message.finished_ts is not None,
    )


def _compact(model: Model) -> JSON:
    """A sub-document without the fields at their defaults (they read back the same)."""
    document = model.model_dump(mode="python", by_alias=True, exclude_defaults=True)
    for name, value in document.items():
        if isinstance(value, dict) and isinstance(getattr(model, name, None), Model):
            document[name] = _compact(getattr(model, name))
    return document


def _ref(ref: ToolCallRef) -> JSON:
    document = _compact(ref)
    document.pop("message_id", None)
    return document


def _frame(frame: ScopeFrame, open_calls: Mapping[str, JSON], last_model: str | None) -> JSON:
    document = _compact(frame)
    if frame.model_name is None:
        if last_model is not None:
            document["model_name"] = None  # absent would read as `last_model`
    elif frame.model_name == last_model:
        del document["model_name"]  # read back from `last_model_name`
    for name in ("fallback", "trigger"):
        ref = getattr(frame, name)
        if ref is not None:
            document[name] = _ref(ref)
    if "fallback" in document and document["fallback"] == document.get("trigger"):
        document["fallback"] = True
    for name in ("fallback", "trigger"):
        value = document.get(name)
        if isinstance(value, dict) and open_calls.get(value["id"]) == value:
            document[name] = value["id"]
    if frame.trigger is not None:  # only a recorded entry has a trigger
        document.pop("trigger_recorded", None)
    return document


USAGE_KEYS: dict[str, str] = {
    "tokens_in": "in",
    "tokens_out": "out",
    "cache_reads": "cr",
    "cache_writes": "cw",
    "cost": "cost",
}
"""UsageTotals field -> its stored key."""


def _usage(usage: UsageTotals) -> JSON:
    return {USAGE_KEYS[name]: value for name, value in usage if value}


def _read_usage(stored: Any) -> Any:
    """Stored usage (short keys, or an earlier version's long ones) -> UsageTotals input."""
    if not isinstance(stored, Mapping):
        return stored  # malformed: validation names it
    values = {name: stored[name] for name in USAGE_KEYS if name in stored}
    values.update({name: stored[key] for name, key in USAGE_KEYS.items() if key in stored})
    return values


def _read_frame(stored: Any, open_calls: Mapping[str, Any], last_model: Any) -> Any:
    """A stored frame with its calls written out: a call id names an open call, `fallback:
    true` the trigger (an id that names no open call is left for validation to refuse);
    no `model_name`: the task's `last_model_name`."""
    if not isinstance(stored, Mapping):
        return stored
    frame = dict(stored)
    frame.setdefault("model_name", last_model)
    for name in ("trigger", "fallback"):
        value = frame.get(name)
        if isinstance(value, str) and value in open_calls:
            frame[name] = open_calls[value]
    if frame.get("fallback") is True:
        frame["fallback"] = frame.get("trigger")
    if frame.get("trigger") is not None:
        frame.setdefault("trigger_recorded", True)
    elif frame.get("trigger_recorded") is True:
        # recorded without a trigger: the entry stored none (an earlier version's frame
        # did not say that the trigger follows the fallback)
        frame.setdefault("trigger_follows", True)
    return frame


def stored_header(header: TaskHeader) -> JSON:
    """The header fields of a task document (see the module docstring for what is left out)."""
    calls = [_ref(ref) for ref in header.open_tool_calls]
    open_calls = {call["id"]: call for call in calls}
    return {
        "seq": header.seq,
        "size_bytes": header.size_bytes,
        "scope_stack": [
            _frame(frame, open_calls, header.last_model_name) for frame in header.scope_stack
        ],
        "open_tool_calls": calls,
        "root_config_index": header.root_config_index,
        "root_model_name": header.root_model_name,
        "root_entry_tools": list(header.root_entry_tools),
        "last_config_index": header.last_config_index,
        "last_model_name": header.last_model_name,
        "usage": _usage(header.usage),
        **{name: getattr(header, name) for name in PAGING_FIELDS if getattr(header, name)},
    }


def header_from_stored(fields: Mapping[str, Any], tail: Tail | None = None) -> TaskHeader:
    """The header from a task document's fields and its tail (`tail_of` the last message;
    None for an empty task, or when the document was read without its last message).

    Raises pydantic's `ValidationError` for malformed fields, as model validation does.
    """
    data = {name: fields[name] for name in STORED_HEADER_FIELDS if name in fields}
    if "usage" in data:
        data["usage"] = _read_usage(data["usage"])
    if isinstance(data.get("scope_stack"), list):
        calls = data.get("open_tool_calls")
        open_calls = {
            call["id"]: call
            for call in (calls if isinstance(calls, list) else [])
            if isinstance(call, Mapping) and isinstance(call.get("id"), str)
        }
        last_model = data.get("last_model_name")
        data["scope_stack"] = [
            _read_frame(frame, open_calls, last_model) for frame in data["scope_stack"]
        ]
    header = TaskHeader.model_validate(data)
    for ref in header.open_tool_calls:
        ref.message_id = ""
    for frame in header.scope_stack:
        for kept in (frame.fallback, frame.trigger):
            if kept is not None:
                kept.message_id = ""
    header.tail = tail
    return header
