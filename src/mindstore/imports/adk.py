"""`adk`: Google ADK's `DatabaseSessionService` (a SQLAlchemy URL).

Every session of the database (each app's `list_sessions`, then `get_session`, through
ADK) is created in `MindstoreSessionService` with its id, app and user, and its events are
appended in order, each with its own id, timestamp, author, content and actions; the
state deltas they carry rebuild the session, `app:` and `user:` state as ADK applied them
(the session is created holding the source's final state, which the deltas then reach
again). The owner is the adapter's rule: the session's user (`owner_of(user_id)`).

Not carried: the session's creation time, and its last update time, which mindstore's
service gives as its last event's time; `temp:` state (ADK never stores it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from google.adk.events.event import Event
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.session import Session
from sqlalchemy import text

from mindstore.imports.driver import Conversation, prefix_rest, text_source
from mindstore.imports.mongo_sources import MongoSource
from mindstore.imports.sql_sources import open_checked
from mindstore.integrations.adk import MindstoreSessionService
from mindstore.store import TenantStore

__all__ = ["KIND", "AdkKind"]

TABLES = {
    "sessions": {"app_name", "user_id", "id", "state"},
    "events": {"id", "app_name", "user_id", "session_id"},
    "app_states": {"app_name", "state"},
    "user_states": {"app_name", "user_id", "state"},
}


def conversation_id(app_name: str, user_id: str, session_id: str) -> str:
    """One id for an ADK session, which ADK names by (app, user, session)."""
    return f"{app_name}/{user_id}/{session_id}"


def canonical(session: Session) -> dict[str, Any]:
    """What `get_session` returns, as JSON: ids, merged state and every event (not the
    last update time, see the module doc)."""
    return {
        "app_name": session.app_name,
        "user_id": session.user_id,
        "id": session.id,
        "state": session.state,
        "events": [event.model_dump(mode="json") for event in session.events],
    }


class AdkKind:
    name = "adk"
    owner_fields: tuple[str, ...] = ("user_id",)
    owns = True
    """The adapter names each session's owner (its user), so `owner` cannot be given."""

    async def read(self, given: str | MongoSource) -> list[Conversation]:
        source = text_source(self.name, given)
        engine, _ = await open_checked(self.name, source, TABLES)
        try:
            async with engine.connect() as connection:
                apps = [row[0] for row in await connection.execute(
                    text("SELECT DISTINCT app_name FROM sessions ORDER BY app_name")
                )]  # fmt: skip
            service = DatabaseSessionService(db_engine=engine)
            conversations = []
            for app_name in apps:
                listed = await service.list_sessions(app_name=app_name)
                for brief in listed.sessions:
                    session = await service.get_session(
                        app_name=app_name, user_id=brief.user_id, session_id=brief.id
                    )
                    if session is None:  # deleted meanwhile
                        continue
                    conversations.append(Conversation(
                        id=conversation_id(app_name, session.user_id, session.id),
                        canonical=canonical(session),
                        counts={"messages": len(session.events)}, payload=session,
                        fields={"user_id": session.user_id, "app_name": app_name},
                    ))  # fmt: skip
        finally:
            await engine.dispose()
        return conversations

    def writer(self, view: TenantStore) -> SessionWriter:
        return SessionWriter(view)


class SessionWriter:
    def __init__(self, view: TenantStore) -> None:
        self.service = MindstoreSessionService(view)

    async def _get(self, source: Session) -> Session | None:
        return await self.service.get_session(
            app_name=source.app_name, user_id=source.user_id, session_id=source.id
        )

    async def served(self, conversation: Conversation) -> Any:
        session = await self._get(conversation.payload)
        return None if session is None else canonical(session)

    async def write(self, conversation: Conversation, step: Callable[[str], None]) -> Counter[str]:
        source: Session = conversation.payload
        written: Counter[str] = Counter()
        session = await self._get(source)
        if session is None:
            session = await self.service.create_session(
                app_name=source.app_name, user_id=source.user_id,
                state=dict(source.state), session_id=source.id,
            )  # fmt: skip
            step("session")
        dumped = [event.model_dump(mode="json") for event in source.events]
        stored = [event.model_dump(mode="json") for event in session.events]
        rest = prefix_rest(stored, dumped, f"adk session {conversation.id!r}")
        for event in source.events[len(source.events) - len(rest) :]:
            await self.service.append_event(session, Event.model_validate(event.model_dump()))
            written["messages"] += 1
            step("event")
        return written


KIND = AdkKind()
