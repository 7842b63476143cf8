"""The task repository's reads of whole tasks: records, headers, the in-memory task, listings.

`get`, `header` and `load` read one task; `list` and `count` page through and count a
view's tasks, keyset-paginated and index-backed, every filter a checked literal (never a
pattern or an operator). The reads of the history (ranges, levels, spans, the context
source) are `message_reads.MessageReads`. Scope (tenant, owner), the page reads and
decoding come from the port (`port.TaskPort`). Each read is documented here, once:
`TaskRepository` exposes it unchanged (`acme.tasks.get` is `TaskReads.get`).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from mindstore.crypto.fields import ENCRYPTED
from mindstore.errors import ValidationError
from mindstore.header_codec import header_from_document
from mindstore.ids import check_name, task_id_of
from mindstore.model.header import TaskHeader, TaskState
from mindstore.model.task import Task
from mindstore.repositories.pages import (
    STALE_READS,
    Paging,
    StalePage,
    kept_changing,
)
from mindstore.repositories.port import TaskPort
from mindstore.repositories.records import (
    Page,
    TaskRecord,
    decode_cursor,
    encode_cursor,
)
from mindstore.repositories.scope import READ_FIELDS
from mindstore.validation import (
    check_bool,
    check_enum,
    check_int,
    check_optional_datetime,
    check_owner,
    check_text,
)

MAX_PAGE = 1000
MAX_TITLE_FILTER = 200
"""The longest title filter of `list` and `count` (characters)."""
MAX_COUNT = 10_000
"""The most tasks `count` counts: a count past it says 'at least' (one bounded query)."""


class TaskReads:
    """The reads of whole tasks, over the port's primitives; no method here writes (legacy
    adoption aside). `TaskRepository` exposes each one as `acme.tasks.<read>`."""

    def __init__(self, port: TaskPort) -> None:
        self.port = port
        self.scope = port.scope

    # ------------------------------------------------------------------ headers
    async def get(self, task_id: str) -> TaskRecord:
        """The task's record: owner, title, state, counts, level, usage totals, timestamps.

        One read of the header fields (no messages).

        Args:
            task_id: The task.

        Returns:
            A `TaskRecord`.

        Raises:
            NotFound: No such task in this view.
            ValidationError: `task_id` is not a task id.

        Example:
            ```python
            record = await acme.tasks.get(task.id)
            record.seq, record.usage.cost
            ```
        """
        document = await self.port.header_document(task_id)
        document = await self.scope.opened_task(document, task_id)
        return TaskRecord.from_document(document, header_from_document(document))

    async def header(self, task_id: str) -> TaskHeader:
        """The task's full header (`TaskHeader`): what the planner folds a verb from (sequence,
        scope stack, open tool calls, usage, paging fields).

        Args:
            task_id: The task.

        Returns:
            The `TaskHeader`.

        Raises:
            NotFound: No such task in this view.
        """
        document = await self.port.header_document(task_id, tail=True)
        self.scope.require_keyring_to_read(document)  # its tail is a message
        return header_from_document(document)

    async def load(self, task_id: str) -> Task:
        """The whole task in memory as a `mindstore.Task` (the Mind Map's API), e.g. to run Mind
        Map code over it. Reads every message: for long tasks prefer the range reads.

        Args:
            task_id: The task.

        Returns:
            The in-memory `Task`.

        Raises:
            NotFound: No such task in this view.
            Conflict: The task's pages kept changing during the read.
        """
        for _attempt in range(STALE_READS):
            document = await self.scope.opened_task(await self.scope.find_task(task_id), task_id)
            paging = Paging.of(document)
            try:  # a paged task's older messages come from its pages, as of this version
                key = self.scope.key(task_id)
                sealed = await self.port.sealed.messages(key, paging, 0, paging.sealed)
            except StalePage:
                continue
            task = Task(
                id=task_id,
                state=document.get("state", "running"),
                content=document.get("content", []),
                messages=[],
            )
            stored = [*sealed, *(document.get("messages") or [])]
            task.messages.extend(await self.port.decode(task_id, stored))
            task._header = header_from_document(document)
            return task
        raise kept_changing(task_id)

    def _listing(
        self,
        owner: str | None,
        state: TaskState | str | None,
        updated_after: datetime | None,
        updated_before: datetime | None,
        owner_prefix: str | None,
        title: str | None,
    ) -> dict[str, Any] | None:
        """The filter of `list` and `count` (without a cursor), each argument checked; None
        when nothing can match (an owner-scoped view asked for another owner's prefix)."""
        owner = check_owner(owner)
        check_optional_datetime(updated_after, "updated_after")
        check_optional_datetime(updated_before, "updated_before")
        if owner_prefix is not None:
            check_name(owner_prefix, "owner_prefix")
            if owner is not None:
                raise ValidationError("owner_prefix: give owner or owner_prefix, not both")
        if title is not None:
            check_text(title, "title", max_chars=MAX_TITLE_FILTER, empty=False)
            if self.scope.cipher is not None:
                raise ValidationError(
                    "title: this store seals titles under its keyring, so the database "
                    "cannot filter them"
                )
        query: dict[str, Any] = {"tenant": self.scope.tenant}
        if self.scope.owner is not None:
            if owner is not None and owner != self.scope.owner:
                raise ValidationError(f"owner: this view is scoped to owner {self.scope.owner!r}")
            if owner_prefix is not None and not self.scope.owner.startswith(owner_prefix):
                return None
            owner, owner_prefix = self.scope.owner, None
        if owner is not None:
            query["owner"] = owner
        if owner_prefix is not None:  # anchored and escaped: the owner index serves it
            query["owner"] = {"$regex": "^" + re.escape(owner_prefix)}
        if state is not None:
            query["state"] = check_enum(state, TaskState, "state").value
        bounds: dict[str, datetime] = {}
        if updated_after is not None:
            bounds["$gt"] = updated_after
        if updated_before is not None:
            bounds["$lt"] = updated_before
        if bounds:
            query["updated_at"] = bounds
        if title is not None:  # a literal substring, whatever its characters
            query["title"] = {"$regex": "(?i)" + re.escape(title)}
        return query

    async def list(
        self,
        *,
        owner: str | None = None,
        state: TaskState | str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        owner_prefix: str | None = None,
        title: str | None = None,
        oldest_first: bool = False,
    ) -> Page[TaskRecord]:
        """One page of the tenant's tasks, newest first (oldest first with `oldest_first`).

        Keyset-paginated on `(updated_at, _id)`: stable under writes and index-backed (by owner,
        by state, or the whole tenant; with both an owner and a state, the owner's tasks are
        read and the other states skipped). Pass the page's `next_cursor` back as `cursor` for
        the next page; its `previous_cursor` with the opposite `oldest_first` reads the tasks
        before it, nearest first. Every filter is a literal value, never a pattern or an
        operator: `owner_prefix` is an escaped, anchored prefix (the owner index serves it),
        `title` an escaped case-insensitive substring, which the tenant's index cannot serve
        (its tasks are read and compared) and which a store with a keyring refuses, since its
        titles are sealed.

        Args:
            owner: Only this owner's tasks (an owner-scoped view: only its own).
            state: Only tasks in this state.
            limit: Page size, 1 to 1,000.
            cursor: The `next_cursor` (or `previous_cursor`) of a page.
            updated_after: Only tasks updated after this time.
            updated_before: Only tasks updated before this time.
            owner_prefix: Only owners whose name starts with this (not with `owner`).
            title: Only titles containing this, ignoring case (1 to 200 characters).
            oldest_first: Oldest first instead of newest first.

        Returns:
            A `Page` of `TaskRecord`s with `items`, `next_cursor` (None on the last page) and
            `previous_cursor`.

        Raises:
            ValidationError: A bad limit, state, owner, owner prefix, title, cursor or time
                (the message names the argument); an owner other than an owner-scoped view's;
                a title filter on a store with a keyring.

        Example:
            ```python
            page = await acme.tasks.list(owner="alice", limit=50)
            while page.next_cursor:
                page = await acme.tasks.list(owner="alice", cursor=page.next_cursor)
            ```
        """
        check_int(limit, "limit", minimum=1, maximum=MAX_PAGE)
        check_bool(oldest_first, "oldest_first")
        query = self._listing(owner, state, updated_after, updated_before, owner_prefix, title)
        if query is None:
            return Page[TaskRecord](items=[])
        after = "$gt" if oldest_first else "$lt"
        if cursor is not None:
            cursor_time, cursor_id = decode_cursor(cursor)
            query["$or"] = [
                {"updated_at": {after: cursor_time}},
                {"updated_at": cursor_time, "_id": {after: cursor_id}},
            ]
        direction = 1 if oldest_first else -1
        projection = dict.fromkeys(READ_FIELDS, 1)
        rows = (
            await self.scope.tasks.find(query, projection)
            .sort([("updated_at", direction), ("_id", direction)])
            .limit(limit + 1)
            .to_list(length=limit + 1)
        )
        if self.scope.cipher is not None:  # titles and metadata opened (mindstore.crypto)
            await self.scope.cipher.ready()
            rows = [self.scope.cipher.open_task(row, task_id_of(row["_id"])) for row in rows]
        else:
            self.scope.require_keyring(
                [{k: row.get(k) for k in ("title", "metadata", ENCRYPTED)} for row in rows]
            )
        items = [TaskRecord.from_document(row, header_from_document(row)) for row in rows[:limit]]
        next_cursor = previous_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_cursor = encode_cursor(last["updated_at"], last["_id"])
        if rows:
            previous_cursor = encode_cursor(rows[0]["updated_at"], rows[0]["_id"])
        return Page[TaskRecord](
            items=items, next_cursor=next_cursor, previous_cursor=previous_cursor
        )

    async def count(
        self,
        *,
        owner: str | None = None,
        state: TaskState | str | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        owner_prefix: str | None = None,
        title: str | None = None,
        at_most: int = MAX_COUNT,
    ) -> int:
        """How many tasks `list` pages through with the same filters, counted by one query
        that stops at `at_most` (a count equal to it means at least that many).

        Args:
            owner: Only this owner's tasks (an owner-scoped view: only its own).
            state: Only tasks in this state.
            updated_after: Only tasks updated after this time.
            updated_before: Only tasks updated before this time.
            owner_prefix: Only owners whose name starts with this (not with `owner`).
            title: Only titles containing this, ignoring case (1 to 200 characters).
            at_most: Where counting stops, 1 to 10,000.

        Returns:
            The number of matching tasks, at most `at_most`.

        Raises:
            ValidationError: A bad filter (as `list`) or `at_most` (the message names it).

        Example:
            ```python
            waiting = await acme.tasks.count(state="paused", owner_prefix="team-a.")
            ```
        """
        check_int(at_most, "at_most", minimum=1, maximum=MAX_COUNT)
        query = self._listing(owner, state, updated_after, updated_before, owner_prefix, title)
        if query is None:
            return 0
        return int(await self.scope.tasks.count_documents(query, limit=at_most))
