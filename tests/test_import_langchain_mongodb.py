"""`mindstore import --from langchain-mongodb`: `MongoDBChatMessageHistory` documents
written by the real library (langchain-mongodb) into an in-memory MongoDB (mongomock, the
embedded backend's engine), read back through `MindstoreChatMessageHistory` and compared
with what the library's own history returns, as LangChain messages."""

from __future__ import annotations

from typing import Any

import mongomock
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_mongodb.chat_message_histories import MongoDBChatMessageHistory

from mindstore.imports import MongoSource, UnreadableSource, import_from
from mindstore.integrations.langchain import MindstoreChatMessageHistory
from mindstore.store import Store
from test_import_support import crash_then_resume, store_bytes

KIND = "langchain-mongodb"
SESSIONS = ("case-1", "case 2/ana", "trip")


def messages(session: str) -> list[Any]:
    call = {"name": "order_status", "args": {"order": "A-17"}, "id": "call_1"}
    return [
        SystemMessage("You are a support agent."),
        HumanMessage(f"Where is order A-17? ({session})"),
        AIMessage("", tool_calls=[call], response_metadata={"model_name": "gpt-x"}, id="m-3"),
        ToolMessage('{"status": "shipped"}', tool_call_id="call_1"),
        AIMessage("It shipped yesterday.", usage_metadata={"input_tokens": 40,
                                                         "output_tokens": 6, "total_tokens": 46}),
    ]  # fmt: skip


def build_source() -> tuple[Any, dict[str, Any]]:
    client: Any = mongomock.MongoClient()
    found = {}
    for session in SESSIONS:
        history = MongoDBChatMessageHistory(None, session, "chat_history", "message_store",
                                            client=client)  # fmt: skip
        history.add_messages(messages(session) if session != "trip" else messages(session)[:2])
        found[session] = history.messages
    return client, found


async def served(store: Store, tenant: str) -> dict[str, Any]:
    view = store.scoped(tenant)
    return {s: await MindstoreChatMessageHistory(s, view).aget_messages() for s in SESSIONS}


async def test_every_session_reads_back_as_the_library_returns_it(store: Store) -> None:
    client, expected = build_source()
    source = MongoSource(client, "chat_history", "message_store")
    receipt = await import_from(store, KIND, source, tenant="acme")
    assert await served(store, "acme") == expected
    assert expected["case-1"][2].tool_calls[0]["name"] == "order_status"
    assert receipt.read == {"conversations": 3, "messages": 12} == receipt.written
    assert receipt.source == "mongodb database 'chat_history' collection 'message_store'"
    assert receipt.read_sha256 == receipt.written_sha256


async def test_rerun_dry_run_crash_and_bad_sources(store: Store) -> None:
    client, expected = build_source()
    source = MongoSource(client, "chat_history", "message_store")
    before = await store_bytes(store)
    dry = await import_from(store, KIND, source, tenant="acme", dry_run=True)
    assert dry.written == {"conversations": 3, "messages": 12}
    client["chat_history"]["other"].insert_one({"session": "x", "text": "hi"})
    for bad, reason in [(MongoSource(client, "chat_history", "nope"), "no such collection"),
                        (MongoSource(client, "chat_history", "other"), "lack SessionId"),
                        ("mongodb://localhost:1/", "names no database"),
                        ("/tmp/history.db", "not a MongoDB URI")]:  # fmt: skip
        with pytest.raises(UnreadableSource, match=reason):
            await import_from(store, KIND, bad, tenant="acme")
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

    assert await crash_then_resume(run, check) == 3
