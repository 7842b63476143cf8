"""One contract, two homes: the in-memory `Task` and the store run the same scenario.

Every verb is called in both homes with the same arguments (the Mind Map's spellings
included), the same ids and a frozen clock. After each step the outcome must agree: the
same return value (messages compared as their stored dicts), or the same error class; and
at the end the same stored messages and header. Replays (the same caller id again) return
what is stored, in both homes. Errors are also instances of the builtins the Mind Map
raised, so `except ValueError` / `except TypeError` written against it still catches them.
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest

from layout import assert_header
from mindstore.errors import (
    InvalidTransition,
    MindstoreError,
    MissingConfig,
    NotFound,
    UnknownToolCall,
    ValidationError,
    WrongType,
)
from mindstore.model.messages import AssistantMessage, UnknownMessage, UserMessage, message_to_dict
from mindstore.model.parts import (
    ObserverResult,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolMetadata,
)
from mindstore.model.task import Task

ROOT = TaskConfigPart(
    model_name="root-model", tool_metadata=[ToolMetadata(name="research", is_task_entry=True)]
)
SUB = TaskConfigPart(model_name="sub-model")  # does not list the entry tool
PART_VERBS = {"add_text_part", "add_reasoning_part", "add_tool_call_part"}


@contextmanager
def frozen(counter: itertools.count) -> Any:
    with (
        mock.patch("mindstore.model.base.ID_SOURCE", lambda: f"gen{next(counter)}"),
        mock.patch("mindstore.model.base.CLOCK", lambda: 1_700_000_000.5),
    ):
        yield


def normalized(result: Any) -> Any:
    if isinstance(result, tuple):
        return tuple(normalized(item) for item in result)
    if isinstance(result, list):
        return [normalized(item) for item in result]
    if result is None or isinstance(result, (bool, int, str)):
        return result
    if hasattr(result, "role"):
        return message_to_dict(result)
    return result.model_dump() if hasattr(result, "model_dump") else result


class Homes:
    """The same task in memory and in the store, driven step by step."""

    def __init__(self, store: Any) -> None:
        self.memory = Task(id="T")
        self.repo = store.scoped("contract").tasks
        self.database = store.database
        self.memory_ids, self.store_ids = itertools.count(), itertools.count()
        self.log: list[tuple[str, Any, Any]] = []

    async def start(self) -> None:
        await self.repo.create(task_id="T")

    async def both(self, verb: str, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        with frozen(self.memory_ids):
            left = self._outcome(verb, lambda: getattr(self.memory, verb)(*args, **kwargs))
        with frozen(self.store_ids):
            try:
                right_value = await getattr(self.repo, verb)("T", *args, **kwargs)
                right = ("ok", right_value)
            except MindstoreError as exc:
                right = ("error", exc)
        self.log.append((verb, left, right))
        return left, right

    @staticmethod
    def _outcome(verb: str, call: Any) -> tuple[str, Any]:
        try:
            return ("ok", call())
        except MindstoreError as exc:
            return ("error", exc)

    async def same(self, verb: str, *args: Any, **kwargs: Any) -> Any:
        """Run in both homes; assert the same outcome; return the store's value."""
        (lk, left), (rk, right) = await self.both(verb, *args, **kwargs)
        assert lk == rk, (verb, left, right)
        if lk == "error":
            assert type(left) is type(right), (verb, left, right)
            return right
        if verb in PART_VERBS:  # the Mind Map's part verbs answer True; the store the message
            assert left is True
        else:
            assert normalized(left) == normalized(right), (verb, left, right)
        return right

    async def agree(self) -> None:
        stored = await self.repo.messages("T")
        assert [message_to_dict(m) for m in stored] == [
            message_to_dict(m) for m in self.memory.messages
        ]
        header = await self.repo.header("T")
        await assert_header(self.database, "contract/T", header, self.memory.header)


@pytest.fixture
async def homes(store: Any) -> Homes:
    pair = Homes(store)
    await pair.start()
    return pair


