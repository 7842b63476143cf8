"""The MCP server's `search_memories` tool over what a LangGraph store wrote
(`MindstoreStore`), driven by the official MCP SDK's client in process: the memories an
agent kept come back by namespace and by word, scoped to the server's tenant and owner,
and a hostile argument is a typed tool error with the database unchanged. The oracle is
what the test put, and LangGraph's own `InMemoryStore` given the same puts."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("langgraph")

from langgraph.store.memory import InMemoryStore
from mcp import Client
from tests.test_mcp import call, refused, stored_bytes

from mindstore.integrations.langgraph_store import MindstoreStore
from mindstore.mcp import server
from mindstore.store import Store

PUTS = [
    ("alice", ("memories", "alice"), "food", {"text": "Alice is vegetarian and loves Lisbon"}),
    ("alice", ("memories", "alice"), "trip", {"text": "Planning a trip to Porto in May"}),
    ("alice", ("memories", "alice", "work"), "job", {"text": "Works on payment systems"}),
    ("bob", ("memories", "bob"), "food", {"text": "Bob is allergic to peanuts, loves Lisbon"}),
]


async def plant(store: Store) -> InMemoryStore:
    reference = InMemoryStore()
    for owner, namespace, key, value in PUTS:
        await MindstoreStore(store.scoped("acme", owner)).aput(namespace, key, value)
        await reference.aput(namespace, key, value)
    await MindstoreStore(store.scoped("globex", "alice")).aput(
        ("memories", "alice"), "food", {"text": "globex secret about Lisbon"}
    )
    return reference


def keys(found: dict[str, Any]) -> set[tuple[tuple[str, ...], str]]:
    return {(tuple(m["namespace"]), m["key"]) for m in found["memories"]}


async def test_memories_come_back_by_namespace_and_word_within_scope(store: Store) -> None:
    reference = await plant(store)
    async with Client(server(store, tenant="acme")) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert "search_memories" in tools
        whole = await call(client, "search_memories", {"namespace": ["memories"]})
        expected = {(i.namespace, i.key) for i in await reference.asearch(("memories",))}
        assert keys(whole) == expected  # every item under the prefix, as LangGraph lists
        values = {(tuple(m["namespace"]), m["key"]): m["value"] for m in whole["memories"]}
        assert values == {(ns, key): value for _, ns, key, value in PUTS}
        question = {"namespace": ["memories"], "query": "Where does she love?  lisbon"}
        lisbon = await call(client, "search_memories", question)
        assert keys(lisbon) == {(("memories", "alice"), "food"), (("memories", "bob"), "food")}
        second = {"namespace": ["memories", "alice"], "limit": 1, "offset": 1}
        page = await call(client, "search_memories", second)
        assert len(page["memories"]) == 1
    async with Client(server(store, tenant="acme", owner="bob")) as client:
        mine = await call(client, "search_memories", {"namespace": ["memories"]})
        assert keys(mine) == {(("memories", "bob"), "food")}  # never alice's
        none = await call(client, "search_memories", {"namespace": ["memories", "alice"]})
        assert none["memories"] == []
    async with Client(server(store, tenant="globex")) as client:
        other = await call(client, "search_memories", {"namespace": ["memories"]})
        assert [m["value"]["text"] for m in other["memories"]] == ["globex secret about Lisbon"]


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({}, "namespace"),
        ({"namespace": []}, "namespace"),
        ({"namespace": ["a.b"]}, "namespace"),
        ({"namespace": ["x" * 257]}, "namespace"),
        ({"namespace": [{"$gt": ""}]}, "namespace"),
        ({"namespace": ["memories"] * 33}, "namespace"),
        ({"namespace": ["memories"], "limit": 0}, "limit"),
        ({"namespace": ["memories"], "offset": -1}, "offset"),
        ({"namespace": ["memories"], "query": ""}, "query"),
        ({"namespace": ["memories"], "filter": {"$where": "1"}}, "filter"),
    ],
)
async def test_hostile_memory_arguments_are_typed_errors_and_write_nothing(
    store: Store, arguments: dict[str, Any], named: str
) -> None:
    await plant(store)
    before = await stored_bytes(store)
    async with Client(server(store, tenant="acme")) as client:
        content = await refused(client, "search_memories", arguments)
    assert content["argument"] == named
    assert await stored_bytes(store) == before
