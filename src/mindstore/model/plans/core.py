"""The planning core: what a verb writes, decided from the task header alone.

A `Plan` lists the messages a verb appends (at fixed indexes `base_index...`), the patches
it makes to existing messages (index, id guard, path, value) and the header after the
verb. The in-memory `Task` applies a plan to its list; the repository turns the same plan
into one guarded MongoDB update. Neither can drift from the other, and all the Mind Map's
rules (levels, triggering tool calls, finished timestamps) live in the planners, free of
I/O. This module holds the `Planner` that folds messages into a header, the checks every
appended message passes, and the stored form of a message; the verbs are in
`plans.messages`, `plans.subtasks` and `plans.parts`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pydantic

from mindstore.errors import (
    InvalidTransition,
    UnknownToolCall,
    ValidationError,
)
from mindstore.ids import check_key, check_name
from mindstore.model.base import JSON, Timestamp, now_ts
from mindstore.model.header import (
    ScopeFrame,
    Tail,
    TaskHeader,
    ToolCallRef,
    UsageTotals,
)
from mindstore.model.lean_form import fill_task_ids, lookup, stored_doc
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    MessageBase,
    TaskConfigMessage,
    TaskEntryMessage,
    TaskExitMessage,
    ToolMessage,
    UnknownMessage,
    Usage,
)
from mindstore.model.parts import (
    TaskConfigPart,
    ToolCallPart,
    ToolResultPart,
)
from mindstore.model.roles import check_role_content
from mindstore.model.storage_form import DERIVED_KEY as DERIVED_KEY  # re-exported (planner)
from mindstore.model.storage_form import bson_size
from mindstore.model.stored_read import StoredRead, parse_read, read_stored
from mindstore.validation import (
    check_int,
    check_number,
    check_timestamp,
    describe_pydantic,
)

F = TypeVar("F", bound=Callable[..., Any])


def typed_errors(function: F) -> F:
    """Planning errors are mindstore's: a pydantic error from building a model becomes a
    `ValidationError` naming the field, so callers catch one family whichever home
    (the in-memory Task or the store) ran the verb."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except pydantic.ValidationError as exc:
            raise ValidationError(describe_pydantic(exc)) from None

    return wrapper  # type: ignore[return-value]


def check_id(value: Any, what: str = "id") -> str:
    """A tenant, task or dialog id (the key alphabet of `mindstore.ids`)."""
    return check_key(value, what)


def check_message_id(value: Any, what: str = "message id") -> str:
    """Message ids come from many frameworks (nanoid, UUID, provider ids): the name alphabet."""
    return check_name(value, what)


def message_usage(message: AnyMessage) -> UsageTotals:
    """The usage a message adds to its task: `usage` if set, else the Mind Map's fields."""
    usage = getattr(message, "usage", None)
    if isinstance(usage, Usage):
        return UsageTotals(
            tokens_in=usage.input_tokens,
            tokens_out=usage.output_tokens,
            cache_reads=usage.cache_read_tokens,
            cache_writes=usage.cache_write_tokens,
            cost=float(usage.cost.total),
        )
    if isinstance(message, AssistantMessage):
        return UsageTotals(
            tokens_in=message.tokens_in or 0,
            tokens_out=message.tokens_out or 0,
            cache_reads=message.cache_reads or 0,
            cache_writes=message.cache_writes or 0,
            cost=float(message.cost or 0),
        )
    return UsageTotals()


USAGE_COUNTS = ("tokens_in", "tokens_out", "cache_reads", "cache_writes")


def check_message_values(message: AnyMessage) -> None:
    """Refuse numbers that would poison the header roll-ups or every analytics report:
    timestamps outside epoch seconds, NaN/inf or negative token counts and costs."""
    for name in ("started_ts", "finished_ts"):
        value = getattr(message, name, None)
        if value is not None:
            check_timestamp(value, name)
    try:
        usage = message_usage(message)
    except (ValueError, OverflowError, TypeError, ArithmeticError):
        raise ValidationError("usage holds a value that is not a finite number") from None
    for name in USAGE_COUNTS:
        check_int(getattr(usage, name), f"usage {name}")
    check_number(usage.cost, "cost")


def parse_stored(
    documents: list[JSON] | StoredRead,
    rewrite: Callable[[JSON], JSON] | None = None,
    *,
    task_id: str | None = None,
) -> list[AnyMessage]:
    """Stored message documents -> messages (keys unescaped, `rewrite` applied to a copy
    of each document, unknown roles stripped of the store's fields, and, given the
    `task_id` they were read from, the task ids the lean form left out), in one walk at
    most and one validation (`mindstore.model.stored_read`). Given a `StoredRead` (the
    repository's reads: strings restored, payloads resolved), it only validates it."""
    if isinstance(documents, StoredRead):
        read = documents
    else:
        read = read_stored(documents, strings=False, copy=rewrite is not None)
    if rewrite is not None:
        read.documents = [rewrite(document) for document in read.documents]
    messages = parse_read(read)
    if task_id is not None:
        fill_task_ids(messages, task_id)
    return messages


