"""`mindstore import --from adk|llamaindex postgresql+asyncpg://...`: the SQLAlchemy
sources of the SQLite tests (tests/test_import_adk.py, tests/test_import_llamaindex.py),
written by ADK's `DatabaseSessionService` and LlamaIndex's `SQLAlchemyChatStore` into a
real PostgreSQL server (tests/postgres_server.py) through asyncpg, imported, and read
back compared with what the framework's own store returns; a rerun writes nothing, a
crash at any write resumes, and a database without the framework's tables is refused
and left without them."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.base.llms.types import ImageBlock
from llama_index.core.storage.chat_store.base_db import MessageStatus

import test_import_adk as adk
import test_import_llamaindex as llamaindex
from mindstore.imports import UnreadableSource, import_from
from mindstore.store import Store
from postgres_server import PostgresServer
from test_import_support import crash_then_resume, store_bytes

ASYNCPG = "postgresql+asyncpg"


async def test_adk_sessions_import_from_postgres(
    store: Store, postgres_server: PostgresServer, postgres_database: str
) -> None:
    url = postgres_server.url(postgres_database, ASYNCPG)
    source = await adk.build_source(url)
    expected = {key: adk.as_read(session) for key, session in source.items()}
    rows = postgres_server.rows(postgres_database)
    receipt = await import_from(store, "adk", url, tenant="acme")
    assert postgres_server.rows(postgres_database) == rows  # read, never written
    assert await adk.served(store, "acme") == expected
    assert source["trips/bo/s-1"].state["user:last"] == "s-1"
    events = sum(len(session.events) for session in source.values())
    assert receipt.read == {"conversations": 4, "messages": events} == receipt.written
    assert events == 13 and receipt.read_sha256 == receipt.written_sha256
    before = await store_bytes(store)
    again = await import_from(store, "adk", url, tenant="acme")
    assert again.written == {"conversations": 0, "messages": 0} and again.unchanged == 4
    assert await store_bytes(store) == before

    async def run(hook: Any, tenant: str) -> Any:
        return await import_from(store, "adk", url, tenant=tenant, on_step=hook)

    async def check(tenant: str) -> None:
        assert await adk.served(store, tenant) == expected

    assert await crash_then_resume(run, check, every=5) == 4 + 13
    await _refuses(store, postgres_server, "adk", "no 'sessions' table")


async def test_llamaindex_chats_import_from_postgres(
    store: Store, postgres_server: PostgresServer, postgres_database: str
) -> None:
    url = postgres_server.url(postgres_database, ASYNCPG)
    expected = await llamaindex.build_source(url)
    rows = postgres_server.rows(postgres_database)
    receipt = await import_from(store, "llamaindex", url, tenant="acme")
    assert postgres_server.rows(postgres_database) == rows  # read, never written
    assert await llamaindex.served(store, "acme") == expected
    assert isinstance(expected["trip-1"][MessageStatus.ACTIVE][1].blocks[1], ImageBlock)
    assert receipt.read == {"conversations": 3, "messages": 15} == receipt.written
    assert receipt.read_sha256 == receipt.written_sha256
    before = await store_bytes(store)
    again = await import_from(store, "llamaindex", url, tenant="acme")
    assert again.written == {"conversations": 0, "messages": 0}
    assert await store_bytes(store) == before

    async def run(hook: Any, tenant: str) -> Any:
        return await import_from(store, "llamaindex", url, tenant=tenant, on_step=hook)

    async def check(tenant: str) -> None:
        assert await llamaindex.served(store, tenant) == expected

    assert await crash_then_resume(run, check) == 5
    await _refuses(store, postgres_server, "llamaindex", "chat tables: none")


async def _refuses(store: Store, server: PostgresServer, kind: str, no_tables: str) -> None:
    before = await store_bytes(store)
    empty = server.create_database()
    try:
        for bad, reason in [(server.url("no_such_database", ASYNCPG), "cannot read"),
                            (server.url(empty, ASYNCPG), no_tables)]:  # fmt: skip
            with pytest.raises(UnreadableSource, match=reason) as refused:
                await import_from(store, kind, bad, tenant="other")
            assert refused.value.source.startswith(f"{ASYNCPG}://")
        assert server.rows(empty) == {}  # the framework's reader never saw it
    finally:
        server.drop_database(empty)
    assert await store_bytes(store) == before
