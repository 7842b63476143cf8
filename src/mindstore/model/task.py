"""`Task`: the Mind Map's in-memory task, built on the shared planners.

Every verb asks a planner what to write and applies the plan to the list, exactly as the
repository applies the same plan to the stored document, so the two homes keep one
contract (docs/contract.md): the same argument names (the Mind Map's spellings accepted
as aliases), the same replays, the same errors. The Mind Map's three bugs are fixed here
(docs/architecture.md): sibling sub-tasks resolve to the open one, unknown roles and parts
are kept, and `finished_ts` bookkeeping is part of the append itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from mindstore.errors import (
    InvalidTransition,
    MindstoreError,
    MissingConfig,
    NotFound,
    ValidationError,
    WrongType,
)
from mindstore.model import planner as plans
from mindstore.model.base import JSON, Model, new_id
from mindstore.model.header import ALLOWED_TRANSITIONS, TaskHeader, TaskState
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    CompressionMessage,
    InformationalMessage,
    Message,
    MessageBase,
    SystemMessage,
    TaskConfigMessage,
    TaskEntryMessage,
    TaskExitMessage,
    ToolMessage,
    UnknownMessage,
    Usage,
    UserMessage,
    parse_message,
)
from mindstore.model.parts import (
    ImagePart,
    InformationalPart,
    ObserverResult,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolResultContent,
)
from mindstore.model.planner import Plan
from mindstore.model.specs import ToolResultSpec, resolve_alias
from mindstore.model.views import (
    SubTaskSpan,
    level_boundaries,
    level_messages,
    sub_task_spans,
)

Replay = Callable[[dict[str, AnyMessage]], Any]


def tool_call_id_of(tool_call: Any) -> str:
    """`answer_tool_call` takes the call or its id (the Mind Map: the call; TypeError else)."""
    if isinstance(tool_call, ToolCallPart):
        return tool_call.tool_call_id
    if isinstance(tool_call, str):
        return tool_call
    raise WrongType(
        f"answer_tool_call expects a ToolCallPart or its id, got {type(tool_call).__name__}"
    )


def exit_answer_id(exit_message: AnyMessage) -> str | None:
    """The id of the ToolMessage a stored exit wrote (None: it answered nothing)."""
    for part in getattr(exit_message, "content", []):
        if getattr(part, "type", None) == "taskexit":
            return getattr(part, "answer_id", None)
    return None


def apply_path(target: Any, path: str, value: Any) -> None:
    """Set a dotted path (`content.2.is_loading`) on models, lists and dicts in memory."""
    *parents, last = path.split(".")
    for step in parents:
        target = (
            target[int(step)]
            if isinstance(target, list)
            else (target[step] if isinstance(target, dict) else getattr(target, step))
        )
    if isinstance(target, list):
        position = int(last)
        if position == len(target):
            target.append(value)
        else:
            target[position] = value
    elif isinstance(target, dict):
        target[last] = value
    else:
        setattr(target, last, value)


class Task(Model):
    id: str = Field(default_factory=new_id)
    state: TaskState = TaskState.running
    content: list[ImagePart | TextPart] = Field(default_factory=list)
    messages: list[Message] = Field(default_factory=list)

    _header: TaskHeader | None = PrivateAttr(default=None)
    _index: dict[str, int] | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def validate_messages(cls, data: Any) -> Any:
        """The Mind Map dropped messages it could not type; here they stay, as unknown
        messages. Only a `messages` value that is not a list is refused, with a typed error.
        """
        if isinstance(data, dict) and not isinstance(data.get("messages", []), list):
            raise ValueError("task messages must be a list")
        return data

    # -- header and plan application -------------------------------------------------
    @property
    def header(self) -> TaskHeader:
        if self._header is None:
            self._header = plans.derive_header(self.id, self.messages)
        return self._header

    def _position(self, message_id: str) -> int | None:
        if self._index is None or len(self._index) != len(self.messages):
            self._index = {message.id: i for i, message in enumerate(self.messages)}
        return self._index.get(message_id)

    def _stored(self, ids: Sequence[str]) -> dict[str, AnyMessage] | None:
        """Like the store: if every id is already here, the call is a replay."""
        present = {i: self.messages[p] for i in ids if (p := self._position(i)) is not None}
        if not present:
            return None
        if len(present) != len(ids):
            raise ValidationError(f"message ids already in the task: {sorted(present)}")
        return present

    def apply(self, plan: Plan, ids: Sequence[str] = (), on_replay: Replay | None = None) -> Any:
        """Apply a plan to the in-memory list (the repository applies it to MongoDB).

        Like the store, a message id that is already in the task is never added twice: if
        every caller-given id (else every new id) is present, the call is a replay and
        returns what is stored.
        """
        stored = self._stored(list(ids) or plan.new_ids)
        if stored is not None:
            if on_replay is not None:
                return on_replay(stored)
            values = list(stored.values())
            if isinstance(plan.result, tuple):
                return tuple(values[: len(plan.result)])
            return values if isinstance(plan.result, list) else values[0]
        for patch in plan.patches:
            message = self.messages[patch.index]
            if patch.message_id and message.id != patch.message_id:
                raise MindstoreError(f"patch guard failed at index {patch.index}")
            apply_path(message, patch.path, patch.value)
        for message in plan.appended:
            self.messages.append(message)
            if self._index is not None:
                self._index[message.id] = len(self.messages) - 1
        self._header = plan.header
        return plan.result

    def _verb(self, planner_fn: Any, *args: Any, ids: Sequence[str | None] = (),
              on_replay: Replay | None = None, **kwargs: Any) -> Any:  # fmt: skip
        """Plan and apply; a planning error on a call whose ids are all stored is a replay
        (an exit replayed after its sub-task closed plans as 'exit at the root')."""
        explicit = [i for i in ids if i is not None]
        for value in explicit:
            plans.check_message_id(value)
        try:
            plan = planner_fn(self.header, self.id, *args, **kwargs)
        except MindstoreError:
            stored = self._stored(explicit) if explicit else None
            if stored is None:
                raise
            return on_replay(stored) if on_replay is not None else stored[explicit[0]]
        return self.apply(plan, explicit, on_replay)

    def _located(self, message_id: str) -> tuple[int, AnyMessage]:
        plans.check_message_id(message_id)
        position = self._position(message_id)
        if position is None:
            raise NotFound(f"no message with id {message_id!r}")
        return position, self.messages[position]

    # -- levels and configuration -----------------------------------------------------
    def current_task_level(self) -> int:
        return self.header.level

    def current_scope(self) -> str | None:
        return self.header.current_scope

    def current_task_config(self) -> TaskConfigPart:
        """The config of the current level: the open entry's, or the latest root config."""
        location = self.header.current_config_index()
        if location is None:
            raise MissingConfig("no task configuration message found in history")
        index, kind = location
        message = self.messages[index]
        entry = message.entry() if isinstance(message, TaskEntryMessage) else None
        if kind == "entry" and entry is not None:
            return entry.initial_task_config
        config = message.config() if isinstance(message, TaskConfigMessage) else None
        if config is not None:
            return config
        return self.get_current_config()

    def get_current_config(self) -> TaskConfigPart:
        for message in reversed(self.messages):
            config = message.config() if isinstance(message, TaskConfigMessage) else None
            if config is not None:
                return config
        raise MissingConfig("no task configuration message found in history")

    def current_task_messages(self) -> list[AnyMessage]:
        return level_messages(self.messages, self.header.current_scope)

    def find_current_task_boundaries(self) -> tuple[int | None, int | None]:
        return level_boundaries(self.messages, self.header.current_scope)

    def task_boundaries(self, entry_id: str) -> tuple[int | None, int | None]:
        """Boundaries of any sub-task, open or exited."""
        boundaries = level_boundaries(self.messages, entry_id)
        if boundaries[0] is None:
            raise NotFound(f"no task entry with id {entry_id!r}")
        return boundaries

    def sub_task_spans(self) -> list[SubTaskSpan]:
        return sub_task_spans(self.messages)

    # -- verbs ----------------------------------------------------------------------
    def add_message(self, message: AnyMessage | JSON) -> AnyMessage:
        """Any message, unknown roles included (kept as they are, as in the store)."""
        if isinstance(message, dict):
            message = parse_message(message)
        if not isinstance(message, (MessageBase, UnknownMessage)):
            raise WrongType(f"expected a message, got {type(message).__name__}")
        return self._verb(plans.plan_add_message, message, ids=[message.id])

    def add_messages(self, messages: Sequence[AnyMessage]) -> list[AnyMessage]:
        """Several messages in one step (all or nothing)."""
        if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
            raise WrongType("messages must be a list of messages")
        ids = [getattr(m, "id", None) for m in messages]
        return self._verb(
            plans.plan_add_messages,
            list(messages),
            ids=ids,
            on_replay=lambda stored: [stored[i] for i in ids if i],
        )

    def add_task_config(
        self, part: TaskConfigPart, timestamp: float | None = None
    ) -> TaskConfigMessage:
        return self._verb(plans.plan_add_task_config, part, timestamp)

    def add_human_message(
        self,
        text: str | list[str] | None = None,
        images: list[ImagePart] | None = None,
        is_ui_hidden: bool = False,
        timestamp: float | None = None,
        message_id: str | None = None,
    ) -> UserMessage | None:
        return self._verb(
            plans.plan_add_human_message, text, images, is_ui_hidden, timestamp, message_id,
            ids=[message_id],
        )  # fmt: skip

    def add_system_message(
        self, text: str, message_id: str | None = None, timestamp: float | None = None,
        *, id: str | None = None,
    ) -> SystemMessage:  # fmt: skip
        message_id = resolve_alias(message_id, id, "message_id", "id")
        return self._verb(
            plans.plan_add_system_message, text, message_id, timestamp, ids=[message_id]
        )

    def add_assistant_message(
        self,
        message_id: str | None = None,
        timestamp: float | None = None,
        *,
        id: str | None = None,
    ) -> AssistantMessage:
        message_id = resolve_alias(message_id, id, "message_id", "id")
        return self._verb(plans.plan_add_assistant_message, message_id, timestamp, ids=[message_id])

    def add_tool_result_message(
        self,
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
        *,
        id: str | None = None,
    ) -> ToolMessage:
        """A tool result (the store's `tasks.add_tool_result_message`, in memory)."""
        spec = ToolResultSpec.from_call((), {
            "observer_results": observer_results, "is_error": is_error, "is_approved": is_approved,
            "tool_result_contents": tool_result_contents, "error_message": error_message,
            "is_loading": is_loading, "has_feedback": has_feedback, "timestamp": timestamp,
            "message_id": message_id, "terminate": terminate, "metadata": metadata, "id": id,
        })  # fmt: skip
        return self._verb(
            plans.plan_add_tool_result_message, tool_call_id, tool_name, result, spec,
            ids=[spec.message_id],
        )  # fmt: skip

    def add_informational_message(
        self,
        informational_type: str,
        details: str,
        is_visible_ai: bool = False,
        is_visible_ui: bool = False,
        additional_data: JSON | list[JSON] | None = None,
        timestamp: float | None = None,
        message_id: str | None = None,
    ) -> InformationalMessage:
        return self._verb(
            plans.plan_add_informational_message, informational_type, details, is_visible_ai,
            is_visible_ui, additional_data, timestamp, message_id, ids=[message_id],
        )  # fmt: skip

    def add_compression_message(
        self,
        start_idx: int,
        end_idx: int,
        reason: str,
        strategies: list[str],
        compressed_message_ids: list[str],
        kept_message_ids: list[str],
        cache: JSON | None = None,
        metadata: JSON | None = None,
        timestamp: float | None = None,
        message_id: str | None = None,
    ) -> CompressionMessage:
        referenced = plans.compression_ids(compressed_message_ids, kept_message_ids)
        if any(self._position(i) is None for i in referenced):
            raise ValidationError(
                "compressed_message_ids / kept_message_ids name messages "
                "that the task does not hold"
            )
        return self._verb(
            plans.plan_add_compression_message, start_idx, end_idx, reason, strategies,
            compressed_message_ids, kept_message_ids, cache, metadata, timestamp, message_id,
            ids=[message_id],
        )  # fmt: skip

    def answer_tool_call(
        self,
        tool_call: ToolCallPart | str,
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
        *,
        id: str | None = None,
    ) -> ToolMessage:
        """Flip the call's flags and append its result, in one step (the store's
        `tasks.answer_tool_call`, in memory)."""
        tool_call_id = tool_call_id_of(tool_call)
        spec = ToolResultSpec.from_call((), {
            "observer_results": observer_results, "is_error": is_error, "is_approved": is_approved,
            "tool_result_contents": tool_result_contents, "error_message": error_message,
            "is_loading": is_loading, "has_feedback": has_feedback, "timestamp": timestamp,
            "message_id": message_id, "terminate": terminate, "metadata": metadata, "id": id,
        })  # fmt: skip
        return self._verb(
            plans.plan_answer_tool_call, tool_call_id, result, spec, ids=[spec.message_id]
        )

    def add_task_entry(
        self,
        task_description: Sequence[TextPart | ImagePart | InformationalPart],
        initial_task_config: TaskConfigPart,
        entry_id: str | None = None,
        timestamp: float | None = None,
        trigger_call_id: str | None = None,
    ) -> TaskEntryMessage:
        return self._verb(
            plans.plan_add_task_entry, task_description, initial_task_config, entry_id, timestamp,
            trigger_call_id, ids=[entry_id],
        )  # fmt: skip

    def add_task_exit(
        self,
        handoff_description: Sequence[TextPart | ImagePart],
        payload_key: str = "task_result",
        timestamp: float | None = None,
        exit_id: str | None = None,
        result_message_id: str | None = None,
        *,
        payloadKey: str | None = None,  # the Mind Map's spelling, an alias
    ) -> tuple[TaskExitMessage, ToolMessage | None]:
        payload_key = resolve_alias(
            payload_key, payloadKey, "payload_key", "payloadKey", "task_result"
        )
        return self._verb(
            plans.plan_add_task_exit, handoff_description, payload_key, timestamp, exit_id,
            result_message_id, ids=[exit_id], on_replay=self._exit_replay(exit_id),
        )  # fmt: skip

    def _exit_replay(self, exit_id: str | None) -> Replay | None:
        if exit_id is None:
            return None

        def replay(stored: dict[str, AnyMessage]) -> tuple[AnyMessage, AnyMessage | None]:
            exit_message = stored[exit_id]
            answer_id = exit_answer_id(exit_message)
            return exit_message, (self.get_message(answer_id) if answer_id else None)

        return replay

    def _part_verb(self, planner_fn: Any, message_id: str, *args: Any) -> bool:
        """The Mind Map's part verbs return False instead of raising; typed errors stay
        available through `plan_*` and the repository."""
        try:
            index, message = self._located(message_id)
            self.apply(planner_fn(self.header, self.id, index, message, *args))
        except (NotFound, InvalidTransition, ValidationError):
            return False
        return True

    def add_text_part(self, message_id: str, text: str) -> bool:
        return self._part_verb(plans.plan_add_text_part, message_id, text)

    def add_reasoning_part(
        self, message_id: str, reasoning: str, signature: str | None = None
    ) -> bool:
        return self._part_verb(plans.plan_add_reasoning_part, message_id, reasoning, signature)

    def add_tool_call_part(self, message_id: str, tool_call: ToolCallPart) -> bool:
        return self._part_verb(plans.plan_add_tool_call_part, message_id, tool_call)

    def finish_assistant_message(
        self,
        message_id: str,
        status: str = "completed",
        usage: Usage | None = None,
        tokens_in: int | None = None,
        tokens_out: int | None = None,
        cache_reads: int | None = None,
        cache_writes: int | None = None,
        cost: float | None = None,
        finished_ts: float | None = None,
    ) -> AssistantMessage:
        index, message = self._located(message_id)
        return self.apply(
            plans.plan_finish_assistant_message(
                self.header, self.id, index, message, status, usage, tokens_in, tokens_out,
                cache_reads, cache_writes, cost, finished_ts,
            )
        )  # fmt: skip

    def set_state(self, state: TaskState | str) -> None:
        self.state = check_transition(self.state, state)

    # -- queries --------------------------------------------------------------------
    def get_message(self, message_id: str) -> AnyMessage | None:
        position = self._position(message_id)
        return None if position is None else self.messages[position]

    def get_updates(
        self, since_id: str | None = None, *, since_message_id: str | None = None
    ) -> list[AnyMessage]:
        """Messages after `since_id` (the Mind Map's `since_message_id`); all of them if it
        is empty or unknown, as in the Mind Map."""
        since_id = resolve_alias(since_id, since_message_id, "since_id", "since_message_id")
        if not since_id:
            return list(self.messages)
        position = self._position(since_id)
        if position is None:
            return list(self.messages)
        return list(self.messages[position + 1 :])


def check_transition(current: TaskState | str, target: TaskState | str) -> TaskState:
    try:
        source, goal = TaskState(current), TaskState(target)
    except ValueError as exc:
        raise ValidationError(f"unknown task state: {exc}") from exc
    if goal == source:
        return goal
    if goal not in ALLOWED_TRANSITIONS[source]:
        raise InvalidTransition(f"a {source.value} task cannot become {goal.value}")
    return goal
