"""The MCP server (`mindstore.mcp.server`) driven in process by the official MCP SDK's
client: the tool listing, every tool against what the test itself stored (the oracle is
the planted data, not the store's reads), owner and tenant scope, hostile arguments (a
typed tool error naming the argument, the database byte-identical afterwards), a 1,000-
message conversation read in pages, and a keyring store that makes no key."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta, timezone
from pathlib import Path
from typing import Any

import bson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp")

import mcp_types as types
from mcp import Client

import mindstore
from mindstore import errors
from mindstore.backends.recorder import observe_all
from mindstore.collection_names import SEARCH_ENTRIES, SEARCH_POSTINGS, SEARCH_TASKS
from mindstore.crypto import Keyring, LocalKeyVault, LocalMasterKey
from mindstore.mcp import reads, server
from mindstore.model.messages import AssistantMessage, UserMessage
from mindstore.model.parts import TextPart
from mindstore.portable import WRITE_COMMANDS
from mindstore.store import Store

TOOL_NAMES = [
    "search_conversations", "read_conversation", "list_conversations", "search_memories",
]  # fmt: skip
ERROR_TYPES = {
    *(name for name in dir(errors) if isinstance(getattr(errors, name), type)),
    "UnknownTool", "InternalError",
}  # fmt: skip
"""What a tool error's type may be: a class of `mindstore.errors`, or the server's own two."""


def said(role: str, text: str) -> UserMessage | AssistantMessage:
    kind = UserMessage if role == "user" else AssistantMessage
    return kind(content=[TextPart(text=text)])


@dataclass
class Planted:
    """What the test stored: conversation id -> (tenant, owner, texts in order)."""

    tasks: dict[str, tuple[str, str, list[str]]]

    def ids(self, tenant: str, owner: str | None = None) -> set[str]:
        return {
            task_id
            for task_id, (t, o, _texts) in self.tasks.items()
            if t == tenant and (owner is None or o == owner)
        }

    def containing(self, word: str, tenant: str, owner: str | None = None) -> set[tuple[str, int]]:
        """(task id, index) of every planted message holding `word`: the search's oracle."""
        return {
            (task_id, index)
            for task_id in self.ids(tenant, owner)
            for index, text in enumerate(self.tasks[task_id][2])
            if word in text.split()
        }


