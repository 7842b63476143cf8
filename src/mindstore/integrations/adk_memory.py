"""`MindstoreMemoryService`: Google ADK's `BaseMemoryService` on mindstore.

```python
from mindstore.integrations.adk import MindstoreMemoryService, MindstoreSessionService

acme = store.scoped("acme")
runner = Runner(agent=agent, app_name="trips", session_service=MindstoreSessionService(acme),
                memory_service=MindstoreMemoryService(acme))
```

Where things are kept: a user's memory in one app is **one task** of the tenant
(`memory_task_id(app, user)`, ``_:adk-m:<digest>``), owned by the user as their sessions
are (`adk_events.owner_of`: the user id itself when it is a name), its metadata naming app
and user. Each event added to memory is one message of it, written as the session service
writes events (`adk_events.message_for`: typed parts, the event's own fields beside them),
with the session it came from in its ``adk`` entry (an event without text, a function
call or response alone, is kept untyped: ADK matches memories on their text). So
memories are a tenant's conversations to the rest of mindstore: searched, backed up and
restored, erased with their owner, retained, redacted and shredded like any task, with no
second database.

**Exactly once per event.** A memory message's id is derived from the memory task, the
session (none for events added without one) and the event's id
(`memory_message_id`), so the store's exactly-once guard on message ids refuses a second
copy, whoever writes it. Adding is incremental: the service reads which of the given
events the task already holds, and appends the others in one guarded update
(`tasks.add_messages`: all or nothing). Two writers racing with overlapping events meet at
that guard: the one that loses reads again and appends what is still missing. What the
task holds is read once per process and memory task, then only its new end
(`_StoredIds`): re-adding a growing session after each turn reads the messages appended
since the last add and writes the new events, whatever the session's length. What a
rewind undid is not added (`live_events`), as ADK's in-memory service from 2.14.

**Search** goes through the store's search (`view.search`, BM25 over the tenant's index)
restricted to the user's memory task: the query is taken as plain words (its terms, as
the index folds them, at most 32), never as the query language's operators, so a model's
``-x``, ``role:user`` or quotes are words like any other. The ten best memories come
back, ties in the order they were added (as ADK's in-memory service orders them), each a
`MemoryEntry` of the event's content without its thought parts (`visible`), author and
time (ISO 8601, as ADK's services format it), its id the event's id. `delete_memory`
redacts a memory's messages: gone from the store and the index, its id still taken, so
it is not added again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types

from mindstore.errors import Conflict, NotFound, ValidationError, WrongType
from mindstore.integrations._derived_ids import derived_id, digest
from mindstore.integrations.adk_events import (
    MARKER,
    _key,
    check_adk_id,
    entry_of,
    event_of,
    message_for,
    owner_of,
)
from mindstore.model.base import JSON
from mindstore.model.messages import AnyMessage, MessageBase
from mindstore.search.modes import Match
from mindstore.search.query import MAX_TERMS
from mindstore.search.service import SearchHit, SearchPage
from mindstore.search.tokenize import terms
from mindstore.services.tasks import TaskService

__all__ = ["MindstoreMemoryService", "memory_message_id", "memory_task_id"]

MAX_RESULTS = 10
"""Memories a search returns: ADK's in-memory service returns its ten best."""
CANDIDATES = 50
"""Hits a search asks the store for, so that ties at the tenth place are ordered as added."""
MAX_QUERY_CHARS = 16 * 1024
"""A longer query is refused (`ValidationError`); only its first `MAX_TERMS` terms count."""
MAX_EVENTS = 10_000
"""Events one call may add."""
WRITE_BATCH = 100
"""Messages per guarded update when one add brings many (each batch is all or nothing)."""
ATTEMPTS = 16
"""Writers racing for one memory task: how many times an add reads again before `Conflict`."""
TASKS_KEPT = 1024
"""Memory tasks whose stored event ids a service keeps (the least recently used go)."""


class MemoryView(Protocol):
    """What the service uses of a store view (`store.scoped(tenant)`)."""

    @property
    def owner(self) -> str | None: ...

    @property
    def tasks(self) -> TaskService: ...

    async def search(
        self,
        query: str,
        *,
        owner: str | None = None,
        task_ids: Iterable[str] | None = None,
        limit: int = 20,
        match: Match = "any",
    ) -> SearchPage: ...


# -- names (pure) --------------------------------------------------------------------------


def memory_task_id(app_name: str, user_id: str) -> str:
    """The task that holds one user's memory in one app."""
    return _key("m", app_name, user_id)


