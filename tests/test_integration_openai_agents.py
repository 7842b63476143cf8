"""`MindstoreSession` driven by the OpenAI Agents SDK itself (a scripted `Model`, no network),
compared call for call with the SDK's own `SQLiteSession`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import bson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.items import ModelResponse
from agents.memory import Session
from agents.memory.session_settings import SessionSettings
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from mindstore.errors import NotFound, ValidationError, WrongType
from mindstore.formats import from_responses, to_responses
from mindstore.ids import task_key
from mindstore.integrations.openai_agents import (
    MindstoreSession,
    UsageHooks,
    batch_ids,
    drop_orphans,
    session_settings_of,
)
from mindstore.integrations.openai_agents_usage import Reported, attribute, item_key, model_name
from mindstore.model.messages import AssistantMessage, ToolMessage, UserMessage
from mindstore.model.messages import Usage as StoredUsage
from mindstore.model.paging import PagePolicy
from mindstore.model.parts import ReasoningPart, TextPart, ToolCallPart
from mindstore.repositories.tasks import RetryPolicy
from mindstore.store import Store

NO_TRACING = RunConfig(tracing_disabled=True)


def usage(tokens_in: int, tokens_out: int, cached: int = 0, reasoning: int = 0) -> Usage:
    """What a model reports for one response (the SDK's `Usage`, details included)."""
    return Usage(requests=1, input_tokens=tokens_in, output_tokens=tokens_out,
                 total_tokens=tokens_in + tokens_out,
                 input_tokens_details=InputTokensDetails.model_validate(
                     {"cached_tokens": cached, "cache_write_tokens": 0}),
                 output_tokens_details=OutputTokensDetails(reasoning_tokens=reasoning))  # fmt: skip


class ScriptedModel(Model):
    """Answers from a script, one list of output items per model call; records its inputs.
    `model` names it as the SDK's OpenAI models name theirs; every response reports `reports`."""

    def __init__(self, turns: list[list[Any]], *, model: str = "scripted",
                 reports: tuple[int, int, int, int] = (0, 0, 0, 0)) -> None:  # fmt: skip
        self.turns = list(turns)
        self.inputs: list[Any] = []
        self.model = model
        self.reports = reports

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                           handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                           prompt=None):  # fmt: skip
        self.inputs.append(json.loads(json.dumps(input)))
        return ModelResponse(output=self.turns.pop(0), usage=usage(*self.reports), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any):  # pragma: no cover - not used
        raise NotImplementedError


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"-3C in {city}"


def text(value: str, item_id: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id=item_id, type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=value,
                                                             annotations=[])])  # fmt: skip


def call(call_id: str, city: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", id=f"fc_{call_id}", call_id=call_id,
                                    name="weather",
                                    arguments=json.dumps({"city": city}))  # fmt: skip


