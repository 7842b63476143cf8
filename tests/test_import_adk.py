"""`mindstore import --from adk`: a real `DatabaseSessionService` (SQLite through
SQLAlchemy) with sessions, events, session, app and user state, read back through
`MindstoreSessionService` and compared with what ADK's own service returns."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.genai import types

from mindstore.errors import ValidationError
from mindstore.imports import UnreadableSource, import_from
from mindstore.integrations.adk import MindstoreSessionService
from mindstore.store import Store
from test_import_support import crash_then_resume, store_bytes

KIND = "adk"
SESSIONS = [("trips", "ana", "s-1"), ("trips", "ana", "s-2"), ("trips", "bo", "s-1"),
            ("support", "bo", "case/9")]  # fmt: skip


def user(words: str, delta: dict[str, Any] | None = None, when: float = 0.0) -> Event:
    return Event(
        author="user",
        timestamp=when,
        actions=EventActions(state_delta=delta or {}),
        content=types.Content(role="user", parts=[types.Part(text=words)]),
    )


def model_call(when: float) -> Event:
    call = types.FunctionCall(id="fc-1", name="search_hotels", args={"city": "Lisbon"})
    return Event(
        author="planner",
        timestamp=when,
        invocation_id="inv-1",
        content=types.Content(role="model", parts=[types.Part(function_call=call)]),
    )


def tool_result(when: float) -> Event:
    response = types.FunctionResponse(
        id="fc-1", name="search_hotels", response={"hotels": ["Casa Alfama"], "price": 142}
    )
    return Event(
        author="planner",
        timestamp=when,
        invocation_id="inv-1",
        content=types.Content(role="user", parts=[types.Part(function_response=response)]),
    )


def answer(words: str, when: float, delta: dict[str, Any] | None = None) -> Event:
    return Event(
        author="planner",
        timestamp=when,
        invocation_id="inv-1",
        actions=EventActions(state_delta=delta or {}),
        content=types.Content(role="model", parts=[types.Part(text=words)]),
    )


def url(path: Path | str) -> str:
    """A SQLite file's URL; a URL (the PostgreSQL tests') as it is."""
    return path if isinstance(path, str) else f"sqlite+aiosqlite:///{path}"


async def build_source(path: Path | str) -> dict[str, Any]:
    """The sessions written with ADK's service; what its `get_session` returns for each."""
    service = DatabaseSessionService(url(path))
    try:
        t = 1_800_000_000.0
        for app, owner, sid in SESSIONS:
            session = await service.create_session(
                app_name=app, user_id=owner, session_id=sid,
                state={"topic": sid, "app:region": "eu", f"user:name_{owner}": owner.title()},
            )  # fmt: skip
            events = [
                user(f"Find a hotel ({sid})", {"turns": 1}, t),
                model_call(t + 1),
                tool_result(t + 2),
                answer("Casa Alfama, 142 EUR.", t + 3, {"turns": 2, "user:last": sid}),
            ]
            if sid == "s-2":
                events = events[:1]
            for event in events:
                await service.append_event(session, event)
            t += 10
        found = {}
        for app, owner, sid in SESSIONS:
            got = await service.get_session(app_name=app, user_id=owner, session_id=sid)
            assert got is not None
            found[f"{app}/{owner}/{sid}"] = got
        return found
    finally:
        await service.close()


def as_read(session: Any) -> dict[str, Any]:
    return {"id": session.id, "app": session.app_name, "user": session.user_id,
            "state": session.state, "events": session.events}  # fmt: skip


async def served(store: Store, tenant: str) -> dict[str, Any]:
    service = MindstoreSessionService(store.scoped(tenant))
    found = {}
    for app, owner, sid in SESSIONS:
        got = await service.get_session(app_name=app, user_id=owner, session_id=sid)
        found[f"{app}/{owner}/{sid}"] = as_read(got)
    return found


async def test_every_session_reads_back_as_adk_returns_it(store: Store, tmp_path: Path) -> None:
    source = await build_source(tmp_path / "adk.db")
    file = (tmp_path / "adk.db").read_bytes()
    receipt = await import_from(store, KIND, url(tmp_path / "adk.db"), tenant="acme")
    assert (tmp_path / "adk.db").read_bytes() == file  # read, never written
    assert await served(store, "acme") == {k: as_read(v) for k, v in source.items()}
    # ADK's objects: events (content, function calls and responses, actions) compare equal
    lisbon = source["trips/bo/s-1"]
    assert lisbon.events[1].content.parts[0].function_call.name == "search_hotels"
    assert lisbon.state["user:last"] == "s-1" and lisbon.state["app:region"] == "eu"
    events = sum(len(s.events) for s in source.values())
    assert receipt.read == {"conversations": 4, "messages": events} == receipt.written
    assert receipt.verified == 4 and receipt.read_sha256 == receipt.written_sha256
    listed = (await store.scoped("acme").tasks.list(limit=100)).items
    sessions = [r for r in listed if "session_id" in r.metadata]
    assert len(sessions) == 4  # the adapter's rule: a session belongs to its user
    assert all(r.owner == r.metadata["user_id"] for r in sessions)


async def test_a_second_run_and_a_dry_run_write_nothing(store: Store, tmp_path: Path) -> None:
    await build_source(tmp_path / "adk.db")
    before = await store_bytes(store)
    dry = await import_from(store, KIND, url(tmp_path / "adk.db"), tenant="acme", dry_run=True)
    assert await store_bytes(store) == before and dry.written["conversations"] == 4
    await import_from(store, KIND, url(tmp_path / "adk.db"), tenant="acme")
    before = await store_bytes(store)
    again = await import_from(store, KIND, url(tmp_path / "adk.db"), tenant="acme")
    assert await store_bytes(store) == before
    assert again.written == {"conversations": 0, "messages": 0} and again.unchanged == 4


async def test_a_crash_at_any_write_then_a_rerun_completes_without_doubles(
    store: Store, tmp_path: Path
) -> None:
    source = await build_source(tmp_path / "adk.db")
    expected = {k: as_read(v) for k, v in source.items()}

    async def run(hook: Any, tenant: str) -> Any:
        return await import_from(store, KIND, url(tmp_path / "adk.db"), tenant=tenant,
                                 on_step=hook)  # fmt: skip

    async def check(tenant: str) -> None:
        assert await served(store, tenant) == expected

    assert await crash_then_resume(run, check, every=3) == 4 + 13


async def test_owners_and_unreadable_sources(store: Store, tmp_path: Path) -> None:
    await build_source(tmp_path / "adk.db")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE sessions (id TEXT)").close()
    before = await store_bytes(store)
    with pytest.raises(ValidationError, match="owned by their user_id"):
        await import_from(store, KIND, url(tmp_path / "adk.db"), tenant="acme", owner="ana")
    for bad, reason in [(url(tmp_path / "none.db"), "no such file"),
                        (url(other), "lacks app_name"), ("not a url", "not a SQLAlchemy URL"),
                        ("sqlite+aiosqlite://", "in-memory")]:  # fmt: skip
        with pytest.raises(UnreadableSource, match=reason):
            await import_from(store, KIND, bad, tenant="acme")
    assert await store_bytes(store) == before
    assert not (tmp_path / "none.db").exists()
    with sqlite3.connect(other) as connection:  # ADK's reader never saw the wrong file
        assert {r[0] for r in connection.execute("SELECT name FROM sqlite_master")} == {"sessions"}
    receipt = await import_from(store, KIND, url(tmp_path / "adk.db"), tenant="acme",
                                owner_from="user_id")  # fmt: skip
    assert receipt.verified == 4
