"""pydantic-ai histories in mindstore, driven by a real `Agent` with a `FunctionModel`
(scripted: a tool call with thinking, then an answer; no network) and `TestModel`."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime

import bson
import pytest

pytest.importorskip("pydantic_ai")

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage

from mindstore.errors import NotFound, ValidationError
from mindstore.ids import task_key
from mindstore.integrations.pydantic_ai import (
    from_model_messages,
    history_processor,
    load_messages,
    paired,
    save_messages,
    to_model_messages,
)
from mindstore.model.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage
from mindstore.model.paging import PagePolicy
from mindstore.model.parts import ReasoningPart
from mindstore.model.parts import ToolCallPart as StoredCall
from mindstore.store import Store

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def scripted(seen: list[list[ModelMessage]]):
    """A model: a thought and a tool call for each new question, then an answer."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        last = messages[-1]
        question = next((p for p in last.parts if isinstance(p, UserPromptPart)), None)
        if question is not None:
            return ModelResponse(
                parts=[ThinkingPart("Look it up.", signature="sig-1"),
                       ToolCallPart("lookup", {"topic": str(question.content)[:20]},
                                    f"call-{len(seen)}")],
                usage=RequestUsage(input_tokens=40, output_tokens=8), model_name="scripted",
            )  # fmt: skip
        return ModelResponse(parts=[TextPart(f"Answer {len(seen)}.")],
                             usage=RequestUsage(input_tokens=60, output_tokens=5),
                             model_name="scripted")  # fmt: skip

    return FunctionModel(respond)


def agent_with(seen: list, **kwargs) -> Agent:
    agent = Agent(scripted(seen), system_prompt="You answer from the manual.", **kwargs)

    @agent.tool_plain
    def lookup(topic: str) -> str:
        """Look a topic up in the manual."""
        return f"The manual covers {topic} in chapter 2."

    return agent


def dumped(messages) -> list:
    return ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")


# what differs between two runs (pydantic-ai 2.78 added each request's time and duration)
VOLATILE = {"timestamp", "request_timestamp", "duration", "run_id", "conversation_id"}


