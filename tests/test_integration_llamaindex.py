"""LlamaIndex on mindstore: `Memory` and a `FunctionAgent` run on `MindstoreChatStore` exactly
as on LlamaIndex's own `SQLAlchemyChatStore` (in-memory SQLite: `Memory`'s default), the
statuses (active, archived, deleted) agree with it over any sequence of operations, every
`ChatMessage` comes back exactly, the stored task is typed (tool calls tracked, usage and
model in analytics), a delete leaves no content behind, and bad input is refused before
anything is written. LlamaIndex's own chat store tests run in tests/llamaindex_chat_stores."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import (
    ChatMessage,
    ImageBlock,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import Memory
from llama_index.core.storage.chat_store.base_db import MessageStatus
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from mindstore.errors import ValidationError
from mindstore.integrations import conversation_id_of, task_id_for
from mindstore.integrations.llamaindex import (
    MindstoreChatStore,
    MindstoreLegacyChatStore,
)
from mindstore.integrations.llamaindex_messages import from_chat, to_chat
from mindstore.model.messages import AssistantMessage, ToolMessage, UserMessage
from mindstore.model.parts import ToolCallPart


def sql_store() -> SQLAlchemyChatStore:
    return SQLAlchemyChatStore(
        table_name="messages", async_database_uri="sqlite+aiosqlite:///:memory:"
    )


def dumped(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json") for m in messages]


# -- a real agent run, side by side with Memory's own store ----------------------------------


def script(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
    """Stands in for the model: looks the question up, then answers (reporting usage)."""
    if messages[-1].role == MessageRole.USER:
        return ChatMessage(role="assistant", blocks=[ToolCallBlock(
            tool_call_id=f"call-{len(messages)}", tool_name="lookup",
            tool_kwargs={"topic": "refunds"})])  # fmt: skip
    return ChatMessage(role="assistant", content="Refunds take 5 days.",
                       additional_kwargs={"prompt_tokens": 40 + len(messages),
                                          "completion_tokens": 7,
                                          "model": "scripted-1"})  # fmt: skip


def lookup(topic: str) -> str:
    """Look a topic up in the manual."""
    return f"{topic}: 5 days"


async def agent_run(memory: Memory) -> list[dict[str, Any]]:
    agent = FunctionAgent(tools=[lookup], llm=MockFunctionCallingLLM(response_generator=script),
                          system_prompt="Answer from the manual.")  # fmt: skip
    for question in ("How long do refunds take?", "And for a gift card?"):
        await agent.run(question, memory=memory)
    return dumped(await memory.aget_all(status=None))


async def test_an_agent_runs_on_the_store_exactly_as_on_memorys_own(store):
    acme = store.scoped("acme", owner="ann")
    ours = await agent_run(
        Memory.from_defaults(session_id="org/chat-1", chat_store=MindstoreChatStore(acme))
    )
    theirs = await agent_run(Memory.from_defaults(session_id="org/chat-1", chat_store=sql_store()))
    assert ours == theirs and len(ours) == 8
    # a later run reads the conversation back from the store
    again = Memory.from_defaults(session_id="org/chat-1", chat_store=MindstoreChatStore(acme))
    assert dumped(await again.aget_all()) == ours
    record = await acme.tasks.get(task_id_for("org/chat-1"))
    assert record.owner == "ann" and conversation_id_of(record) == "org/chat-1"
    assert record.open_tool_call_ids == []  # every call answered by its tool message
    stored = await acme.tasks.messages(record.id)
    assert [type(m) for m in stored] == [
        UserMessage,
        AssistantMessage,
        ToolMessage,
        AssistantMessage,
    ] * 2
    assert isinstance(stored[1].content[0], ToolCallPart)
    rows = {
        row.model: (row.tokens_in, row.tokens_out)
        for row in await acme.analytics.usage(group_by="model")
    }
    assert rows["scripted-1"] == (44 + 48, 14)  # what the model reported, per model


@pytest.mark.parametrize("limit", [60, 120])
async def test_memory_with_a_small_token_limit_archives_alike(store, limit):
    """A small token limit makes Memory move the oldest turns out of the active queue
    (`archive_oldest_messages`); both stores then hold the same active and archived lists."""
    results = []
    for chat_store in (MindstoreChatStore(store.scoped("acme")), sql_store()):
        memory = Memory.from_defaults(session_id="chat", chat_store=chat_store, token_limit=limit,
                                      chat_history_token_ratio=0.5,
                                      token_flush_size=20)  # fmt: skip
        for turn in range(6):
            await memory.aput_messages([
                ChatMessage(role="user", content=f"question {turn} " + "w " * 10),
                ChatMessage(role="assistant", content=f"answer {turn} " + "w " * 10)])  # fmt: skip
        results.append([dumped(await memory.aget_all(status=s))
                        for s in (MessageStatus.ACTIVE, MessageStatus.ARCHIVED)]
                       + [dumped(await memory.aget())])  # fmt: skip
    assert results[0] == results[1]
    assert results[0][1]  # something was archived


# -- statuses against the SQL store ----------------------------------------------------------

OPS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(1, 3), st.sampled_from(["active", "archived"])),
    st.tuples(st.just("archive"), st.integers(0, 3)),
    st.tuples(st.just("delete_oldest"), st.integers(0, 3)),
    st.tuples(st.just("delete_status"), st.sampled_from(["active", "archived"])),
    st.tuples(st.just("set"), st.integers(0, 2), st.sampled_from(["active", "archived"])),
), max_size=8)  # fmt: skip
KEYS = itertools.count()
PAGES = st.tuples(st.one_of(st.none(), st.integers(0, 4)), st.one_of(st.none(), st.integers(0, 4)))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS, page=PAGES)
async def test_statuses_agree_with_the_sql_store(store, ops, page):
    ours, theirs = MindstoreChatStore(store.scoped("acme")), sql_store()
    key = f"k-{next(KEYS)}"
    made = 0
    for op in ops:
        returned = []
        for chat_store in (ours, theirs):
            got: list[ChatMessage] = []
            if op[0] in ("add", "set"):
                messages = [ChatMessage(role="user", content=f"m{made + i}") for i in range(op[1])]
                verb = chat_store.add_messages if op[0] == "add" else chat_store.set_messages
                await verb(key, messages, status=MessageStatus(op[2]))
            elif op[0] == "archive":
                got = await chat_store.archive_oldest_messages(key, op[1])
            elif op[0] == "delete_oldest":
                got = await chat_store.delete_oldest_messages(key, op[1])
            else:
                await chat_store.delete_messages(key, status=MessageStatus(op[1]))
            returned.append(dumped(got))
        assert returned[0] == returned[1], op
        if op[0] in ("add", "set"):
            made += op[1]
    for status in (MessageStatus.ACTIVE, MessageStatus.ARCHIVED, None):
        mine = await ours.get_messages(key, status=status, offset=page[0], limit=page[1])
        reference = await theirs.get_messages(key, status=status, offset=page[0], limit=page[1])
        assert dumped(mine) == dumped(reference)
        assert await ours.count_messages(key, status=status) == await theirs.count_messages(
            key, status=status
        )


# -- messages come back exactly --------------------------------------------------------------

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
BLOCKS = st.lists(st.one_of(
    st.builds(TextBlock, text=TEXT),
    st.builds(ToolCallBlock, tool_call_id=st.sampled_from(["c1", "c2", None, "bad id"]),
              tool_name=st.sampled_from(["lookup", "calc"]),
              tool_kwargs=st.one_of(st.dictionaries(st.sampled_from("ab"),
                                                    st.integers(-2**63, 2**63 - 1)),
                                    st.just('{"a": 1}'))),
    st.builds(ImageBlock, url=st.just("https://example.com/a.png")),
), max_size=3)  # fmt: skip
KWARGS = st.one_of(st.just({}),
                   st.fixed_dictionaries({"tool_call_id": st.sampled_from(["c1", "x y"])},
                                         optional={"name": st.sampled_from(["lookup", ""])}),
                   st.fixed_dictionaries({"prompt_tokens": st.integers(-3, 99),
                                          "completion_tokens": st.integers(0, 99),
                                          "model": st.sampled_from(["m-1", ""])}))  # fmt: skip
CHATS = st.builds(
    ChatMessage, role=st.sampled_from(list(MessageRole)), blocks=BLOCKS, additional_kwargs=KWARGS
)


@settings(max_examples=80, deadline=None)
@given(CHATS)
def test_every_chat_message_comes_back_exactly(message):
    assert to_chat(from_chat(message)).model_dump(mode="json") == message.model_dump(mode="json")


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(CHATS, max_size=4))
async def test_through_the_store_too(store, messages):
    chat_store = MindstoreChatStore(store.scoped("acme"))
    key = f"exact-{next(KEYS)}"
    await chat_store.add_messages(key, messages)
    assert dumped(await chat_store.get_messages(key)) == dumped(messages)


# -- deletes, owners, bad input --------------------------------------------------------------


async def test_a_deleted_message_leaves_no_content_in_the_database(store):
    chat_store = MindstoreChatStore(store.scoped("acme"))
    await chat_store.add_messages("chat", [
        ChatMessage(role="user", content="my SSN is 123-45-6789"),
        ChatMessage(role="assistant", content="noted")])  # fmt: skip
    [gone] = await chat_store.delete_oldest_messages("chat", 1)
    assert gone.content == "my SSN is 123-45-6789"
    assert [m.content for m in await chat_store.get_messages("chat", status=None)] == ["noted"]
    for name in await store.database.list_collection_names():
        async for document in store.database[name].find({}):
            assert "123-45-6789" not in repr(document), name
    # indexes never move: the remaining message is still at index 1
    assert (await chat_store.delete_message("chat", 0)) is None
    assert (await chat_store.delete_message("chat", 1)).content == "noted"


async def test_chats_are_the_views_own(store):
    ann, bob = store.scoped("acme", owner="ann"), store.scoped("acme", owner="bob")
    await MindstoreChatStore(ann).add_message(
        "alice@example.com:chat-1", ChatMessage(role="user", content="hi")
    )
    await ann.tasks.create(task_id="other-task")  # not a chat: not a key
    assert await MindstoreChatStore(ann).get_keys() == ["alice@example.com:chat-1"]
    assert await MindstoreChatStore(bob).get_messages("alice@example.com:chat-1") == []
    assert await MindstoreChatStore(bob).get_keys() == []
    assert await MindstoreLegacyChatStore(ann).aget_keys() == ["alice@example.com:chat-1"]


async def stored_documents(store) -> list[Any]:
    return [[d async for d in store.database[name].find({})]
            for name in sorted(await store.database.list_collection_names())]  # fmt: skip


async def test_bad_input_is_refused_naming_the_argument_before_any_write(store):
    chat_store = MindstoreChatStore(store.scoped("acme"))
    legacy = MindstoreLegacyChatStore(store.scoped("acme"))
    await chat_store.add_messages("chat", [ChatMessage(role="user", content="keep me")])
    before = await stored_documents(store)
    cases = [
        ("key", chat_store.add_message("", ChatMessage(role="user", content="x"))),
        ("key", chat_store.get_messages("a\x00b")),
        ("key", chat_store.set_messages("x" * 513, [])),
        (
            r"messages\[1\]",
            chat_store.add_messages("chat", [ChatMessage(role="user", content="x"), "no"]),
        ),
        (r"messages\[0\]", chat_store.set_messages("chat", [{"role": "user"}])),
        ("messages", chat_store.add_messages("chat", "not a list")),
        ("status", chat_store.get_messages("chat", status="gone")),
        ("status", chat_store.delete_messages("chat", status="everything")),
        ("n", chat_store.archive_oldest_messages("chat", -1)),
        ("n", chat_store.delete_oldest_messages("chat", True)),
        ("idx", chat_store.delete_message("chat", -1)),
        ("offset", chat_store.get_messages("chat", offset=-2)),
        ("limit", chat_store.get_messages("chat", limit="3")),
        (r"messages\[0\]", legacy.aset_messages("chat", [None])),
        ("idx", legacy.async_add_message("chat", ChatMessage(role="user", content="x"), idx=0)),
    ]
    for name, call in cases:
        with pytest.raises(ValidationError, match=name):
            await call
    assert await stored_documents(store) == before
    assert [m.content for m in await chat_store.get_messages("chat")] == ["keep me"]


# -- the lifecycle: backup, restore, erase ---------------------------------------------------


async def test_a_chat_and_a_history_survive_backup_and_restore_and_are_erased(
    store, store_factory, tmp_path
):
    """Both adapters keep everything in tasks, so the lifecycle covers them as it is:
    a backup restored into a new store gives the same chats (statuses included) and the
    same Agent Framework history; an owner's erase removes them."""
    pytest.importorskip("agent_framework")
    from agent_framework import Message

    from mindstore.backup import backup, erase, restore
    from mindstore.integrations.agent_framework import MindstoreHistoryProvider

    async def views(target) -> Any:
        chats = MindstoreChatStore(target.scoped("acme"))
        history = MindstoreHistoryProvider(target.scoped("acme"))
        return ([dumped(await chats.get_messages("chat", status=s))
                 for s in (MessageStatus.ACTIVE, MessageStatus.ARCHIVED)],
                [m.to_dict() for m in await history.get_messages("s1")],
                await chats.get_keys(), await history.list_sessions())  # fmt: skip

    ann = store.scoped("acme", owner="ann")
    chats = MindstoreChatStore(ann)
    await chats.add_messages("chat", [ChatMessage(role="user", content=f"m{i}") for i in range(4)])
    await chats.archive_oldest_messages("chat", 2)
    await MindstoreHistoryProvider(ann).save_messages(
        "s1", [Message(role="user", contents=["hi"], message_id="u1")]
    )
    before = await views(store)
    await backup(store, tmp_path / "backup")
    fresh = await store_factory()
    await restore(fresh, tmp_path / "backup")
    assert await views(fresh) == before and before[0][1]
    await erase(fresh, "acme", owner="ann")
    assert await views(fresh) == ([[], []], [], [], [])
