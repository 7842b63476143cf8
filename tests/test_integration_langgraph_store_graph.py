"""A real LangGraph graph that writes and recalls long-term memories through its store,
run side by side on LangGraph's `InMemoryStore` (the reference) and on `MindstoreStore`:
the same conversation gives the same answers and leaves the same memories. The chat model
is scripted (no network): it answers with what the recall step put before it."""

from __future__ import annotations

import asyncio
import math
import uuid
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from conftest import close_store, open_store
from mindstore.collection_names import MEMORY_ITEMS
from mindstore.integrations.langgraph_store import MindstoreStore
from mindstore.store import Store

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def embed(texts: list[str]) -> list[list[float]]:
    """Letter counts, normalised: a deterministic embedding with clear margins."""
    out = []
    for text in texts:
        counts = [float(text.lower().count(c)) for c in LETTERS]
        norm = math.sqrt(sum(x * x for x in counts)) or 1.0
        out.append([x / norm for x in counts])
    return out


INDEX = {"dims": len(LETTERS), "embed": embed, "fields": ["text"]}
TURNS = [
    ("ana", "remember: I am vegetarian"),
    ("ana", "remember: I live in Lyon"),
    ("bob", "remember: I play the cello"),
    ("ana", "what should I cook tonight, vegetarian please"),
    ("bob", "which instrument do I play"),
    ("ana", "which city do I live in"),
]


def scripted_model() -> GenericFakeChatModel:
    """Answers each call with the memories it was shown (the recall step's system
    message), so the answers depend on what the store returned and in what order."""

    class Echo(GenericFakeChatModel):
        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            shown = [m.content for m in messages if isinstance(m, SystemMessage)]
            self.messages = iter([AIMessage(content=f"recalled: {shown[-1] if shown else ''}")])
            return super()._generate(messages, *args, **kwargs)

    return Echo(messages=iter([]))


def graph_of(store: BaseStore, asynchronous: bool) -> Any:
    model = scripted_model()

    def user_of(config: RunnableConfig) -> str:
        return str(config["configurable"]["user_id"])

    def memory_of(text: str) -> tuple[str, dict[str, str]]:
        fact = text.removeprefix("remember:").strip()
        return str(uuid.uuid5(uuid.NAMESPACE_OID, fact)), {"text": fact}

    def shown(found: list[Any]) -> SystemMessage:
        return SystemMessage(content=" | ".join(item.value["text"] for item in found))

    if asynchronous:

        async def remember(
            state: MessagesState, config: RunnableConfig, *, store: BaseStore
        ) -> dict[str, Any]:
            text = str(state["messages"][-1].content)
            if text.startswith("remember:"):
                key, value = memory_of(text)
                await store.aput(("memories", user_of(config)), key, value)
            return {}

        async def recall(
            state: MessagesState, config: RunnableConfig, *, store: BaseStore
        ) -> dict[str, Any]:
            query = str(state["messages"][-1].content)
            found = await store.asearch(("memories", user_of(config)), query=query, limit=2)
            return {"messages": [shown(found)]}

        async def answer(state: MessagesState) -> dict[str, Any]:
            return {"messages": [await model.ainvoke(state["messages"])]}

    else:

        def remember(
            state: MessagesState, config: RunnableConfig, *, store: BaseStore
        ) -> dict[str, Any]:  # type: ignore[misc]
            text = str(state["messages"][-1].content)
            if text.startswith("remember:"):
                key, value = memory_of(text)
                store.put(("memories", user_of(config)), key, value)
            return {}

        def recall(
            state: MessagesState, config: RunnableConfig, *, store: BaseStore
        ) -> dict[str, Any]:  # type: ignore[misc]
            query = str(state["messages"][-1].content)
            found = store.search(("memories", user_of(config)), query=query, limit=2)
            return {"messages": [shown(found)]}

        def answer(state: MessagesState) -> dict[str, Any]:  # type: ignore[misc]
            return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", "answer")
    return builder.compile(store=store)


def config(user: str) -> RunnableConfig:
    return {"configurable": {"user_id": user}}


def memories_of(store: BaseStore) -> dict[str, list[tuple[str, Any]]]:
    return {user: sorted((i.key, i.value) for i in store.search(("memories", user), limit=50))
            for user in ("ana", "bob")}  # fmt: skip


def run_sync(store: BaseStore) -> list[str]:
    graph = graph_of(store, asynchronous=False)
    answers = []
    for user, text in TURNS:
        result = graph.invoke({"messages": [HumanMessage(content=text)]}, config(user))
        answers.append(str(result["messages"][-1].content))
    return answers


async def run_async(store: BaseStore) -> list[str]:
    graph = graph_of(store, asynchronous=True)
    answers = []
    for user, text in TURNS:
        result = await graph.ainvoke({"messages": [HumanMessage(content=text)]}, config(user))
        answers.append(str(result["messages"][-1].content))
    return answers


def test_a_graph_recalls_the_same_memories_as_on_the_in_memory_store() -> None:
    reference = InMemoryStore(index=INDEX)  # type: ignore[arg-type]
    expected = run_sync(reference)
    # the answers show the memories recalled, best match first
    assert expected[3] == "recalled: I am vegetarian | I live in Lyon"
    assert expected[4] == "recalled: I play the cello"
    assert expected[5] == "recalled: I live in Lyon | I am vegetarian"

    opened: Store = asyncio.run(open_store())
    try:
        memories = MindstoreStore(opened.scoped("acme"), index=INDEX)  # type: ignore[arg-type]
        assert run_sync(memories) == expected
        assert memories_of(memories) == memories_of(reference)
        count = asyncio.run(opened.database[MEMORY_ITEMS].count_documents({"tenant": "acme"}))
        assert count == 3
    finally:
        asyncio.run(close_store(opened))


async def test_an_async_graph_recalls_the_same_memories_as_on_the_in_memory_store(
    store: Store,
) -> None:
    reference = InMemoryStore(index=INDEX)  # type: ignore[arg-type]
    expected = await run_async(reference)
    memories = MindstoreStore(store.scoped("acme"), index=INDEX)  # type: ignore[arg-type]
    assert await run_async(memories) == expected
    for user in ("ana", "bob"):
        ours = await memories.asearch(("memories", user), query="vegetarian cooking", limit=5)
        theirs = await reference.asearch(("memories", user), query="vegetarian cooking", limit=5)
        assert [(i.key, i.value) for i in ours] == [(i.key, i.value) for i in theirs]
        for mine, reference_item in zip(ours, theirs, strict=True):
            assert mine.score == pytest.approx(reference_item.score, abs=1e-6)
