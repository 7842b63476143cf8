"""The OpenAI Agents SDK's own session tests (tests/memory/test_session.py and
test_session_limit.py of openai-agents-python), ported: each runs on `MindstoreSession`
and on the SDK's `SQLiteSession`, which must agree. The SDK tests that read SQLite's
internals (connections, locks, tables, corrupt rows, `close()`) are not ported:
docs/integrations.md lists them."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from datetime import datetime
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, SQLiteSession
from agents.items import ModelResponse
from agents.memory.session_settings import SessionSettings
from agents.models.interface import Model
from agents.testing import ScriptedModel, assistant_message
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from mindstore.errors import ValidationError, WrongType
from mindstore.integrations.openai_agents import MindstoreSession


class Replies(Model):
    """Answers each call with the next text; keeps every input it was sent."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions, input, *args: Any, **kwargs: Any):
        self.inputs.append(json.loads(json.dumps(input)))
        text = ResponseOutputText(type="output_text", text=self.replies.pop(0), annotations=[])
        message = ResponseOutputMessage(id=f"msg_{len(self.inputs)}", type="message",
                                        role="assistant", status="completed",
                                        content=[text])  # fmt: skip
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any):  # pragma: no cover - not used
        raise NotImplementedError


@pytest.fixture(params=["mindstore", "sqlite"])
def open_session(request, acme):
    """`open_session(id, **settings)`: a session of the kind under test."""
    if request.param == "sqlite":
        return lambda session_id, **kw: SQLiteSession(session_id, **kw)
    return lambda session_id, **kw: MindstoreSession(session_id, acme, **kw)


async def run(agent: Agent, question: Any, session: Any, **config: Any) -> Any:
    return await Runner.run(agent, question, session=session,
                            run_config=RunConfig(tracing_disabled=True, **config))  # fmt: skip


def contents(items: list[Any]) -> list[Any]:
    return [item.get("content") if isinstance(item.get("content"), str)
            else item["content"][0]["text"]
            for item in items]  # fmt: skip


async def test_basic_memory_and_separate_sessions(open_session):
    model = Replies("San Francisco", "California", "I like dogs", "You mentioned cats")
    agent = Agent(name="test", model=model)
    first, second = open_session("session_1"), open_session("session_2")
    assert (await run(agent, "Golden Gate Bridge?", first)).final_output == "San Francisco"
    await run(agent, "What state?", first)
    assert len(model.inputs[-1]) == 3  # the history came along
    await run(agent, "I like dogs", second)
    assert model.inputs[-1] == [{"role": "user", "content": "I like dogs"}]
    await run(agent, "What did I say?", first)
    assert contents(model.inputs[-1]) == ["Golden Gate Bridge?", "San Francisco", "What state?",
                                          "California", "What did I say?"]  # fmt: skip


async def test_direct_add_get_clear_and_pop(open_session):
    session, other = open_session("pop_test"), open_session("other")
    assert await session.pop_item() is None
    items = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there!"},
             {"role": "user", "content": "How are you?"}]  # fmt: skip
    await session.add_items(items)
    await other.add_items([{"role": "user", "content": "elsewhere"}])
    assert await session.get_items() == items
    for expected in reversed(items):
        assert await session.pop_item() == expected
    assert await session.pop_item() is None and await session.get_items() == []
    assert contents(await other.get_items()) == ["elsewhere"]
    await other.clear_session()
    assert await other.get_items() == []


async def test_get_items_with_limit(open_session):
    session = open_session("count_test")
    items = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"Message {i}"} for i in range(6)
    ]
    await session.add_items(items)
    for limit, expected in ((None, items), (2, items[-2:]), (4, items[-4:]), (10, items), (0, [])):
        assert await session.get_items(limit=limit) == expected


async def test_list_input_is_appended_and_callbacks_shape_the_input(open_session):
    session = open_session("list_input")
    history = [
        {"role": "user", "content": "Earlier message"},
        {"role": "assistant", "content": "Saved reply"},
    ]
    await session.add_items(history)
    model = Replies("This should run", "I'm gpt-4o")
    agent = Agent(name="test", model=model)
    await run(agent, [{"role": "user", "content": "Test message"}], session)
    assert model.inputs[-1] == [*history, {"role": "user", "content": "Test message"}]

    def users_only(stored, new_input):
        return [item for item in stored if item.get("role") == "user"] + new_input

    await run(
        agent,
        [{"role": "user", "content": "What your name?"}],
        session,
        session_input_callback=users_only,
    )
    assert contents(model.inputs[-1]) == ["Earlier message", "Test message", "What your name?"]


async def test_a_callback_repeating_history_does_not_grow_the_session(open_session):
    session = open_session("session_repeat")
    model = Replies("assistant 0", "assistant 1", "assistant 2")

    def repeat_first(stored, new_input):
        return [*stored, stored[0], *new_input] if stored else new_input

    for n in range(3):
        await run(
            Agent(name="test", model=model),
            f"user {n}",
            session,
            session_input_callback=repeat_first,
        )
    stored = await session.get_items()
    assert len(stored) == 6 and contents([i for i in stored if i.get("role") == "user"]) == [
        "user 0",
        "user 1",
        "user 2",
    ]


