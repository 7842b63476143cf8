"""Microsoft Agent Framework session snapshots kept in mindstore tasks:
`MindstoreSessionStore`, with compare-and-swap versions.

The framework's `SessionStore` maps an opaque caller-selected id to an `AgentSession`
snapshot (`get` / `set` / `delete`). Here each stored id is one task of the view:

* its task id is ``_:agent-framework-session:`` + 32 hex digits of the id's BLAKE2b
  digest (`session_task_id`): the id is never interpreted, and no application
  conversation id names that task (`task_id_for` never keeps an id starting with ``_:``);
  the id as given is kept in the task's metadata (sealed under a keyring like all
  metadata);
* the snapshot (`AgentSession.to_dict()`, as JSON text, so the framework's encoded state
  comes back exactly) is the task's agent state (`tasks.save_agent_state`), replaced in
  place and sealed whole under a keyring;
* its version counts the writes: each `set` stores version N+1 with one small marker
  message whose id is derived from (id, N+1) in the same guarded update. Message ids are
  exactly-once, so of two writers that both read N only the first stores N+1; the other's
  update is a replay that writes nothing, and it sees another writer's snapshot when it
  reads back. `set(..., expected_version=N)` then raises `Conflict`; a plain `set`
  (the framework's contract: replace) retries on the newer version.

So a session snapshot is a task, and every lifecycle path that covers tasks covers it:
backup, restore, erase, retention and the keyring's sealing and re-encryption sweep. The
cost is one marker message (about 200 bytes) per `set`, kept with the task. A dedicated
collection would save that, at the price of its own backup, restore, erase, retention and
keyring paths; the markers were chosen to ship the store on the paths already proven.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from agent_framework import AgentSession, SessionStore

from mindstore.errors import Conflict, NotFound, ValidationError
from mindstore.formats.agent_state import AgentState
from mindstore.integrations._derived_ids import derived_id
from mindstore.integrations._session import scoped_owner
from mindstore.integrations.conversation_ids import MAPPED_PREFIX, check_conversation_id
from mindstore.model.messages import InformationalMessage
from mindstore.model.parts import InformationalPart
from mindstore.protocols import StateView

__all__ = ["MARKER", "MindstoreSessionStore", "session_task_id"]

MARKER = {"integration": "agent-framework-session"}
"""Task metadata of a stored session snapshot."""
FIELD = "agent_framework_session"
"""The agent-state field holding the snapshot: ``{"v": version, "w": writer, "s": json}``."""
ATTEMPTS = 8
"""How many times a plain `set` re-reads the version after losing a race."""


def session_task_id(session_id: str) -> str:
    """The task that holds a stored session (see the module doc).

    Args:
        session_id: The opaque session-store id.

    Returns:
        The task id.

    Raises:
        ValidationError: Not a non-empty string of at most 512 characters without control
            characters.
    """
    check_conversation_id(session_id, "session_id")
    digest = hashlib.blake2b(session_id.encode("utf-8"), digest_size=16).hexdigest()
    return f"{MAPPED_PREFIX}agent-framework-session:{digest}"


def _expected(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"invalid expected_version: expected an integer >= 0, got {value!r}")
    return value


def _snapshot(session: Any) -> str:
    if not isinstance(session, AgentSession):
        raise ValidationError(
            f"invalid session: expected an AgentSession, got {type(session).__name__}"
        )
    try:
        return json.dumps(session.to_dict(), ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError) as error:
        raise ValidationError(
            f"invalid session: its state cannot be serialised ({error})"
        ) from error


class MindstoreSessionStore(SessionStore):
    """An Agent Framework `SessionStore` kept in mindstore tasks, with versions (see the
    module doc).

    Args:
        view: A `TenantStore` (`store.scoped(tenant)`, optionally with an owner).
        owner: The owner new snapshots get (an owner-scoped view's own by default).

    Example:
        ```python
        sessions = MindstoreSessionStore(acme)
        session, version = await sessions.get_versioned("chat-1") or (agent.create_session(), 0)
        await agent.run("Hello", session=session)
        await sessions.set("chat-1", session, expected_version=version)
        ```
    """

    def __init__(self, view: StateView, *, owner: str | None = None) -> None:
        super().__init__()
        self.view = view
        self.owner = scoped_owner(view, owner)

    async def _stored(self, task_id: str) -> dict[str, Any] | None:
        try:
            state = await self.view.tasks.agent_state(task_id)
        except NotFound:
            return None
        extra = state.model_extra if state is not None else None
        stored = (extra or {}).get(FIELD)
        return stored if isinstance(stored, dict) else None

    async def get_versioned(self, session_id: str) -> tuple[AgentSession, int] | None:
        """The stored session and its version, or None when absent.

        Args:
            session_id: The opaque session-store id.

        Returns:
            A new `AgentSession` (an independent copy) and the version to pass to `set`.

        Raises:
            ValidationError: A bad session id.
        """
        stored = await self._stored(session_task_id(session_id))
        if stored is None:
            return None
        return AgentSession.from_dict(json.loads(stored["s"])), int(stored["v"])

    async def get(self, session_id: str) -> AgentSession | None:
        """The stored session (an independent copy), or None when absent.

        Args:
            session_id: The opaque session-store id.

        Raises:
            ValidationError: A bad session id (an empty one included: a `ValueError`).
        """
        found = await self.get_versioned(session_id)
        return found[0] if found is not None else None

    async def version(self, session_id: str) -> int:
        """The stored session's version (0: none stored).

        Args:
            session_id: The opaque session-store id.

        Raises:
            ValidationError: A bad session id.
        """
        stored = await self._stored(session_task_id(session_id))
        return int(stored["v"]) if stored is not None else 0

    async def set(  # type: ignore[override]  # returns the version the framework ignores
        self, session_id: str, session: AgentSession, *, expected_version: int | None = None
    ) -> int:
        """Store the session's snapshot, replacing the stored one.

        Args:
            session_id: The opaque session-store id.
            session: The `AgentSession` (its `to_dict()` is stored).
            expected_version: Store only if the stored version is this one (0: only if
                none is stored); None: replace whatever is stored.

        Returns:
            The stored version.

        Raises:
            ValidationError: A bad id, session or expected version (nothing is written).
            Conflict: The stored version is not `expected_version` (another writer moved
                it), or writers kept racing.
            NotFound: The id's task is another owner's (on an owner-scoped view).
        """
        task_id = session_task_id(session_id)
        text = _snapshot(session)
        expected = _expected(expected_version)
        for _ in range(ATTEMPTS):
            stored = await self._stored(task_id)
            current = int(stored["v"]) if stored is not None else 0
            if expected is not None and current != expected:
                raise Conflict(
                    f"session_id {session_id!r}: expected version {expected}, stored {current}"
                )
            if await self._write(session_id, task_id, current + 1, text):
                return current + 1
            if expected is not None:
                raise Conflict(
                    f"session_id {session_id!r}: another writer stored version {current + 1}"
                )
        raise Conflict(f"session_id {session_id!r}: writers kept racing")

    async def _write(self, session_id: str, task_id: str, version: int, text: str) -> bool:
        """Store `version`; True if this writer's snapshot is the one stored."""
        writer = uuid.uuid4().hex
        state = AgentState.model_validate({FIELD: {"v": version, "w": writer, "s": text}})
        marker = InformationalMessage(
            id=derived_id("agent-framework-session", session_id, str(version)),
            content=[InformationalPart(informational_type="session-version", details=str(version))],
        )
        tasks = self.view.tasks
        try:
            await tasks.save_agent_state(task_id, state, messages=[marker])
        except NotFound:
            try:
                await tasks.create(
                    task_id=task_id, owner=self.owner, metadata={**MARKER, "session_id": session_id}
                )
            except Conflict:  # created meanwhile by another writer
                await tasks.get(task_id)  # NotFound if it is another owner's
            try:
                await tasks.save_agent_state(task_id, state, messages=[marker])
            except NotFound:  # deleted meanwhile: read the version again
                return False
        stored = await self._stored(task_id)
        return stored is not None and stored.get("w") == writer

    async def delete(self, session_id: str) -> None:
        """Delete the stored session, if any (its task, markers included).

        Args:
            session_id: The opaque session-store id.

        Raises:
            ValidationError: A bad session id.
        """
        try:
            await self.view.tasks.delete(session_task_id(session_id))
        except NotFound:
            return
