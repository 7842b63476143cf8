"""Framework conversation ids: what the frameworks accept, every adapter accepts, stores
under one deterministic task id (`mindstore.integrations.task_id_for`), works under owner
views and lists back as given; hostile ids get a typed error naming the argument, before
any write."""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindstore.errors import ValidationError
from mindstore.ids import check_key
from mindstore.integrations import MAX_CONVERSATION_ID_LENGTH, conversation_id_of, task_id_for
from mindstore.integrations.conversation_ids import MAPPED_PREFIX, check_conversation_id, is_kept

KEY = re.compile(r"[A-Za-z0-9_\-.:]{1,128}")
SPOKEN = ["alice@example.com:chat-1", "org/team/chat-1", "has space", "日本語/チャット", "$where",
          "x" * 512, "_:looks-mapped", "a" * 129, "{\"$ne\": 1}", "🙂"]  # fmt: skip
IDS = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")),
    min_size=1,
    max_size=MAX_CONVERSATION_ID_LENGTH,
)
KEYS = st.from_regex(KEY, fullmatch=True)


# ---------------------------------------------------------------- the rule, pure


@settings(max_examples=400)
@given(st.one_of(IDS, KEYS))
def test_every_conversation_id_maps_to_a_key_deterministically(conversation_id):
    task_id = task_id_for(conversation_id)
    assert check_key(task_id, "task id") == task_id == task_id_for(conversation_id)
    if KEY.fullmatch(conversation_id) and not conversation_id.startswith(MAPPED_PREFIX):
        assert task_id == conversation_id  # a key is its own task id
    else:
        assert (
            task_id.startswith(MAPPED_PREFIX)
            and len(task_id) <= 83
            and re.search(r":[0-9a-f]{32}$", task_id)
        )


@settings(max_examples=400)
@given(st.one_of(IDS, KEYS), st.one_of(IDS, KEYS))
def test_two_conversation_ids_never_share_a_task(first, second):
    assert (task_id_for(first) == task_id_for(second)) == (first == second)


def test_the_mapping_is_readable_and_stable():
    assert task_id_for("support-42") == "support-42"
    assert task_id_for("alice@example.com:chat-1").startswith("_:alice_example.com:chat-1:")
    assert task_id_for("_:looks-mapped") != "_:looks-mapped" and not is_kept("_:looks-mapped")
    # the digest is BLAKE2b-128 of the UTF-8 id: pinned, so stored task ids never move
    digest = hashlib.blake2b(b"org/team/chat-1", digest_size=16).hexdigest()
    assert task_id_for("org/team/chat-1") == f"_:org_team_chat-1:{digest}"
    assert (
        task_id_for("日本語/チャット")
        == "_:_:" + hashlib.blake2b("日本語/チャット".encode(), digest_size=16).hexdigest()
    )


@pytest.mark.parametrize("bad", ["", "x" * (MAX_CONVERSATION_ID_LENGTH + 1), "a\x00b",
                                 "tab\there", "new\nline", "\ud800", "\x7f", 7, None, b"bytes",
                                 {"$ne": 1}, ["a"]])  # fmt: skip
def test_a_hostile_conversation_id_is_refused_naming_the_argument(bad):
    with pytest.raises(ValidationError, match="thread_id"):
        task_id_for(bad, "thread_id")
    with pytest.raises(ValidationError, match="conversation_id"):
        check_conversation_id(bad)


class Record:
    def __init__(self, id, metadata):
        self.id, self.metadata = id, metadata


def test_the_original_id_is_listed_back_from_the_metadata():
    assert (
        conversation_id_of(Record("_:org_team_chat-1:x", {"session_id": "org/team/chat-1"}))
        == "org/team/chat-1"
    )
    assert conversation_id_of(Record("lg-abc", {"thread_id": "trip/7"})) == "trip/7"
    assert conversation_id_of(Record("plain", None)) == "plain"


# ---------------------------------------------------------------- every adapter