async def test_unicode_and_special_characters(open_session):
    session = open_session("special_chars")
    items = [{"role": "user", "content": text} for text in
             ("こんにちは", "😊👍", "O'Reilly", "DROP TABLE sessions;", '"SELECT * FROM users";',
              "{'$ne': 1}")]  # fmt: skip
    await session.add_items(items)
    assert await session.get_items() == items


async def test_session_settings(open_session):
    assert open_session("default").session_settings.limit is None
    assert (
        open_session("five", session_settings=SessionSettings(limit=5)).session_settings.limit == 5
    )
    session = open_session("dictionary", session_settings={"limit": 0})
    assert (
        isinstance(session.session_settings, SessionSettings)
        and session.session_settings.limit == 0
    )
    assert session.session_settings.resolve({"limit": 4}).limit == 4
    with pytest.raises(TypeError, match="Unknown session settings: limitt"):
        open_session("invalid", session_settings={"limitt": 1})
    limited = open_session("uses_settings", session_settings=SessionSettings(limit=3))
    await limited.add_items([{"role": "user", "content": f"Message {i}"} for i in range(5)])
    assert contents(await limited.get_items()) == ["Message 2", "Message 3", "Message 4"]
    assert contents(await limited.get_items(limit=2)) == [
        "Message 3",
        "Message 4",
    ]  # an explicit limit wins


@pytest.mark.parametrize(("limit", "history"), [(2, 2), (0, 0), (None, 6), (100, 6)])
async def test_a_runs_session_limit_bounds_the_history_sent(open_session, limit, history):
    session = open_session("limit_test", session_settings=SessionSettings(limit=100))
    model = Replies("Reply 1", "Reply 2", "Reply 3", "Reply 4")
    agent = Agent(name="test", model=model)
    for n in (1, 2, 3):
        await run(agent, f"Message {n}", session)
    await run(agent, "Message 4", session, session_settings=SessionSettings(limit=limit))
    sent = model.inputs[-1]
    assert len(sent) == history + 1 and sent[-1] == {"role": "user", "content": "Message 4"}
    assert (
        contents(sent[:-1])
        == ["Message 1", "Reply 1", "Message 2", "Reply 2", "Message 3", "Reply 3"][6 - history :]
    )