async def test_every_verb_agrees_in_both_homes(homes: Homes) -> None:
    h = homes
    # no config yet: the Mind Map raised ValueError for all three
    for verb in ("add_assistant_message", "current_task_config"):
        error = await h.same(verb)
        assert isinstance(error, MissingConfig) and isinstance(error, ValueError)
    await h.same("add_task_config", ROOT)
    await h.same("add_system_message", "be brief", id="sys-1")  # the Mind Map's `id=`
    await h.same("add_system_message", "be brief", message_id="sys-1")  # replay: the stored one
    await h.same("add_human_message", "plan a trip", message_id="u-1")
    await h.same("add_human_message", "plan a trip", message_id="u-1")
    await h.same("add_assistant_message", id="a-1")
    await h.same("add_text_part", "a-1", "Let me ")
    await h.same("add_reasoning_part", "a-1", "think", "sig")
    await h.same(
        "add_tool_call_part", "a-1", ToolCallPart(tool_call_id="call-r", tool_name="research")
    )
    await h.same(
        "add_tool_call_part", "a-1", ToolCallPart(tool_call_id="call-w", tool_name="weather")
    )
    # the weather call is answered positionally, the Mind Map's way
    await h.same("answer_tool_call", "call-w", {"t": 21},
                 [ObserverResult(observer_name="o", is_success=True)], False, True,
                 message_id="r-w")  # fmt: skip
    await h.same("answer_tool_call", "call-w", {"t": 21}, message_id="r-w")  # replay
    error = await h.same("answer_tool_call", "no-such-call", {})
    assert isinstance(error, UnknownToolCall) and isinstance(error, ValueError)
    error = await h.same("answer_tool_call", 42, {})
    assert isinstance(error, WrongType) and isinstance(error, TypeError)
    await h.same(
        "add_informational_message", "note", "between the call and the entry", message_id="i-1"
    )
    # a message sits between the research call and the entry, and the sub-task's config does
    # not list the tool: the entry still records the call it answers
    entry = await h.same("add_task_entry", [TextPart(text="find hotels")], SUB, "e-1")
    assert entry.content[0].trigger_call_id == "call-r"
    await h.same("add_task_entry", [TextPart(text="find hotels")], SUB, "e-1")  # replay
    assert await h.same("current_task_level") == 1
    assert (await h.same("current_task_config")).model_name == "sub-model"
    await h.same("add_tool_result_message", "loose", "grep", "found", message_id="t-1",
                 terminate=True, metadata={"k": 1})  # fmt: skip
    exit_message, answer = await h.same("add_task_exit", [TextPart(text="Casa do Rio")],
                                        exit_id="x-1", payloadKey="hotel")  # fmt: skip
    assert answer is not None and answer.content[0].tool_call_id == "call-r"
    assert answer.content[0].result["hotel"] == "Casa do Rio"
    replayed = await h.same(
        "add_task_exit", [TextPart(text="Casa do Rio")], exit_id="x-1", payloadKey="hotel"
    )
    assert normalized(replayed) == normalized((exit_message, answer))  # the answer comes back too
    error = await h.same("add_task_exit", [TextPart(text="again")], exit_id="x-2")
    assert isinstance(error, InvalidTransition)
    await h.same("finish_assistant_message", "a-1", tokens_in=10, tokens_out=5, cost=0.01)
    await h.same("get_updates", since_message_id="u-1")
    await h.same("get_updates", "x-1")
    await h.same("get_message", "e-1")
    await h.same("current_task_messages")
    await h.same("find_current_task_boundaries")
    await h.same("task_boundaries", "e-1")
    await h.same("sub_task_spans")
    # content per role, on new writes
    error = await h.same(
        "add_message",
        UserMessage(id="bad-1", content=[ToolCallPart(tool_call_id="z", tool_name="t")]),
    )
    assert isinstance(error, ValidationError)
    error = await h.same("add_message", AssistantMessage(id="bad-2", status="bogus"))
    assert isinstance(error, ValidationError)
    # an unknown role is stored in both homes and comes back unchanged
    plugin = {"role": "plugin", "id": "p-1", "blob": [1, {"$x": 2}]}
    await h.same("add_message", dict(plugin))
    await h.same("add_messages", [UserMessage(id="m-1", content=[TextPart(text="x")])])
    await h.same("add_messages", [UserMessage(id="m-1", content=[TextPart(text="x")])])  # replay
    await h.agree()
    stored = await h.repo.get_message("T", "p-1")
    assert message_to_dict(stored) == plugin == message_to_dict(h.memory.get_message("p-1"))


