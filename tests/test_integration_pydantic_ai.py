"""pydantic-ai histories in mindstore, driven by a real `Agent` with a `FunctionModel`
(scripted: a tool call with thinking, then an answer; no network) and `TestModel`."""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("pydantic_ai")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
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
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.models.test import TestModel  # noqa: E402
from pydantic_ai.usage import RequestUsage  # noqa: E402

from mindstore.errors import NotFound, ValidationError  # noqa: E402
from mindstore.integrations.pydantic_ai import (  # noqa: E402
    from_model_messages,
    history_processor,
    load_messages,
    paired,
    save_messages,
    to_model_messages,
)
from mindstore.model.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage  # noqa: E402
from mindstore.model.parts import ReasoningPart, ToolCallPart as StoredCall  # noqa: E402

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
                       ToolCallPart("lookup", {"topic": str(question.content)[:20]}, f"call-{len(seen)}")],
                usage=RequestUsage(input_tokens=40, output_tokens=8), model_name="scripted",
            )  # fmt: skip
        return ModelResponse(parts=[TextPart(f"Answer {len(seen)}.")], usage=RequestUsage(input_tokens=60, output_tokens=5),
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


VOLATILE = {"timestamp", "run_id", "conversation_id"}


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
    assert [stable(dumped(m)) for m in stored_seen] == [stable(dumped(m)) for m in memory_seen]  # the model saw the same
    assert dumped(await load_messages(acme, "chat")) == dumped(result.all_messages())  # exactly, times and ids too


async def test_the_stored_task_is_typed_and_tracked(acme):
    agent = agent_with([])
    result = await agent.run("billing?")
    await save_messages(acme, "typed", result.all_messages())
    messages = await acme.tasks.messages("typed")
    assert [type(m) for m in messages] == [SystemMessage, UserMessage, AssistantMessage, ToolMessage, AssistantMessage]
    assert isinstance(messages[2].content[0], ReasoningPart) and messages[2].content[0].signature == "sig-1"
    assert isinstance(messages[2].content[1], StoredCall)
    assert messages[3].content[0].tool_name == "lookup"
    record = await acme.tasks.get("typed")
    assert record.open_tool_call_ids == [] and record.usage.tokens_in == 100 and record.usage.tokens_out == 13


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
    messages: list[ModelMessage] = [ModelRequest(parts=[SystemPromptPart("You answer."), UserPromptPart("q0")])]
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
    calls = {p.tool_call_id for m in kept if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, ToolCallPart)}
    returns = {p.tool_call_id for m in kept if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)}
    assert returns <= calls and calls <= returns  # no result without its call, no call without its result
    assert isinstance(kept[0], ModelRequest)
    # the window is the store's: the same messages tasks.context keeps
    window = await acme.tasks.context("long", max_tokens=600)
    assert kept[:-1] == paired(to_model_messages(window.messages), [new_request])


def test_pairing_drops_half_pairs_and_a_leading_response():
    call = ModelResponse(parts=[TextPart("checking"), ToolCallPart("lookup", {}, "c1")])
    orphan_call = ModelResponse(parts=[ToolCallPart("lookup", {}, "c2")])
    answer = ModelRequest(parts=[ToolReturnPart("lookup", "ok", "c1"), ToolReturnPart("lookup", "lost", "c0")])
    window = [ModelResponse(parts=[TextPart("old")]), ModelRequest(parts=[UserPromptPart("q")]), call, answer, orphan_call]
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
    agent = agent_with(seen, capabilities=[ProcessHistory(history_processor(acme, "driven", max_tokens=600))])
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
        await save_messages(acme, "bad", [ModelRequest(parts=[UserPromptPart("x")]), "not a message"])
    with pytest.raises(ValidationError, match="task_id"):
        await save_messages(acme, "a b", long_history(1))
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
    st.builds(ToolCallPart, tool_name=st.just("t"), args=st.dictionaries(st.sampled_from("abc"), st.integers()),
              tool_call_id=CALL_IDS),
)  # fmt: skip
MESSAGES = st.lists(st.one_of(
    st.builds(ModelRequest, parts=st.lists(REQUEST_PARTS, max_size=3)),
    st.builds(ModelResponse, parts=st.lists(RESPONSE_PARTS, max_size=3),
              usage=st.builds(RequestUsage, input_tokens=st.integers(0, 10**6), output_tokens=st.integers(0, 10**6))),
), max_size=6)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(MESSAGES)
def test_conversion_round_trips(messages):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert dumped(to_model_messages(from_model_messages(messages))) == dumped(messages)
