"""`mindstore import --from openai-agents`: a real `SQLiteSession` file, read back through
`MindstoreSession` and compared with what the SDK's own session returns."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from agents.memory.sqlite_session import SQLiteSession

from mindstore.errors import Conflict, ValidationError
from mindstore.imports import UnreadableSource, import_from
from mindstore.integrations import task_id_for
from mindstore.integrations.openai_agents import MindstoreSession
from mindstore.store import Store
from test_import_support import crash_then_resume, store_bytes

KIND = "openai-agents"

SESSIONS: dict[str, list[dict[str, Any]]] = {
    "trip-lisbon": [
        {"role": "user", "content": "Find me a hotel in Lisbon for May 3-6."},
        {"type": "function_call", "call_id": "call_1", "name": "search_hotels",
         "arguments": '{"city": "Lisbon", "from": "2027-05-03", "to": "2027-05-06"}'},
        {"type": "function_call_output", "call_id": "call_1",
         "output": '[{"name": "Casa Alfama", "price": 142}]'},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "Casa Alfama has rooms at 142 EUR.",
                      "annotations": []}]},
        {"role": "user", "content": "Book it."},
    ],
    "support/case 7": [
        {"role": "user", "content": "My invoice shows two charges."},
        {"type": "message", "role": "assistant", "id": "msg_2", "status": "completed",
         "content": [{"type": "output_text", "text": "I see a duplicate; refunding one.",
                      "annotations": []}]},
    ],
    "single": [{"role": "user", "content": "hi"}],
}  # fmt: skip


async def build_source(path: Path) -> dict[str, list[Any]]:
    """The sessions written with the SDK; what the SDK reads back for each."""
    expected = {}
    for session_id, items in SESSIONS.items():
        session = SQLiteSession(session_id, str(path))
        for start in range(0, len(items), 2):  # as a run adds them: a few at a time
            await session.add_items(items[start : start + 2])
        expected[session_id] = await session.get_items()
        session.close()
    return expected


async def served(store: Store, tenant: str, owner: str | None = None) -> dict[str, list[Any]]:
    view = store.scoped(tenant, owner)
    return {sid: await MindstoreSession(sid, view).get_items() for sid in SESSIONS}


async def test_every_session_reads_back_as_the_sdk_returns_it(store: Store, tmp_path: Path) -> None:
    expected = await build_source(tmp_path / "agents.db")
    source = (tmp_path / "agents.db").read_bytes()
    receipt = await import_from(store, KIND, tmp_path / "agents.db", tenant="acme")
    assert (tmp_path / "agents.db").read_bytes() == source  # read, never written
    assert await served(store, "acme") == expected
    items = sum(len(v) for v in expected.values())
    assert receipt.read == {"conversations": 3, "messages": items}
    assert receipt.written == {"conversations": 3, "messages": items}
    assert receipt.verified == 3 and receipt.unchanged == 0
    assert receipt.read_sha256 == receipt.written_sha256
    assert receipt.conversations == tuple(sorted(SESSIONS))
    # the adapter's own rule names the tasks: mindstore's API finds them
    record = await store.scoped("acme").tasks.get(task_id_for("support/case 7"))
    assert record.owner is None


async def test_a_second_run_writes_nothing(store: Store, tmp_path: Path) -> None:
    await build_source(tmp_path / "agents.db")
    first = await import_from(store, KIND, tmp_path / "agents.db", tenant="acme")
    before = await store_bytes(store)
    second = await import_from(store, KIND, tmp_path / "agents.db", tenant="acme")
    assert await store_bytes(store) == before
    assert second.written == {"conversations": 0, "messages": 0}
    assert second.unchanged == 3
    assert (second.read_sha256, second.written_sha256) == (first.read_sha256, first.written_sha256)


async def test_a_crash_at_any_write_then_a_rerun_completes_without_doubles(
    store: Store, tmp_path: Path
) -> None:
    expected = await build_source(tmp_path / "agents.db")

    async def run(hook: Any, tenant: str) -> Any:
        return await import_from(store, KIND, tmp_path / "agents.db", tenant=tenant,
                                 on_step=hook)  # fmt: skip

    async def check(tenant: str) -> None:
        assert await served(store, tenant) == expected

    assert await crash_then_resume(run, check) == 3


async def test_the_source_grew_since_the_last_import(store: Store, tmp_path: Path) -> None:
    """A session with more items than the last run imported gets the new ones only."""
    path = tmp_path / "agents.db"
    await build_source(path)
    await import_from(store, KIND, path, tenant="acme")
    session = SQLiteSession("single", str(path))
    await session.add_items([{"role": "user", "content": "still there?"}])
    expected = await session.get_items()
    session.close()
    receipt = await import_from(store, KIND, path, tenant="acme")
    assert receipt.written == {"conversations": 1, "messages": 1}
    assert await MindstoreSession("single", store.scoped("acme")).get_items() == expected


async def test_a_dry_run_writes_nothing(store: Store, tmp_path: Path) -> None:
    await build_source(tmp_path / "agents.db")
    before = await store_bytes(store)
    receipt = await import_from(store, KIND, tmp_path / "agents.db", tenant="acme", dry_run=True)
    assert await store_bytes(store) == before
    assert receipt.written["conversations"] == 3 and receipt.written_sha256 is None


async def test_owners_given_or_taken_from_a_field(store: Store, tmp_path: Path) -> None:
    await build_source(tmp_path / "agents.db")
    await import_from(store, KIND, tmp_path / "agents.db", tenant="acme", owner="ana")
    assert await served(store, "acme", "ana") == await served(store, "acme")
    record = await store.scoped("acme").tasks.get("trip-lisbon")
    assert record.owner == "ana"
    await import_from(store, KIND, tmp_path / "agents.db", tenant="mapped",
                      owner_from="session_id")  # fmt: skip
    record = await store.scoped("mapped").tasks.get(task_id_for("support/case 7"))
    assert record.owner == "support/case 7"
    odd = SQLiteSession("$ops", str(tmp_path / "agents.db"))  # a session id, not an owner
    await odd.add_items([{"role": "user", "content": "hi"}])
    odd.close()
    before = await store_bytes(store)
    with pytest.raises(ValidationError, match=r"\$ops"):
        await import_from(store, KIND, tmp_path / "agents.db", tenant="other",
                          owner_from="session_id")  # fmt: skip
    with pytest.raises(ValidationError, match="user_id"):
        await import_from(store, KIND, tmp_path / "agents.db", tenant="other",
                          owner_from="user_id")  # fmt: skip
    with pytest.raises(ValidationError, match="owner"):
        await import_from(store, KIND, tmp_path / "agents.db", tenant="other", owner="$where")
    assert await store_bytes(store) == before


async def test_an_unreadable_source_is_refused_by_name(store: Store, tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    connection = sqlite3.connect(other)
    connection.execute("CREATE TABLE notes (id INTEGER, body TEXT)")
    connection.close()
    text = tmp_path / "notes.txt"
    text.write_text("not a database, " * 100)
    before = await store_bytes(store)
    for source, reason in [(tmp_path / "missing.db", "no such file"),
                           (text, "not a SQLite database"),
                           (other, "no 'agent_sessions' table")]:  # fmt: skip
        with pytest.raises(UnreadableSource, match=reason) as caught:
            await import_from(store, KIND, source, tenant="acme")
        assert str(source) in str(caught.value)
    assert await store_bytes(store) == before
    assert other.read_bytes()[:16] == b"SQLite format 3\x00"
    with sqlite3.connect(other) as connection:  # the wrong file was not given the SDK's tables
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    assert tables == {"notes"}


async def test_a_different_conversation_under_the_id_is_a_conflict(
    store: Store, tmp_path: Path
) -> None:
    await build_source(tmp_path / "agents.db")
    await MindstoreSession("single", store.scoped("acme")).add_items(
        [{"role": "user", "content": "something else"}]
    )
    before = await store_bytes(store)
    with pytest.raises(Conflict, match="single"):
        await import_from(store, KIND, tmp_path / "agents.db", tenant="acme")
    # sessions sort before "single" ("s" < "t") were imported; the conflicting one is intact
    assert await MindstoreSession("single", store.scoped("acme")).get_items() == [
        {"role": "user", "content": "something else"}
    ]
    assert "tasks" in before


# -- MongoDBSession ----------------------------------------------------------------------


async def test_mongodb_sessions_read_back_as_the_sdk_returns_them(store: Store) -> None:
    """The SDK's `MongoDBSession` writes its batches into the embedded backend's client (an
    in-memory MongoDB with `AsyncMongoClient`'s interface); each session reads back
    through `MindstoreSession` as the SDK's session returns it."""
    from agents.extensions.memory.mongodb_session import MongoDBSession

    from mindstore.backends.embedded import EmbeddedClient
    from mindstore.imports import MongoSource

    client = EmbeddedClient()
    expected = {}
    for session_id, items in SESSIONS.items():
        session = MongoDBSession(session_id, client=client, database="agents")
        for start in range(0, len(items), 2):  # batches of two, as runs add them
            await session.add_items(items[start : start + 2])
        expected[session_id] = await session.get_items()
    await MongoDBSession("single", client=client, database="agents").pop_item()
    expected["single"] = []
    source = MongoSource(client, "agents", "agent_messages")
    receipt = await import_from(store, KIND, source, tenant="acme")
    assert await served(store, "acme") == expected
    assert receipt.read == {"conversations": 3, "messages": 7}
    # a session left empty (its one item popped) has nothing to bring: no task is made
    assert receipt.written == {"conversations": 2, "messages": 7} and receipt.unchanged == 1
    again = await import_from(store, KIND, source, tenant="acme")
    assert again.written == {"conversations": 0, "messages": 0} and again.unchanged == 3

    async def run(hook: Any, tenant: str) -> Any:
        return await import_from(store, KIND, source, tenant=tenant, on_step=hook)

    async def check(tenant: str) -> None:
        assert await served(store, tenant) == expected

    assert await crash_then_resume(run, check) == 2
    before = await store_bytes(store)
    with pytest.raises(UnreadableSource, match="no 'nope' collection"):
        await import_from(store, KIND, MongoSource(client, "agents", "nope"), tenant="t")
    assert await store_bytes(store) == before
