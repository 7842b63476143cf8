"""`mindstore import --from llamaindex`: a real `SQLAlchemyChatStore` (SQLite) with active
and archived messages, text and image blocks, read back through `MindstoreChatStore` and
compared with what LlamaIndex's own store returns."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, MessageRole, TextBlock
from llama_index.core.storage.chat_store.base_db import MessageStatus
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from mindstore.imports import UnreadableSource, import_from
from mindstore.integrations.llamaindex import MindstoreChatStore
from mindstore.store import Store
from test_import_support import crash_then_resume, store_bytes

KIND = "llamaindex"
KEYS = ("trip-1", "support/7", "notes")
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(32))


def chat(key: str) -> list[ChatMessage]:
    return [
        ChatMessage(role=MessageRole.SYSTEM, content="You plan trips."),
        ChatMessage(role=MessageRole.USER, content=f"Plan {key}"),
        ChatMessage(role=MessageRole.ASSISTANT, content="Day 1: Alfama.",
                    additional_kwargs={"tool_calls": [{"id": "c1", "name": "maps"}]}),
        ChatMessage(role=MessageRole.USER, blocks=[
            TextBlock(text="this view?"), ImageBlock(image=PNG, image_mimetype="image/png")]),
        ChatMessage(role=MessageRole.ASSISTANT, content="That is Graça."),
    ]  # fmt: skip


def url(path: Path | str) -> str:
    """A SQLite file's URL; a URL (the PostgreSQL tests') as it is."""
    return path if isinstance(path, str) else f"sqlite+aiosqlite:///{path}"


async def build_source(path: Path | str, table: str = "llama_index_memory") -> dict[str, Any]:
    store = SQLAlchemyChatStore(table_name=table, async_database_uri=url(path))
    for key in KEYS:
        await store.add_messages(key, chat(key))
        if key != "notes":
            await store.archive_oldest_messages(key, 2)  # what Memory does as it fills
    found = {key: {s: await store.get_messages(key, status=s) for s in MessageStatus}
             for key in KEYS}  # fmt: skip
    await store._async_engine.dispose()  # type: ignore[union-attr]
    return found


async def served(store: Store, tenant: str) -> dict[str, Any]:
    chats = MindstoreChatStore(store.scoped(tenant))
    return {key: {s: await chats.get_messages(key, status=s) for s in MessageStatus}
            for key in KEYS}  # fmt: skip


async def test_every_chat_reads_back_as_the_sql_store_returns_it(
    store: Store, tmp_path: Path
) -> None:
    expected = await build_source(tmp_path / "chats.db")
    file = (tmp_path / "chats.db").read_bytes()
    receipt = await import_from(store, KIND, url(tmp_path / "chats.db"), tenant="acme")
    assert (tmp_path / "chats.db").read_bytes() == file  # read, never written
    assert await served(store, "acme") == expected
    assert expected["trip-1"][MessageStatus.ARCHIVED][0].content == "You plan trips."
    assert isinstance(expected["trip-1"][MessageStatus.ACTIVE][1].blocks[1], ImageBlock)
    assert receipt.read == {"conversations": 3, "messages": 15} == receipt.written
    assert receipt.read_sha256 == receipt.written_sha256
    mine = MindstoreChatStore(store.scoped("acme"))
    assert sorted(await mine.get_keys()) == sorted(KEYS)
    assert await mine.get_messages("trip-1", status=None) == chat("trip-1")


async def test_rerun_dry_run_and_crash(store: Store, tmp_path: Path) -> None:
    expected = await build_source(tmp_path / "chats.db")
    source = url(tmp_path / "chats.db")
    before = await store_bytes(store)
    dry = await import_from(store, KIND, source, tenant="acme", dry_run=True)
    assert dry.written == {"conversations": 3, "messages": 15}
    assert await store_bytes(store) == before
    await import_from(store, KIND, source, tenant="acme")
    before = await store_bytes(store)
    again = await import_from(store, KIND, source, tenant="acme")
    assert again.written == {"conversations": 0, "messages": 0}
    assert await store_bytes(store) == before

    async def run(hook: Any, tenant: str) -> Any:
        return await import_from(store, KIND, source, tenant=tenant, on_step=hook)

    async def check(tenant: str) -> None:
        assert await served(store, tenant) == expected

    assert await crash_then_resume(run, check) == 5


async def test_tables_named_and_unreadable_sources(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "two.db"
    expected = await build_source(path, "memory_a")
    await build_source(path, "memory_b")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE notes (id INTEGER)").close()
    before = await store_bytes(store)
    for bad, reason in [(url(path), "memory_a, memory_b"), (url(path) + "#nope", "'nope'"),
                        (url(other), "chat tables: none"),
                        (url(tmp_path / "none.db"), "no such file")]:  # fmt: skip
        with pytest.raises(UnreadableSource, match=reason):
            await import_from(store, KIND, bad, tenant="acme")
    assert await store_bytes(store) == before
    receipt = await import_from(store, KIND, url(path) + "#memory_a", tenant="acme", owner="ana")
    assert receipt.verified == 3
    assert await served(store, "acme") == expected
    assert (await store.scoped("acme").tasks.list()).items[0].owner == "ana"


async def test_two_frameworks_naming_one_conversation_alike_conflict(
    store: Store, tmp_path: Path
) -> None:
    """Every adapter maps a conversation id to a task by one rule, so a LlamaIndex chat
    and an OpenAI Agents session both called `trip-1` would be one task: the second
    import stops with `Conflict` naming it, and leaves the first one as it was."""
    from agents.memory.sqlite_session import SQLiteSession

    from mindstore.errors import Conflict
    from mindstore.integrations.openai_agents import MindstoreSession

    agents = SQLiteSession("trip-1", str(tmp_path / "agents.db"))
    await agents.add_items([{"role": "user", "content": "Lisbon in May?"}])
    agents.close()
    await import_from(store, "openai-agents", tmp_path / "agents.db", tenant="acme")
    await build_source(tmp_path / "chats.db")
    with pytest.raises(Conflict, match="trip-1"):
        await import_from(store, KIND, url(tmp_path / "chats.db"), tenant="acme")
    assert await MindstoreSession("trip-1", store.scoped("acme")).get_items() == [
        {"role": "user", "content": "Lisbon in May?"}
    ]
    receipt = await import_from(store, KIND, url(tmp_path / "chats.db"), tenant="chats")
    assert receipt.verified == 3  # another tenant holds them apart