def memory_message_id(task_id: str, session_id: str | None, event: Event) -> str:
    """The id of the message that holds `event` in a memory task: one per session (None:
    added without one) and event id, so a second add of the event matches the stored one.
    An event without an id is named by its author, time and content (as ADK's SQLite
    memory service names it)."""
    event_id = event.id or digest(
        [event.author, event.timestamp, event.content.model_dump(mode="json", exclude_none=True)
         if event.content is not None else None]
    )  # fmt: skip
    return derived_id("adk-memory", task_id, session_id or "", event_id)


def memorable(event: Event) -> bool:
    """An event memory keeps: one with content parts (ADK's services skip the others)."""
    return bool(event.content and event.content.parts)


def live_events(events: Sequence[Event]) -> list[Event]:
    """`events` without what a rewind undid: an event whose `rewind_before_invocation_id`
    names invocation X drops itself and every event back to X's first one, walking back
    from the end (so a rewind that was itself rewound undoes nothing). These are the
    events ADK still shows its agents, and those its in-memory memory service keeps from
    google-adk 2.14 on: rewound content does not come back through memory."""
    if not any(e.actions and e.actions.rewind_before_invocation_id for e in events):
        return list(events)
    first: dict[str, int] = {}
    for index, event in enumerate(events):
        if event.invocation_id:
            first.setdefault(event.invocation_id, index)
    kept: list[Event] = []
    index = len(events) - 1
    while index >= 0:
        event = events[index]
        target = event.actions.rewind_before_invocation_id if event.actions else None
        if target:
            start = first.get(target)
            if start is not None and start < index:
                index = start
        else:
            kept.append(event)
        index -= 1
    return kept[::-1]


def visible(content: types.Content) -> types.Content:
    """`content` without its thought parts: a memory is what was said, not the model's
    reasoning (ADK's services neither match nor return thoughts from google-adk 2.14)."""
    parts = [part for part in content.parts or [] if not part.thought]
    return content.model_copy(update={"parts": parts})


def query_terms(query: Any) -> list[str]:
    """The words a memory search looks for: the query's terms as the index folds them,
    each once, the first `MAX_TERMS`. Operators of the query language are not read: the
    terms hold letters and digits only.

    Raises:
        ValidationError: Not a string, longer than `MAX_QUERY_CHARS`, or holding a lone
            surrogate (no text: nothing could match it).
    """
    if not isinstance(query, str):
        raise ValidationError(f"invalid query: expected a string, got {type(query).__name__}")
    if len(query) > MAX_QUERY_CHARS:
        raise ValidationError(f"invalid query: longer than {MAX_QUERY_CHARS} characters")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"invalid query: a lone surrogate at position {exc.start} is not text"
        ) from None
    return list(dict.fromkeys(terms(query)))[:MAX_TERMS]


def timestamp_text(timestamp: float) -> str:
    """A memory's time as ADK's memory services give it (`MemoryEntry.timestamp`)."""
    return datetime.fromtimestamp(timestamp).isoformat()


def _check_events(events: Any) -> list[Event]:
    if isinstance(events, (str, bytes, Mapping)) or not isinstance(events, Sequence):
        raise WrongType(f"events: expected a sequence of ADK events, got {type(events).__name__}")
    if len(events) > MAX_EVENTS:
        raise ValidationError(f"events: at most {MAX_EVENTS} per call, got {len(events)}")
    for index, event in enumerate(events):
        if not isinstance(event, Event):
            raise WrongType(f"events[{index}]: expected an ADK Event, got {type(event).__name__}")
    return list(events)


# -- what a memory task holds --------------------------------------------------------------


class _Overtaken(Exception):
    """A write refused because a racing writer stored some of its messages first."""


@dataclass
class _StoredIds:
    """The message ids a memory task held when this service last read or wrote it: its
    message count then, the last message's id (which tells the same task grown from one
    deleted and written again) and every id."""

    count: int = 0
    last_id: str = ""
    ids: set[str] = field(default_factory=set)

    def grew(self, appended: Sequence[AnyMessage]) -> None:
        """The task holds `appended` after what was known."""
        self.written([m.id for m in appended])

    def written(self, ids: Sequence[str]) -> None:
        """This service appended `ids` (if a writer came between its read and its write,
        the next read finds another last id there and reads the task whole)."""
        if ids:
            self.ids.update(ids)
            self.count += len(ids)
            self.last_id = ids[-1]


