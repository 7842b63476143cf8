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
from typing import Any, TypeVar, cast

from pydantic import Field, PrivateAttr, model_validator

from mindstore.errors import (
    InvalidTransition,
    MindstoreError,
    MissingConfig,
    NotFound,
    ValidationError,
)
from mindstore.model import plans, verbs
from mindstore.model.base import Model, new_id
from mindstore.model.header import ALLOWED_TRANSITIONS, TaskHeader, TaskState
from mindstore.model.levels import (
    SubTaskSpan,
    level_boundaries,
    level_messages,
    sub_task_spans,
)
from mindstore.model.messages import AnyMessage, Message, TaskConfigMessage, TaskEntryMessage
from mindstore.model.parts import ImagePart, TaskConfigPart, TextPart
from mindstore.model.plans import Plan
from mindstore.model.specs import resolve_alias
from mindstore.model.verbs import exit_answer_id, tool_call_id_of

__all__ = [
    "Task",
    "TaskVerbs",
    "apply_path",
    "check_transition",
    "exit_answer_id",
    "tool_call_id_of",
]

R = TypeVar("R")
Replay = Callable[[dict[str, AnyMessage]], Any]


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


class TaskVerbs:
    """The in-memory Task's verbs, each made from its one declaration in `model/verbs.py`
    (the repository makes its own from the same ones). A plain class, not the pydantic
    model itself, so its attributes are never taken for fields."""

    add_message = verbs.in_memory(verbs.add_message)
    add_messages = verbs.in_memory(verbs.add_messages)
    add_task_config = verbs.in_memory(verbs.add_task_config)
    add_human_message = verbs.in_memory(verbs.add_human_message)
    add_system_message = verbs.in_memory(verbs.add_system_message)
    add_assistant_message = verbs.in_memory(verbs.add_assistant_message)
    add_tool_result_message = verbs.in_memory(verbs.add_tool_result_message)
    add_informational_message = verbs.in_memory(verbs.add_informational_message)
    add_compression_message = verbs.in_memory(verbs.add_compression_message)
    answer_tool_call = verbs.in_memory(verbs.answer_tool_call)
    add_task_entry = verbs.in_memory(verbs.add_task_entry)
    add_task_exit = verbs.in_memory(verbs.add_task_exit)
    add_text_part = verbs.in_memory_or_false(verbs.add_text_part)
    add_reasoning_part = verbs.in_memory_or_false(verbs.add_reasoning_part)
    add_tool_call_part = verbs.in_memory_or_false(verbs.add_tool_call_part)
    finish_assistant_message = verbs.in_memory(verbs.finish_assistant_message)


class Task(Model, TaskVerbs):
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

    def _verb(self, planner_fn: Callable[..., Plan], *args: object, ids: Sequence[str | None] = (),
              on_replay: Replay | None = None) -> Any:  # fmt: skip
        """Plan and apply; a planning error on a call whose ids are all stored is a replay
        (an exit replayed after its sub-task closed plans as 'exit at the root')."""
        explicit = [i for i in ids if i is not None]
        for value in explicit:
            plans.check_message_id(value)
        try:
            plan = planner_fn(self.header, self.id, *args)
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

    def _run(self, step: verbs.Step[R]) -> R:
        """Run a declared verb's step on the list (`model/verbs.py`; the store runs the same
        step in one guarded update)."""
        if step.require_ids and any(self._position(i) is None for i in step.require_ids):
            raise ValidationError(
                "compressed_message_ids / kept_message_ids name messages "
                "that the task does not hold"
            )
        if step.locate is not None:
            index, message = self._located(step.locate)
            return cast(
                R, self.apply(step.planner(self.header, self.id, index, message, *step.args))
            )
        on_replay = self._exit_replay(step.ids[0]) if step.exit_replay else step.replay
        return cast(R, self._verb(step.planner, *step.args, ids=step.ids, on_replay=on_replay))

    def _exit_replay(self, exit_id: str | None) -> Replay | None:
        if exit_id is None:
            return None

        def replay(stored: dict[str, AnyMessage]) -> tuple[AnyMessage, AnyMessage | None]:
            exit_message = stored[exit_id]
            answer_id = exit_answer_id(exit_message)
            return exit_message, (self.get_message(answer_id) if answer_id else None)

        return replay

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
