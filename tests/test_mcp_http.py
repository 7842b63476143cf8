"""The MCP server over real streamable HTTP (`mindstore.mcp.http_app` served by uvicorn on a
free localhost port) driven by the official SDK's streamable-HTTP client: each bearer
credential reaches its own tenant and owner only, a missing or wrong token is 401, a
session opened by one credential is not reachable with another's token, and the local
binding refuses a foreign `Host`."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

pytest.importorskip("mcp")

import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mindstore.errors import ConfigurationError
from mindstore.mcp import Credentials, credential, credentials_from_json, http_app
from mindstore.store import Store
from test_mcp import TOOL_NAMES, Planted, call, every_page, plant, refused, stored_bytes

TOKENS = {
    "acme-all": ("acme-whole-tenant-token-0001", "acme", None),
    "acme-ann": ("acme-ann-only-token-00000002", "acme", "ann"),
    "globex": ("globex-whole-tenant-token-03", "globex", None),
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def serving(store: Store) -> AsyncIterator[str]:
    """The HTTP app on a free localhost port, in this event loop; its URL."""
    allowed = Credentials(credential(name, *scope) for name, scope in TOKENS.items())
    port = free_port()
    config = uvicorn.Config(
        http_app(store, allowed), host="127.0.0.1", port=port, log_level="warning"
    )
    served = uvicorn.Server(config)
    task = asyncio.create_task(served.serve())
    try:
        for _ in range(500):
            if served.started or task.done():
                break
            await asyncio.sleep(0.01)
        assert served.started
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        served.should_exit = True
        await task


@asynccontextmanager
async def connected(url: str, name: str) -> AsyncIterator[Client]:
    token = TOKENS[name][0]
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


@pytest.fixture
async def planted(store: Store) -> Planted:
    return await plant(store)


async def test_each_credential_reaches_its_own_scope_over_http(
    store: Store, planted: Planted
) -> None:
    async with serving(store) as url:
        async with connected(url, "acme-all") as client:
            assert [t.name for t in (await client.list_tools()).tools] == TOOL_NAMES
            hits = await every_page(client, "search_conversations", {"query": "lisbon"}, "hits")
            assert {(h["task_id"], h["index"]) for h in hits} == planted.containing(
                "lisbon", "acme"
            )
            listed = await every_page(client, "list_conversations", {"limit": 1}, "conversations")
            assert {c["task_id"] for c in listed} == planted.ids("acme")
            task_id = next(iter(planted.ids("acme", "bob")))
            read = await call(client, "read_conversation", {"task_id": task_id, "last": 1})
            assert [m["text"] for m in read["messages"]] == planted.tasks[task_id][2][-1:]
        async with connected(url, "acme-ann") as client:
            hits = await every_page(client, "search_conversations", {"query": "lisbon"}, "hits")
            assert {h["owner"] for h in hits} == {"ann"}
            assert {(h["task_id"], h["index"]) for h in hits} == planted.containing(
                "lisbon", "acme", "ann"
            )
            listed = await every_page(client, "list_conversations", {}, "conversations")
            assert {c["task_id"] for c in listed} == planted.ids("acme", "ann")
            for other in planted.ids("acme", "bob") | planted.ids("globex"):
                error = await refused(client, "read_conversation", {"task_id": other})
                assert (error["error"], error["argument"]) == ("NotFound", "task_id")
            error = await refused(client, "list_conversations", {"owner": "bob"})
            assert (error["error"], error["argument"]) == ("ValidationError", "owner")
        async with connected(url, "globex") as client:
            hits = await every_page(client, "search_conversations", {"query": "lisbon"}, "hits")
            assert {h["task_id"] for h in hits} == planted.ids("globex")
            for other in planted.ids("acme"):
                error = await refused(client, "read_conversation", {"task_id": other})
                assert error["error"] == "NotFound"


async def test_hostile_calls_over_http_write_nothing(store: Store, planted: Planted) -> None:
    async with serving(store) as url, connected(url, "acme-ann") as client:
        await call(client, "search_conversations", {"query": "lisbon"})
        before = await stored_bytes(store)
        for arguments, argument in (
            ({"query": "lisbon", "limit": 10**9}, "limit"),
            ({"query": "lisbon", "owner": {"$ne": None}}, "owner"),
            ({"query": "lisbon", "tenant": "globex"}, "tenant"),
        ):
            error = await refused(client, "search_conversations", arguments)
            assert error["argument"] == argument
        error = await refused(client, "read_conversation", {"task_id": "../../globex"})
        assert error["argument"] == "task_id"
        assert await stored_bytes(store) == before


INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "probe", "version": "0"}},
}  # fmt: skip
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def bearer(name: str) -> dict[str, str]:
    return {**HEADERS, "Authorization": f"Bearer {TOKENS[name][0]}"}


def results(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response (JSON, or server-sent events)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    lines = response.text.splitlines()
    return [json.loads(line[5:]) for line in lines if line.startswith("data:") and line[5:].strip()]


async def test_no_token_or_a_wrong_one_is_401_and_a_session_stays_with_its_scope(
    store: Store, planted: Planted
) -> None:
    async with serving(store) as url, httpx2.AsyncClient() as http:
        for headers in (
            HEADERS,
            {**HEADERS, "Authorization": "Bearer not-a-token-of-anyone-here"},
            {**HEADERS, "Authorization": f"Basic {TOKENS['acme-all'][0]}"},
            {**HEADERS, "Authorization": f"Bearer {TOKENS['acme-all'][0][:-1]}"},
        ):
            answer = await http.post(url, json=INITIALIZE, headers=headers)
            assert answer.status_code == 401
            assert answer.headers["www-authenticate"].startswith("Bearer")
            assert "lisbon" not in answer.text
        opened = await http.post(url, json=INITIALIZE, headers=bearer("acme-all"))
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        headers = {
            **bearer("acme-all"),
            "mcp-session-id": session,
            "mcp-protocol-version": "2025-06-18",
        }
        assert (await http.post(url, json=ready, headers=headers)).status_code == 202
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                   "params": {"name": "list_conversations", "arguments": {}}}  # fmt: skip
        own = await http.post(url, json=listing, headers=headers)
        rows = results(own)[0]["result"]["structuredContent"]["conversations"]
        assert {r["task_id"] for r in rows} == planted.ids("acme")
        for name in ("globex", "acme-ann"):
            stolen = await http.post(
                url,
                json=listing,
                headers={**headers, "Authorization": bearer(name)["Authorization"]},
            )
            assert (stolen.status_code, stolen.json()["error"]["message"]) == (
                404,
                "Session not found",
            )
            assert not any(task_id in stolen.text for task_id in planted.ids("acme", "bob"))
        foreign = await http.post(
            url, json=INITIALIZE, headers={**bearer("acme-all"), "Host": "evil.example"}
        )
        assert foreign.status_code == 421  # the SDK's DNS-rebinding protection
        page = await http.post(
            url, json=INITIALIZE, headers={**bearer("acme-all"), "Origin": "http://evil.example"}
        )
        assert page.status_code == 403
        elsewhere = await http.post(
            url.replace("/mcp", "/other"), json=INITIALIZE, headers=bearer("acme-all")
        )
        assert elsewhere.status_code == 404


def test_credentials_follow_the_console_rules() -> None:
    with pytest.raises(ConfigurationError, match="at least 16"):
        credential("short", "tooshort", "acme")
    with pytest.raises(ConfigurationError, match="tenant"):
        credential("bad", "a-long-enough-token-0001", "acme/x")
    with pytest.raises(ConfigurationError, match="owner"):
        credential("bad", "a-long-enough-token-0001", "acme", "$where")
    with pytest.raises(ConfigurationError, match="same token"):
        Credentials([credential("a", "same-token-for-both-01", "acme"),
                     credential("b", "same-token-for-both-01", "globex")])  # fmt: skip
    with pytest.raises(ConfigurationError, match="same name"):
        Credentials([credential("a", "a-long-enough-token-0001", "acme"),
                     credential("a", "a-long-enough-token-0002", "acme")])  # fmt: skip
    with pytest.raises(ConfigurationError, match="unknown field 'tenants'"):
        credentials_from_json(
            '[{"name": "a", "token": "a-long-enough-token-0001", "tenants": "*"}]'
        )
    with pytest.raises(ConfigurationError, match="not JSON"):
        credentials_from_json("{")
    found = credentials_from_json(
        '[{"name": "a", "token": "a-long-enough-token-0001", "tenant": "acme", "owner": "ann"}]'
    )
    allowed = Credentials(found)
    assert allowed.check("a-long-enough-token-0001") == found[0]
    assert found[0].scope == ("acme", "ann")
    assert b"a-long-enough-token-0001" not in repr(found[0]).encode()
    for wrong in (None, "", "a-long-enough-token-000", "a-long-enough-token-00011"):
        assert allowed.check(wrong) is None