def choose_trigger(
    header: TaskHeader, config: TaskConfigPart, entry_index: int
) -> ToolCallRef | None:
    """The open tool call a new sub-task answers when it exits, decided at its entry.

    Among the open calls of the current level that no open sub-task has claimed: the
    latest call of a task-entry tool (named by the sub-task's config or by the current
    level's), else the latest call of the assistant message right before the entry (the
    Mind Map's fallback). Another message between the call and the entry, or a sub-task
    config that does not list the tool, no longer loses the trigger; a caller who knows
    better passes `trigger_call_id`.
    """
    claimed = {frame.trigger.id for frame in header.scope_stack if frame.trigger is not None}
    floor = header.scope_stack[-1].index if header.scope_stack else -1
    level_calls = [ref for ref in header.open_tool_calls
                   if ref.id not in claimed and floor < ref.index < entry_index]  # fmt: skip
    names = set(config.task_entry_tool_names())
    names.update(
        header.scope_stack[-1].entry_tools if header.scope_stack else header.root_entry_tools
    )
    by_name = [ref for ref in level_calls if ref.name in names]
    if by_name:
        return max(by_name, key=lambda ref: (ref.index, ref.part))
    tail = header.tail
    if tail is not None and tail.index == entry_index - 1 and tail.role == "assistant":
        just_before = [ref for ref in level_calls if ref.index == tail.index]
        if just_before:
            return max(just_before, key=lambda ref: ref.part)
    return None


FROM_VALUE: Any = object()
"""`Patch.stored` when the update derives the stored value from `Patch.value`."""


@dataclass
class Patch:
    """Set `path` (relative to the message) of the message at `index`, guarded by its id.

    `value` is what the in-memory message gets. `stored` is what the document gets: the
    value in the lean stored form (keys escaped), or `ABSENT` when the lean form leaves
    the field out (a value set back to its default: the update `$unset`s it), or
    `FROM_VALUE` (the update stores `value`, models in their lean form)."""

    index: int
    message_id: str
    path: str
    value: Any
    stored: Any = FROM_VALUE
    push: bool = False
    """Append the stored value to the array at `path` (`$push`) instead of setting it: a
    streamed chunk (model/streaming.py)."""
    guard: dict[str, Any] | None = None
    """A test the update's filter puts on `path` (a streamed part's chunk count), or None."""


@dataclass
class Plan:
    base_index: int
    header_before: TaskHeader
    header: TaskHeader
    appended: list[AnyMessage] = field(default_factory=list)
    appended_docs: list[JSON] = field(default_factory=list)
    patches: list[Patch] = field(default_factory=list)
    result: Any = None
    document_set: JSON | None = None
    """Task-document fields outside the header and the messages (`agent_state`) that the
    same guarded update sets, so they change atomically with this plan's messages."""

    @property
    def new_ids(self) -> list[str]:
        return [message.id for message in self.appended]

    @property
    def is_empty(self) -> bool:
        return (
            not self.appended
            and not self.patches
            and not self.document_set
            and self.header == self.header_before
        )


DocTransform = Callable[[JSON], JSON]


