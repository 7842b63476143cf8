"""What the session-style integrations share: one mindstore task per framework session.

The LangChain history and the OpenAI Agents session both keep a conversation in one task,
created on the first write with the integration's marker and the session id as given in
its metadata, scoped to an owner (the store view's owner wins; a different one is
refused). The session id may be any string the framework accepts (`conversation_ids`:
1-512 characters, no control characters); the task is `task_id_for(session_id)`, and the
adapters keep passing `self.session_id` to `self._tasks`, a view of the repository that
knows which task that id names (`SessionTasks`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import ClassVar

from mindstore.errors import Conflict, NotFound, ValidationError
from mindstore.integrations.conversation_ids import (
    check_conversation_id,
    conversation_id_of,
    task_id_for,
)
from mindstore.model.header import TaskHeader
from mindstore.model.messages import AnyMessage
from mindstore.protocols import ConversationTasks, TaskRecord, TenantView
from mindstore.validation import check_owner


def scoped_owner(store: TenantView, owner: str | None) -> str | None:
    """The owner a session writes as: the store view's, or the one given (checked)."""
    owner = check_owner(owner)
    scoped = store.owner
    if scoped is not None:
        if owner is not None and owner != scoped:
            raise ValidationError(f"owner: this view is scoped to owner {scoped!r}")
        owner = scoped
    return owner


class SessionTasks:
    """The tasks repository as one session uses it: its session id (or its task id) names
    its task. Only the verbs the session adapters call."""

    def __init__(
        self,
        tasks: ConversationTasks,
        session_id: str,
        task_id: str,
        create: Callable[[Sequence[AnyMessage]], Awaitable[None]] | None = None,
    ) -> None:
        self._repository = tasks
        self._names = {session_id: task_id, task_id: task_id}
        self.create = create
        """Given while the session's task does not exist yet: reads see an empty
        conversation, and the first append creates the task holding its messages, in one
        insert (so a fault never leaves an empty task behind). It belongs to one write
        attempt: one session object may be written from several coroutines, threads and
        event loops at once, so the view holding it is never shared."""

    def _task(self, session_id: str) -> str:
        try:
            return self._names[session_id]
        except (KeyError, TypeError):
            raise ValidationError(
                f"session_id: this view holds one session, not {session_id!r}"
            ) from None

    async def get(self, session_id: str) -> TaskRecord:
        return await self._repository.get(self._task(session_id))

    async def header(self, session_id: str) -> TaskHeader:
        if self.create is not None:
            return TaskHeader()
        return await self._repository.header(self._task(session_id))

    async def messages(
        self, session_id: str, start: int = 0, limit: int | None = None
    ) -> list[AnyMessage]:
        return await self._repository.messages(self._task(session_id), start, limit)

    async def tail(self, session_id: str, count: int = 50) -> list[AnyMessage]:
        if self.create is not None:
            return []
        return await self._repository.tail(self._task(session_id), count)

    async def add_messages(
        self, session_id: str, messages: Sequence[AnyMessage]
    ) -> list[AnyMessage]:
        task_id = self._task(session_id)
        create, self.create = self.create, None
        if create is not None and await _created(create, messages):
            return await self._repository.tail(task_id, len(messages))
        return await self._repository.add_messages(task_id, messages)

    async def retract_last(
        self, session_id: str, expected_id: str | None = None
    ) -> AnyMessage | None:
        return await self._repository.retract_last(self._task(session_id), expected_id=expected_id)

    async def delete(self, session_id: str) -> bool:
        return await self._repository.delete(self._task(session_id))


class TaskSession:
    """The task behind one framework session: created lazily, written with one retry."""

    MARKER: ClassVar[dict[str, str]]

    def __init__(
        self,
        session_id: str,
        store: TenantView,
        *,
        owner: str | None = None,
        title: str | None = None,
    ) -> None:
        self.session_id = check_conversation_id(session_id, "session_id")
        self.task_id = task_id_for(session_id, "session_id")
        self.owner = scoped_owner(store, owner)
        self.title = title
        self._repository = store.tasks
        self._tasks = SessionTasks(store.tasks, self.session_id, self.task_id)
        self._exists = False

    @staticmethod
    def listed_id(record: TaskRecord) -> str:
        """The session id a listed task holds, as the framework gave it.

        Args:
            record: A task record from `tasks.list`.

        Returns:
            The session id.
        """
        return conversation_id_of(record)

    async def _attempt(self) -> SessionTasks:
        """The view one write attempt uses: if the session's task is not there yet, its first
        append creates it with its messages (`SessionTasks.create`); another owner's task of
        that id is NotFound."""
        if not self._exists:
            try:
                await self._repository.get(self.task_id)
            except NotFound:
                return SessionTasks(self._repository, self.session_id, self.task_id, self._create)
            self._exists = True
        return self._tasks

    async def _create(self, messages: Sequence[AnyMessage]) -> None:
        """The session's task, holding `messages` (one insert); a task of that id already
        there (a racing writer, a retry whose insert landed) is Conflict."""
        await self._repository.create(
            task_id=self.task_id,
            owner=self.owner,
            title=self.title,
            messages=messages,
            metadata={**self.MARKER, "session_id": self.session_id},
        )
        self._exists = True

    async def _write(self, write: Callable[[SessionTasks], Awaitable[None]]) -> None:
        """Run `write` through a view of the session's task (one that creates it, if it is
        not there yet); if another session object cleared it meanwhile (NotFound), start
        afresh once."""
        for attempt in range(2):
            try:
                await write(await self._attempt())
                return
            except NotFound:
                if attempt:
                    raise
                self._exists = False


async def _created(
    create: Callable[[Sequence[AnyMessage]], Awaitable[None]], messages: Sequence[AnyMessage]
) -> bool:
    """Create the task holding `messages`; False when one of that id exists (its messages
    are then appended as to any task: a retry of a create that landed is a replay)."""
    try:
        await create(messages)
    except Conflict:
        return False
    return True


LIST_PAGE = 1000
"""Tasks read per page when an adapter lists its conversations."""


async def conversations_of(view: TenantView, integration: str) -> list[str]:
    """The conversation ids of the view's tasks that `integration` wrote, in task order
    (another integration's tasks, and plain tasks, are left out)."""
    found: list[str] = []
    cursor: str | None = None
    while True:
        page = await view.tasks.list(limit=LIST_PAGE, cursor=cursor)
        found.extend(
            conversation_id_of(r)
            for r in page.items
            if (r.metadata or {}).get("integration") == integration
        )
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor
