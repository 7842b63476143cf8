"""Pure planners: what a verb writes, decided from the task header alone.

A `Plan` lists the messages a verb appends (at fixed indexes `base_index...`), the patches
it makes to existing messages (index, id guard, path, value) and the header after the
verb. The in-memory `Task` applies a plan to its list; the repository turns the same plan
into one guarded MongoDB update. Neither can drift from the other, and all the mind-map
rules (levels, triggering tool calls, finished timestamps) live here, free of I/O.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

import pydantic

from mindstore.errors import InvalidTransition, NotFound, ValidationError
from mindstore.ids import check_key, check_name
from mindstore.model.base import JSON, clock, new_id
from mindstore.model.header import (
    ScopeFrame,
    Tail,
    TaskHeader,
    ToolCallRef,
    UsageTotals,
)
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    CompressionMessage,
    InformationalMessage,
    MessageBase,
    SystemMessage,
    TaskConfigMessage,
    TaskEntryMessage,
    TaskExitMessage,
    ToolMessage,
    UnknownMessage,
    Usage,
    UserMessage,
    message_to_dict,
)
from mindstore.model.parts import (
    CompressionPart,
    ImagePart,
    InformationalPart,
    ObserverResult,
    ReasoningPart,
    TaskConfigPart,
    TaskEntryPart,
    TaskExitPart,
    TextPart,
    ToolCallPart,
    ToolResultContent,
    ToolResultPart,
)
from mindstore.model.storage_form import bson_size, escape_keys
from mindstore.validation import (
    check_bool,
    check_int,
    check_number,
    check_optional_int,
    check_optional_json,
    check_optional_text,
    check_text,
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
    """The usage a message adds to its task: `usage` if set, else seed 000's fields."""
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


def stored_doc(message: AnyMessage) -> JSON:
    """The document stored for a message: its dict with user keys escaped."""
    return escape_keys(message_to_dict(message))


@dataclass
class Patch:
    """Set `path` (relative to the message) of the message at `index`, guarded by its id."""

    index: int
    message_id: str
    path: str
    value: Any