class Planner:
    """Folds messages and patches into a header, collecting what must be written."""

    def __init__(
        self,
        header: TaskHeader,
        task_id: str,
        *,
        now: float | None = None,
        transform: DocTransform | None = None,
        replay: bool = False,
    ) -> None:
        self.task_id = task_id
        # Replay folds an existing history into a header: it tolerates what the Mind Map
        # tolerated (duplicate ids, an exit at the root) and never rewrites timestamps.
        self.replay = replay
        self.before = header
        self.header = header.model_copy(deep=True)
        self.base = header.seq
        # one instant for every message and patch of this write (epoch seconds, 1 ms)
        self.now: Timestamp = now if now is not None else now_ts()
        self.transform = transform
        self.appended: list[AnyMessage] = []
        self.docs: list[JSON] = []
        self.patches: list[Patch] = []
        self._ids: set[str] = set()

    # -- appends --------------------------------------------------------------------
    def append(self, message: AnyMessage) -> AnyMessage:
        if not isinstance(message, (MessageBase, UnknownMessage)):
            raise ValidationError(f"expected a message, got {type(message).__name__}")
        if not self.replay:
            check_message_id(message.id)
            check_message_values(message)
            check_role_content(message)
            if message.id in self._ids:
                raise ValidationError(f"message id {message.id!r} appears twice in one write")
            self._ids.add(message.id)
        header = self.header
        index = header.seq
        if not message.task_id:
            message.task_id = self.task_id
        if isinstance(message, MessageBase) and not message.started_ts and not self.replay:
            message.started_ts = self.now
        if isinstance(message, UnknownMessage) and message.finished_ts is None:
            message.finished_ts = None  # the store keeps the key (patched when the next arrives)

        if not self.replay:
            self._finish_tail(message.started_ts)

        exits = isinstance(message, TaskExitMessage) and (header.scope_stack or not self.replay)
        if exits:
            if not header.scope_stack:
                raise InvalidTransition("task exit at the root level: no sub-task is open")
            message.scope = header.scope_stack[-1].entry_id
            message.depth = header.level
        else:
            message.scope = header.current_scope
            message.depth = header.level

        if isinstance(message, TaskEntryMessage):
            entry = message.entry()
            if entry is None:
                raise ValidationError("a task entry message needs a taskentry part")
            recorded = "trigger_call_id" in entry.model_fields_set
            if not self.replay:
                if entry.trigger_call_id is not None:
                    check_message_id(entry.trigger_call_id, "trigger_call_id")
                    if header.open_call(entry.trigger_call_id) is None:
                        raise UnknownToolCall(
                            f"trigger_call_id {entry.trigger_call_id!r} is not an open tool call"
                        )
                elif not recorded:
                    chosen = choose_trigger(header, entry.initial_task_config, index)
                    entry.trigger_call_id = chosen.id if chosen is not None else None
                recorded = True
            trigger = header.open_call(entry.trigger_call_id) if entry.trigger_call_id else None
            fallback = self._tail_last_call(index)
            if recorded and trigger is None and entry.trigger_call_id is None:
                # No trigger when the entry was written, but the message right before it holds
                # an open call now: it was streamed in after the entry (`open_tool_call` made it
                # the trigger then), so folding the stored history gives the same header.
                trigger = fallback
            header.scope_stack.append(
                ScopeFrame(
                    entry_id=message.id,
                    index=index,
                    model_name=entry.initial_task_config.model_name,
                    entry_tools=entry.initial_task_config.task_entry_tool_names(),
                    fallback=fallback,
                    trigger=trigger,
                    trigger_recorded=recorded,
                    trigger_follows=recorded and entry.trigger_call_id is None,
                )
            )
        elif exits:
            header.scope_stack.pop()
        elif isinstance(message, TaskConfigMessage):
            config = message.config()
            if config is not None:
                if header.level == 0:
                    header.root_config_index = index
                    header.root_model_name = config.model_name
                    header.root_entry_tools = config.task_entry_tool_names()
                header.last_config_index = index
                header.last_model_name = config.model_name
        elif isinstance(message, AssistantMessage):
            for position, part in enumerate(message.content):
                if isinstance(part, ToolCallPart):
                    self.open_tool_call(part, index, position, message.id)
        elif isinstance(message, ToolMessage):
            for part in message.content:
                if isinstance(part, ToolResultPart):
                    self._close_call(part.tool_call_id)

        header.usage = header.usage.plus(message_usage(message))
        doc = stored_doc(message, self.task_id)
        if self.transform is not None:
            doc = self.transform(doc)
        header.size_bytes += bson_size(doc)
        header.tail = Tail(
            index=index,
            id=message.id,
            role=message.role if isinstance(message.role, str) else None,
            started_ts=message.started_ts,
            finished=message.finished_ts is not None,
        )
        header.seq = index + 1
        self.appended.append(message)
        self.docs.append(doc)
        return message

    def _finish_tail(self, next_started_ts: int | float) -> None:
        """The Mind Map `add_message`: the previous message finishes when the next one starts."""
        tail = self.header.tail
        if tail is None or tail.finished:
            return
        finish = max(tail.started_ts, min(next_started_ts, self.now))
        if tail.index >= self.base:
            local = tail.index - self.base
            self.appended[local].finished_ts = finish
            old_doc = self.docs[local]
            new_doc = dict(old_doc, finished_ts=finish)
            self.header.size_bytes += bson_size(new_doc) - bson_size(old_doc)
            self.docs[local] = new_doc
        else:
            self.patches.append(Patch(tail.index, tail.id, "finished_ts", finish))
            # The stored value was null (0 bytes); the key always exists in stored messages.
            self.resize(tail.index, bson_size({"": finish}) - bson_size({"": None}))
        tail.finished = True

    def _tail_last_call(self, entry_index: int) -> ToolCallRef | None:
        tail = self.header.tail
        if tail is None or tail.index != entry_index - 1 or tail.role != "assistant":
            return None
        calls = [ref for ref in self.header.open_tool_calls if ref.index == tail.index]
        return max(calls, key=lambda ref: ref.part) if calls else None

    def open_tool_call(
        self, part: ToolCallPart, index: int, position: int, message_id: str
    ) -> None:
        """Record `part`, the tool call at `position` of message `index`, as open. Folding
        an appended message opens its calls; a planner that patches a call into a stored
        message (`plans.parts.plan_add_tool_call_part`) opens it here the same way."""
        if not part.tool_call_id:
            raise ValidationError("a tool call part needs a tool_call_id")
        if self.header.open_call(part.tool_call_id) is not None:
            if not self.replay:
                raise ValidationError(f"tool call id {part.tool_call_id!r} is already open")
            self._close_call(part.tool_call_id)
        ref = ToolCallRef(
            id=part.tool_call_id,
            name=part.tool_name,
            index=index,
            part=position,
        )
        self.header.open_tool_calls.append(ref)
        for frame in self.header.scope_stack:
            # A call streamed into the message right before an entry is that entry's fallback
            # (or, when the entry found no trigger when it was written, its trigger).
            if frame.index == index + 1 and (
                frame.fallback is None or frame.fallback.part < position
            ):
                previous, frame.fallback = frame.fallback, ref
                # a trigger that came from the fallback follows it, as when the finished
                # message is folded whole (backup verify, imports): its last call
                if frame.trigger_follows and (frame.trigger is None or frame.trigger == previous):
                    frame.trigger = ref

    def _close_call(self, tool_call_id: str) -> None:
        self.header.open_tool_calls = [
            ref for ref in self.header.open_tool_calls if ref.id != tool_call_id
        ]

    # -- patches --------------------------------------------------------------------
    def resize(self, index: int, change: int) -> None:
        """A stored message grew or shrank by `change` bytes (also the sealed pages' share
        when it lives in one). `patch_message` sizes its own patches; a caller that builds
        patches itself (the streaming writer's chunk pushes, `model.streaming`) counts them
        here."""
        self.header.size_bytes += change
        if index < self.header.sealed:
            self.header.sealed_bytes += change

    def patch_message(
        self,
        index: int,
        old: AnyMessage,
        new: AnyMessage,
        paths: Sequence[tuple[str, Any]],
        *,
        replaces_content: bool = False,
    ) -> None:
        """Record field-level patches of a stored message and their effect on the header.

        `old` is the message as stored (markers, escapes). Usually `new` is `old` plus new
        caller data, so both go through the write transform and what was already stored
        cancels out; a patch that replaces the content (redaction) sizes the stored `old`
        as it is and only the new content through the transform.
        """
        if index >= self.base:
            raise ValidationError("cannot patch a message appended in the same write")
        old_doc, new_doc = stored_doc(old, self.task_id), stored_doc(new, self.task_id)
        for path, value in paths:
            # what the lean form of `new` holds there (ABSENT: back to its default, unset)
            self.patches.append(Patch(index, old.id, path, value, lookup(new_doc, path)))
        if replaces_content:
            if self.transform is not None:
                wrapped = self.transform({"id": new.id, "content": new_doc.get("content", [])})
                new_doc["content"] = wrapped["content"]
        elif self.transform is not None:
            old_doc, new_doc = self.transform(old_doc), self.transform(new_doc)
        self.resize(index, bson_size(new_doc) - bson_size(old_doc))
        before, after = message_usage(old), message_usage(new)
        if after != before:  # (adding and taking back the same cost could round it)
            self.header.usage = self.header.usage.plus(after).plus(before, sign=-1)
        tail = self.header.tail
        if tail is not None and tail.index == index:
            tail.finished = new.finished_ts is not None

    def finish(self, result: Any = None) -> Plan:
        return Plan(
            base_index=self.base,
            header_before=self.before,
            header=self.header,
            appended=self.appended,
            appended_docs=self.docs,
            patches=self.patches,
            result=result,
        )


def resolve_ts(timestamp: float | None, now: Timestamp) -> Timestamp:
    """A caller's timestamp as given (an int stays an int, a float keeps its digits), else
    the write's `now`."""
    checked = check_timestamp(timestamp)
    return checked if checked is not None else now


@typed_errors
def derive_header(task_id: str, messages: Sequence[AnyMessage]) -> TaskHeader:
    """Fold a whole history into its header (loading, importing, forking).

    Scope and depth are (re)assigned from the entry/exit structure, so histories written
    by the Mind Map, which has no such fields, get them; nothing else is changed.
    """
    planner = Planner(TaskHeader(), task_id, replay=True)
    for message in messages:
        planner.append(message)
    return planner.header