def stable(value):
    """A dump without what differs between two runs of the same agent (times, run ids)."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


async def test_an_agent_resumes_from_the_store_exactly_as_from_memory(acme):
    stored_seen, memory_seen = [], []
    stored, memory = agent_with(stored_seen), agent_with(memory_seen)
    history: list[ModelMessage] = []
    for question in ("billing?", "refunds?"):
        result = await stored.run(question, message_history=await load_messages(acme, "chat"))
        await save_messages(acme, "chat", result.new_messages())
        reference = await memory.run(question, message_history=history)
        history = reference.all_messages()
        assert result.output == reference.output
    assert [stable(dumped(m)) for m in stored_seen] == [
        stable(dumped(m)) for m in memory_seen
    ]  # the model saw the same
    assert dumped(await load_messages(acme, "chat")) == dumped(
        result.all_messages()
    )  # exactly, times and ids too


async def test_the_stored_task_is_typed_and_tracked(acme):
    agent = agent_with([])
    result = await agent.run("billing?")
    await save_messages(acme, "typed", result.all_messages())
    messages = await acme.tasks.messages("typed")
    assert [type(m) for m in messages] == [
        SystemMessage,
        UserMessage,
        AssistantMessage,
        ToolMessage,
        AssistantMessage,
    ]
    assert (
        isinstance(messages[2].content[0], ReasoningPart)
        and messages[2].content[0].signature == "sig-1"
    )
    assert isinstance(messages[2].content[1], StoredCall)
    assert messages[3].content[0].tool_name == "lookup"
    record = await acme.tasks.get("typed")
    assert (
        record.open_tool_call_ids == []
        and record.usage.tokens_in == 100
        and record.usage.tokens_out == 13
    )


async def test_test_model_runs_round_trip(acme):
    agent = Agent(TestModel(), system_prompt="Be brief.")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    result = await agent.run("What is 1 + 2?")
    await save_messages(acme, "test-model", result.all_messages())
    assert dumped(await load_messages(acme, "test-model")) == dumped(result.all_messages())
    again = await agent.run("And again?", message_history=await load_messages(acme, "test-model"))
    assert again.output


def long_history(turns: int) -> list[ModelMessage]:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart("You answer."), UserPromptPart("q0")])
    ]
    for i in range(turns):
        if i:
            messages.append(ModelRequest(parts=[UserPromptPart(f"question {i} " + "word " * 40)]))
        messages.append(ModelResponse(parts=[ToolCallPart("lookup", {"topic": f"t{i}"}, f"c{i}")]))
        messages.append(ModelRequest(parts=[ToolReturnPart("lookup", "result " * 60, f"c{i}")]))
        messages.append(ModelResponse(parts=[TextPart(f"answer {i} " + "word " * 30)]))
    return messages


async def test_the_history_processor_trims_through_the_store_without_splitting_tool_pairs(acme):
    await save_messages(acme, "long", long_history(12))
    process = history_processor(acme, "long", max_tokens=600)
    stored = await load_messages(acme, "long")
    new_request = ModelRequest(parts=[UserPromptPart("latest question")])
    kept = await process([*stored, new_request])
    assert kept[-1] == new_request and len(kept) < len(stored)
    calls = {
        p.tool_call_id
        for m in kept
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, ToolCallPart)
    }
    returns = {
        p.tool_call_id
        for m in kept
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }
    assert (
        returns <= calls and calls <= returns
    )  # no result without its call, no call without its result
    assert isinstance(kept[0], ModelRequest)
    # the window is the store's: the same messages tasks.context keeps
    window = await acme.tasks.context("long", max_tokens=600)
    assert kept[:-1] == paired(to_model_messages(window.messages), [new_request])


def test_pairing_drops_half_pairs_and_a_leading_response():
    call = ModelResponse(parts=[TextPart("checking"), ToolCallPart("lookup", {}, "c1")])
    orphan_call = ModelResponse(parts=[ToolCallPart("lookup", {}, "c2")])
    answer = ModelRequest(
        parts=[ToolReturnPart("lookup", "ok", "c1"), ToolReturnPart("lookup", "lost", "c0")]
    )
    window = [
        ModelResponse(parts=[TextPart("old")]),
        ModelRequest(parts=[UserPromptPart("q")]),
        call,
        answer,
        orphan_call,
    ]
    kept = paired(window)
    assert [type(m) for m in kept] == [ModelRequest, ModelResponse, ModelRequest]
    assert [p.tool_call_id for p in kept[2].parts] == ["c1"]
    assert kept[1] == call
    later = [ModelRequest(parts=[ToolReturnPart("lookup", "late", "c2")])]
    assert paired(window, later)[-1] == orphan_call


async def test_the_processor_drives_an_agent_run(acme):
    from pydantic_ai.capabilities import ProcessHistory

    await save_messages(acme, "driven", long_history(12))
    seen: list = []
    agent = agent_with(
        seen, capabilities=[ProcessHistory(history_processor(acme, "driven", max_tokens=600))]
    )
    result = await agent.run("short question", message_history=await load_messages(acme, "driven"))
    assert result.output.startswith("Answer")
    assert len(seen[0]) < len(await load_messages(acme, "driven")) + 1
    assert isinstance(seen[0][-1], ModelRequest)


async def test_a_foreign_history_is_left_alone_and_a_missing_task_too(acme):
    process = history_processor(acme, "nothing", max_tokens=100)
    history = long_history(2)
    assert await process(history) == history
    await save_messages(acme, "other", long_history(3))
    assert await history_processor(acme, "other", max_tokens=100)(history) == history


async def test_bad_input_is_refused_before_any_write(acme):
    await save_messages(acme, "bad", long_history(1))
    before = await acme.tasks.messages("bad")
    with pytest.raises(ValidationError, match=r"messages\[1\]"):
        await save_messages(
            acme, "bad", [ModelRequest(parts=[UserPromptPart("x")]), "not a message"]
        )
    for bad in ("", "a\x00b", "x" * 513, 7):
        with pytest.raises(ValidationError, match="task_id"):
            await save_messages(acme, bad, long_history(1))
    with pytest.raises(ValidationError, match="task_id"):
        await load_messages(acme, {"$ne": 1})
    assert await acme.tasks.messages("bad") == before
    assert await load_messages(acme, "missing") == []


async def test_owner_scope(store):
    ann, bob = store.scoped("acme", owner="ann"), store.scoped("acme", owner="bob")
    await save_messages(ann, "mine", long_history(1))
    assert await load_messages(bob, "mine") == []
    with pytest.raises(NotFound):
        await save_messages(bob, "mine", long_history(1))
    assert (await ann.tasks.get("mine")).owner == "ann"


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
CALL_IDS = st.sampled_from(["c1", "c2", "c3"])
REQUEST_PARTS = st.one_of(
    st.builds(SystemPromptPart, TEXT), st.builds(UserPromptPart, TEXT),
    st.builds(ToolReturnPart, tool_name=st.just("t"), content=TEXT, tool_call_id=CALL_IDS),
)  # fmt: skip
RESPONSE_PARTS = st.one_of(
    st.builds(TextPart, TEXT), st.builds(ThinkingPart, TEXT, signature=st.one_of(st.none(), TEXT)),
    st.builds(ToolCallPart, tool_name=st.just("t"),
              args=st.dictionaries(st.sampled_from("abc"), st.integers()),
              tool_call_id=CALL_IDS),
)  # fmt: skip
MESSAGES = st.lists(st.one_of(
    st.builds(ModelRequest, parts=st.lists(REQUEST_PARTS, max_size=3)),
    st.builds(ModelResponse, parts=st.lists(RESPONSE_PARTS, max_size=3),
              usage=st.builds(RequestUsage, input_tokens=st.integers(0, 10**6),
                              output_tokens=st.integers(0, 10**6))),
), max_size=6)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(MESSAGES)
def test_conversion_round_trips(messages):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert dumped(to_model_messages(from_model_messages(messages))) == dumped(messages)


# -- exactly-once saves ---------------------------------------------------------------------


async def stored_bytes(store: Store, task_id: str, tenant: str = "acme") -> bytes:
    """The task document and its pages, as stored: equal bytes, nothing written."""
    key = task_key(tenant, task_id)
    task = await store.database["tasks"].find_one({"_id": key})
    pages = await store.database["task_pages"].find({"task": key}).to_list(None)
    return b"".join(bson.encode(doc) for doc in [task, *sorted(pages, key=lambda p: p["_id"])])


@pytest.mark.parametrize("page_messages", [None, 2])
async def test_a_retried_save_stores_nothing_new(store, page_messages):
    policy = PagePolicy(page_messages=page_messages) if page_messages else None
    view = Store(store.backend, page_policy=policy).scoped("acme")
    agent = agent_with([])
    for question in ("billing?", "refunds?"):
        result = await agent.run(question, message_history=await load_messages(view, "retry"))
        await save_messages(view, "retry", result.new_messages())
        before = await stored_bytes(store, "retry")
        await save_messages(view, "retry", result.new_messages())  # the same save again
        other = Store(store.backend, page_policy=policy).scoped("acme")  # another process
        await save_messages(other, "retry", result.new_messages())
        assert await stored_bytes(store, "retry") == before
    assert dumped(await load_messages(view, "retry")) == dumped(result.all_messages())


async def test_a_save_whose_reply_was_lost_is_retried_exactly_once(acme, monkeypatch):
    real, real_create = type(acme.tasks).add_messages, type(acme.tasks).create
    lost: list[int] = []

    def lose_the_first_reply() -> None:
        if not lost:
            lost.append(1)
            raise ConnectionError("the reply was lost")

    async def write_then_lose_the_reply(self, task_id, messages):
        stored = await real(self, task_id, messages)
        lose_the_first_reply()
        return stored

    async def create_then_lose_the_reply(self, **arguments):  # the first save creates
        record = await real_create(self, **arguments)
        lose_the_first_reply()
        return record

    monkeypatch.setattr(type(acme.tasks), "add_messages", write_then_lose_the_reply)
    monkeypatch.setattr(type(acme.tasks), "create", create_then_lose_the_reply)
    result = await agent_with([]).run("billing?")
    with pytest.raises(ConnectionError):
        await save_messages(acme, "lost", result.new_messages())
    await save_messages(acme, "lost", result.new_messages())
    assert dumped(await load_messages(acme, "lost")) == dumped(result.all_messages())
    assert (await acme.tasks.get("lost")).usage.tokens_in == result.usage.input_tokens


async def test_saving_history_that_is_stored_already_is_refused_whole(acme):
    agent = agent_with([])
    first = await agent.run("billing?")
    await save_messages(acme, "overlap", first.new_messages())
    second = await agent.run("refunds?", message_history=await load_messages(acme, "overlap"))
    before = await acme.tasks.messages("overlap")
    with pytest.raises(ValidationError, match="already stored"):
        await save_messages(acme, "overlap", second.all_messages())  # not new_messages()
    assert await acme.tasks.messages("overlap") == before
    await save_messages(acme, "overlap", second.new_messages())
    assert dumped(await load_messages(acme, "overlap")) == dumped(second.all_messages())


def test_identical_messages_in_one_save_get_their_own_ids():
    when = datetime(2026, 1, 1, tzinfo=UTC)
    same = [
        ModelRequest(parts=[UserPromptPart("hi", timestamp=when)], timestamp=when) for _ in range(2)
    ]
    ids = [m.id for m in from_model_messages(same)]
    assert len(set(ids)) == 2 and ids == [m.id for m in from_model_messages(same)]


# -- usage and model ------------------------------------------------------------------------


def answering(model_name: str, tokens_in: int, tokens_out: int) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("ok")],
                             usage=RequestUsage(input_tokens=tokens_in, output_tokens=tokens_out,
                                                cache_read_tokens=3),
                             model_name=model_name)  # fmt: skip

    return FunctionModel(respond, model_name=model_name)


async def test_analytics_per_model_equal_what_pydantic_ai_reported(acme):
    runs = [(agent_with([]), "billing?"), (Agent(answering("fake-large", 250, 40)), "and?"),
            (Agent(TestModel()), "test?"), (agent_with([]), "refunds?")]  # fmt: skip
    reported: dict[str, list[int]] = {}
    totals = [0, 0]
    for agent, question in runs:
        result = await agent.run(question, message_history=await load_messages(acme, "per-model"))
        await save_messages(acme, "per-model", result.new_messages())
        totals = [
            totals[0] + result.usage.input_tokens,
            totals[1] + result.usage.output_tokens,
        ]  # the run's
        for message in result.new_messages():  # what pydantic-ai reported, response by response
            if isinstance(message, ModelResponse):
                sums = reported.setdefault(message.model_name, [0, 0, 0])
                sums[0] += message.usage.input_tokens
                sums[1] += message.usage.output_tokens
                sums[2] += message.usage.cache_read_tokens
    rows = await acme.analytics.usage(group_by="model")
    assert {r.model: [r.tokens_in, r.tokens_out, r.cache_reads] for r in rows} == reported
    assert reported["function:respond:"] == [200, 26, 0] and reported["fake-large"] == [250, 40, 3]
    assert set(reported) == {"function:respond:", "fake-large", "test"}
    assert [sum(r.tokens_in for r in rows), sum(r.tokens_out for r in rows)] == totals
