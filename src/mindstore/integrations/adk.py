"""`MindstoreSessionService`: Google ADK's `BaseSessionService` on mindstore.

```python
from mindstore.integrations.adk import MindstoreSessionService

service = MindstoreSessionService(store.scoped("acme"))     # the view's tenant
runner = Runner(agent=agent, app_name="trips", session_service=service)
```

Where things are kept:

* a **session** is a task (`adk_events.session_task_id(app, user, session)`), owned by the
  user (`owner_of(user_id)`), its metadata naming app, user and session. Its first message
  (slot 0) is a task config holding the session's creation time and initial state; every
  event after it is one message (`adk_events`): typed parts, the event's own fields beside
  them, so `acme.tasks`, the formats, analytics, backups, erase, retention and redaction see
  an ADK session as a conversation;
* **session state** lives in the history: a message whose event changed it holds the
  whole session state after it, every other one points at the last such message
  (`state_at`), so the event and its session-state change are one write;
* **`app:` and `user:` state** live in registers (`adk_state`), `temp:` state nowhere.

`get_session` reads ranges: `GetSessionConfig(num_recent_events=n)` is `tail(n)` plus the
message holding the session state when it is older, and the two registers' last snapshots,
whatever the history's length; `after_timestamp` reads back from the end in growing ranges
until an older event.

Appends are compare-and-swap on the history: a session handle knows how many messages its
task held when it was read or last written (`Session._storage_update_marker`, as
`DatabaseSessionService` keeps it), the next message's id is derived from that slot, and the
store's exactly-once guard refuses a second message in one slot. So an append from a handle
that another writer has overtaken raises `StaleSessionError` and stores nothing, an event
redelivered to the slot it already holds is stored once, and appends on one handle from
concurrent coroutines queue on a per-session lock and all land in call order.

The event's write is also the commit point of the `app:`/`user:` part of its delta: that
part is recorded in its register as an intent (the event's slot and a commit mark the
event's entry carries) before the write, and rolled forward by whoever reads the register
next, the writer itself right after the write (`adk_state`). A process dying between the
two leaves nothing half done to a reader; no multi-document transaction is needed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
import uuid
import weakref
from collections.abc import Mapping
from typing import Any, Protocol

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.adk.sessions.state import State
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from mindstore.errors import Conflict, NotFound, ValidationError, WrongType
from mindstore.integrations.adk_events import (
    MARKER,
    adk_metadata,
    check_adk_id,
    entry_of,
    event_of,
    is_event,
    message_for,
    owner_of,
    session_task_id,
    slot_id,
    timestamp_of,
)
from mindstore.integrations.adk_memory import MindstoreMemoryService
from mindstore.integrations.adk_state import GRACE, Intent, StateRegister
from mindstore.model.base import JSON
from mindstore.model.messages import AnyMessage, TaskConfigMessage
from mindstore.model.parts import TaskConfigPart
from mindstore.operations import operations, through
from mindstore.services.tasks import TaskService

__all__ = ["MindstoreMemoryService", "MindstoreSessionService"]

STALE_SESSION = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)
"""ADK's own wording (`DatabaseSessionService`), which callers match."""
MODEL_NAME = "adk"
"""The model name of a session's task config: ADK names models per agent, not per session."""
LIST_PAGE = 1000
STATES_KEPT = 4096
"""How many sessions' states a service keeps to append without a read (least recent go)."""
AFTER_FIRST_READ = 64


class TenantView(Protocol):
    """What the service uses of a store view (`store.scoped(tenant)`)."""

    @property
    def tasks(self) -> TaskService: ...


def _adk_stores_binary() -> bool:
    """Whether the installed ADK stores `bytes` that are not UTF-8 text in session state
    (as base64 text, from 2.14) rather than refusing them (2.13 and older); asked of ADK's
    own serializer of a session, so mindstore follows whichever release is installed."""
    probe = Session(id="probe", app_name="probe", user_id="probe", state={"k": b"\xff"})
    try:
        probe.model_dump(mode="json")
    except ValueError:
        return False
    return True