async def test_the_runner_leaves_out_a_result_whose_call_the_limit_cut_off(open_session):
    session = open_session("limit_tool_pair")
    history = [
        {"role": "user", "content": "What is the weather?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "It is sunny.", "annotations": []}]},
    ]  # fmt: skip
    await session.add_items(history)
    assert await session.get_items(limit=2) == history[-2:]
    model = Replies("Tomorrow is sunny too.")
    await run(Agent(name="test", model=model), "What about tomorrow?", session,
              session_settings=SessionSettings(limit=2))  # fmt: skip
    assert model.inputs[-1] == [history[-1], {"role": "user", "content": "What about tomorrow?"}]


NOT_JSON = [object(), {1, 2}, datetime(2026, 1, 2, 3, 4, 5, 678901), b"bytes", Replies]


@pytest.mark.parametrize("value", NOT_JSON, ids=["object", "set", "datetime", "bytes", "class"])
async def test_an_item_that_is_not_json_is_refused_with_a_type_error(open_session, value):
    """SQLiteSession stores `json.dumps(item)` and raises its TypeError (the SDK's tests expect
    one); the store's `WrongType` is one. The whole call is refused, nothing is stored, and the
    session stays usable."""
    session = open_session("rollback_test")
    await session.add_items([{"role": "user", "content": "kept"}])
    with pytest.raises(TypeError):
        await session.add_items([{"role": "user", "content": "lost"},
                                 {"role": "user", "content": value}])  # fmt: skip
    with pytest.raises(TypeError):
        await session.add_items([{"role": "user", "content": "lost", "extra": {"deep": [value]}}])
    assert contents(await session.get_items()) == ["kept"]
    await session.add_items([{"role": "user", "content": "after failure"}])
    assert contents(await session.get_items()) == ["kept", "after failure"]


async def test_a_refused_item_is_named_with_the_stores_typed_error(acme):
    session = MindstoreSession("named", acme)
    with pytest.raises(WrongType, match=r"items\[1\]"):
        await session.add_items([{"role": "user", "content": "ok"},
                                 {"role": "user", "content": object()}])  # fmt: skip
    circular: dict[str, Any] = {"role": "user", "content": "loop"}
    circular["self"] = circular
    with pytest.raises(ValidationError, match=r"items\[0\]"):  # json's ValueError, as SQLite's
        await session.add_items([circular])
    assert await session.get_items() == []


AS_JSON = [{1: "a", "b": (2, 3)}, [(1, 2), {"x": None}], float("inf"), "\u2028 \x7f",
           {"nested": {"$ne": 1, "a.b": 2}}]  # fmt: skip


@pytest.mark.parametrize("extra", AS_JSON)
async def test_an_item_reads_back_as_its_json_as_sqlite_gives_it_back(open_session, extra):
    """Keys become strings, tuples lists: `json.loads(json.dumps(item))`, on both sessions."""
    session = open_session("as_json")
    item = {"role": "user", "content": "x", "extra": extra}
    await session.add_items([item])
    assert await session.get_items() == [json.loads(json.dumps(item))]


async def test_one_session_from_five_threads_each_running_a_loop_of_its_own(open_session, store):
    """The SDK's `test_sqlite_session_concurrent_access`: five worker threads, each item added
    from a new event loop of its own while the test's own loop waits blocked; every item is
    stored once. Threads are joined with a deadline: a hang fails the test, not the run."""
    if store.kind != "embedded":
        pytest.skip("a MongoDB client is bound to the event loop it was first used on")
    session = open_session("concurrent_test")
    items = [{"role": "user", "content": f"Message {i}"} for i in range(10)]
    failures: list[BaseException] = []

    def add_each(mine: list[dict[str, Any]]) -> None:
        for item in mine:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(session.add_items([item]))
            except BaseException as exc:  # reported by the test's thread
                failures.append(exc)
            finally:
                loop.close()

    workers = [threading.Thread(target=add_each, args=(items[n::5],), daemon=True)
               for n in range(5)]  # fmt: skip
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + 30  # far above the well-under-a-second they need
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    assert not [worker for worker in workers if worker.is_alive()], "a thread hung"
    assert not failures, failures
    stored = contents(await session.get_items())
    assert sorted(stored) == sorted(item["content"] for item in items)


def sync_run(agent: Agent, question: Any, **kwargs: Any) -> Any:
    """`Runner.run_sync` in a new event loop of its own (as the SDK's tests run it)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return Runner.run_sync(agent, question, **kwargs)
    finally:
        loop.close()


async def run_by(method: str, agent: Agent, question: Any, session: Any) -> Any:
    config = RunConfig(tracing_disabled=True)
    if method == "run_sync":
        return await asyncio.to_thread(sync_run, agent, question, session=session,
                                       run_config=config)  # fmt: skip
    if method == "run_streamed":
        result = Runner.run_streamed(agent, question, session=session, run_config=config)
        async for _ in result.stream_events():
            pass
        return result
    return await Runner.run(agent, question, session=session, run_config=config)


@pytest.mark.parametrize("method", ["run", "run_sync", "run_streamed"])
async def test_memory_through_every_runner_method(open_session, store, method):
    """The SDK's `test_session_memory_basic_functionality_parametrized` and
    `test_session_memory_different_sessions_parametrized`."""
    if method == "run_sync" and store.kind != "embedded":
        pytest.skip("a MongoDB client is bound to the event loop it was first used on")
    said = ["What city is the Golden Gate Bridge in?", "What state is it in?", "I like dogs"]
    replies = ["San Francisco", "California", "Dogs are great"]
    model = ScriptedModel()
    model.extend([[assistant_message(text)] for text in replies])
    agent = Agent(name="test", model=model)
    session, other = open_session("test_session_123"), open_session("other")
    assert (await run_by(method, agent, said[0], session)).final_output == replies[0]
    assert (await run_by(method, agent, said[1], session)).final_output == replies[1]
    assert len(model.calls[-1].input) == 3  # the history came along
    await run_by(method, agent, said[2], other)
    assert model.calls[-1].input == [{"role": "user", "content": said[2]}]
    assert contents(await session.get_items()) == [said[0], replies[0], said[1], replies[1]]


@pytest.mark.parametrize("operation", ["add", "pop", "clear"])
async def test_a_cancelled_write_is_all_or_nothing_and_cancelled(open_session, operation):
    """The contract part of the SDK's `test_sqlite_session_post_commit_cancellation_propagates_
    after_known_outcome` (the rest pauses SQLite's commit): a write cancelled at any point of
    its way raises `CancelledError` to its caller and leaves the session either before or
    after it; a retried add then stores its items once (MindstoreSession; SQLiteSession would
    store them again)."""
    before = [{"role": "user", "content": "once"}, {"role": "assistant", "content": "twice"}]
    more = [{"role": "user", "content": "again"}, {"role": "assistant", "content": "and again"}]
    after = {"add": [*before, *more], "pop": before[:1], "clear": []}[operation]

    def start(session: Any) -> Any:
        if operation == "add":
            return session.add_items(more)
        return session.pop_item() if operation == "pop" else session.clear_session()

    cancelled = 0
    for ticks in range(200):
        session = open_session(f"cancel_{operation}_{ticks}")
        await session.add_items(before)
        mutation = asyncio.create_task(start(session))
        for _ in range(ticks):
            await asyncio.sleep(0)
        if mutation.done():
            assert await session.get_items() == after
            break
        mutation.cancel()
        with pytest.raises(asyncio.CancelledError):
            await mutation
        cancelled += 1
        assert await session.get_items() in (before, after)
        if operation == "add" and isinstance(session, MindstoreSession):
            await session.add_items(more)  # the caller's retry: stored once, whichever it was
            assert await session.get_items() == after
    assert cancelled and mutation.done()
