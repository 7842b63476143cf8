"""`Task`: seed 000's in-memory mind map, built on the shared planners.

Every verb asks a planner what to write and applies the plan to the list, exactly as the
repository applies the same plan to the stored document. The seed's three bugs are fixed
here (see DESIGN.md): sibling sub-tasks resolve to the open one, unknown roles and parts
are kept, and `finished_ts` bookkeeping is part of the append itself.
"""

from __future__ import annotations

from typing import Any, Sequence

from pydantic import Field, PrivateAttr, model_validator

from mindstore.errors import (
    InvalidTransition,
    MindstoreError,
    NotFound,
    ValidationError,
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
    SystemMessage,
    TaskConfigMessage,
    TaskEntryMessage,
    TaskExitMessage,
    ToolMessage,
    UserMessage,
    create_message_from_dict,
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
from mindstore.model.views import (
    SubTaskSpan,
    level_boundaries,
    level_messages,
    sub_task_spans,
)


def apply_path(target: Any, path: str, value: Any) -> None:
    """Set a dotted path (`content.2.is_loading`) on models, lists and dicts in memory."""
    *parents, last = path.split(".")
    for step in parents:
        target = target[int(step)] if isinstance(target, list) else (
            target[step] if isinstance(target, dict) else getattr(target, step)
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
        """Seed 000 dropped messages it could not type; here they stay, as unknown messages.

        Only a `messages` value that is not a list is refused, with a typed error.
        """
        if isinstance(data, dict) and "messages" in data:
            if not isinstance(data["messages"], list):
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

    def apply(self, plan: Plan) -> Any:
        """Apply a plan to the in-memory list (the repository applies it to MongoDB).

        Like the store, a message id that is already in the task is never added twice: if
        every new id is present the call is a replay and returns what is stored.
        """
        present = [i for i in plan.new_ids if self._position(i) is not None]
        if present:
            if len(present) != len(plan.new_ids):
                raise ValidationError(f"message ids already in the task: {sorted(present)}")
            stored = [self.messages[self._position(i)] for i in plan.new_ids]
            if isinstance(plan.result, tuple):
                return tuple(stored[: len(plan.result)])
            return stored if isinstance(plan.result, list) else stored[0]
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

    def _located(self, message_id: str) -> tuple[int, AnyMessage]:
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
            raise NotFound("no task configuration message found in history")
        index, kind = location
        message = self.messages[index]
        if kind == "entry" and isinstance(message, TaskEntryMessage) and message.entry():
            return message.entry().initial_task_config
        if isinstance(message, TaskConfigMessage) and message.config():
            return message.config()
        return self.get_current_config()

    def get_current_config(self) -> TaskConfigPart:
        for message in reversed(self.messages):
            if isinstance(message, TaskConfigMessage) and message.config() is not None:
                return message.config()
        raise NotFound("no task configuration message found in history")

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
        if isinstance(message, dict):
            message = create_message_from_dict(message)
        return self.apply(plans.plan_add_message(self.header, self.id, message))

    def add_task_config(self, part: TaskConfigPart, timestamp: float | None = None) -> TaskConfigMessage:
        return self.apply(plans.plan_add_task_config(self.header, self.id, part, timestamp))

    def add_human_message(
        self,
        text: str | list[str] | None = None,
        images: list[ImagePart] | None = None,
        is_ui_hidden: bool = False,
        timestamp: float | None = None,
        message_id: str | None = None,
    ) -> UserMessage | None:
        return self.apply(
            plans.plan_add_human_message(
                self.header, self.id, text, images, is_ui_hidden, timestamp, message_id
            )
        )

    def add_system_message(
        self, text: str, id: str | None = None, timestamp: float | None = None
    ) -> SystemMessage:
        return self.apply(plans.plan_add_system_message(self.header, self.id, text, id, timestamp))

    def add_assistant_message(
        self, id: str | None = None, timestamp: float | None = None
    ) -> AssistantMessage:
        return self.apply(plans.plan_add_assistant_message(self.header, self.id, id, timestamp))

    def add_tool_result_message(
        self,
        tool_call_id: str,
        tool_name: str,
        result: Any,
        observer_results: list[ObserverResult] | None = None,
        is_error: bool = False,
        is_approved: bool = True,
        tool_result_contents: list[ToolResultContent] | None = None,
        error_message: str | None = None,
        is_loading: bool = False,
        has_feedback: bool = False,
        timestamp: float | None = None,
        message_id: str | None = None,
    ) -> ToolMessage:
        return self.apply(
            plans.plan_add_tool_result_message(
                self.header, self.id, tool_call_id, tool_name, result, observer_results,
                is_error, is_approved, tool_result_contents, error_message, is_loading,
                has_feedback, timestamp, message_id,
            )
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
        return self.apply(
            plans.plan_add_informational_message(
                self.header, self.id, informational_type, details, is_visible_ai,
                is_visible_ui, additional_data, timestamp, message_id,
            )
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
        return self.apply(
            plans.plan_add_compression_message(
                self.header, self.id, start_idx, end_idx, reason, strategies,
                compressed_message_ids, kept_message_ids, cache, metadata, timestamp, message_id,
            )
        )  # fmt: skip

    def answer_tool_call(
        self,
        tool_call: ToolCallPart | str,
        result: Any,
        observer_results: list[ObserverResult] | None = None,
        is_error: bool = False,
        is_approved: bool = True,
        tool_result_contents: list[ToolResultContent] | None = None,
        error_message: str | None = None,
        is_loading: bool = False,
        has_feedback: bool = False,
        timestamp: float | None = None,
        message_id: str | None = None,
    ) -> ToolMessage:
        if isinstance(tool_call, ToolCallPart):
            tool_call_id = tool_call.tool_call_id
        elif isinstance(tool_call, str):
            tool_call_id = tool_call
        else:
            raise ValidationError(
                f"answer_tool_call expects a ToolCallPart or its id, got {type(tool_call).__name__}"
            )
        return self.apply(
            plans.plan_answer_tool_call(
                self.header, self.id, tool_call_id, result, observer_results, is_error,
                is_approved, tool_result_contents, error_message, is_loading, has_feedback,
                timestamp, message_id,
            )
        )  # fmt: skip

    def add_task_entry(
        self,
        task_description: Sequence[TextPart | ImagePart | InformationalPart],
        initial_task_config: TaskConfigPart,
        entry_id: str | None = None,
        timestamp: float | None = None,
    ) -> TaskEntryMessage:
        return self.apply(
            plans.plan_add_task_entry(
                self.header, self.id, task_description, initial_task_config, entry_id, timestamp
            )
        )

    def add_task_exit(
        self,
        handoff_description: Sequence[TextPart | ImagePart],
        payloadKey: str = "task_result",
        timestamp: float | None = None,
        exit_id: str | None = None,
        result_message_id: str | None = None,
    ) -> tuple[TaskExitMessage, ToolMessage | None]:
        return self.apply(
            plans.plan_add_task_exit(
                self.header, self.id, handoff_description, payloadKey, timestamp, exit_id,
                result_message_id,
            )
        )  # fmt: skip

    def _part_verb(self, planner_fn: Any, message_id: str, *args: Any) -> bool:
        """Seed 000 part verbs return False instead of raising; typed errors stay available
        through `plan_*` and the repository."""
        try:
            index, message = self._located(message_id)
            self.apply(planner_fn(self.header, self.id, index, message, *args))
        except (NotFound, InvalidTransition, ValidationError):
            return False
        return True

    def add_text_part(self, message_id: str, text: str) -> bool:
        return self._part_verb(plans.plan_add_text_part, message_id, text)

    def add_reasoning_part(self, message_id: str, reasoning: str, signature: str | None = None) -> bool:
        return self._part_verb(plans.plan_add_reasoning_part, message_id, reasoning, signature)

    def add_tool_call_part(self, message_id: str, tool_call: ToolCallPart) -> bool:
        return self._part_verb(plans.plan_add_tool_call_part, message_id, tool_call)

    def finish_assistant_message(self, message_id: str, **fields: Any) -> AssistantMessage:
        index, message = self._located(message_id)
        return self.apply(
            plans.plan_finish_assistant_message(self.header, self.id, index, message, **fields)
        )

    def set_state(self, state: TaskState | str) -> None:
        self.state = check_transition(self.state, state)

    # -- queries --------------------------------------------------------------------
    def get_message(self, message_id: str) -> AnyMessage | None:
        position = self._position(message_id)
        return None if position is None else self.messages[position]

    def get_updates(self, since_message_id: str | None) -> list[AnyMessage]:
        """Messages after `since_message_id`; all of them if it is empty or unknown (seed)."""
        if not since_message_id:
            return list(self.messages)
        position = self._position(since_message_id)
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
