"""What the session-style integrations share: one mindstore task per framework session.

The LangChain history and the OpenAI Agents session both keep a conversation in one task
named by the session id, created on the first write with the integration's marker in its
metadata, scoped to an owner (the store view's owner wins; a different one is refused).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from mindstore.errors import Conflict, NotFound, ValidationError
from mindstore.ids import check_key
from mindstore.validation import check_owner


def scoped_owner(store: Any, owner: str | None) -> str | None:
    """The owner a session writes as: the store view's, or the one given (checked)."""
    owner = check_owner(owner)
    scoped = getattr(store, "owner", None)
    if scoped is not None:
        if owner is not None and owner != scoped:
            raise ValidationError(f"owner: this view is scoped to owner {scoped!r}")
        owner = scoped
    return owner


class TaskSession:
    """The task behind one framework session: created lazily, written with one retry."""

    MARKER: ClassVar[dict[str, str]]

    def __init__(
        self, session_id: str, store: Any, *, owner: str | None = None, title: str | None = None
    ) -> None:
        self.session_id = check_key(session_id, "session_id")
        self.owner = scoped_owner(store, owner)
        self.title = title
        self._tasks = store.tasks
        self._exists = False

    async def _ensure(self) -> None:
        """Create the session's task once; another owner's task of that id is NotFound."""
        if self._exists:
            return
        try:
            await self._tasks.create(
                task_id=self.session_id,
                owner=self.owner,
                title=self.title,
                metadata=dict(self.MARKER),
            )
        except Conflict:
            await self._tasks.get(self.session_id)  # NotFound if it is another owner's
        self._exists = True

    async def _write(self, write: Callable[[], Awaitable[None]]) -> None:
        """Run `write` against an existing task; if another session object cleared it
        meanwhile (NotFound), start afresh once."""
        for attempt in range(2):
            await self._ensure()
            try:
                await write()
                return
            except NotFound:
                if attempt:
                    raise
                self._exists = False