@dataclass
class Plan:
    base_index: int
    header_before: TaskHeader
    header: TaskHeader
    appended: list[AnyMessage] = field(default_factory=list)
    appended_docs: list[JSON] = field(default_factory=list)
    patches: list[Patch] = field(default_factory=list)
    result: Any = None

    @property
    def new_ids(self) -> list[str]:
        return [message.id for message in self.appended]

    @property
    def is_empty(self) -> bool:
        return not self.appended and not self.patches and self.header == self.header_before


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
        # Replay folds an existing history into a header: it tolerates what the seed
        # tolerated (duplicate ids, an exit at the root) and never rewrites timestamps.
        self.replay = replay
        self.before = header
        self.header = header.model_copy(deep=True)
        self.base = header.seq
        self.now = int(now if now is not None else clock())
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
            if message.id in self._ids:
                raise ValidationError(f"message id {message.id!r} appears twice in one write")
            self._ids.add(message.id)
        header = self.header
        index = header.seq
        if not message.task_id:
            message.task_id = self.task_id
        if isinstance(message, MessageBase) and not message.started_ts and not self.replay:
            message.started_ts = self.now
        if isinstance(message, UnknownMessage):
            message.raw.setdefault("id", message.id)
            message.raw.setdefault("finished_ts", None)

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
            header.scope_stack.append(
                ScopeFrame(
                    entry_id=message.id,
                    index=index,
                    model_name=entry.initial_task_config.model_name,
                    entry_tools=entry.initial_task_config.task_entry_tool_names(),
                    fallback=self._tail_last_call(index),
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
                header.last_config_index = index
                header.last_model_name = config.model_name
        elif isinstance(message, AssistantMessage):
            for position, part in enumerate(message.content):
                if isinstance(part, ToolCallPart):
                    self._open_call(part, index, position, message.id)
        elif isinstance(message, ToolMessage):
            for part in message.content:
                if isinstance(part, ToolResultPart):
                    self._close_call(part.tool_call_id)

        header.usage = header.usage.plus(message_usage(message))
        doc = stored_doc(message)
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
        """Seed 000 `add_message`: the previous message finishes when the next one starts."""
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
            self.header.size_bytes += bson_size({"": finish}) - bson_size({"": None})
        tail.finished = True

    def _tail_last_call(self, entry_index: int) -> ToolCallRef | None:
        tail = self.header.tail
        if tail is None or tail.index != entry_index - 1 or tail.role != "assistant":
            return None
        calls = [ref for ref in self.header.open_tool_calls if ref.index == tail.index]
        return max(calls, key=lambda ref: ref.part) if calls else None

    def _open_call(self, part: ToolCallPart, index: int, position: int, message_id: str) -> None:
        if not part.tool_call_id:
            raise ValidationError("a tool call part needs a tool_call_id")
        if self.header.open_call(part.tool_call_id) is not None:
            if not self.replay:
                raise ValidationError(f"tool call id {part.tool_call_id!r} is already open")
            self._close_call(part.tool_call_id)
        ref = ToolCallRef(
            id=part.tool_call_id, name=part.tool_name, index=index, part=position, message_id=message_id
        )
        self.header.open_tool_calls.append(ref)
        for frame in self.header.scope_stack:
            # A call streamed into the message right before an entry is that entry's fallback.
            if frame.index == index + 1 and (frame.fallback is None or frame.fallback.part < position):
                frame.fallback = ref

    def _close_call(self, tool_call_id: str) -> None:
        self.header.open_tool_calls = [
            ref for ref in self.header.open_tool_calls if ref.id != tool_call_id
        ]

    # -- patches --------------------------------------------------------------------
    def patch_message(
        self,
        index: int,
        old: AnyMessage,
        new: AnyMessage,
        paths: Sequence[tuple[str, Any]],
    ) -> None:
        """Record field-level patches of a stored message and their effect on the header."""
        if index >= self.base:
            raise ValidationError("cannot patch a message appended in the same write")
        for path, value in paths:
            self.patches.append(Patch(index, old.id, path, value))
        old_doc, new_doc = stored_doc(old), stored_doc(new)
        if self.transform is not None:
            old_doc, new_doc = self.transform(old_doc), self.transform(new_doc)
        self.header.size_bytes += bson_size(new_doc) - bson_size(old_doc)
        self.header.usage = self.header.usage.plus(message_usage(new)).plus(
            message_usage(old), sign=-1
        )
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


# ----------------------------------------------------------------------------------
# Verbs. Each takes the header (and, for part verbs, the one message it changes) and
# returns a Plan. Timestamps follow seed 000: int epoch seconds.
# ----------------------------------------------------------------------------------


def _ts(timestamp: float | None, now: int) -> int:
    checked = check_timestamp(timestamp)
    return int(checked if checked is not None else now)


@typed_errors
def derive_header(task_id: str, messages: Sequence[AnyMessage]) -> TaskHeader:
    """Fold a whole history into its header (loading, importing, forking).

    Scope and depth are (re)assigned from the entry/exit structure, so histories written
    by the seed, which has no such fields, get them; nothing else is changed.
    """
    planner = Planner(TaskHeader(), task_id, replay=True)
    for message in messages:
        planner.append(message)
    return planner.header


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
    header: TaskHeader, task_id: str, part: TaskConfigPart, timestamp: float | None = None, **kw: Any
) -> Plan:
    if not isinstance(part, TaskConfigPart):
        raise ValidationError(f"part must be a TaskConfigPart, got {type(part).__name__}")
    planner = Planner(header, task_id, **kw)
    ts = _ts(timestamp, planner.now)
    message = TaskConfigMessage(task_id=task_id, started_ts=ts, finished_ts=ts, content=[part])
    return planner.finish(planner.append(message))


def build_human_message(
    task_id: str,
    text: str | Sequence[str] | None,
    images: Sequence[ImagePart] | None,
    is_ui_hidden: bool,
    ts: int,
    message_id: str | None = None,
) -> UserMessage | None:
    content: list[Any] = []
    if isinstance(text, str):
        content.append(TextPart(text=check_text(text, "text")))
    elif isinstance(text, (list, tuple)):
        content.extend(TextPart(text=check_text(t, "text item")) for t in text)
    elif text is not None:
        raise ValidationError(f"text must be a string or a list of strings, got {type(text).__name__}")
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
    """Seed 000: a human message with no text and no image writes nothing (result None)."""
    planner = Planner(header, task_id, **kw)
    message = build_human_message(
        task_id, text, images, is_ui_hidden, _ts(timestamp, planner.now), message_id
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
    ts = _ts(timestamp, planner.now)
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
        raise InvalidTransition(
            "no task configuration found: add a task config before an assistant message"
        )
    planner = Planner(header, task_id, **kw)
    message = AssistantMessage(
        id=message_id or new_id(),
        task_id=task_id,
        started_ts=_ts(timestamp, planner.now),
        status="loading",
        model_id=model_name,
    )
    return planner.finish(planner.append(message))


def build_tool_result_message(
    task_id: str,
    tool_call_id: str,
    tool_name: str,
    result: Any,
    observer_results: Sequence[ObserverResult] | None,
    is_error: bool,
    is_approved: bool,
    tool_result_contents: Sequence[ToolResultContent] | None,
    error_message: str | None,
    is_loading: bool,
    has_feedback: bool,
    ts: int,
    message_id: str | None = None,
    terminate: bool = False,
    metadata: JSON | None = None,
) -> ToolMessage:
    check_message_id(tool_call_id, "tool_call_id")
    check_text(tool_name, "tool_name")
    for flag, value in (("is_error", is_error), ("is_approved", is_approved), ("is_loading", is_loading),
                        ("has_feedback", has_feedback), ("terminate", terminate)):  # fmt: skip
        check_bool(value, flag)
    check_optional_text(error_message, "error_message")
    check_optional_json(metadata, "metadata")
    part = ToolResultPart(
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        result=result,
        observer_results=list(observer_results or []),
        is_error=is_error,
        is_approved=is_approved,
        is_loading=is_loading,
        has_feedback=has_feedback,
        tool_result_contents=list(tool_result_contents or []),
        error=error_message if is_error else None,
        terminate=terminate,
        metadata=dict(metadata or {}),
    )
    return ToolMessage(
        id=message_id or new_id(),
        task_id=task_id,
        started_ts=ts,
        finished_ts=ts,
        content=[part],
    )


@typed_errors
def plan_add_tool_result_message(
    header: TaskHeader,
    task_id: str,
    tool_call_id: str,
    tool_name: str,
    result: Any,
    observer_results: Sequence[ObserverResult] | None = None,
    is_error: bool = False,
    is_approved: bool = True,
    tool_result_contents: Sequence[ToolResultContent] | None = None,
    error_message: str | None = None,
    is_loading: bool = False,
    has_feedback: bool = False,
    timestamp: float | None = None,
    message_id: str | None = None,
    terminate: bool = False,
    metadata: JSON | None = None,
    **kw: Any,
) -> Plan:
    planner = Planner(header, task_id, **kw)
    message = build_tool_result_message(
        task_id, tool_call_id, tool_name, result, observer_results, is_error, is_approved,
        tool_result_contents, error_message, is_loading, has_feedback,
        _ts(timestamp, planner.now), message_id, terminate, metadata,
    )  # fmt: skip
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
    ts = _ts(timestamp, planner.now)
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
    ts = _ts(timestamp, planner.now)
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


def _answer_call(
    planner: Planner,
    ref: ToolCallRef,
    tool_message: ToolMessage,
    is_loading: bool,
) -> ToolMessage:
    """Flip the call part's flags (seed 000 `answer_tool_call`) and append the result."""
    if ref.index < planner.base:
        for name, value in (("is_loading", is_loading), ("is_approval_pending", False)):
            planner.patches.append(
                Patch(ref.index, ref.message_id, f"content.{ref.part}.{name}", value)
            )
    else:  # the call was appended in this same write
        call_message = planner.appended[ref.index - planner.base]
        part = call_message.content[ref.part]
        part.is_loading, part.is_approval_pending = is_loading, False
    planner.append(tool_message)
    return tool_message


@typed_errors
def plan_answer_tool_call(
    header: TaskHeader,
    task_id: str,
    tool_call_id: str,
    result: Any,
    observer_results: Sequence[ObserverResult] | None = None,
    is_error: bool = False,
    is_approved: bool = True,
    tool_result_contents: Sequence[ToolResultContent] | None = None,
    error_message: str | None = None,
    is_loading: bool = False,
    has_feedback: bool = False,
    timestamp: float | None = None,
    message_id: str | None = None,
    terminate: bool = False,
    metadata: JSON | None = None,
    **kw: Any,
) -> Plan:
    """Answer an open tool call: one update flips its flags and appends the ToolMessage.

    The patch is guarded by the id of the message holding the call, so a stale index can
    never patch the wrong message.
    """
    ref = header.open_call(tool_call_id)
    if ref is None:
        raise NotFound(f"no open tool call with id {tool_call_id!r} (unknown or already answered)")
    planner = Planner(header, task_id, **kw)
    message = build_tool_result_message(
        task_id, tool_call_id, ref.name, result, observer_results, is_error, is_approved,
        tool_result_contents, error_message, is_loading, has_feedback,
        _ts(timestamp, planner.now), message_id, terminate, metadata,
    )  # fmt: skip
    _answer_call(planner, ref, message, is_loading)
    return planner.finish(message)


@typed_errors
def plan_add_task_entry(
    header: TaskHeader,
    task_id: str,
    task_description: Sequence[TextPart | ImagePart | InformationalPart],
    initial_task_config: TaskConfigPart,
    entry_id: str | None = None,
    timestamp: float | None = None,
    **kw: Any,
) -> Plan:
    """Seed 000 `add_task_entry`: entry, config, hidden user context, informational parts."""
    if isinstance(task_description, (str, bytes, dict)) or not isinstance(task_description, Sequence):
        raise ValidationError("task_description must be a list of text, image or informational parts")
    description = list(task_description)
    for part in description:
        if not isinstance(part, (TextPart, ImagePart, InformationalPart)):
            raise ValidationError(
                f"task description parts must be text, image or informational, got {type(part).__name__}"
            )
    if not isinstance(initial_task_config, TaskConfigPart):
        raise ValidationError("initial_task_config must be a TaskConfigPart")
    planner = Planner(header, task_id, **kw)
    checked = check_timestamp(timestamp)
    entry_ts = float(checked if checked is not None else clock())
    entry = TaskEntryMessage(
        id=entry_id or new_id(),
        task_id=task_id,
        started_ts=int(entry_ts),
        finished_ts=int(entry_ts),
        content=[TaskEntryPart(initial_task_config=initial_task_config, initial_context=description)],
    )
    planner.append(entry)
    ts = int(entry_ts + 0.001)
    planner.append(
        TaskConfigMessage(
            task_id=task_id, started_ts=ts, finished_ts=ts, content=[initial_task_config]
        )
    )
    texts = [part.text for part in description if isinstance(part, TextPart)]
    images = [part for part in description if isinstance(part, ImagePart)]
    if texts or images:
        user = build_human_message(task_id, texts, images, True, int(entry_ts + 0.002))
        if user is not None:
            planner.append(user)
    infos = [part for part in description if isinstance(part, InformationalPart)]
    for position, part in enumerate(infos):
        ts = int(entry_ts + 0.003 + position * 0.001)
        planner.append(
            InformationalMessage(
                task_id=task_id,
                started_ts=ts,
                finished_ts=ts,
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
    """The tool call a sub-task exit answers, with seed 000's priorities.

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
    """Seed 000 `add_task_exit`: the exit plus, if a trigger is found, its answer.

    Result is `(exit_message, tool_message_or_None)`. The whole thing is one write, so a
    reader never sees an exited sub-task whose triggering call is still loading.
    """
    if not header.scope_stack:
        raise InvalidTransition("task exit at the root level: no sub-task is open")
    handoff = list(handoff_description)
    for part in handoff:
        if not isinstance(part, (TextPart, ImagePart)):
            raise ValidationError(
                f"handoff parts must be text or image, got {type(part).__name__}"
            )
    trigger = find_exit_trigger(header)
    planner = Planner(header, task_id, **kw)
    checked = check_timestamp(timestamp)
    exit_ts = float(checked if checked is not None else clock())
    exit_message = TaskExitMessage(
        id=exit_id or new_id(),
        task_id=task_id,
        started_ts=int(exit_ts),
        finished_ts=int(exit_ts),
        content=[TaskExitPart(handoff_description=handoff)],
    )
    planner.append(exit_message)
    if trigger is None:
        return planner.finish((exit_message, None))
    text = "".join(part.text for part in handoff if isinstance(part, TextPart))
    contents = [
        ToolResultContent(type="image", image_data=part.image, mime_type=part.mime_type)
        for part in handoff
        if isinstance(part, ImagePart)
    ]
    if text:
        contents.append(ToolResultContent(type="text", text=text))
    tool_message = build_tool_result_message(
        task_id,
        trigger.id,
        trigger.name,
        {payload_key: text, "status": "completed", "message": text},
        [],
        False,
        True,
        contents,
        None,
        False,
        True,
        int(exit_ts + 0.001),
        result_message_id,
    )
    # The fallback trigger may already be answered: closing it again is a no-op.
    _answer_call(planner, trigger, tool_message, False)
    return planner.finish((exit_message, tool_message))


# -- part verbs: they change one stored message, which the caller supplies ------------


def _require_role(message: AnyMessage, allowed: tuple[type, ...], verb: str) -> None:
    if not isinstance(message, allowed):
        role = getattr(message, "role", None)
        raise InvalidTransition(f"{verb} is not allowed on a {role} message")


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
    _require_role(message, (AssistantMessage,), "add_reasoning_part")
    planner = Planner(header, task_id, **kw)
    started = round(clock(), 3)
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
    _require_role(message, (AssistantMessage,), "add_tool_call_part")
    planner = Planner(header, task_id, **kw)
    new = message.model_copy(deep=True)
    paths: list[tuple[str, Any]] = []
    for position in range(len(new.content) - 1, -1, -1):
        part = new.content[position]
        if isinstance(part, ReasoningPart) and part.finished_ts is None:
            part.finished_ts = round(clock(), 3)
            paths.append((f"content.{position}.finished_ts", part.finished_ts))
            break
    position = len(message.content)
    new.content.append(tool_call)
    paths.append((f"content.{position}", tool_call))
    if new.status != "loading":
        new.status = "loading"
        paths.append(("status", "loading"))
    planner.patch_message(index, message, new, paths)
    planner._open_call(tool_call, index, position, message.id)
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
    _require_role(message, (AssistantMessage,), "finish_assistant_message")
    if not isinstance(status, str) or status not in {"loading", "completed", "error", "interrupted"}:
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
        new.finished_ts = int(finished_ts if finished_ts is not None else planner.now)
        paths.append(("finished_ts", new.finished_ts))
    planner.patch_message(index, message, new, paths)
    return planner.finish(new)
