"""The two homes of a declared verb: the in-memory `Task`'s method and the repository's.

`model/verbs.py` declares each verb once as a typed stub returning a `Step`; this module
makes the homes' methods from a stub, so neither can drift from the other
(docs/contract.md):

* `Task.<verb> = in_memory(stub)`: sync, applies the step to the in-memory list;
* `TaskRepository.<verb> = in_store(stub)`: async, the task id first, one guarded update
  through the repository's `_verb` / `_part_verb`.

The two factories are typed with the stub's `ParamSpec`, so mypy (and an IDE) sees each
home's real parameters and return type; at run time each made function carries the stub's
`__signature__` (with `self`, and `task_id` in the store) and docstring, so `help()` and
`inspect.signature` show the verb's parameters rather than `*args, **kwargs`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, cast

from mindstore.errors import InvalidTransition, NotFound, ValidationError, WrongType
from mindstore.model.messages import AnyMessage, MessageBase, UnknownMessage
from mindstore.model.parts import ToolCallPart
from mindstore.model.plans.core import Plan

P = ParamSpec("P")
R = TypeVar("R")
Replay = Callable[[dict[str, AnyMessage]], object]


@dataclass(frozen=True)
class Step(Generic[R]):
    """What one call of a verb runs, whichever home runs it.

    `R` is the verb's result type: the planner's result, or on a replay what is stored.
    """

    planner: Callable[..., Plan]
    """Called as `planner(header, task_id, *args)` (a part verb: `..., index, message, *args`)."""
    args: tuple[object, ...] = ()
    ids: tuple[str | None, ...] = ()
    """The caller-given message ids: all stored already means a replay (exactly-once)."""
    locate: str | None = None
    """A part verb: the id of the message it changes (else the verb appends)."""
    also_guard: tuple[str | None, ...] = ()
    """Further ids that must not be stored yet (the store guards them in its filter)."""
    require_ids: tuple[str, ...] = ()
    """Ids that must be stored already (a typed error if one is not)."""
    replay: Replay | None = None
    """What a replay returns, from the stored messages by id (default: the first id's)."""
    exit_replay: bool = False
    """A sub-task exit: a replay returns the stored exit and the answer it wrote."""


def tool_call_id_of(tool_call: object) -> str:
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


def check_messages(messages: object) -> list[AnyMessage]:
    """A list of message models (the store's and the in-memory Task's one check)."""
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise WrongType("messages must be a list of messages")
    for message in messages:
        if not isinstance(message, (MessageBase, UnknownMessage)):
            raise WrongType(f"expected a message, got {type(message).__name__}")
    return list(messages)


# ---------------------------------------------------------------------------- the homes
class MemoryHome(Protocol):
    """What `in_memory` needs of the in-memory `Task`."""

    def _run(self, step: Step[R]) -> R: ...


class StoreHome(Protocol):
    """What `in_store` needs of the repository: its entries to the writer, and one read."""

    async def _verb(
        self,
        task_id: str,
        planner_fn: Callable[..., Plan],
        *args: object,
        ids: Sequence[str | None] = ...,
        replay: Replay | None = ...,
        also_guard: Sequence[str | None] = ...,
        require_ids: Sequence[str] = ...,
    ) -> object: ...

    async def _part_verb(
        self, task_id: str, message_id: str, planner_fn: Callable[..., Plan], *args: object
    ) -> object: ...

    async def get_message(self, task_id: str, message_id: str) -> AnyMessage | None: ...


@dataclass(frozen=True)
class _Replayed:
    """A replayed exit, so its answer can be read after the write loop."""

    message: AnyMessage


def _replayed_exit(exit_id: str | None) -> Replay:
    """An exit's replay in the store: marked, so the answer it wrote is read after the write
    loop (the in-memory Task reads it from its list at once)."""
    return lambda stored: _Replayed(stored[exit_id]) if exit_id in stored else None


def in_memory(stub: Callable[P, Step[R]]) -> Callable[Concatenate[MemoryHome, P], R]:
    """The in-memory `Task`'s method for a verb: the stub's parameters, sync."""

    def verb(self: MemoryHome, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._run(stub(*args, **kwargs))

    return _described(verb, stub, _doc(stub, memory=True))


def in_memory_or_false(
    stub: Callable[P, Step[R]],
) -> Callable[Concatenate[MemoryHome, P], bool]:
    """The Mind Map's part verbs in memory: False instead of a missing message, a role the
    part may not join or a refused value (the store's raise; typed errors stay available
    through the planners and the repository)."""

    def verb(self: MemoryHome, /, *args: P.args, **kwargs: P.kwargs) -> bool:
        try:
            self._run(stub(*args, **kwargs))
        except (NotFound, InvalidTransition, ValidationError):
            return False
        return True

    return _described(verb, stub, _doc(stub, memory=True, returns=_OR_FALSE), result="bool")


def in_store(
    stub: Callable[P, Step[R]],
) -> Callable[Concatenate[StoreHome, str, P], Coroutine[Any, Any, R]]:
    """The repository's method for a verb: async, the task id first, one guarded update."""

    async def verb(self: StoreHome, task_id: str, /, *args: P.args, **kwargs: P.kwargs) -> R:
        step = stub(*args, **kwargs)
        if step.locate is not None:
            return cast(R, await self._part_verb(task_id, step.locate, step.planner, *step.args))
        replay = _replayed_exit(step.ids[0]) if step.exit_replay else step.replay
        result = await self._verb(
            task_id, step.planner, *step.args, ids=step.ids, replay=replay,
            also_guard=step.also_guard, require_ids=step.require_ids,
        )  # fmt: skip
        if isinstance(result, _Replayed):
            answer_id = exit_answer_id(result.message)
            answer = await self.get_message(task_id, answer_id) if answer_id else None
            return cast(R, (result.message, answer))
        return cast(R, result)

    return _described(verb, stub, _doc(stub, memory=False), task_id=True)


F = TypeVar("F", bound=Callable[..., object])


def _described(
    function: F, stub: Callable[..., object], doc: str, *, task_id: bool = False,
    result: str | None = None,
) -> F:  # fmt: skip
    """The stub's name, docstring and signature on a home's function (`help()`,
    `inspect.signature` and the API reference show the verb's real parameters)."""
    signature = inspect.signature(stub)
    leading = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)]
    if task_id:
        leading.append(
            inspect.Parameter("task_id", inspect.Parameter.POSITIONAL_ONLY, annotation="str")
        )
    step = str(signature.return_annotation)  # "Step[R]": the stubs' annotations are strings
    function.__name__ = function.__qualname__ = stub.__name__
    function.__doc__ = doc
    function.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*leading, *signature.parameters.values()],
        return_annotation=result or step.removeprefix("Step[").removesuffix("]"),
    )
    return function


_OR_FALSE = (
    "Returns:\n"
    "    True; False when the message is missing, is of a role the part may not join, or\n"
    "    the value is refused (the Mind Map's part verbs return False instead of raising)."
)


def _doc(stub: Callable[..., object], *, memory: bool, returns: str | None = None) -> str:
    """The stub's docstring for one home: the store's names `task_id` first in its Args;
    the in-memory Task's leaves out the store's example (and may say its own result)."""
    lines = inspect.cleandoc(stub.__doc__ or "").splitlines()
    if not memory:
        at = lines.index("Args:") + 1
        return "\n".join([*lines[:at], "    task_id: The task.", *lines[at:]])
    kept = _without(
        lines, ("Example:",) if returns is None else ("Example:", "Returns:", "Raises:")
    )
    return "\n".join(kept).rstrip() + ("" if returns is None else "\n\n" + returns)


def _without(lines: list[str], sections: tuple[str, ...]) -> list[str]:
    kept: list[str] = []
    skipping = False
    for line in lines:
        if line and not line.startswith(" "):
            skipping = line in sections
        if not skipping:
            kept.append(line)
    return kept