class MindstoreMemoryService(BaseMemoryService):
    """ADK memory stored in mindstore (see the module doc).

    Args:
        view: A tenant's view of a store (`store.scoped("acme")`); each user's memory in
            an app is a task of it, owned by the user.
    """

    def __init__(self, view: MemoryView) -> None:
        if getattr(view, "owner", None) is not None:
            raise ValidationError(
                "view: ADK memory takes its owner from the ADK user id, as ADK sessions "
                "do: pass a tenant view, store.scoped(tenant)"
            )
        self._view = view
        self._tasks = view.tasks
        self._stored: dict[str, _StoredIds] = {}

    # -- add -------------------------------------------------------------------------------

    async def add_session_to_memory(self, session: Session) -> None:
        """Add the session's events to memory; those already added are not added again,
        nor those a rewind undid (`live_events`).

        Args:
            session: The ADK session (its app, user, id and events).

        Raises:
            WrongType: `session` is not an ADK `Session`.
            ValidationError: An app name, user id or session id that is not 1-512
                characters without control characters; more than 10,000 events. Nothing
                is stored.
            Conflict: Writers kept racing for the user's memory.
        """
        if not isinstance(session, Session):
            raise WrongType(f"session: expected an ADK Session, got {type(session).__name__}")
        await self.add_events_to_memory(
            app_name=session.app_name,
            user_id=session.user_id,
            events=live_events(session.events),
            session_id=session.id,
        )

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Add these events to memory (a delta: memory keeps what it held); an event
        already added from the same session (by id) is not added again, and events without
        content are skipped.

        Args:
            app_name: The ADK app.
            user_id: The ADK user (the memory's owner).
            events: The events.
            session_id: The session they come from; None: none (they are kept apart from
                every session's).
            custom_metadata: Accepted and ignored, as ADK's in-memory service does.

        Raises:
            WrongType: `events` is not a sequence of ADK events; `custom_metadata` not a
                mapping.
            ValidationError: An id that is not 1-512 characters without control
                characters; more than 10,000 events. Nothing is stored.
            Conflict: Writers kept racing for the user's memory.
        """
        check_adk_id(app_name, "app_name")
        check_adk_id(user_id, "user_id")
        if session_id is not None:
            check_adk_id(session_id, "session_id")
        if custom_metadata is not None and not isinstance(custom_metadata, Mapping):
            raise WrongType(
                f"custom_metadata: expected a mapping, got {type(custom_metadata).__name__}"
            )
        task_id = memory_task_id(app_name, user_id)
        given: dict[str, tuple[Event, AnyMessage]] = {}  # built before anything is written
        for event in _check_events(events):
            message_id = memory_message_id(task_id, session_id, event)
            if memorable(event) and message_id not in given:  # the first of an id given twice
                given[message_id] = (event, _message(event, message_id, session_id))
        if given:
            metadata: JSON = {**MARKER, "memory": True, "app_name": app_name, "user_id": user_id}
            await self._add(task_id, owner_of(user_id), metadata, given, session_id)

    async def _add(
        self,
        task_id: str,
        owner: str,
        metadata: JSON,
        given: dict[str, tuple[Event, AnyMessage]],
        session_id: str | None,
    ) -> None:
        """Append the events the task does not hold, in guarded updates of `WRITE_BATCH`
        messages (the task created, empty, on the first add); a racing writer that stored
        some of them first (the guard refuses the batch) makes this read again."""
        for attempt in range(ATTEMPTS):
            stored = await self._read_stored(task_id)
            if stored is None:
                with contextlib.suppress(Conflict):  # a racing writer created it
                    await self._tasks.create(task_id=task_id, owner=owner, metadata=metadata)
                continue
            fresh = [i for i in given if i not in stored.ids]
            try:
                for start in range(0, len(fresh), WRITE_BATCH):
                    batch = fresh[start : start + WRITE_BATCH]
                    await self._append(task_id, [given[i] for i in batch], session_id)
                    stored.written(batch)
                return
            except (_Overtaken, NotFound):  # a racing writer's overlap; or deleted meanwhile
                self._stored.pop(task_id, None)
                await asyncio.sleep(0.001 * attempt)
        raise Conflict(f"memory task {task_id!r}: writers kept racing")

    async def _append(
        self, task_id: str, batch: list[tuple[Event, AnyMessage]], session_id: str | None
    ) -> None:
        """One guarded update. A refusal because another writer stored one of the batch
        first is `_Overtaken`; any other (typed parts the history refuses: a tool call id
        it already tracks as open, say) writes the events one by one, those refused typed
        untyped, their content verbatim."""
        try:
            await self._tasks.add_messages(task_id, [message for _, message in batch])
            return
        except ValidationError:
            if await self._overtaken(task_id, [message.id for _, message in batch]):
                raise _Overtaken from None
        for event, message in batch:
            try:
                await self._tasks.add_messages(task_id, [message])
            except ValidationError:
                untyped = _message(event, message.id, session_id, typed=False)
                await self._tasks.add_messages(task_id, [untyped])

    async def _overtaken(self, task_id: str, ids: list[str]) -> bool:
        """After a refused write: does the task hold one of `ids` now (a racing writer's)?"""
        self._stored.pop(task_id, None)
        stored = await self._read_stored(task_id)
        return stored is not None and any(i in stored.ids for i in ids)

    async def _read_stored(self, task_id: str) -> _StoredIds | None:
        """The ids the task holds (None: no such task). Known from an earlier read, only
        the messages appended since are read (from the last one known, to check it is
        the same task); else, or when that check fails, every message."""
        known = self._stored.pop(task_id, None)
        try:
            if known is not None and known.count:
                tail = await self._tasks.read_range(task_id, known.count - 1)
                if tail and tail[0].id == known.last_id:
                    known.grew(tail[1:])
                    return self._keep(task_id, known)
            messages = await self._tasks.read_range(task_id, 0)
        except NotFound:
            return None
        known = _StoredIds()
        known.grew(messages)
        return self._keep(task_id, known)

    def _keep(self, task_id: str, known: _StoredIds) -> _StoredIds:
        self._stored[task_id] = known
        if len(self._stored) > TASKS_KEPT:
            del self._stored[next(iter(self._stored))]
        return known

    # -- search ----------------------------------------------------------------------------

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        """The user's memories in the app that match the query best (at most ten).

        Args:
            app_name: The ADK app.
            user_id: The ADK user.
            query: Words to look for (plain text: the search's operators are words here).

        Returns:
            The memories, best first (BM25; ties in the order they were added); none for a
            query without words.

        Raises:
            ValidationError: An id that is not 1-512 characters without control
                characters; a query that is not a string, longer than 16,384 characters or
                holding a lone surrogate.
        """
        check_adk_id(app_name, "app_name")
        check_adk_id(user_id, "user_id")
        words = query_terms(query)
        if not words:
            return SearchMemoryResponse()
        task_id = memory_task_id(app_name, user_id)
        page = await self._view.search(
            " ".join(words),
            owner=owner_of(user_id),
            task_ids=[task_id],
            limit=CANDIDATES,
            match="any",  # a memory holding any of the words, as ADK's services
        )
        best = sorted(page.hits, key=_rank)[:MAX_RESULTS]
        found = await asyncio.gather(*(self._memory(hit) for hit in best))
        return SearchMemoryResponse(memories=[m for m in found if m is not None])

    async def _memory(self, hit: SearchHit) -> MemoryEntry | None:
        """The memory a hit names (None: gone since the search)."""
        try:
            message = await self._tasks.get_message(hit.task_id, hit.message_id)
        except NotFound:
            return None
        if message is None:
            return None
        event = event_of(message)
        if event.content is None:
            return None
        return MemoryEntry(
            id=event.id,
            content=visible(event.content),
            author=event.author,
            timestamp=timestamp_text(event.timestamp),
        )

    # -- delete ----------------------------------------------------------------------------

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        """Delete a memory (the id `search_memory` gave it: its event's id), from every
        session it was added from: its message is redacted (`tasks.redact`: its content
        gone from the store and the index) and its id stays taken, so adding its session
        again does not bring it back, as with ADK's in-memory service. Reads the user's
        memory task whole (a rare call); no such memory: a no-op.

        Args:
            app_name: The ADK app.
            user_id: The ADK user.
            memory_id: The memory's id; None or empty: a no-op (as ADK's in-memory service).

        Raises:
            ValidationError: An id that is not 1-512 characters without control characters.
        """
        check_adk_id(app_name, "app_name")
        check_adk_id(user_id, "user_id")
        if memory_id is None or memory_id == "":
            return
        check_adk_id(memory_id, "memory_id")
        task_id = memory_task_id(app_name, user_id)
        try:
            messages = await self._tasks.read_range(task_id, 0)
        except NotFound:
            return
        for message in messages:
            if (entry_of(message).get("event") or {}).get("id") == memory_id:
                with contextlib.suppress(NotFound):
                    await self._tasks.redact(task_id, message.id, "ADK delete_memory")


def _rank(hit: SearchHit) -> tuple[float, int]:
    """Best score first; equal scores in the order they were added."""
    return (-hit.score, hit.index)


def _message(
    event: Event, message_id: str, session_id: str | None, *, typed: bool = True
) -> AnyMessage:
    """The message that keeps `event` in memory (as a session keeps it), timed as the
    event, naming the session it came from. An event without text (a function call or
    response alone) is kept untyped, its content verbatim: ADK's services match memories
    on their text only, and the index would find a tool's name and values."""
    has_text = any(part.text for part in (event.content.parts if event.content else None) or [])
    entry: JSON = {"session_id": session_id}
    message = message_for(event, message_id, entry, typed=typed and has_text)
    if isinstance(message, MessageBase):  # always: `message_for` makes typed messages
        message.started_ts = float(event.timestamp)
    return message