BINARY_AS_BASE64 = _adk_stores_binary()
"""True on google-adk 2.14 and later: state `bytes` that are not UTF-8 text are stored as
their base64 text (and read back as that text), as ADK's database services store them."""


def _bytes_as_text(value: Any) -> Any:
    """`value` with every `bytes` in it, at any depth, keys and models' fields included,
    as ADK (2.14 and later) stores it: its UTF-8 text, else its base64 (standard alphabet,
    padded). Tuples stay tuples, sets become lists; anything else is left as it is."""
    if isinstance(value, (bytes, bytearray)):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(raw).decode("ascii")
    if isinstance(value, BaseModel):
        return _bytes_as_text(value.model_dump(mode="python"))
    if isinstance(value, dict):
        return {_bytes_as_text(key): _bytes_as_text(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return tuple(_bytes_as_text(item) for item in value)
    if isinstance(value, (list, set)):
        return [_bytes_as_text(item) for item in value]
    return value


def _check_storable(value: Any, where: str) -> None:
    """Refuse, naming `where` (``state_delta['k'][0]``), what no stored state can hold, at
    any depth, keys included: text with a lone surrogate, an integer beyond MongoDB's 8
    bytes, and, on an ADK that refuses them (2.13 and older: a bare `UnicodeDecodeError`
    from its database services), `bytes` that are not UTF-8 text (UTF-8 bytes are stored
    as their text, as ADK's database services store them)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        if BINARY_AS_BASE64 and not isinstance(value, memoryview):
            return
        try:
            bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(
                f"{where}: bytes that are not UTF-8 text (byte {exc.start}) cannot be stored "
                "in session state; store binary data as text (base64) or as an artifact"
            ) from None
    elif isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValidationError(
                f"{where}: text with a lone surrogate (position {exc.start}) cannot be stored"
            ) from None
    elif isinstance(value, int) and not isinstance(value, bool):
        if not -(2**63) <= value < 2**63:
            raise ValidationError(f"{where}: an integer beyond 8 bytes cannot be stored")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _check_storable(key, f"{where} (the key {key!r})")
            _check_storable(item, f"{where}[{key!r}]")
    elif isinstance(value, (list, tuple, set, frozenset)):
        for index, item in enumerate(value):
            _check_storable(item, f"{where}[{index}]")


def _json_safe(value: Any, where: str) -> JSON:
    """A state value as JSON; what JSON cannot say is stored as its string (ADK's database
    service does the same), so a callable in a delta does not lose the event. Bytes that
    are not UTF-8 text, on an ADK that stores them, are stored as it stores them: the
    value is serialized again with every `bytes` as text (`_bytes_as_text`), as ADK's
    services do when the first attempt fails. What no stored state can hold is a
    `ValidationError` naming `where` (`_check_storable`)."""
    _check_storable(value, where)
    try:
        try:
            safe: JSON = to_jsonable_python(value, fallback=str)
        except ValueError:
            if not BINARY_AS_BASE64:
                raise
            safe = to_jsonable_python(_bytes_as_text(value), fallback=str)
    except ValueError as exc:  # bytes inside an object (a dataclass; a model before 2.14)
        raise ValidationError(f"{where}: cannot be stored in session state: {exc}") from None
    _check_storable(safe, where)  # what an object turned into
    return safe


def _split(delta: Mapping[str, Any] | None, argument: str) -> tuple[JSON, JSON, JSON]:
    """(app, user, session) parts of a state delta as JSON, prefixes removed; `temp:`
    dropped (never stored, so never refused: ADK's services take any value there).
    Pure: a value no stored state can hold raises (naming `argument` and its key) before
    the caller changes anything."""
    app: JSON = {}
    user: JSON = {}
    session: JSON = {}
    for key, value in (delta or {}).items():
        if not isinstance(key, str):
            raise WrongType(f"{argument}: keys are strings, got {key!r}")
        if key.startswith(State.TEMP_PREFIX):
            continue
        safe = _json_safe(value, f"{argument}[{key!r}]")
        _check_storable(key, f"{argument}[{key!r}]")
        if key.startswith(State.APP_PREFIX):
            app[key.removeprefix(State.APP_PREFIX)] = safe
        elif key.startswith(State.USER_PREFIX):
            user[key.removeprefix(State.USER_PREFIX)] = safe
        else:
            session[key] = safe
    return app, user, session


def _take_temp_state(session: Session, event: Event) -> None:
    """`temp:` keys of the event's delta go to the handle's state (later agents of this
    invocation read them) and out of the event (never stored), as ADK's own services do;
    written here, not by the base class's private helpers, which older 2.x releases lack."""
    delta = event.actions.state_delta if event.actions else None
    if not delta:
        return
    for key, value in delta.items():
        if key.startswith(State.TEMP_PREFIX):
            session.state[key] = value
    event.actions.state_delta = {
        key: value for key, value in delta.items() if not key.startswith(State.TEMP_PREFIX)
    }


def _merged(session_state: JSON, app: JSON, user: JSON) -> dict[str, Any]:
    state: dict[str, Any] = dict(session_state)
    state.update({State.APP_PREFIX + key: value for key, value in app.items()})
    state.update({State.USER_PREFIX + key: value for key, value in user.items()})
    return state


@operations("adk", resilience=through("_tasks"))
class MindstoreSessionService(BaseSessionService):
    """ADK sessions stored in mindstore (see the module doc).

    Args:
        view: A tenant's view of a store (`store.scoped("acme")`); sessions are its tasks,
            owned by their ADK user.
        grace: Seconds an `app:`/`user:` change recorded for an event not (yet) stored
            waits before it is dropped, its writer taken as dead (`adk_state`).
    """

    def __init__(self, view: TenantView, *, grace: float = GRACE) -> None:
        if getattr(view, "owner", None) is not None:
            raise ValidationError(
                "view: ADK sessions take their owner from the ADK user id, and `app:` state "
                "is shared by an app's users: pass a tenant view, store.scoped(tenant)"
            )
        self._tasks = view.tasks
        self._grace = grace
        self._locks: weakref.WeakValueDictionary[tuple[int, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._states: dict[str, tuple[int, int, JSON]] = {}
        """Per session task: (message count, index of the state message, session state),
        as this service last wrote or read it (a handle at that count needs no read)."""

    async def close(self) -> None:
        """Nothing to release: the store is the caller's (`store.close()`). Here so the
        service stands where ADK's `DatabaseSessionService` did (`close`, `async with`)."""

    async def __aenter__(self) -> MindstoreSessionService:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- names -----------------------------------------------------------------------------

    def _register(self, scope: str, app_name: str, user_id: str) -> StateRegister:
        if scope == "app":
            return StateRegister(self._tasks, "app", app_name, None, None, grace=self._grace)
        return StateRegister(
            self._tasks, "user", app_name, user_id, owner_of(user_id), grace=self._grace
        )

    async def _intend(
        self, app_name: str, user_id: str, app: JSON, user: JSON, intent: Intent
    ) -> None:
        """Record the shared part of a delta in its registers before the event's write
        (the commit point; `adk_state`)."""
        if user:
            await self._register("user", app_name, user_id).intend(user, intent)
        if app:
            await self._register("app", app_name, user_id).intend(app, intent)

    def _remember(self, task_id: str, known: tuple[int, int, JSON]) -> None:
        """Keep a session's state as last written or read (the most recent sessions only)."""
        self._states.pop(task_id, None)
        self._states[task_id] = known
        if len(self._states) > STATES_KEPT:
            del self._states[next(iter(self._states))]

    def _lock(self, task_id: str) -> asyncio.Lock:
        key = (id(asyncio.get_running_loop()), task_id)
        lock = self._locks.get(key)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[key] = lock
        return lock

    # -- create ----------------------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a session (a task of the user's); `app:`/`user:` keys of `state` go to
        their registers, `temp:` keys nowhere.

        Args:
            app_name: The ADK app.
            user_id: The ADK user (the session's owner).
            state: The initial state (`app:`, `user:`, `temp:` and session keys).
            session_id: The session's id (surrounding blanks stripped, as ADK does);
                None: a new UUID.

        Returns:
            The session, its state merged with the app's and the user's.

        Raises:
            ValidationError: An id that is not 1-512 characters without control characters;
                a state value no stored state can hold (text with a lone surrogate, an
                integer beyond 8 bytes, at any depth; on google-adk 2.13 and older,
                `bytes` that are not UTF-8 text, which 2.14 and later store as base64
                text, as ADK's database services do), named by its key. Nothing is
                stored.
            WrongType: A state key that is not a string.
            google.adk.errors.already_exists_error.AlreadyExistsError: This app and user
                already have a session of that id.
        """
        check_adk_id(app_name, "app_name")
        check_adk_id(user_id, "user_id")
        if session_id is not None and not isinstance(session_id, str):
            raise ValidationError(f"invalid session_id: expected a string, got {session_id!r}")
        session_id = session_id.strip() if session_id else None
        session_id = check_adk_id(session_id or str(uuid.uuid4()), "session_id")
        app, user, own = _split(state, "state")
        task_id = session_task_id(app_name, user_id, session_id)
        created = time.time()
        intent = Intent.new(task_id, 0)
        entry: JSON = {"slot": 0, "created": created, "state": own, "state_at": 0}
        if app or user:
            entry["commit"] = intent.commit
        first = TaskConfigMessage(
            id=slot_id(task_id, 0),
            content=[TaskConfigPart(model_name=MODEL_NAME)],
            metadata=adk_metadata(entry),
        )
        metadata = {**MARKER, "app_name": app_name, "user_id": user_id, "session_id": session_id}
        await self._intend(app_name, user_id, app, user, intent)
        try:
            await self._tasks.create(
                task_id=task_id, owner=owner_of(user_id), metadata=metadata, messages=[first]
            )
        except Conflict:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.") from None
        app = (await self._register("app", app_name, user_id).read())[1]
        user = (await self._register("user", app_name, user_id).read())[1]
        self._remember(task_id, (1, 0, own))
        session = Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=_merged(own, app, user),
            last_update_time=created,
        )
        session._storage_update_marker = "1"
        return session

    # -- read ------------------------------------------------------------------------------

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with its events (all, or as `config` limits them), or None.

        Only the events returned are read (with the message holding the session state, and
        the two registers' last snapshots).

        Args:
            app_name: The ADK app.
            user_id: The ADK user.
            session_id: The session's id.
            config: `num_recent_events` (the last n events) and/or `after_timestamp` (the
                events at or after it); None: every event.

        Returns:
            The session (state merged with the app's and the user's), or None when there is
            no such session.

        Raises:
            ValidationError: An id that is not 1-512 characters without control characters.
        """
        check_adk_id(app_name, "app_name")
        check_adk_id(user_id, "user_id")
        session_id = check_adk_id(session_id.strip() if isinstance(session_id, str)
                                  else session_id, "session_id")  # fmt: skip
        task_id = session_task_id(app_name, user_id, session_id)
        recent = config.num_recent_events if config is not None else None
        after = config.after_timestamp if config is not None else None
        try:
            if recent is not None:
                count, _, messages = await self._tasks.ends(task_id, 0, max(recent, 1))
            elif after is not None:
                count, messages = await self._after(task_id, after)
            else:
                messages = await self._tasks.read_range(task_id, 0)
                count = len(messages)
        except NotFound:
            return None
        base = count - len(messages)  # the index of messages[0]
        known = dict(enumerate(messages, base))
        own = await self._session_state(task_id, count, known, cached=False)
        events = [event_of(m) for i, m in known.items() if i > 0]
        if recent is not None:
            events = events[-recent:] if recent else []
        if after is not None:
            index = len(events) - 1
            while index >= 0 and events[index].timestamp >= after:
                index -= 1
            events = events[index + 1 :]
        app = (await self._register("app", app_name, user_id).read())[1]
        user = (await self._register("user", app_name, user_id).read())[1]
        session = Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=_merged(own, app, user),
            events=events,
            last_update_time=timestamp_of(messages[-1]),
        )
        session._storage_update_marker = str(count)
        return session

    async def _after(self, task_id: str, after: float) -> tuple[int, list[AnyMessage]]:
        """The message count, and the history's end back to its first event older than
        `after` (or its start), read in ranges that double."""
        size = AFTER_FIRST_READ
        while True:
            count, _, messages = await self._tasks.ends(task_id, 0, size)
            if len(messages) < size or any(
                is_event(m) and timestamp_of(m) < after for m in messages
            ):
                return count, messages
            size *= 2

    async def _session_state(
        self,
        task_id: str,
        count: int,
        known: dict[int, AnyMessage] | None = None,
        *,
        cached: bool = True,
    ) -> JSON:
        """The session state after the history's first `count` messages.

        The last message points at the one holding the state (`state_at`). A message
        redacted whole has lost its entry: the state is then the one before it (its
        change is redacted with it), found from the message before. `cached`: the state
        this service last wrote at that count serves without a read (appends; reads always
        read, so they see a redaction made elsewhere)."""
        last = self._states.get(task_id) if cached else None
        if last is not None and last[0] == count:
            return dict(last[2])
        known = dict(known or {})
        index = count - 1
        while index >= 0:
            if index not in known:
                known[index] = (await self._tasks.read_range(task_id, index, index + 1))[0]
            entry = entry_of(known[index])
            at = entry.get("state_at")
            if at is None:  # redacted: ask the message before
                index -= 1
                continue
            at = int(at)
            if at != index:
                index = at
                continue
            if "state" not in entry:
                index -= 1
                continue
            state = dict(entry["state"])
            self._remember(task_id, (count, at, state))
            return dict(state)
        raise NotFound(f"task {task_id!r} holds no ADK session")

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's `user:` state, keys without the prefix.

        Args:
            app_name: The ADK app.
            user_id: The ADK user.

        Returns:
            The state ({} when none was stored).

        Raises:
            ValidationError: An id that is not 1-512 characters without control characters.
        """
        check_adk_id(app_name, "app_name")
        check_adk_id(user_id, "user_id")
        return dict((await self._register("user", app_name, user_id).read())[1])

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The app's sessions (one user's, or every user's), without events, oldest update
        first (ADK's order), each with its merged state.

        Reads the tenant's (or the user's) task listing, then per session its last message
        and the message holding its state; the shared states once (each user's once).

        Args:
            app_name: The ADK app.
            user_id: Only this user's sessions; None: every user's.

        Returns:
            The sessions, without events.

        Raises:
            ValidationError: An id that is not 1-512 characters without control characters.
        """
        check_adk_id(app_name, "app_name")
        owner = None
        if user_id is not None:
            owner = owner_of(check_adk_id(user_id, "user_id"))
        found: list[tuple[str, str, str]] = []
        cursor: str | None = None
        while True:
            page = await self._tasks.list(owner=owner, limit=LIST_PAGE, cursor=cursor)
            for record in page.items:
                metadata = record.metadata or {}
                if (
                    metadata.get("integration") == MARKER["integration"]
                    and "session_id" in metadata
                    and metadata.get("app_name") == app_name
                    and (user_id is None or metadata.get("user_id") == user_id)
                ):
                    found.append((metadata["user_id"], metadata["session_id"], record.id))
            cursor = page.next_cursor
            if cursor is None:
                break
        app = (await self._register("app", app_name, "").read())[1]
        users: dict[str, JSON] = {}
        sessions = []
        for user, session_id, task_id in found:
            try:  # the last message: the update time and where the session state is
                count, _, last = await self._tasks.ends(task_id, 0, 1)
                own = await self._session_state(task_id, count, {count - 1: last[-1]},
                                                cached=False)  # fmt: skip
            except NotFound:  # deleted since it was listed
                continue
            if user not in users:  # each user's shared state read once
                users[user] = (await self._register("user", app_name, user).read())[1]
            sessions.append(
                Session(
                    id=session_id,
                    app_name=app_name,
                    user_id=user,
                    state=_merged(own, app, users[user]),
                    last_update_time=timestamp_of(last[-1]),
                )
            )
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    # -- delete ----------------------------------------------------------------------------

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session's task (its `app:`/`user:` state stays); no such session: a
        no-op.

        Args:
            app_name: The ADK app.
            user_id: The ADK user.
            session_id: The session's id.

        Raises:
            ValidationError: An id that is not 1-512 characters without control characters.
        """
        check_adk_id(app_name, "app_name")
        check_adk_id(user_id, "user_id")
        session_id = check_adk_id(session_id.strip() if isinstance(session_id, str)
                                  else session_id, "session_id")  # fmt: skip
        task_id = session_task_id(app_name, user_id, session_id)
        with contextlib.suppress(NotFound):
            await self._tasks.delete(task_id)
        self._states.pop(task_id, None)

    # -- append ----------------------------------------------------------------------------

    async def append_event(self, session: Session, event: Event) -> Event:
        """Store `event` and apply its state delta (see the module doc for the guarantees).

        Args:
            session: The session handle (from `create_session` or `get_session`); its
                events, state and last update time follow the append, as ADK's do.
            event: The event; a `partial` one is not stored.

        Returns:
            The event, its `temp:` state taken out of its delta.

        Raises:
            ValidationError: A value of the event's `state_delta` no stored state can hold
                (as for `create_session`; `temp:` keys, never stored, take anything), named
                by its key. Nothing is stored, and neither the handle nor the event changes.
            WrongType: A `state_delta` key that is not a string.
            google.adk.errors.session_not_found_error.SessionNotFoundError: The session is
                not stored (or was deleted).
            google.adk.errors.StaleSessionError: Another writer appended since `session`
                was read (nothing was stored).
        """
        if event.partial:
            return event
        delta = event.actions.state_delta if event.actions else None
        app, user, own = _split(delta, "event.actions.state_delta")  # before any change
        task_id = session_task_id(session.app_name, session.user_id, session.id)
        async with self._lock(task_id):
            if any(e == event for e in session.events if e.id == event.id):
                return event  # redelivered to the handle that holds it
            _take_temp_state(session, event)
            count = await self._count(task_id, session)
            try:
                state = await self._session_state(task_id, count)
            except NotFound:
                raise SessionNotFoundError(f"Session {session.id} not found.") from None
            except IndexError:  # the history is shorter than the handle saw: recreated
                raise StaleSessionError(STALE_SESSION) from None
            cached = self._states[task_id]
            intent = Intent.new(task_id, count)
            entry: JSON = {"slot": count, "state_at": cached[1]}
            if app or user:
                entry["commit"] = intent.commit
            if own:
                state = {**state, **own}
                entry.update(state=state, state_at=count)
            message = message_for(event, slot_id(task_id, count), entry)
            await self._intend(session.app_name, session.user_id, app, user, intent)
            try:
                try:
                    stored = await self._tasks.add_messages(task_id, [message])
                except ValidationError:  # typed parts the history refuses (a call id
                    # already open, say): the event untyped, its content kept verbatim
                    message = message_for(event, message.id, entry, typed=False)
                    stored = await self._tasks.add_messages(task_id, [message])
            except NotFound:
                raise SessionNotFoundError(f"Session {session.id} not found.") from None
            if entry_of(stored[0]).get("event") != entry_of(message)["event"]:
                raise StaleSessionError(STALE_SESSION)
            self._remember(task_id, (count + 1, int(entry["state_at"]), state))
            # committed: roll the shared part forward now (a reader would, if this dies)
            if user:
                await self._register("user", session.app_name, session.user_id).read()
            if app:
                await self._register("app", session.app_name, session.user_id).read()
            session.last_update_time = event.timestamp
            session._storage_update_marker = str(count + 1)
            if event.actions and event.actions.state_delta:
                session.state.update(event.actions.state_delta)
            session.events.append(event)
            return event

    async def _count(self, task_id: str, session: Session) -> int:
        """How many messages the handle's task held when the handle was last in step; a
        handle without a marker (built by hand) is taken as current."""
        marker = session._storage_update_marker
        if marker is not None and marker.isdigit():
            return int(marker)
        try:
            count, _, _ = await self._tasks.ends(task_id, 0, 1)
        except NotFound:
            raise SessionNotFoundError(f"Session {session.id} not found.") from None
        return count