def reasoning(item_id: str, summary: str) -> ResponseReasoningItem:
    return ResponseReasoningItem(
        id=item_id, type="reasoning", summary=[Summary(type="summary_text", text=summary)]
    )


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
        {"type": "reasoning", "id": "rs_1",
         "summary": [{"type": "summary_text", "text": "Use the tool."}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather",
         "arguments": "{\"city\": \"Oslo\"}"},
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
    calls = [
        p
        for m in messages
        if isinstance(m, AssistantMessage)
        for p in m.content
        if isinstance(p, ToolCallPart)
    ]
    assert [c.tool_call_id for c in calls] == ["call_1", "call_2", "call_3"]
    results = [p for m in messages if isinstance(m, ToolMessage) for p in m.content]
    assert [(r.tool_call_id, r.tool_name) for r in results] == [
        ("call_1", "weather"),
        ("call_2", "weather"),
        ("call_3", "weather"),
    ]
    record = await acme.tasks.get("chat-typed")
    assert record.owner == "ann" and record.open_tool_call_ids == []


async def test_the_same_call_sequence_gives_what_sqlite_session_gives(acme):
    ours, theirs = MindstoreSession("seq", acme), SQLiteSession("seq")
    for session in (ours, theirs):
        await session.add_items(sample_items()[:3])
        await session.add_items(sample_items()[3:])
        await session.add_items([{"role": "user", "content": "thanks"}])
    assert await ours.get_items() == await theirs.get_items()
    for limit in (1, 2, 3, 4, 6, 50):
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


async def test_a_limit_gives_exactly_the_latest_items_and_the_runner_pairs_them(acme):
    session = MindstoreSession("cut", acme)
    await session.add_items(sample_items())
    theirs = SQLiteSession("cut")
    await theirs.add_items(sample_items())
    # the latest 2 items are the tool output and the answer: exactly what SQLiteSession gives
    assert (
        await session.get_items(limit=2) == await theirs.get_items(limit=2) == sample_items()[-2:]
    )
    assert (
        drop_orphans(await session.get_items(limit=2)) == sample_items()[-1:]
    )  # the explicit option
    # the Runner leaves the orphaned output out itself (the SDK's own session-limit test)
    model = ScriptedModel([[text("Tomorrow too.", "msg_2")]])
    agent = Agent(name="planner", model=model)
    await Runner.run(agent, "And tomorrow?", session=session,
                     run_config=RunConfig(tracing_disabled=True,
                                          session_settings=SessionSettings(limit=2)))  # fmt: skip
    assert model.inputs[0] == [sample_items()[-1], {"role": "user", "content": "And tomorrow?"}]


async def test_session_settings_limit_applies_like_sqlite(acme):
    ours = MindstoreSession("lim", acme, session_settings=SessionSettings(limit=2))
    theirs = SQLiteSession("lim", session_settings=SessionSettings(limit=2))
    for session in (ours, theirs):
        await session.add_items([{"role": "user", "content": f"m{i}"} for i in range(5)])
    assert await ours.get_items() == await theirs.get_items()
    assert len(await ours.get_items()) == 2


async def test_session_settings_given_as_a_dict_are_converted_and_a_run_uses_them(acme):
    session = MindstoreSession("dict", acme, session_settings={"limit": 2})
    assert (
        isinstance(session.session_settings, SessionSettings)
        and session.session_settings.limit == 2
    )
    assert session.session_settings.resolve({"limit": 4}).limit == 4
    await session.add_items([{"role": "user", "content": f"m{i}"} for i in range(5)])
    model = ScriptedModel([[text("ok", "msg_1")]])
    await Runner.run(Agent(name="a", model=model), "next", session=session, run_config=NO_TRACING)
    assert [item.get("content") for item in model.inputs[0]] == ["m3", "m4", "next"]
    assert MindstoreSession("zero", acme, session_settings={"limit": 0}).session_settings.limit == 0
    assert MindstoreSession("none", acme, session_settings={}).session_settings.limit is None


@pytest.mark.parametrize(
    ("settings", "error", "named"),
    [({"limitt": 1}, WrongType, "limitt"), ({"limit": 2, "max": 1}, WrongType, "max"),
     ({"limit": "many"}, ValidationError, "session_settings.limit"),
     ({"limit": -1}, ValidationError, "session_settings.limit"),
     (5, WrongType, "session_settings"), (["limit"], WrongType, "session_settings")],
)  # fmt: skip
def test_bad_session_settings_are_refused_naming_the_key(acme, settings, error, named):
    with pytest.raises(error, match=named):
        MindstoreSession("bad-settings", acme, session_settings=settings)


def test_an_unknown_settings_key_is_a_type_error_as_the_sdk_raises():
    with pytest.raises(TypeError, match="Unknown session settings: limitt"):
        SQLiteSession("theirs", session_settings={"limitt": 1})
    with pytest.raises(TypeError, match="Unknown session settings: limitt"):
        session_settings_of({"limitt": 1})


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
    await MindstoreSession("b1", store.scoped("acme", owner="bob")).add_items(
        [{"role": "user", "content": "x"}]
    )
    await store.scoped("acme").tasks.create(owner="ann", task_id="not-a-session")
    listed = await MindstoreSession.list_sessions(ann)
    assert [s.session_id for s in listed] == ["s1", "s3", "s2"]
    assert all(s.owner == "ann" and s.age.total_seconds() >= 0 and s.age >= s.idle for s in listed)
    assert listed[0].items == 2
    assert await MindstoreSession("s1", store.scoped("acme", owner="bob")).get_items() == []
    assert await MindstoreSession("s1", store.scoped("globex")).get_items() == []
    with pytest.raises(NotFound):
        await MindstoreSession("s1", store.scoped("acme", owner="bob")).add_items(
            [{"role": "user", "content": "x"}]
        )
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
    with pytest.raises(ValidationError, match=r"items\[1\]: expected an object"):
        await session.add_items([{"role": "user", "content": "lost"}, "not an item"])
    with pytest.raises(WrongType, match=r"items\[1\]"):
        await session.add_items([{"role": "user", "content": "lost"}, {"when": object()}])
    with pytest.raises(ValidationError, match="items"):
        await session.add_items({"role": "user"})
    with pytest.raises(ValidationError, match="limit"):
        await session.get_items(limit=-1)
    assert await session.get_items() == [{"role": "user", "content": "kept"}]


async def test_every_item_comes_back_byte_for_byte_and_pop_takes_exactly_the_last(acme):
    """Issue 45: items with neither a `type` nor content (an `EncryptedSession` envelope, an
    empty turn) were left out of `get_items` (the export rule for empty turns), and
    `pop_item` returned 'hi' having deleted all three."""
    session = MindstoreSession("s1", acme)
    items = [{"role": "user", "content": "hi"},
             {"__enc__": 1, "v": 1, "kid": "k", "payload": "x"},
             {"role": "user", "content": ""}]  # fmt: skip
    await session.add_items(items)
    assert await session.get_items() == items
    assert await session.get_items(limit=2) == items[1:]
    assert await session.pop_item() == items[2]
    assert await session.get_items() == items[:2]
    assert await session.pop_item() == items[1]
    assert await session.pop_item() == items[0]
    assert await session.pop_item() is None


ODD_ITEMS = [
    {"content": "hi", "role": "user"},  # keys in another order than the format renders them
    {"type": "message", "role": "user", "content": [{"text": "", "type": "input_text"}]},
    {"role": "assistant", "content": ""},
    {"type": "text", "text": "x", "extra": 1},  # a mindstore part type
    {"type": "toolCall"},  # a mindstore part type it cannot parse as
    {"type": "function_call", "call_id": "$x", "name": "n", "arguments": "{}"},  # no typed home
    {"role": "tool", "content": "a Chat Completions message"},
    {"$set": {"a.b": 1}, "a.b": "$x", "": [{}], "n": [1, 1.0, True, None]},
    {},
]


async def test_items_of_any_shape_come_back_byte_for_byte(acme):
    """What the Responses format cannot type, or renders another way, is kept whole; the
    rest stays typed (searchable, tracked) with its key order kept beside it."""
    session = MindstoreSession("odd", acme)
    await session.add_items(ODD_ITEMS)
    assert [json.dumps(i) for i in await session.get_items()] == [json.dumps(i) for i in ODD_ITEMS]
    assert [json.dumps(await session.pop_item()) for _ in ODD_ITEMS] == [
        json.dumps(i) for i in reversed(ODD_ITEMS)]  # fmt: skip
    assert await session.get_items() == []


async def test_an_item_kept_whole_is_data_a_model_is_never_sent(acme):
    session = MindstoreSession("whole", acme)
    await session.add_items([{"role": "user", "content": "hi"}, {"type": "toolCall", "x": "y"}])
    first, kept = await acme.tasks.messages("whole")
    assert isinstance(first.content[0], TextPart)  # typed as before
    assert kept.content[0].to_dict() == {"type": "openai_agents_item",
                                         "item": {"type": "toolCall", "x": "y"}}  # fmt: skip
    assert to_responses([first, kept]) == [{"role": "user", "content": "hi"}]
    await acme.tasks.redact("whole", kept.id, reason="gdpr")
    placeholder = {"type": "message", "role": "user", "content": "[redacted]"}
    assert (await session.get_items())[-1] == placeholder


async def test_a_session_cleared_elsewhere_starts_afresh(acme):
    first, second = MindstoreSession("shared", acme), MindstoreSession("shared", acme)
    await first.add_items([{"role": "user", "content": "one"}])
    await second.add_items([{"role": "user", "content": "two"}])
    await first.clear_session()
    await second.add_items([{"role": "user", "content": "three"}])
    assert await first.get_items() == [{"role": "user", "content": "three"}]


# -- exactly-once saves ---------------------------------------------------------------------


async def stored_bytes(store: Store, task_id: str, tenant: str = "acme") -> bytes:
    """The task document and its pages, as stored: equal bytes, nothing written."""
    key = task_key(tenant, task_id)
    task = await store.database["tasks"].find_one({"_id": key})
    pages = await store.database["task_pages"].find({"task": key}).to_list(None)
    return b"".join(bson.encode(doc) for doc in [task, *sorted(pages, key=lambda p: p["_id"])])


def turn(n: int) -> list[dict[str, Any]]:
    """One step's output as the Runner saves it: reasoning, a call and its result."""
    return [
        {"type": "reasoning", "id": f"rs_{n}",
         "summary": [{"type": "summary_text", "text": "Look."}]},
        {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": "weather",
         "arguments": "{}"},
        {"type": "function_call_output", "call_id": f"call_{n}", "output": "-3C"},
    ]  # fmt: skip


@pytest.mark.parametrize("page_messages", [None, 2])
async def test_a_retried_add_stores_nothing_new(store, page_messages):
    policy = PagePolicy(page_messages=page_messages) if page_messages else None
    view = Store(store.backend, page_policy=policy).scoped("acme")
    session = MindstoreSession("retry", view)
    batches = [[{"role": "user", "content": "Weather?"}], turn(1), turn(2), sample_items()[4:]]
    for batch in batches:
        await session.add_items(batch)
        before = await stored_bytes(store, "retry")
        await session.add_items(batch)  # the same call again: a retry
        fresh = MindstoreSession("retry", Store(store.backend, page_policy=policy).scoped("acme"))
        await fresh.add_items(batch)  # from another process (no cached header)
        assert await stored_bytes(store, "retry") == before
    assert await session.get_items() == [item for batch in batches for item in batch]


@pytest.mark.parametrize("written", [True, False], ids=["reply-lost", "write-failed"])
async def test_a_failed_add_is_retried_exactly_once_with_its_usage(acme, monkeypatch, written):
    session = MindstoreSession("lost", acme)
    await session.add_items([{"role": "user", "content": "Weather?"}])
    real = type(acme.tasks).add_messages
    lost: list[int] = []

    async def write_then_lose_the_reply(self, task_id, messages):
        if not lost:
            lost.append(1)
            if written:
                await real(self, task_id, messages)
            raise ConnectionError("the reply was lost")
        return await real(self, task_id, messages)

    monkeypatch.setattr(type(acme.tasks), "add_messages", write_then_lose_the_reply)
    session.record_response(ModelResponse(output=[call("call_1", "Oslo")], usage=usage(100, 10),
                                          response_id=None),
                            model="fake-small")  # fmt: skip
    with pytest.raises(ConnectionError):
        await session.add_items(turn(1)[1:])
    await session.add_items(turn(1)[1:])  # the caller retries
    assert await session.get_items() == [{"role": "user", "content": "Weather?"}, *turn(1)[1:]]
    [row] = await acme.analytics.usage(group_by="model")
    assert (row.model, row.tokens_in, row.tokens_out) == ("fake-small", 100, 10)  # counted once


async def test_the_same_items_after_other_items_are_stored_again(acme):
    session = MindstoreSession("again", acme)
    yes = [{"role": "user", "content": "yes"}]
    await session.add_items(yes)
    await session.add_items(sample_items()[4:])
    await session.add_items(yes)
    assert await session.get_items() == [*yes, *sample_items()[4:], *yes]
    assert await session.pop_item() == yes[0]
    await session.add_items(yes)  # popped, then said again: stored again
    assert len(await session.get_items()) == 3


async def test_the_same_items_said_again_are_kept_and_the_same_call_again_is_a_retry(acme):
    """Items said again right after themselves (a new list: a user repeating "yes") are
    stored again; the same list again after it returned is a retry (stored once), as is the
    same list from another session object (another process) after a lost reply. Before,
    every one of these was taken for a retry: the repeated "yes" was lost."""
    session = MindstoreSession("twice", acme)
    said = [{"role": "user", "content": "yes"}]
    await session.add_items(said)
    await session.add_items([{"role": "user", "content": "yes"}])
    assert await session.get_items() == said * 2
    again = [{"role": "user", "content": "yes"}]
    await session.add_items(again)
    await session.add_items(again)  # the same call again: a retry
    await MindstoreSession("twice", acme).add_items(list(again))  # another process's retry
    assert await session.get_items() == said * 3


def test_batch_ids_depend_on_the_batch_and_what_it_follows():
    ids = batch_ids("m1", "digest", 3)
    assert len(set(ids)) == 3 and ids == batch_ids("m1", "digest", 3)
    assert not set(ids) & set(batch_ids("m2", "digest", 3)) and not set(ids) & set(
        batch_ids("m1", "other", 3)
    )


# -- usage and model ----------------------------------------------------------------------


def planner_script() -> list[list[Any]]:
    return [[call("call_a", "Oslo")], [text("Pack a coat.", "msg_a")]]


async def test_usage_and_model_of_every_response_reach_analytics(acme):
    session = MindstoreSession("usage", acme, owner="ann")
    hooks = UsageHooks(session)
    small = ScriptedModel(
        [*planner_script(), [text("Still cold.", "msg_b")]],
        model="fake-small",
        reports=(100, 10, 0, 0),
    )
    large = ScriptedModel([[reasoning("rs_c", "Compare."), text("Rome.", "msg_c")]],
                          model="fake-large", reports=(250, 40, 50, 7))  # fmt: skip
    planner = Agent(name="planner", model=small, tools=[weather])
    writer = Agent(name="writer", model=large)
    reported: dict[str, list[int]] = {}
    for agent, question in (
        (planner, "Weather in Oslo?"),
        (writer, "Rome or Oslo?"),
        (planner, "And now?"),
    ):
        result = await Runner.run(
            agent, question, session=session, hooks=hooks, run_config=NO_TRACING
        )
        for response in result.raw_responses:  # what the framework reported, response by response
            sums = reported.setdefault(agent.model.model, [0, 0, 0, 0])
            counts = response.usage
            for i, value in enumerate((counts.input_tokens, counts.output_tokens,
                                       counts.input_tokens_details.cached_tokens,
                                       counts.output_tokens_details.reasoning_tokens)):  # fmt: skip
                sums[i] += value
    assert reported == {"fake-small": [300, 30, 0, 0], "fake-large": [250, 40, 50, 7]}
    rows = await acme.analytics.usage(group_by="model")
    assert {r.model: [r.tokens_in, r.tokens_out, r.cache_reads, 0] for r in rows} == {
        "fake-small": [300, 30, 0, 0],
        "fake-large": [250, 40, 50, 0],
    }
    record = await acme.tasks.get("usage")
    assert (record.usage.tokens_in, record.usage.tokens_out) == (550, 70)
    by_owner = await acme.analytics.usage(group_by=("model", "owner"))
    assert {(r.model, r.owner) for r in by_owner} == {("fake-small", "ann"), ("fake-large", "ann")}
    stored = await acme.tasks.messages("usage")
    assert sum((m.usage.reasoning_tokens if m.usage else 0) for m in stored) == 7
    # every assistant message names its model; usage sits on each response's first item
    assistants = [m for m in stored if isinstance(m, AssistantMessage)]
    assert [m.model_id for m in assistants] == [
        "fake-small",
        "fake-small",
        "fake-large",
        "fake-large",
        "fake-small",
    ]
    assert [m.usage is not None for m in assistants] == [True, True, True, False, True]
    assert len(await session.get_items()) == 9  # 4 + 3 + 2 items, as the runs gave them


async def test_a_streamed_run_records_usage_too(acme):
    testing = pytest.importorskip("agents.testing")
    session = MindstoreSession("streamed", acme)
    model = testing.ScriptedModel(
        [[call("call_s", "Oslo")], [text("Cold.", "msg_s")]], default_usage=usage(120, 12)
    )
    model.model = "fake-stream"
    agent = Agent(name="planner", model=model, tools=[weather])
    result = Runner.run_streamed(
        agent, "Weather?", session=session, hooks=UsageHooks(session), run_config=NO_TRACING
    )
    async for _event in result.stream_events():
        pass
    assert result.context_wrapper.usage.input_tokens == 240
    [row] = await acme.analytics.usage(group_by="model")
    assert (row.model, row.tokens_in, row.tokens_out) == ("fake-stream", 240, 24)


async def test_the_hooks_model_names_the_run_configs_model(acme):
    session = MindstoreSession("override", acme)
    model = ScriptedModel([[text("Hi.", "msg_o")]], reports=(10, 1, 0, 0))
    await Runner.run(Agent(name="a", model=model), "Hello", session=session,
                     hooks=UsageHooks(session, model="gpt-x"), run_config=NO_TRACING)  # fmt: skip
    [row] = await acme.analytics.usage(group_by="model")
    assert (row.model, row.tokens_in) == ("gpt-x", 10)


def test_the_model_name_comes_from_the_agent():
    from agents.models import get_default_model

    class Bare(Model):  # a Model without a name
        async def get_response(self, *args: Any, **kwargs: Any): ...  # pragma: no cover
        def stream_response(self, *args: Any, **kwargs: Any): ...  # pragma: no cover

    assert model_name(Agent(name="a", model="gpt-4o-mini")) == "gpt-4o-mini"
    assert model_name(Agent(name="a", model=ScriptedModel([], model="fake-small"))) == "fake-small"
    assert model_name(Agent(name="a", model=Bare())) is None
    assert model_name(Agent(name="a")) == get_default_model()


def output_item(kind: str, n: int) -> dict[str, Any]:
    if kind == "call":
        return {"type": "function_call", "call_id": f"c{n}", "name": "t", "arguments": "{}"}
    if kind == "text":  # a Chat Completions model: every item has the same placeholder id
        return {"type": "message", "role": "assistant", "id": "__fake_id__", "status": "completed",
                "content": [{"type": "output_text", "text": f"t{n}",
                             "annotations": []}]}  # fmt: skip
    return {"type": "reasoning", "id": f"rs_{n}", "summary": []}


BATCHES = st.lists(st.tuples(st.sampled_from(["call", "text", "reasoning", "user", "output"]),
                             st.booleans()),
                   max_size=8)  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(BATCHES, st.lists(st.integers(0, 3), max_size=4), st.data())
def test_attribution_keeps_every_reported_token(batch, sizes, data):
    """Whatever the batch holds, the tokens on its messages are the tokens reported, each
    on an assistant message, and only a batch with model output takes them."""
    items = [output_item(kind, n) if kind in ("call", "text", "reasoning")
             else {"role": "user", "content": "q"} if kind == "user"
             else {"type": "function_call_output", "call_id": f"c{n}", "output": "ok"}
             for n, (kind, _) in enumerate(batch)]  # fmt: skip
    messages = [m for item in items for m in from_responses([item])]
    outputs = [
        item
        for item in items
        if item.get("role") != "user" and item.get("type") != "function_call_output"
    ]
    pending = []
    for n, size in enumerate(sizes):  # a response: some of the batch's outputs, or items not in it
        chosen = data.draw(st.lists(st.sampled_from(outputs), max_size=size)) if outputs else []
        keys = tuple(item_key(i) for i in chosen) or (item_key(output_item("call", 100 + n)),)
        pending.append(
            Reported(
                model=f"m{n}",
                usage=StoredUsage(input_tokens=10 * (n + 1), output_tokens=n),
                keys=keys,
            )
        )
    taken = attribute(items, messages, pending)
    carried = [m for m in messages if m.usage is not None]
    assert all(isinstance(m, AssistantMessage) for m in carried)
    if any(isinstance(m, AssistantMessage) for m in messages):
        assert taken == len(pending)
        assert sum(m.usage.input_tokens for m in carried) == sum(
            r.usage.input_tokens for r in pending
        )
        assert sum(m.usage.output_tokens for m in carried) == sum(
            r.usage.output_tokens for r in pending
        )
    else:
        assert taken == 0 and carried == []


def test_responses_are_found_by_their_items_in_order():
    items = [output_item("text", 0),
             {"type": "function_call_output", "call_id": "x", "output": "ok"},
             output_item("reasoning", 1), output_item("call", 1),
             output_item("text", 2)]  # fmt: skip
    messages = [m for item in items for m in from_responses([item])]
    first = Reported("m-a", StoredUsage(input_tokens=5), (item_key(items[0]),))
    second = Reported("m-b", StoredUsage(input_tokens=7), tuple(item_key(i) for i in items[2:5]))
    assert attribute(items, messages, [first, second]) == 2
    assert [m.usage.input_tokens if m.usage else None for m in messages] == [5, None, 7, None, None]
    assert [getattr(m, "model_id", None) for m in messages] == ["m-a", None, "m-b", "m-b", "m-b"]
