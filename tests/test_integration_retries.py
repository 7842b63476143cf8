"""Retried saves store nothing new: every LangChain `add_messages` and every LangGraph
`put` / `put_writes`, sent again (right away, as a client that lost the acknowledgement
would, or late, after the run went on), leaves the database byte-identical."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import bson
import pytest

pytest.importorskip("langgraph")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from mindstore.integrations.langchain import MindstoreChatMessageHistory
from mindstore.integrations.langgraph import MindstoreSaver

pytestmark = pytest.mark.filterwarnings("ignore:.*deprecated")


async def dump(store) -> dict[str, list[bytes]]:
    """Every document of every collection, as BSON, in `_id` order."""
    database = store.database
    out = {}
    for name in sorted(await database.list_collection_names()):
        docs = await database[name].find({}).sort("_id", 1).to_list(length=None)
        out[name] = [bson.encode(doc) for doc in docs]
    return out


class LostAcknowledgement(ConnectionError):
    """The write was applied, the reply never arrived."""


class LosingTheFirstAcknowledgement:
    """The history's task repository, whose first write (the create of a new task, or an
    append) lands and then raises, as a write whose reply was lost does."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.writes = inner, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def _landed(self, write: Any) -> Any:
        stored = await write
        self.writes += 1
        if self.writes == 1:
            raise LostAcknowledgement
        return stored

    async def create(self, *args: Any, **kwargs: Any) -> Any:
        return await self._landed(self.inner.create(*args, **kwargs))

    async def add_messages(self, *args: Any, **kwargs: Any) -> Any:
        return await self._landed(self.inner.add_messages(*args, **kwargs))


def lose_the_first_acknowledgement(history: MindstoreChatMessageHistory) -> None:
    losing = LosingTheFirstAcknowledgement(history._repository)
    history._repository = losing  # what a write attempt on a new task goes through
    history._tasks._repository = losing  # and on an existing one


# ---------------------------------------------------------------- LangChain


async def test_a_retried_langchain_save_stores_nothing_new(store):
    ann = store.scoped("acme", owner="ann")
    history = MindstoreChatMessageHistory("org/team/chat-1", ann)
    await history.aadd_messages([SystemMessage("Be brief.")])
    lose_the_first_acknowledgement(history)
    exchange = [HumanMessage("Weather in Oslo?"),
                AIMessage("", id="lc_run--1", tool_calls=[{"name": "w", "args": {}, "id": "c1"}]),
                ToolMessage("-3C", tool_call_id="c1"),
                AIMessage("Cold.", id="lc_run--2")]  # fmt: skip
    with pytest.raises(LostAcknowledgement):
        await history.aadd_messages(exchange)
    before = await dump(store)
    await history.aadd_messages(exchange)  # the retry: same call
    assert await dump(store) == before
    await MindstoreChatMessageHistory("org/team/chat-1", ann).aadd_messages(
        list(exchange)
    )  # another object, another process
    assert await dump(store) == before
    assert await history.aget_messages() == [SystemMessage("Be brief."), *exchange]


async def test_a_retried_save_without_langchain_ids_stores_nothing_new_but_a_repeat_is_kept(store):
    acme = store.scoped("acme")
    history = MindstoreChatMessageHistory("plain", acme)
    lose_the_first_acknowledgement(history)
    said = [HumanMessage("ok")]
    with pytest.raises(LostAcknowledgement):
        await history.aadd_messages(said)
    before = await dump(store)
    await history.aadd_messages(said)  # the same message objects again: a retry
    assert await dump(store) == before
    await history.aadd_messages([HumanMessage("ok")])  # a new message that says the same: kept
    assert [m.content for m in await history.aget_messages()] == ["ok", "ok"]


KINDS = st.sampled_from(["human", "ai", "ai-with-id", "system"])
OPS = st.lists(st.tuples(st.sampled_from(["add", "retry", "repeat"]),
                         st.lists(KINDS, min_size=1, max_size=3)),
               min_size=1, max_size=8)  # fmt: skip


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
async def test_histories_with_retries_hold_what_in_memory_holds_without_them(store, ops):
    """`retry` sends the previous call again (same objects); `repeat` sends new messages
    equal to the previous call's, without ids (a new exchange that says the same)."""
    acme = store.scoped("prop")
    ours, reference = (
        MindstoreChatMessageHistory(uuid.uuid4().hex, acme),
        InMemoryChatMessageHistory(),
    )
    last: list = []
    for step, (op, kinds) in enumerate(ops):
        if op == "retry" and last:
            await ours.aadd_messages(last)
            continue
        if op == "repeat" and last:
            batch = [type(m)(content=m.content) for m in last]
        else:
            batch = [
                HumanMessage(f"q{step}.{i}") if kind == "human"
                else SystemMessage(f"s{step}.{i}") if kind == "system"
                else AIMessage(f"a{step}.{i}",
                               id=f"lc_run--{uuid.uuid4()}" if kind == "ai-with-id" else None)
                for i, kind in enumerate(kinds)
            ]  # fmt: skip
        await ours.aadd_messages(batch)
        await reference.aadd_messages(batch)
        last = batch
    assert await ours.aget_messages() == reference.messages