async def test_an_exit_without_a_trigger_answers_nothing_visibly(homes: Homes) -> None:
    h = homes
    await h.same("add_task_config", ROOT)
    entry = await h.same("add_task_entry", [TextPart(text="side quest")], SUB, "e-1")
    assert entry.content[0].trigger_call_id is None
    exit_message, answer = await h.same("add_task_exit", [TextPart(text="done")], exit_id="x-1")
    assert answer is None and exit_message.content[0].tool_call_id is None
    await h.agree()


async def test_the_caller_can_name_the_trigger(homes: Homes) -> None:
    h = homes
    await h.same("add_task_config", ROOT)
    await h.same(
        "add_message",
        AssistantMessage(
            id="a-1",
            model_id="root-model",
            content=[
                ToolCallPart(tool_call_id="c-1", tool_name="research"),
                ToolCallPart(tool_call_id="c-2", tool_name="research"),
            ],
        ),
    )
    error = await h.same("add_task_entry", [TextPart(text="t")], SUB, "e-0", None, "nope")
    assert isinstance(error, UnknownToolCall)
    await h.same("add_task_entry", [TextPart(text="t")], SUB, "e-1", None, "c-1")
    _, answer = await h.same("add_task_exit", [TextPart(text="ok")], exit_id="x-1")
    assert answer.content[0].tool_call_id == "c-1"
    assert [ref.id for ref in h.memory.header.open_tool_calls] == ["c-2"]
    await h.agree()


@pytest.mark.parametrize("chosen", [True, False])
async def test_a_trigger_stored_by_id_stays_and_a_missing_one_follows_the_message_before(
    store: Any, chosen: bool
) -> None:
    """A call streamed into the assistant message right before an entry, after the entry:
    an entry that stored its trigger by id keeps it (the exit answers that call); one stored
    without a trigger takes the message's last call, as a fold of the history does. Both
    homes agree, and an import of the finished history (a fold) gives the same header."""
    h = Homes(store)
    await h.start()
    await h.same("add_task_config", ROOT)
    await h.same("add_assistant_message", id="a-1")
    if chosen:
        await h.same(
            "add_tool_call_part", "a-1", ToolCallPart(tool_call_id="c-1", tool_name="research")
        )
    entry = await h.same("add_task_entry", [TextPart(text="t")], SUB, "e-1")
    assert entry.content[0].trigger_call_id == ("c-1" if chosen else None)
    await h.same(
        "add_tool_call_part", "a-1", ToolCallPart(tool_call_id="c-2", tool_name="research")
    )
    await h.agree()
    folded = store.scoped("imported").tasks
    await folded.import_task(h.memory)
    assert (await folded.header("T")) == (await h.repo.header("T"))
    _, answer = await h.same("add_task_exit", [TextPart(text="ok")], exit_id="x-1")
    assert answer.content[0].tool_call_id == ("c-1" if chosen else "c-2")
    await h.agree()


def test_reading_a_task_never_writes_into_its_messages() -> None:
    raw = {"role": "plugin", "id": "p-1", "data": {"k": [1, 2]}}
    task = Task.model_validate({"id": "T", "messages": [dict(raw)]})
    assert task.current_task_level() == 0 and task.current_task_messages()
    assert isinstance(task.messages[0], UnknownMessage)
    assert message_to_dict(task.messages[0]) == raw


def test_aliases_that_disagree_are_refused() -> None:
    task = Task()
    task.add_task_config(ROOT)
    with pytest.raises(ValidationError):
        task.add_system_message("x", message_id="a", id="b")
    with pytest.raises(ValidationError):
        task.add_task_exit([TextPart(text="x")], payload_key="one", payloadKey="two")


def test_mind_map_errors_are_builtin_errors_too() -> None:
    task = Task()
    with pytest.raises(ValueError):
        task.get_current_config()
    with pytest.raises(ValueError):
        task.current_task_config()
    with pytest.raises(ValueError):
        task.add_assistant_message()
    task.add_task_config(ROOT)
    with pytest.raises(ValueError):
        task.answer_tool_call(ToolCallPart(tool_call_id="nope", tool_name="t"), {}, [], False, True)
    with pytest.raises(TypeError):
        task.answer_tool_call({"tool_call_id": "nope"}, {}, [], False, True)
    with pytest.raises(LookupError):  # and still mindstore's NotFound
        task.task_boundaries("nope")
    assert issubclass(MissingConfig, NotFound)