async def test_langchain_histories_take_any_session_id_under_an_owner_view(store):
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, HumanMessage

    from mindstore.integrations.langchain import MindstoreChatMessageHistory

    ann, bob = store.scoped("acme", owner="ann"), store.scoped("acme", owner="bob")
    for index, session_id in enumerate(SPOKEN):
        history = MindstoreChatMessageHistory(session_id, ann)
        assert history.session_id == session_id and history.task_id == task_id_for(session_id)
        await history.aadd_messages([HumanMessage(f"q{index}"), AIMessage(f"a{index}")])
        assert [
            m.content for m in await MindstoreChatMessageHistory(session_id, ann).aget_messages()
        ] == [f"q{index}", f"a{index}"]
        record = await ann.tasks.get(task_id_for(session_id))  # found from mindstore's own API
        assert record.owner == "ann" and conversation_id_of(record) == session_id
        assert await MindstoreChatMessageHistory(session_id, bob).aget_messages() == []
    assert len({task_id_for(s) for s in SPOKEN}) == len(SPOKEN)


async def test_openai_agents_sessions_take_what_sqlite_session_takes(store, tmp_path):
    pytest.importorskip("agents")
    from agents.memory import SQLiteSession

    from mindstore.integrations.openai_agents import MindstoreSession

    ann = store.scoped("acme", owner="ann")
    items = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    for session_id in SPOKEN:
        reference = SQLiteSession(session_id, str(tmp_path / "ref.db"))
        ours = MindstoreSession(session_id, ann)
        for session in (reference, ours):
            await session.add_items(items)
            await session.add_items([{"role": "user", "content": session_id}])
        assert await ours.get_items() == await reference.get_items()
        assert await ours.pop_item() == await reference.pop_item()
        assert await ours.get_items() == await reference.get_items()
        reference.close()
    listed = await MindstoreSession.list_sessions(ann, limit=100)
    assert sorted(s.session_id for s in listed) == sorted(SPOKEN)  # listed back as given


async def test_langgraph_threads_take_any_thread_id_under_an_owner_view(store):
    pytest.importorskip("langgraph")
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, MessagesState, StateGraph

    from mindstore.integrations.langgraph import MindstoreSaver

    def graph(saver):
        builder = StateGraph(MessagesState)
        builder.add_node(
            "reply",
            lambda s: {
                "messages": [AIMessage(f"seen {len(s['messages'])}", id=f"r{len(s['messages'])}")]
            },
        )
        builder.add_edge(START, "reply")
        builder.add_edge("reply", END)
        return builder.compile(checkpointer=saver)

    ann = store.scoped("acme", owner="ann")
    saver = MindstoreSaver(ann)
    ours, theirs = graph(saver), graph(InMemorySaver())
    for thread in SPOKEN:
        config = {"configurable": {"thread_id": thread}}
        for g in (ours, theirs):
            await g.ainvoke({"messages": [HumanMessage("one", id="h1")]}, config)
            await g.ainvoke({"messages": [HumanMessage("two", id="h2")]}, config)
        assert (await ours.aget_state(config)).values == (await theirs.aget_state(config)).values
        assert [s.values async for s in ours.aget_state_history(config)] == [
            s.values async for s in theirs.aget_state_history(config)
        ]
        stored = await ann.tasks.messages(task_id_for(thread))  # found from mindstore's own API
        assert [m.id for m in stored] == ["h1", "r1", "h2", "r3"]
        assert conversation_id_of(await ann.tasks.get(task_id_for(thread))) == thread
    listed = {t.config["configurable"]["thread_id"] async for t in saver.alist(None)}
    assert listed == set(SPOKEN)  # listed back as given
    await saver.adelete_thread("org/team/chat-1")
    assert (await ours.aget_state({"configurable": {"thread_id": "org/team/chat-1"}})).values == {}
    assert task_id_for("org/team/chat-1") not in {
        r.id for r in (await ann.tasks.list(limit=100)).items
    }


