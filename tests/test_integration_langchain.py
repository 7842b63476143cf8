"""`MindstoreChatMessageHistory` driven by LangChain itself (`RunnableWithMessageHistory`
with a scripted fake chat model), and the LangChain <-> mindstore message conversion."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langchain_core")

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

import mindstore
from mindstore.errors import NotFound, ValidationError
from mindstore.integrations.langchain import MindstoreChatMessageHistory
from mindstore.integrations.langchain_messages import from_langchain, to_langchain
from mindstore.model.messages import AssistantMessage, UserMessage
from mindstore.model.messages import ToolMessage as StoredToolMessage
from mindstore.model.parts import ReasoningPart, ToolCallPart

# RunnableWithMessageHistory and InMemoryChatMessageHistory are deprecated upstream, still
# the way LangChain applications drive a BaseChatMessageHistory
pytestmark = pytest.mark.filterwarnings("ignore:.*deprecated")


def chain_with(history_for, responses):
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You answer briefly."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    model = FakeMessagesListChatModel(responses=responses)
    return RunnableWithMessageHistory(prompt | model, history_for, input_messages_key="question",
                                      history_messages_key="history")  # fmt: skip


RESPONSES = [
    AIMessage(content="Oslo is cold.", id="ai-1",
              usage_metadata={"input_tokens": 12, "output_tokens": 4, "total_tokens": 16}),
    AIMessage(content="Rome is milder.", id="ai-2", response_metadata={"model_name": "fake"}),
]  # fmt: skip


async def test_a_runnable_with_history_keeps_the_same_conversation_as_in_memory(acme):
    ours: dict[str, MindstoreChatMessageHistory] = {}
    theirs: dict[str, InMemoryChatMessageHistory] = {}
    mine = chain_with(
        lambda sid: ours.setdefault(sid, MindstoreChatMessageHistory(sid, acme, owner="ann")),
        RESPONSES,
    )
    reference = chain_with(
        lambda sid: theirs.setdefault(sid, InMemoryChatMessageHistory()), RESPONSES
    )
    config = {"configurable": {"session_id": "trip"}}
    for question in ("Weather in Oslo?", "And Rome?"):
        answer = await mine.ainvoke({"question": question}, config)
        expected = await reference.ainvoke({"question": question}, config)
        assert answer == expected
    stored = await ours["trip"].aget_messages()
    assert stored == theirs["trip"].messages and len(stored) == 4
    record = await acme.tasks.get("trip")
    assert record.owner == "ann" and record.usage.tokens_in == 12 and record.usage.tokens_out == 4
    typed = await acme.tasks.messages("trip")
    assert [type(m) for m in typed] == [
        UserMessage,
        AssistantMessage,
        UserMessage,
        AssistantMessage,
    ]


async def test_the_sync_chain_works_from_a_worker_thread(acme):
    histories: dict[str, MindstoreChatMessageHistory] = {}
    chain = chain_with(
        lambda sid: histories.setdefault(sid, MindstoreChatMessageHistory(sid, acme)), RESPONSES
    )
    config = {"configurable": {"session_id": "sync"}}
    answer = await asyncio.to_thread(chain.invoke, {"question": "Weather in Oslo?"}, config)
    assert answer.content == "Oslo is cold."
    assert [m.content for m in await histories["sync"].aget_messages()] == [
        "Weather in Oslo?",
        "Oslo is cold.",
    ]
    with pytest.raises(RuntimeError, match="async"):
        histories["sync"].messages  # noqa: B018 - from the loop's own thread: refused, not a deadlock


def test_the_sync_methods_work_in_a_script_without_a_loop():
    store = asyncio.run(mindstore.connect("embedded"))
    history = MindstoreChatMessageHistory("script", store.scoped("acme"))
    history.add_messages([HumanMessage("hi"), AIMessage("hello")])
    history.add_user_message("again")
    assert [m.content for m in history.messages] == ["hi", "hello", "again"]
    history.clear()
    assert history.messages == []
    asyncio.run(store.close())


async def test_tool_calls_are_tracked_and_results_named(acme):
    history = MindstoreChatMessageHistory("tools", acme)
    call = AIMessage(
        content="", tool_calls=[{"name": "search", "args": {"q": "oslo"}, "id": "call_1"}]
    )
    await history.aadd_messages([HumanMessage("Weather in Oslo?"), call])
    assert (await acme.tasks.get("tools")).open_tool_call_ids == ["call_1"]
    await history.aadd_messages(
        [ToolMessage("-3C", tool_call_id="call_1"), AIMessage("Pack a coat.")]
    )
    assert (await acme.tasks.get("tools")).open_tool_call_ids == []
    stored = await acme.tasks.messages("tools")
    assert isinstance(stored[1].content[0], ToolCallPart)
    result = stored[2].content[0]
    assert (
        isinstance(stored[2], StoredToolMessage)
        and result.tool_name == "search"
        and result.result == "-3C"
    )
    assert (await history.aget_messages())[2] == ToolMessage("-3C", tool_call_id="call_1")


async def test_clear_and_scope(store):
    ann = store.scoped("acme", owner="ann")
    history = MindstoreChatMessageHistory("s", ann)
    await history.aadd_messages([HumanMessage("mine")])
    assert (
        await MindstoreChatMessageHistory("s", store.scoped("acme", owner="bob")).aget_messages()
        == []
    )
    assert await MindstoreChatMessageHistory("s", store.scoped("globex")).aget_messages() == []
    with pytest.raises(NotFound):
        await MindstoreChatMessageHistory("s", store.scoped("acme", owner="bob")).aadd_messages(
            [HumanMessage("x")]
        )
    await history.aclear()
    assert await history.aget_messages() == []
    await history.aadd_messages([HumanMessage("after")])
    assert [m.content for m in await history.aget_messages()] == ["after"]


async def test_bad_input_is_refused_before_any_write(acme):
    history = MindstoreChatMessageHistory("bad", acme)
    await history.aadd_messages([HumanMessage("kept")])
    with pytest.raises(ValidationError, match=r"messages\[1\]"):
        await history.aadd_messages(
            [HumanMessage("lost"), HumanMessage("x", additional_kwargs={"o": object()})]
        )
    with pytest.raises(ValidationError, match="messages"):
        await history.aadd_messages(HumanMessage("not a list"))
    for bad in ("", "x" * 513, "a\x00b", "line\nbreak", 7):
        with pytest.raises(ValidationError, match="session_id"):
            MindstoreChatMessageHistory(bad, acme)
    assert [m.content for m in await history.aget_messages()] == ["kept"]


def test_conversion_keeps_every_field():
    messages = [
        SystemMessage("sys"),
        HumanMessage(content=[{"type": "text", "text": "look"},
                              {"type": "image_url", "image_url": {"url": "http://x/y.png"}}],
                     id="h1"),
        AIMessage(content=[{"type": "thinking", "thinking": "hmm", "signature": "sig"},
                           {"type": "text", "text": "ok"}],
                  tool_calls=[{"name": "s", "args": {"q": 1}, "id": "c1"}], id="a1",
                  usage_metadata={"input_tokens": 5, "output_tokens": 2, "total_tokens": 7,
                                  "input_token_details": {"cache_read": 3}},
                  response_metadata={"model": "m"}),
        ToolMessage("boom", tool_call_id="c1", status="error", artifact={"trace": [1, 2]},
                    name="s"),
        ChatMessage(role="critic", content="meh"),
    ]  # fmt: skip
    converted = from_langchain(messages, check=True)
    assert to_langchain(converted) == messages
    assert (
        isinstance(converted[2].content[0], ReasoningPart)
        and converted[2].usage.cache_read_tokens == 3
    )
    assert converted[3].content[0].is_error and converted[3].content[0].tool_name == "s"


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
MESSAGES = st.lists(
    st.one_of(
        st.builds(HumanMessage, content=TEXT),
        st.builds(SystemMessage, content=TEXT),
        st.builds(AIMessage, content=TEXT, id=st.one_of(st.none(), st.uuids().map(str))),
        st.builds(
            ToolMessage,
            content=TEXT,
            tool_call_id=st.sampled_from(["c1", "c2"]),
            status=st.sampled_from(["success", "error"]),
        ),
    ),
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(MESSAGES)
def test_conversion_round_trips(messages):
    assert to_langchain(from_langchain(messages, check=True)) == messages


async def test_a_history_cleared_elsewhere_starts_afresh(acme):
    first, second = (
        MindstoreChatMessageHistory("shared", acme),
        MindstoreChatMessageHistory("shared", acme),
    )
    await first.aadd_messages([HumanMessage("one")])
    await second.aadd_messages([HumanMessage("two")])
    await first.aclear()
    await second.aadd_messages([HumanMessage("three")])
    assert [m.content for m in await first.aget_messages()] == ["three"]