# ---------------------------------------------------------------- LangGraph


class RetryingSaver(MindstoreSaver):
    """Sends every put and put_writes twice and checks that the second changed nothing;
    records the calls so a test can send them all again, late. (LangGraph saves in the
    background, concurrently: a lock keeps other saves out while one is compared.)"""

    def __init__(self, view, store) -> None:
        super().__init__(view)
        self.raw, self.calls, self.lock = store, [], asyncio.Lock()

    async def aput(self, config, checkpoint, metadata, new_versions):
        async with self.lock:
            first = await super().aput(config, checkpoint, metadata, new_versions)
            after = await dump(self.raw)
            assert await super().aput(config, checkpoint, metadata, new_versions) == first
            assert await dump(self.raw) == after, "a retried put changed the database"
            self.calls.append(("aput", (config, checkpoint, metadata, new_versions)))
            return first

    async def aput_writes(self, config, writes, task_id, task_path=""):
        async with self.lock:
            await super().aput_writes(config, writes, task_id, task_path)
            after = await dump(self.raw)
            await super().aput_writes(config, writes, task_id, task_path)
            assert await dump(self.raw) == after, "retried writes changed the database"
            self.calls.append(("aput_writes", (config, writes, task_id, task_path)))


@tool
def search(query: str) -> str:
    """Search the manual."""
    return f"chapter 4 covers {query}"


def agent(state: MessagesState) -> dict:
    n = len(state["messages"])
    if isinstance(state["messages"][-1], HumanMessage):
        return {"messages": [AIMessage("", id=f"ai-{n}",
                                       tool_calls=[{"name": "search", "args": {"query": "x"},
                                                    "id": f"c{n}"}],
                                       usage_metadata={"input_tokens": 9, "output_tokens": 1,
                                                       "total_tokens": 10})]}  # fmt: skip
    removals = (
        [RemoveMessage(id=m.id) for m in state["messages"][:2]] if n > 9 else []
    )  # a rewrite, now and then
    return {
        "messages": [*removals, AIMessage(f"answer {n}", id=f"$answer-{n}")]
    }  # an id no message id can be


def graph_with(checkpointer):
    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([search]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


async def run(graph) -> list:
    config = {"configurable": {"thread_id": "org/team/chat-1"}}
    for i in range(3):
        await graph.ainvoke({"messages": [HumanMessage(f"q{i}", id=f"h{i}")]}, config)
    states = [s async for s in graph.aget_state_history(config)]
    earlier = next(s for s in states if len(s.values.get("messages", [])) == 4 and not s.next)
    await graph.ainvoke(
        {"messages": [HumanMessage("instead", id="f1")]}, earlier.config
    )  # time travel
    return [masked(s.values) async for s in graph.aget_state_history(config)]


def masked(values: dict) -> list:
    """The state's messages with the random ids LangGraph gives id-less ones masked."""
    out = []
    for message in values.get("messages", []):
        data = message.model_dump()
        if len(str(data["id"])) == 36 and str(data["id"]).count("-") == 4:
            data["id"] = "<uuid>"
        out.append(data)
    return out


async def test_retried_and_late_langgraph_saves_store_nothing_new(store):
    saver = RetryingSaver(store.scoped("acme", owner="ann"), store)
    ours, theirs = await run(graph_with(saver)), await run(graph_with(InMemorySaver()))
    assert ours == theirs
    assert {name for name, _ in saver.calls} == {"aput", "aput_writes"} and len(saver.calls) > 30
    threads = [
        r
        for r in (await store.scoped("acme").tasks.list()).items
        if (r.metadata or {}).get("thread_id")
    ]
    assert len(threads) == 3  # the thread, the rewrite's task, the time-travel branch
    before = await dump(store)
    for name, args in saver.calls:  # every save of the run sent again, after the run went on
        await getattr(MindstoreSaver, name)(saver, *args)
    assert await dump(store) == before