async def test_pydantic_ai_takes_the_ids_the_other_adapters_take(store):
    pytest.importorskip("pydantic_ai")
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    from mindstore.integrations.pydantic_ai import history_processor, load_messages, save_messages

    ann, bob = store.scoped("acme", owner="ann"), store.scoped("acme", owner="bob")
    for index, conversation_id in enumerate(SPOKEN):
        turn = [
            ModelRequest(parts=[UserPromptPart(f"q{index}")]),
            ModelResponse(parts=[TextPart(f"a{index}")]),
        ]
        await save_messages(ann, conversation_id, turn)
        await save_messages(ann, conversation_id, turn)  # a retried save: nothing new
        assert await load_messages(ann, conversation_id) == turn
        record = await ann.tasks.get(task_id_for(conversation_id))  # found from mindstore's own API
        assert (
            record.owner == "ann"
            and record.seq == 2
            and conversation_id_of(record) == conversation_id
        )
        assert await load_messages(bob, conversation_id) == []
        assert await history_processor(ann, conversation_id, max_tokens=1_000)(turn) == turn
    listed = {conversation_id_of(r) for r in (await ann.tasks.list(limit=100)).items}
    assert listed == set(SPOKEN)  # listed back as given


async def test_llamaindex_and_agent_framework_take_the_ids_the_other_adapters_take(store):
    pytest.importorskip("llama_index.core")
    pytest.importorskip("agent_framework")
    from agent_framework import Message
    from llama_index.core.base.llms.types import ChatMessage

    from mindstore.integrations.agent_framework import MindstoreHistoryProvider
    from mindstore.integrations.llamaindex import MindstoreChatStore

    ann, bob = store.scoped("acme", owner="ann"), store.scoped("acme", owner="bob")
    chats, history = MindstoreChatStore(ann), MindstoreHistoryProvider(ann)
    for index, conversation_id in enumerate(SPOKEN):
        key = ("li " + conversation_id)[
            :512
        ]  # one task each: the two adapters never share one here
        await chats.add_messages(key, [ChatMessage(role="user", content=f"q{index}")])
        await history.save_messages(conversation_id, [Message(role="user", contents=[f"q{index}"])])
        assert [m.content for m in await chats.get_messages(key)] == [f"q{index}"]
        assert [m.text for m in await history.get_messages(conversation_id)] == [f"q{index}"]
        for given_id in (key, conversation_id):
            record = await ann.tasks.get(task_id_for(given_id))  # found from mindstore's own API
            assert record.owner == "ann" and conversation_id_of(record) == given_id
        assert await MindstoreChatStore(bob).get_messages(key) == []
        assert await MindstoreHistoryProvider(bob).get_messages(conversation_id) == []
    assert sorted(await chats.get_keys()) == sorted(
        ("li " + s)[:512] for s in SPOKEN
    )  # listed back as given
    assert await history.list_sessions() == sorted(SPOKEN)


async def test_a_hostile_id_is_refused_by_every_adapter_before_any_write(store):
    pytest.importorskip("langgraph")
    pytest.importorskip("agents")
    from langchain_core.messages import HumanMessage

    from mindstore.integrations.langchain import MindstoreChatMessageHistory
    from mindstore.integrations.langgraph import MindstoreSaver
    from mindstore.integrations.openai_agents import MindstoreSession

    ann = store.scoped("acme", owner="ann")
    saver = MindstoreSaver(ann)
    for bad in ("", "x" * 513, "a\x00b", "cr\r", 3.5):
        with pytest.raises(ValidationError, match="session_id"):
            MindstoreChatMessageHistory(bad, ann)
        with pytest.raises(ValidationError, match="session_id"):
            MindstoreSession(bad, ann)
        with pytest.raises(ValidationError, match="thread_id"):
            await saver.aget_tuple({"configurable": {"thread_id": bad}})
        with pytest.raises(ValidationError, match="thread_id"):
            await saver.aput({"configurable": {"thread_id": bad, "checkpoint_ns": ""}},
                             {"v": 1, "id": "c1", "ts": "",
                              "channel_values": {"messages": [HumanMessage("x")]},
                              "channel_versions": {"messages": 1}, "versions_seen": {}},
                             {}, {"messages": 1})  # fmt: skip
        with pytest.raises(ValidationError, match="thread_id"):
            await saver.adelete_thread(bad)
    for name in await store.database.list_collection_names():
        assert await store.database[name].count_documents({}) == 0, name
