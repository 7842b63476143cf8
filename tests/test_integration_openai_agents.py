"""`MindstoreSession` driven by the OpenAI Agents SDK itself (a scripted `Model`, no network),
compared call for call with the SDK's own `SQLiteSession`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

agents = pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.memory import Session  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary  # noqa: E402

from mindstore.errors import NotFound, ValidationError  # noqa: E402
from mindstore.integrations.openai_agents import MindstoreSession, drop_orphans  # noqa: E402
from mindstore.model.messages import AssistantMessage, ToolMessage, UserMessage  # noqa: E402
from mindstore.model.parts import ReasoningPart, ToolCallPart  # noqa: E402
from mindstore.repositories.tasks import RetryPolicy  # noqa: E402
from mindstore.store import Store  # noqa: E402

NO_TRACING = RunConfig(tracing_disabled=True)


class ScriptedModel(Model):
    """Answers from a script, one list of output items per model call; records its inputs."""

    def __init__(self, turns: list[list[Any]]) -> None:
        self.turns = list(turns)
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                           handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                           prompt=None):  # fmt: skip
        self.inputs.append(json.loads(json.dumps(input)))
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any):  # pragma: no cover - not used
        raise NotImplementedError


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"-3C in {city}"


def text(value: str, item_id: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id=item_id, type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=value, annotations=[])])  # fmt: skip


def call(call_id: str, city: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", id=f"fc_{call_id}", call_id=call_id, name="weather",
                                    arguments=json.dumps({"city": city}))  # fmt: skip


def reasoning(item_id: str, summary: str) -> ResponseReasoningItem:
    return ResponseReasoningItem(id=item_id, type="reasoning", summary=[Summary(type="summary_text", text=summary)])


def script() -> list[list[Any]]:
    return [
        [reasoning("rs_1", "Use the tool."), call("call_1", "Oslo")],
        [text("Pack a coat.", "msg_1")],
        [call("call_2", "Rome"), call("call_3", "Paris")],
        [text("Rome is milder.", "msg_2")],
    ]


async def run_conversation(session: Any) -> ScriptedModel:
    model = ScriptedModel(script())
    agent = Agent(name="planner", instructions="Be brief.", model=model, tools=[weather])
    first = await Runner.run(agent, "Weather in Oslo?", session=session, run_config=NO_TRACING)
    assert first.final_output == "Pack a coat."
    second = await Runner.run(agent, "And Rome or Paris?", session=session, run_config=NO_TRACING)
    assert second.final_output == "Rome is milder."
    return model


def sample_items() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Weather in Oslo?"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Use the tool."}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{\"city\": \"Oslo\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "-3C"},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "Pack a coat.", "annotations": []}]},
    ]  # fmt: skip


async def test_a_real_run_sends_the_model_the_same_history_as_sqlite_session(acme):
    ours = MindstoreSession("chat-1", acme, owner="ann")
    assert isinstance(ours, Session)
    theirs = SQLiteSession("chat-1")
    model_ours = await run_conversation(ours)
    model_theirs = await run_conversation(theirs)
    assert model_ours.inputs == model_theirs.inputs  # every model call saw the same input
    assert await ours.get_items() == await theirs.get_items()
    assert len(await ours.get_items()) == 11


async def test_items_are_stored_as_typed_tracked_messages(acme):
    session = MindstoreSession("chat-typed", acme, owner="ann")
    await run_conversation(session)
    messages = await acme.tasks.messages("chat-typed")
    assert isinstance(messages[0], UserMessage)
    assert isinstance(messages[1].content[0], ReasoningPart)
    calls = [p for m in messages if isinstance(m, AssistantMessage) for p in m.content if isinstance(p, ToolCallPart)]
    assert [c.tool_call_id for c in calls] == ["call_1", "call_2", "call_3"]
    results = [p for m in messages if isinstance(m, ToolMessage) for p in m.content]
    assert [(r.tool_call_id, r.tool_name) for r in results] == [
        ("call_1", "weather"), ("call_2", "weather"), ("call_3", "weather")]
    record = await acme.tasks.get("chat-typed")
    assert record.owner == "ann" and record.open_tool_call_ids == []


async def test_the_same_call_sequence_gives_what_sqlite_session_gives(acme):
    ours, theirs = MindstoreSession("seq", acme), SQLiteSession("seq")
    for session in (ours, theirs):
        await session.add_items(sample_items()[:3])
        await session.add_items(sample_items()[3:])
        await session.add_items([{"role": "user", "content": "thanks"}])
    assert await ours.get_items() == await theirs.get_items()
    for limit in (1, 2, 4, 6, 50):  # (3 would start with an orphaned output: see below)
        assert await ours.get_items(limit=limit) == await theirs.get_items(limit=limit)
    for _ in range(3):
        assert await ours.pop_item() == await theirs.pop_item()
    assert await ours.get_items() == await theirs.get_items()
    await ours.add_items([{"role": "user", "content": "again"}])
    await theirs.add_items([{"role": "user", "content": "again"}])
    assert await ours.get_items() == await theirs.get_items()
    await ours.clear_session()
    await theirs.clear_session()
    assert await ours.get_items() == await theirs.get_items() == []
    assert await ours.pop_item() is None and await theirs.pop_item() is None


async def test_a_limit_never_starts_with_a_result_whose_call_was_cut_off(acme):
    session = MindstoreSession("cut", acme)
    await session.add_items(sample_items())
    theirs = SQLiteSession("cut")
    await theirs.add_items(sample_items())
    # the latest 2 items are the tool output and the answer: SQLite starts with the orphan
    assert (await theirs.get_items(limit=2))[0]["type"] == "function_call_output"
    assert await session.get_items(limit=2) == [sample_items()[-1]]
    assert await session.get_items(limit=3) == sample_items()[-3:]
    assert drop_orphans(sample_items()[3:]) == sample_items()[4:]


async def test_session_settings_limit_applies_like_sqlite(acme):
    from agents.memory.session_settings import SessionSettings

    ours = MindstoreSession("lim", acme, session_settings=SessionSettings(limit=2))
    theirs = SQLiteSession("lim", session_settings=SessionSettings(limit=2))
    for session in (ours, theirs):
        await session.add_items([{"role": "user", "content": f"m{i}"} for i in range(5)])
    assert await ours.get_items() == await theirs.get_items()
    assert len(await ours.get_items()) == 2


async def test_popping_a_result_reopens_its_call(acme):
    session = MindstoreSession("pop", acme)
    await session.add_items(sample_items()[:4])
    assert (await acme.tasks.get("pop")).open_tool_call_ids == []
    popped = await session.pop_item()
    assert popped == sample_items()[3]
    assert (await acme.tasks.get("pop")).open_tool_call_ids == ["call_1"]
    await session.add_items([sample_items()[3]])
    assert (await acme.tasks.get("pop")).open_tool_call_ids == []


async def test_concurrent_pops_remove_exactly_as_many_items(store):
    patient = RetryPolicy(attempts=400, base_delay=0.0002, max_delay=0.01)
    views = [Store(store.backend, retry=patient).scoped("acme") for _ in range(3)]
    first = MindstoreSession("busy", views[0])
    items = [{"role": "user", "content": f"m{i}"} for i in range(30)]
    await first.add_items(items)
    sessions = [MindstoreSession("busy", views[n % 3]) for n in range(12)]
    popped = await asyncio.gather(*(s.pop_item() for s in sessions))
    assert sorted(p["content"] for p in popped) == sorted(i["content"] for i in items[-12:])
    assert await first.get_items() == items[:18]
    assert (await views[0].tasks.get("busy")).seq == 18


async def test_sessions_are_scoped_to_tenant_and_owner_and_listed_newest_first(store):
    ann = store.scoped("acme", owner="ann")
    for name in ("s1", "s2", "s3"):
        await MindstoreSession(name, ann).add_items([{"role": "user", "content": name}])
        await asyncio.sleep(0.002)
    await MindstoreSession("s1", ann).add_items([{"role": "user", "content": "back"}])
    await MindstoreSession("b1", store.scoped("acme", owner="bob")).add_items([{"role": "user", "content": "x"}])
    await store.scoped("acme").tasks.create(owner="ann", task_id="not-a-session")
    listed = await MindstoreSession.list_sessions(ann)
    assert [s.session_id for s in listed] == ["s1", "s3", "s2"]
    assert all(s.owner == "ann" and s.age.total_seconds() >= 0 and s.age >= s.idle for s in listed)
    assert listed[0].items == 2
    assert await MindstoreSession("s1", store.scoped("acme", owner="bob")).get_items() == []
    assert await MindstoreSession("s1", store.scoped("globex")).get_items() == []
    with pytest.raises(NotFound):
        await MindstoreSession("s1", store.scoped("acme", owner="bob")).add_items([{"role": "user", "content": "x"}])
    assert len(await MindstoreSession("s1", ann).get_items()) == 2


@pytest.mark.parametrize("session_id", ["", "x" * 513, "a\x00b", 7, {"$ne": 1}])
def test_a_bad_session_id_is_refused(acme, session_id):
    with pytest.raises(ValidationError, match="session_id"):
        MindstoreSession(session_id, acme)


def test_an_owner_other_than_the_views_is_refused(store):
    with pytest.raises(ValidationError, match="owner"):
        MindstoreSession("x", store.scoped("acme", owner="ann"), owner="bob")


async def test_a_malformed_item_is_refused_and_nothing_is_stored(acme):
    session = MindstoreSession("bad", acme)
    await session.add_items([{"role": "user", "content": "kept"}])
    with pytest.raises(ValidationError, match=r"items\[1\]"):
        await session.add_items([{"role": "user", "content": "lost"},
                                 {"type": "function_call", "call_id": "$x", "name": "n", "arguments": "{}"}])  # fmt: skip
    with pytest.raises(ValidationError, match="items"):
        await session.add_items({"role": "user"})
    with pytest.raises(ValidationError, match="limit"):
        await session.get_items(limit=-1)
    assert await session.get_items() == [{"role": "user", "content": "kept"}]


async def test_a_session_cleared_elsewhere_starts_afresh(acme):
    first, second = MindstoreSession("shared", acme), MindstoreSession("shared", acme)
    await first.add_items([{"role": "user", "content": "one"}])
    await second.add_items([{"role": "user", "content": "two"}])
    await first.clear_session()
    await second.add_items([{"role": "user", "content": "three"}])
    assert await first.get_items() == [{"role": "user", "content": "three"}]