async def plant(store: Store) -> Planted:
    """Two owners of acme, and another tenant (globex) that says the same words."""
    layout = [
        ("acme", "ann", "trip", ["book a lisbon hotel", "the lisbon hotel is booked", "thanks"]),
        ("acme", "ann", "dinner", ["find a dinner place", "a lisbon tasca near the hotel"]),
        ("acme", "bob", "secret", ["bob plans a lisbon surprise", "bobonly detail"]),
        ("globex", "ann", "other", ["globex lisbon hotel plans", "globexonly detail"]),
    ]
    tasks = {}
    for tenant, owner, title, texts in layout:
        history = [said("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)]
        record = await store.scoped(tenant).tasks.create(owner=owner, title=title, messages=history)
        tasks[record.id] = (tenant, owner, texts)
    return Planted(tasks)


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A successful call's structured content (its text says the same)."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.structured_content
    assert isinstance(result.content[0], types.TextContent)
    assert json.loads(result.content[0].text) == result.structured_content
    content = result.structured_content
    assert isinstance(content, dict)
    return content


async def refused(client: Client, tool: str, arguments: Any) -> dict[str, Any]:
    """A refused call's structured content: a typed tool error naming its argument."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    content = result.structured_content
    assert isinstance(content, dict) and set(content) == {"error", "argument", "message"}
    assert content["error"] in ERROR_TYPES, content
    assert "Traceback" not in content["message"] and 'File "' not in content["message"]
    return content


async def every_page(client: Client, tool: str, arguments: dict[str, Any], key: str) -> list[Any]:
    """Every item of a paged tool, following next_cursor (the same other arguments)."""
    items: list[Any] = []
    cursor = None
    for _ in range(10_000):
        page = await call(client, tool, {**arguments, **({"cursor": cursor} if cursor else {})})
        items += page[key]
        cursor = page["next_cursor"]
        if cursor is None:
            return items
    raise AssertionError("the pages never ended")


async def stored_bytes(store: Store) -> dict[str, list[bytes]]:
    """Every document of every collection, search index included, as BSON bytes."""
    names = sorted(await store.database.list_collection_names())
    return {
        name: sorted(bson.encode(d) for d in await store.database[name].find({}).to_list(None))
        for name in names
    }


@pytest.fixture
async def planted(store: Store) -> Planted:
    return await plant(store)


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    """How the SDK's client connects in process: 'auto' dispatches directly, 'legacy' runs
    the initialize handshake over the SDK's in-memory streams."""
    return str(request.param)


@asynccontextmanager
async def acme_client(store: Store, mode: str = "auto") -> AsyncIterator[Client]:
    """The SDK's client on a tenant-wide acme server."""
    async with Client(server(store, tenant="acme"), mode=mode) as connected:
        yield connected


async def test_the_tools_are_listed_with_bounded_schemas(
    store: Store,
    planted: Planted,
    mode: str,
) -> None:
    async with acme_client(store, mode) as client:
        listed = (await client.list_tools()).tools
        assert [tool.name for tool in listed] == TOOL_NAMES
        for tool in listed:
            schema = tool.input_schema
            assert schema["type"] == "object" and schema["additionalProperties"] is False
            assert tool.annotations is not None and tool.annotations.read_only_hint is True
            assert tool.annotations.destructive_hint is False
            assert tool.description
            limit = schema["properties"]["limit"]
            assert (limit["type"], limit["minimum"], limit["maximum"]) == ("integer", 1, 100)
            if tool.name != "search_memories":  # memories page by offset (tests/test_mcp_memory.py)
                assert schema["properties"]["cursor"]["anyOf"][0]["maxLength"] == 4096
        by_name = {tool.name: tool.input_schema for tool in listed}
        search = by_name["search_conversations"]
        assert search["required"] == ["query"]
        assert search["properties"]["query"]["maxLength"] == 1024
        assert search["properties"]["mode"]["anyOf"][0]["enum"] == ["hybrid", "lexical", "semantic"]
        assert search["properties"]["match"]["anyOf"][0]["enum"] == ["any", "all"]
        owner = search["properties"]["owner"]["anyOf"][0]
        assert (owner["minLength"], owner["maxLength"]) == (1, 128)
        read = by_name["read_conversation"]
        assert read["required"] == ["task_id"]
        assert read["properties"]["task_id"]["pattern"] == r"^[A-Za-z0-9_\-.:]+$"
        assert read["properties"]["task_id"]["maxLength"] == 128
        assert read["properties"]["start"]["anyOf"][0]["minimum"] == 0
        assert set(by_name["list_conversations"]["properties"]) == {
            "owner", "since", "until", "oldest_first", "limit", "cursor",
        }  # fmt: skip


async def test_search_finds_every_planted_message_and_only_the_tenants(
    planted: Planted,
    store: Store,
    mode: str,
) -> None:
    async with acme_client(store, mode) as client:
        hits = await every_page(
            client, "search_conversations", {"query": "lisbon", "limit": 2}, "hits"
        )
        assert {(h["task_id"], h["index"]) for h in hits} == planted.containing("lisbon", "acme")
        scores = [h["score"] for h in hits]
        assert scores == sorted(scores, reverse=True)
        for hit in hits:
            tenant, owner, texts = planted.tasks[hit["task_id"]]
            assert tenant == "acme" and hit["owner"] == owner
            assert "lisbon" in hit["snippet"] and hit["snippet"] in texts[hit["index"]]
            assert hit["role"] == ("user" if hit["index"] % 2 == 0 else "assistant")
            assert isinstance(hit["message_id"], str) and hit["time"].endswith("+00:00")
        only_ann = await call(client, "search_conversations", {"query": "lisbon", "owner": "ann"})
        assert {(h["task_id"], h["index"]) for h in only_ann["hits"]} == planted.containing(
            "lisbon", "acme", "ann"
        )
        users = await call(client, "search_conversations", {"query": "lisbon", "roles": ["user"]})
        assert {h["index"] % 2 for h in users["hits"]} == {0}
        assert (await call(client, "search_conversations", {"query": "globexonly"}))["hits"] == []


async def test_search_passes_recall_options_only_as_the_store_takes_them(
    monkeypatch: pytest.MonkeyPatch,
    store: Store,
    planted: Planted,
    mode: str,
) -> None:
    """Today's search has no `mode` or `match`: what it already does is accepted, the rest
    refused naming the argument; a search that takes them gets them as given."""
    async with acme_client(store, mode) as client:
        if "mode" not in reads.SEARCH_PARAMETERS:
            same = {"query": "lisbon", "mode": "lexical", "match": "all"}
            assert (await call(client, "search_conversations", same))["hits"]
            for name, value in (("mode", "semantic"), ("mode", "hybrid"), ("match", "any")):
                error = await refused(client, "search_conversations", {"query": "x", name: value})
                assert (error["error"], error["argument"]) == ("ValidationError", name)
        monkeypatch.setattr(reads, "SEARCH_PARAMETERS", frozenset({"mode", "match"}))
        assert reads.recall_options("semantic", "any") == {"mode": "semantic", "match": "any"}
        assert reads.recall_options(None, None) == {}


async def test_read_gives_the_last_messages_and_ranges_a_page_at_a_time(
    planted: Planted,
    store: Store,
    mode: str,
) -> None:
    async with acme_client(store, mode) as client:
        task_id = next(
            t for t, (_, _, texts) in planted.tasks.items() if texts[0].startswith("book")
        )
        texts = planted.tasks[task_id][2]
        last = await call(client, "read_conversation", {"task_id": task_id, "last": 2})
        assert [m["text"] for m in last["messages"]] == texts[-2:]
        assert [m["index"] for m in last["messages"]] == [1, 2]
        assert last["next_cursor"] is None
        assert (last["task_id"], last["owner"], last["title"]) == (task_id, "ann", "trip")
        assert last["messages_total"] == len(texts)
        paged = await every_page(
            client, "read_conversation", {"task_id": task_id, "limit": 1}, "messages"
        )
        assert [m["text"] for m in paged] == texts
        assert [m["role"] for m in paged] == ["user", "assistant", "user"]
        ranged = await call(
            client, "read_conversation", {"task_id": task_id, "start": 1, "stop": 2}
        )
        assert [m["text"] for m in ranged["messages"]] == texts[1:2]
        past = await call(client, "read_conversation", {"task_id": task_id, "start": 50})
        assert past["messages"] == [] and past["next_cursor"] is None


async def test_list_pages_conversations_by_owner_and_time(
    planted: Planted,
    store: Store,
    mode: str,
) -> None:
    async with acme_client(store, mode) as client:
        listed = await every_page(client, "list_conversations", {"limit": 1}, "conversations")
        assert {c["task_id"] for c in listed} == planted.ids("acme")
        assert len(listed) == len(planted.ids("acme"))
        updated = [c["updated"] for c in listed]
        assert updated == sorted(updated, reverse=True)
        for row in listed:
            assert row["messages_total"] == len(planted.tasks[row["task_id"]][2])
        oldest = await every_page(
            client, "list_conversations", {"limit": 2, "oldest_first": True}, "conversations"
        )
        assert [c["task_id"] for c in oldest] == [c["task_id"] for c in reversed(listed)]
        ann = await every_page(client, "list_conversations", {"owner": "ann"}, "conversations")
        assert {c["task_id"] for c in ann} == planted.ids("acme", "ann")
        middle = listed[1]["updated"]
        since = await every_page(client, "list_conversations", {"since": middle}, "conversations")
        until = await every_page(client, "list_conversations", {"until": middle}, "conversations")
        records = {t: await store.scoped("acme").tasks.get(t) for t in planted.ids("acme")}
        cut = records[listed[1]["task_id"]].updated_at
        assert {c["task_id"] for c in since} == {
            t for t, r in records.items() if r.updated_at > cut
        }
        assert {c["task_id"] for c in until} == {
            t for t, r in records.items() if r.updated_at < cut
        }


async def test_an_owner_server_never_sees_another_owner_nor_another_tenant(
    store: Store, planted: Planted
) -> None:
    bobs = planted.ids("acme", "bob")
    globex = planted.ids("globex")
    async with Client(server(store, tenant="acme", owner="ann")) as ann:
        hits = await every_page(ann, "search_conversations", {"query": "lisbon"}, "hits")
        assert {(h["task_id"], h["index"]) for h in hits} == planted.containing(
            "lisbon", "acme", "ann"
        )
        assert (await call(ann, "search_conversations", {"query": "bobonly"}))["hits"] == []
        listed = await every_page(ann, "list_conversations", {}, "conversations")
        assert {c["task_id"] for c in listed} == planted.ids("acme", "ann")
        for task_id in bobs | globex:
            error = await refused(ann, "read_conversation", {"task_id": task_id})
            assert (error["error"], error["argument"]) == ("NotFound", "task_id")
        for tool in ("search_conversations", "list_conversations"):
            asked = {"owner": "bob", **({"query": "lisbon"} if tool.startswith("search") else {})}
            error = await refused(ann, tool, asked)
            assert (error["error"], error["argument"]) == ("ValidationError", "owner")
    async with Client(server(store, tenant="globex")) as other:
        hits = await every_page(other, "search_conversations", {"query": "lisbon"}, "hits")
        assert {h["task_id"] for h in hits} == globex
        listed = await every_page(other, "list_conversations", {}, "conversations")
        assert {c["task_id"] for c in listed} == globex
        for task_id in planted.ids("acme"):
            assert (await refused(other, "read_conversation", {"task_id": task_id}))[
                "error"
            ] == "NotFound"


HOSTILE: list[tuple[str, Any, str]] = [
    ("search_conversations", {}, "query"),
    ("search_conversations", {"query": ""}, "query"),
    ("search_conversations", {"query": "x" * 1025}, "query"),
    ("search_conversations", {"query": "a\x00b"}, "query"),
    ("search_conversations", {"query": {"$ne": 1}}, "query"),
    ("search_conversations", {"query": "lisbon", "limit": 0}, "limit"),
    ("search_conversations", {"query": "lisbon", "limit": 101}, "limit"),
    ("search_conversations", {"query": "lisbon", "limit": 2.5}, "limit"),
    ("search_conversations", {"query": "lisbon", "limit": "5"}, "limit"),
    ("search_conversations", {"query": "lisbon", "limit": True}, "limit"),
    ("search_conversations", {"query": "lisbon", "limit": 10**30}, "limit"),
    ("search_conversations", {"query": "lisbon", "owner": "$where"}, "owner"),
    ("search_conversations", {"query": "lisbon", "owner": "x" * 129}, "owner"),
    ("search_conversations", {"query": "lisbon", "owner": "a\nb"}, "owner"),
    ("search_conversations", {"query": "lisbon", "roles": ["root"]}, "roles"),
    ("search_conversations", {"query": "lisbon", "roles": "user"}, "roles"),
    ("search_conversations", {"query": "lisbon", "since": "yesterday"}, "since"),
    ("search_conversations", {"query": "lisbon", "until": 1e308}, "until"),
    ("search_conversations", {"query": "lisbon", "cursor": "not a cursor"}, "cursor"),
    ("search_conversations", {"query": "lisbon", "cursor": "bm90IGEgY3Vyc29y"}, "cursor"),
    ("search_conversations", {"query": "lisbon", "mode": "everything"}, "mode"),
    ("search_conversations", {"query": "lisbon", "match": "some"}, "match"),
    ("search_conversations", {"query": "lisbon", "task_ids": ["x"]}, "task_ids"),
    ("read_conversation", {}, "task_id"),
    ("read_conversation", {"task_id": "acme/x"}, "task_id"),
    ("read_conversation", {"task_id": "x" * 129}, "task_id"),
    ("read_conversation", {"task_id": {"$gt": ""}}, "task_id"),
    ("read_conversation", {"task_id": "missing"}, "task_id"),
    ("read_conversation", {"task_id": "missing", "start": -1}, "start"),
    ("read_conversation", {"task_id": "missing", "last": 0}, "last"),
    ("read_conversation", {"task_id": "missing", "limit": 1000}, "limit"),
    ("read_conversation", {"task_id": "missing", "stop": 1.5}, "stop"),
    ("list_conversations", {"limit": -3}, "limit"),
    ("list_conversations", {"since": "2026-13-45"}, "since"),
    ("list_conversations", {"since": "0001-01-01T00:00:00+14:00"}, "since"),
    ("search_conversations", {"query": "x", "until": "9999-12-31T23:59:59-14:00"}, "until"),
    ("list_conversations", {"oldest_first": "yes"}, "oldest_first"),
    ("list_conversations", {"cursor": "Zm9v"}, "cursor"),
    ("list_conversations", {"owner": ""}, "owner"),
    ("list_conversations", {"tenant": "globex"}, "tenant"),
]


async def test_hostile_arguments_are_typed_tool_errors_and_write_nothing(
    store: Store,
    planted: Planted,
    mode: str,
) -> None:
    async with acme_client(store, mode) as client:
        await call(client, "search_conversations", {"query": "lisbon"})  # the index is current
        before = await stored_bytes(store)
        task_id = next(iter(planted.ids("acme", "ann")))
        window = [
            ("read_conversation", {"task_id": task_id, "last": 2, "start": 0}, "last"),
            ("read_conversation", {"task_id": task_id, "start": 2, "stop": 1}, "start"),
            ("read_conversation", {"task_id": task_id, "cursor": "9:3"}, "cursor"),
            ("read_conversation", {"task_id": task_id, "cursor": "abc"}, "cursor"),
        ]
        for tool, arguments, argument in HOSTILE + window:
            error = await refused(client, tool, arguments)
            assert error["argument"] == argument, (tool, arguments, error)
        unknown = await refused(client, "drop_everything", {})
        assert unknown["error"] == "UnknownTool"
        assert await stored_bytes(store) == before


ISO_TIMES = st.builds(
    lambda moment, minutes: moment.replace(tzinfo=timezone(timedelta(minutes=minutes))).isoformat(),
    st.datetimes(),
    st.integers(-14 * 60 + 1, 14 * 60 - 1),
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40) | ISO_TIMES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    calls=st.lists(
        st.tuples(
            st.sampled_from(TOOL_NAMES),
            st.dictionaries(
                st.sampled_from(
                    [
                        "query",
                        "task_id",
                        "owner",
                        "roles",
                        "since",
                        "until",
                        "limit",
                        "cursor",
                        "start",
                        "stop",
                        "last",
                        "mode",
                        "match",
                        "oldest_first",
                        "extra",
                    ]
                ),
                JSON_VALUES,
                max_size=4,
            ),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_any_arguments_answer_a_result_or_a_typed_error_and_write_nothing(
    calls: Sequence[tuple[str, dict[str, Any]]],
) -> None:
    async def body() -> None:
        async with await mindstore.connect("embedded") as store:
            await plant(store)
            async with Client(server(store, tenant="acme", owner="ann")) as client:
                await call(client, "search_conversations", {"query": "lisbon"})
                before = await stored_bytes(store)
                for tool, arguments in calls:
                    result = await client.call_tool(tool, arguments)
                    content = result.structured_content
                    assert isinstance(content, dict)
                    if result.is_error:
                        assert content["error"] in ERROR_TYPES - {"InternalError"}, content
                        listed = {*TOOL_SCHEMAS[tool]["properties"], "arguments", None}
                        assert content["argument"] in listed | set(arguments), content
                    else:
                        assert "next_cursor" in content
                assert await stored_bytes(store) == before

    asyncio.run(body())


TOOL_SCHEMAS = {tool.name: tool.input_schema() for tool in mindstore.mcp.TOOLS}


async def test_a_thousand_message_conversation_is_read_in_pages(store: Store) -> None:
    texts = [f"message number {i} about item{i}" for i in range(1000)]
    history = [said("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)]
    record = await store.scoped("acme").tasks.create(owner="ann", messages=history)
    async with Client(server(store, tenant="acme")) as client:
        pages = 0
        read: list[dict[str, Any]] = []
        cursor = None
        while True:
            asked = {"task_id": record.id, "limit": 100, **({"cursor": cursor} if cursor else {})}
            page = await call(client, "read_conversation", asked)
            assert len(page["messages"]) <= 100
            read += page["messages"]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert pages == 10
        assert [m["text"] for m in read] == texts
        assert [m["index"] for m in read] == list(range(1000))
        tail = await every_page(
            client, "read_conversation", {"task_id": record.id, "last": 250}, "messages"
        )
        assert [m["text"] for m in tail] == texts[750:]
        middle = await call(
            client, "read_conversation", {"task_id": record.id, "start": 498, "stop": 503}
        )
        assert [m["text"] for m in middle["messages"]] == texts[498:503]
        found = await call(client, "search_conversations", {"query": "item777"})
        assert [(h["task_id"], h["index"]) for h in found["hits"]] == [(record.id, 777)]


async def test_a_page_of_messages_stops_at_its_text_budget(store: Store) -> None:
    from mindstore.mcp.tools import MAX_PAGE_CHARS

    big = "word " * (MAX_PAGE_CHARS // 5 // 4 - 10)  # four of these fill a page
    texts = [big + str(i) for i in range(5)]
    record = await store.scoped("acme").tasks.create(messages=[said("user", t) for t in texts])
    async with Client(server(store, tenant="acme")) as client:
        first = await call(client, "read_conversation", {"task_id": record.id, "limit": 100})
        assert len(first["messages"]) == 4
        assert sum(len(m["text"]) for m in first["messages"]) <= MAX_PAGE_CHARS
        rest = await every_page(
            client,
            "read_conversation",
            {"task_id": record.id, "cursor": first["next_cursor"]},
            "messages",
        )
        assert [m["text"] for m in first["messages"] + rest] == texts


async def test_a_keyring_store_reads_a_sealed_tenant_and_makes_no_key(tmp_path: Path) -> None:
    """Serving a tenant sealed by the application reads it with the keyring given; a
    tenant in the clear stays in the clear (no data key, no vault file is made)."""
    vault = tmp_path / "vault"
    keyring = Keyring(LocalKeyVault(vault, LocalMasterKey(bytes(range(32)))))
    async with await mindstore.connect("embedded", keyring=keyring) as sealed_app:
        sealed = await sealed_app.scoped("sealed").tasks.create(
            owner="ann", title="private", messages=[said("user", "a sealed lisbon secret")]
        )
        plain_store = Store(sealed_app.backend)  # the application of a tenant in the clear
        await plant(plain_store)
        keys_before = await sealed_app.database["data_keys"].count_documents({})
        files_before = sorted(p.name for p in vault.rglob("*"))
        async with Client(server(sealed_app, tenant="sealed")) as client:
            found = await call(client, "search_conversations", {"query": "lisbon"})
            assert [h["task_id"] for h in found["hits"]] == [sealed.id]
            read = await call(client, "read_conversation", {"task_id": sealed.id})
            assert [m["text"] for m in read["messages"]] == ["a sealed lisbon secret"]
            assert (await call(client, "list_conversations", {}))["conversations"][0][
                "title"
            ] == "private"
        async with Client(server(sealed_app, tenant="acme")) as client:
            assert (await call(client, "search_conversations", {"query": "lisbon"}))["hits"]
            assert (await call(client, "list_conversations", {}))["conversations"]
        assert await sealed_app.database["data_keys"].count_documents({}) == keys_before
        assert sorted(p.name for p in vault.rglob("*")) == files_before
        # the application without a keyring still writes acme: it was not sealed
        await plain_store.scoped("acme").tasks.create(owner="ann", title="after the server")
        async with Client(server(plain_store, tenant="sealed")) as client:
            for tool, arguments in (
                ("search_conversations", {"query": "lisbon"}),
                ("read_conversation", {"task_id": sealed.id}),
            ):
                assert (await refused(client, tool, arguments))["error"] == "KeyringRequired"
        assert sealed_app.keyring is not None
        await sealed_app.keyring.shred("sealed")
        async with Client(server(sealed_app, tenant="sealed")) as client:
            for tool, arguments in (
                ("search_conversations", {"query": "lisbon"}),
                ("read_conversation", {"task_id": sealed.id}),
                ("list_conversations", {}),
            ):
                assert (await refused(client, tool, arguments))["error"] == "KeyShredded"


def test_a_bad_tenant_or_owner_is_refused_before_serving() -> None:
    async def body() -> None:
        async with await mindstore.connect("embedded") as store:
            with pytest.raises(errors.ValidationError, match="tenant"):
                server(store, tenant="acme/../x")
            with pytest.raises(errors.ValidationError, match="owner"):
                server(store, tenant="acme", owner="$where")

    asyncio.run(body())


def test_an_unexpected_failure_is_an_internal_error_without_details(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("secret internals /etc/passwd")

    async def body() -> None:
        async with await mindstore.connect("embedded") as store:
            monkeypatch.setattr(reads.ConversationReads, "list_tasks", broken)
            async with Client(server(store, tenant="acme")) as client:
                error = await refused(client, "list_conversations", {})
                assert error == {
                    "error": "InternalError", "argument": None,
                    "message": "the tool failed; the server's log says why",
                }  # fmt: skip

    asyncio.run(body())


async def test_every_tool_writes_nothing_but_the_search_index(
    store: Store, planted: Planted
) -> None:
    """Recorded commands of a session calling every tool: the only writes are to the
    search index's collections (`search_*`), which a search brings up to date."""
    task_id = next(iter(planted.ids("acme", "ann")))
    async with acme_client(store) as client:
        with observe_all() as log:
            await call(client, "search_conversations", {"query": "lisbon", "limit": 1})
            await every_page(
                client, "read_conversation", {"task_id": task_id, "limit": 1}, "messages"
            )
            await every_page(client, "list_conversations", {"limit": 1}, "conversations")
        assert log.names()
        writes = [c for c in log if c.name.lower() in WRITE_COMMANDS]
        assert writes and {str(c.collection) for c in writes} <= {
            SEARCH_ENTRIES, SEARCH_POSTINGS, SEARCH_TASKS,
        }  # fmt: skip
        with observe_all() as log:  # the index is current now: a second search writes nothing
            await call(client, "search_conversations", {"query": "hotel"})
            await call(client, "read_conversation", {"task_id": task_id, "last": 1})
        assert not [c for c in log if c.name.lower() in WRITE_COMMANDS]


def test_the_tools_reach_the_store_through_reads_only() -> None:
    """`ConversationReads` has these reads and no other public attribute (no write verb,
    no way to the view it wraps)."""
    public = {name for name in dir(reads.ConversationReads) if not name.startswith("_")}
    assert public == {"search", "task", "read_range", "list_tasks", "memories", "owner", "tenant"}
    assert reads.ConversationReads.__slots__ == ("__view", "owner", "tenant")


async def test_a_page_of_messages_reads_only_its_messages(store: Store) -> None:
    """A page deep in a long conversation costs no more round trips and about the same
    bytes as the first one: only its range is read."""
    texts = [f"message {i} " + "x" * 200 for i in range(600)]
    record = await store.scoped("acme").tasks.create(messages=[said("user", t) for t in texts])
    async with acme_client(store) as client:
        costs = {}
        for start in (0, 580):
            with observe_all() as log:
                page = await call(client, "read_conversation",
                                  {"task_id": record.id, "start": start, "limit": 20})  # fmt: skip
            assert [m["text"] for m in page["messages"]] == texts[start : start + 20]
            costs[start] = (log.round_trips, log.bytes_received)
        assert costs[580][0] <= costs[0][0] <= 6  # the first read also learns the paging
        assert costs[580][1] < costs[0][1] * 1.5 + 4096, costs
        assert costs[0][1] < 600 * 200 / 2, costs  # far less than the conversation


async def test_concurrent_calls_and_a_concurrent_writer(store: Store, planted: Planted) -> None:
    """Calls of two servers run at once answer what each answers alone, and a conversation
    read a page at a time while the application appends to it gives the window the first
    page chose, in order, whatever was appended meanwhile."""
    texts = [f"turn {i}" for i in range(60)]
    record = await store.scoped("acme").tasks.create(
        owner="ann", messages=[said("user", t) for t in texts]
    )
    calls = [
        ("search_conversations", {"query": "lisbon"}),
        ("list_conversations", {}),
        ("read_conversation", {"task_id": record.id, "last": 5}),
    ]
    async with (
        Client(server(store, tenant="acme")) as whole,
        Client(server(store, tenant="acme", owner="ann")) as ann,
    ):
        alone = [await call(c, tool, args) for c in (whole, ann) for tool, args in calls]
        together = await asyncio.gather(
            *(call(c, tool, args) for c in (whole, ann) for tool, args in calls)
        )
        assert list(together) == alone

        async def append() -> None:
            for i in range(30):
                await store.scoped("acme").tasks.add_human_message(record.id, f"late {i}")
                await asyncio.sleep(0)

        async def page_through() -> list[dict[str, Any]]:
            return await every_page(
                ann, "read_conversation", {"task_id": record.id, "last": 60, "limit": 7}, "messages"
            )

        read, _ = await asyncio.gather(page_through(), append())
        everything = texts + [f"late {i}" for i in range(30)]
        first = read[0]["index"]  # the last 60 when the first page was read
        assert [m["index"] for m in read] == list(range(first, first + 60))
        assert [m["text"] for m in read] == everything[first : first + 60]
