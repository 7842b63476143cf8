"""The task repository's reads: headers, listings, ranges of messages, levels, spans.

Reads never load more than they return. Every message read is a range of the message
array (`read_range`: ``$slice`` on the server) or a server-side filter (levels, spans,
the context view), so what lies beneath (one document today) can change without touching
the features built on them. Scope (tenant, owner) comes from the engine's `_filter`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from datetime import datetime
from typing import Any

from mindstore.documents import header_from_document
from mindstore.errors import MissingConfig, NotFound, ValidationError
from mindstore.ids import check_name, page_key, task_id_of
from mindstore.model.header import TaskHeader, TaskState
from mindstore.model.messages import AnyMessage, TaskConfigMessage, TaskEntryMessage
from mindstore.model.paging import apply_pending
from mindstore.model.parts import TaskConfigPart
from mindstore.model.specs import resolve_alias
from mindstore.model.storage_form import unescape_keys
from mindstore.model.task import Task
from mindstore.model.views import SubTaskSpan
from mindstore.pipelines import boundaries as pipelines
from mindstore.pipelines import context as context_pipelines
from mindstore.pipelines.boundaries import with_fields
from mindstore.repositories.engine import MAX_SLICE, READ_FIELDS, TaskEngine
from mindstore.repositories.pages import (
    PAGING_FIELDS,
    STALE_READS,
    Paging,
    StalePage,
    kept_changing,
)
from mindstore.repositories.records import (
    CheckpointRecord,
    Page,
    TaskRecord,
    decode_cursor,
    encode_cursor,
)
from mindstore.validation import (
    check_enum,
    check_int,
    check_optional_datetime,
    check_optional_int,
    check_owner,
)

MAX_PAGE = 1000


class TaskReads(TaskEngine):
    """Everything that reads tasks; no method here writes (legacy adoption aside)."""

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
        document = await self._read_header_doc(task_id)
        document = await self._opened_task(document, task_id)
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
        return header_from_document(await self._read_header_doc(task_id, tail=True))

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
            document = await self._opened_task(await self._find_task(task_id), task_id)
            paging = Paging.of(document)
            try:  # a paged task's older messages come from its pages, as of this version
                sealed = await self._sealed_range(self._key(task_id), paging, 0, paging.sealed)
            except StalePage:
                continue
            task = Task(
                id=task_id,
                state=document.get("state", "running"),
                content=document.get("content", []),
                messages=[],
            )
            stored = [*sealed, *(document.get("messages") or [])]
            task.messages.extend(await self._decode(task_id, stored))
            task._header = header_from_document(document)
            return task
        raise kept_changing(task_id)

    async def list(
        self,
        *,
        owner: str | None = None,
        state: TaskState | str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        updated_after: datetime | None = None,
    ) -> Page[TaskRecord]:
        """One page of the tenant's tasks, newest first.

        Keyset-paginated on `(updated_at, _id)`: stable under writes and index-backed. Pass the
        page's `next_cursor` back as `cursor` for the next page.

        Args:
            owner: Only this owner's tasks (an owner-scoped view: only its own).
            state: Only tasks in this state.
            limit: Page size, 1 to 1,000.
            cursor: The `next_cursor` of the previous page.
            updated_after: Only tasks updated after this time.

        Returns:
            A `Page` of `TaskRecord`s with `items` and `next_cursor` (None on the last page).

        Raises:
            ValidationError: A bad limit, state, owner, cursor or time; an owner other than an
                owner-scoped view's.

        Example:
            ```python
            page = await acme.tasks.list(owner="alice", limit=50)
            while page.next_cursor:
                page = await acme.tasks.list(owner="alice", cursor=page.next_cursor)
            ```
        """
        check_int(limit, "limit", minimum=1, maximum=MAX_PAGE)
        owner = check_owner(owner)
        check_optional_datetime(updated_after, "updated_after")
        query: dict[str, Any] = {"tenant": self.tenant}
        if self.owner is not None:
            if owner is not None and owner != self.owner:
                raise ValidationError(f"owner: this view is scoped to owner {self.owner!r}")
            owner = self.owner
        if owner is not None:
            query["owner"] = owner
        if state is not None:
            query["state"] = check_enum(state, TaskState, "state").value
        if updated_after is not None:
            query["updated_at"] = {"$gt": updated_after}
        if cursor is not None:
            cursor_time, cursor_id = decode_cursor(cursor)
            query["$or"] = [
                {"updated_at": {"$lt": cursor_time}},
                {"updated_at": cursor_time, "_id": {"$lt": cursor_id}},
            ]
        projection = dict.fromkeys(READ_FIELDS, 1)
        rows = (
            await self._tasks.find(query, projection)
            .sort([("updated_at", -1), ("_id", -1)])
            .limit(limit + 1)
            .to_list(length=limit + 1)
        )
        if self.cipher is not None:  # titles and metadata opened (mindstore.crypto)
            await self.cipher.ready()
            rows = [self.cipher.open_task(row, task_id_of(row["_id"])) for row in rows]
        items = [TaskRecord.from_document(row, header_from_document(row)) for row in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_cursor = encode_cursor(last["updated_at"], last["_id"])
        return Page[TaskRecord](items=items, next_cursor=next_cursor)

    # ------------------------------------------------------------------ ranges
    def _sealed_guess(self, task_id: str) -> int:
        """Where the open page starts, as this process last wrote the task (0 if unknown:
        most tasks are never paged). A wrong guess costs one more read, never a wrong
        answer: the read returns the task's real mark and is redone with it."""
        entry = self._headers.get((self.tenant, task_id))
        return entry.header.sealed if entry is not None else 0

    @staticmethod
    def _open_slice(start: int, stop: int | None, sealed: int) -> dict[str, Any]:
        """The projection of the open page's part of ``[start, stop)`` (its array holds
        messages from `sealed` on) and the fields of a paged read."""
        projection: dict[str, Any] = dict.fromkeys(PAGING_FIELDS, 1)
        first = max(start - sealed, 0)
        if stop is None and first == 0:
            projection["messages"] = 1
        elif stop is None or stop > sealed:
            count = MAX_SLICE if stop is None else min(stop - sealed - first, MAX_SLICE)
            if count > 0:
                projection["messages"] = {"$slice": [min(first, MAX_SLICE), count]}
        return projection

    async def read_range(
        self, task_id: str, start: int = 0, stop: int | None = None
    ) -> builtins.list[AnyMessage]:
        """Messages `[start, stop)` of the history (`stop=None`: to the end).

        The one primitive the range reads build on: the open page's part is a `$slice` of the
        task document's array, the sealed part comes from the pages it overlaps (the first and
        last sliced on the server), so only the range travels, plus at most the open page when
        this process guessed the task's paging wrong.

        Args:
            task_id: The task.
            start: Index of the first message (0-based).
            stop: Index after the last message, or None for the end.

        Returns:
            The messages, in order.

        Raises:
            NotFound: No such task in this view.
            ValidationError: A negative or non-integer bound.
            Conflict: The task's pages kept changing during the read.
        """
        check_int(start, "start")
        check_optional_int(stop, "stop")
        if stop is not None and stop <= start:
            await self._read_header_doc(task_id)  # NotFound still applies
            return []
        key, guess = self._key(task_id), self._sealed_guess(task_id)
        for _attempt in range(STALE_READS):
            document = await self._find_task(task_id, self._open_slice(start, stop, guess))
            paging = Paging.of(document)
            if paging.sealed != guess:
                guess = paging.sealed
                continue
            try:
                sealed = await self._sealed_range(key, paging, start, stop or paging.sealed)
            except StalePage:
                continue
            return await self._decode(task_id, [*sealed, *(document.get("messages") or [])])
        raise kept_changing(task_id)

    async def messages(
        self, task_id: str, start: int = 0, limit: int | None = None
    ) -> builtins.list[AnyMessage]:
        """A window of the history, sliced on the server.

        Args:
            task_id: The task.
            start: Index of the first message (0-based).
            limit: At most this many messages (None: to the end).

        Returns:
            The messages, in order.

        Raises:
            NotFound: No such task in this view.
            ValidationError: A negative start or a limit below 1.
        """
        check_int(start, "start")
        check_optional_int(limit, "limit", minimum=1)
        return await self.read_range(task_id, start, None if limit is None else start + limit)

    async def ends(
        self, task_id: str, first: int, last: int
    ) -> tuple[int, builtins.list[AnyMessage], builtins.list[AnyMessage]]:
        """The message count, the first `first` and the last `last` messages, from one snapshot.

        One read of the task document with two `$slice`s (and, for a paged task, of the pages
        they reach), so a trimmed fork of a long dialog reads only what it keeps, and the count
        matches the slices even under concurrent appends.

        Args:
            task_id: The task.
            first: How many messages from the start (0 or more).
            last: How many messages from the end (1 or more).

        Returns:
            `(count, head, tail)`.

        Raises:
            NotFound: No such task in this view.
            ValidationError: A bound out of range.
        """
        check_int(first, "first", maximum=MAX_SLICE)
        check_int(last, "last", minimum=1, maximum=MAX_SLICE)
        key, guess = self._key(task_id), self._sealed_guess(task_id)
        for _attempt in range(STALE_READS):
            project: dict[str, Any] = {"_id": 0, **dict.fromkeys(PAGING_FIELDS, 1),
                                       "tail": {"$slice": ["$messages", -last]}}  # fmt: skip
            if first > guess:
                project["head"] = {"$slice": ["$messages", first - guess]}

            def build(query: dict[str, Any], project: dict[str, Any] = project) -> list[Any]:
                return [{"$match": query}, {"$project": project}]

            rows = await self._aggregate_task(task_id, build)
            row, paging = rows[0], Paging.of(rows[0])
            if paging.sealed != guess:
                guess = paging.sealed
                continue
            try:
                head = await self._sealed_range(key, paging, 0, min(first, paging.sealed))
                tail = row["tail"]
                if len(tail) < last:
                    older = max(paging.seq - last, 0)
                    tail = [*await self._sealed_range(key, paging, older, paging.sealed), *tail]
            except StalePage:
                continue
            head = [*head, *row.get("head", [])]
            return paging.seq, await self._decode(task_id, head), await self._decode(task_id, tail)
        raise kept_changing(task_id)

    async def tail(self, task_id: str, count: int = 50) -> builtins.list[AnyMessage]:
        """The last `count` messages: only they travel over the wire.

        Args:
            task_id: The task.
            count: How many (1 or more).

        Returns:
            The messages, oldest first.

        Raises:
            NotFound: No such task in this view.
            ValidationError: A count below 1.

        Example:
            ```python
            recent = await acme.tasks.tail(task.id, 50)
            ```
        """
        check_int(count, "count", minimum=1)
        key = self._key(task_id)
        projection = {**dict.fromkeys(PAGING_FIELDS, 1),
                      "messages": {"$slice": -min(count, MAX_SLICE)}}  # fmt: skip
        for _attempt in range(STALE_READS):
            document = await self._find_task(task_id, projection)
            paging, stored = Paging.of(document), document.get("messages") or []
            if len(stored) < count and paging.sealed:
                older = max(paging.sealed - (count - len(stored)), 0)
                try:
                    stored = [*await self._sealed_range(key, paging, older, paging.sealed), *stored]
                except StalePage:
                    continue
            return await self._decode(task_id, stored)
        raise kept_changing(task_id)

    async def _find_message(self, task_id: str, message_id: str) -> tuple[int, Any] | None:
        """(index in the history, stored message) of a message, open page first."""
        for _attempt in range(STALE_READS):
            paging = Paging.of(await self._find_task(task_id, dict.fromkeys(PAGING_FIELDS, 1)))
            rows = await (
                await self._tasks.aggregate(
                    pipelines.locate_message_pipeline(self._filter(task_id), message_id)
                )
            ).to_list(length=1)
            if rows:
                return paging.sealed + int(rows[0]["index"]), rows[0]["message"]
            try:
                found = await self._sealed_locate(self._key(task_id), paging, "id", [message_id])
            except StalePage:
                continue
            return found[0] if found else None
        raise kept_changing(task_id)

    async def get_message(self, task_id: str, message_id: str) -> AnyMessage | None:
        """One message by id, or None if the task has no such message (as in the Mind Map).

        Args:
            task_id: The task.
            message_id: The message's id.

        Returns:
            The message, or None.

        Raises:
            NotFound: No such task in this view.
            ValidationError: `message_id` is not a message id.
        """
        check_name(message_id, "message id")
        found = await self._find_message(task_id, message_id)
        if found is None:
            return None
        return (await self._decode(task_id, [found[1]]))[0]

    async def get_updates(
        self, task_id: str, since_id: str | None = None, *, since_message_id: str | None = None
    ) -> builtins.list[AnyMessage]:
        """The messages after `since_id`: what a client that has seen up to it is missing. All of
        them when `since_id` is empty or unknown, as in the Mind Map.

        Args:
            task_id: The task.
            since_id: The last message the caller has.
            since_message_id: The Mind Map's spelling of `since_id` (an alias).

        Returns:
            The newer messages, in order.

        Raises:
            NotFound: No such task in this view.
            ValidationError: A bad id, or `since_id` and `since_message_id` disagree.

        Example:
            ```python
            newer = await acme.tasks.get_updates(task.id, since_id="u-1")
            ```
        """
        since_id = resolve_alias(since_id, since_message_id, "since_id", "since_message_id")
        if since_id is None or since_id == "":
            return await self.messages(task_id)
        check_name(since_id, "since_id")
        found = await self._find_message(task_id, since_id)
        if found is None:
            return await self.messages(task_id)
        return await self.read_range(task_id, found[0] + 1)

    # ------------------------------------------------------------------ levels
    async def current_task_level(self, task_id: str) -> int:
        """How deep the task is: 0 at the root, 1 inside a sub-task, and so on.

        Args:
            task_id: The task.

        Returns:
            The level.

        Raises:
            NotFound: No such task in this view.
        """
        return (await self._scope_header(task_id)).level

    async def level_messages(self, task_id: str, scope: str | None) -> builtins.list[AnyMessage]:
        """The messages of one level, filtered on the server.

        Args:
            task_id: The task.
            scope: The entry id of a sub-task, or None for the root level.

        Returns:
            The level's messages, in order.

        Raises:
            NotFound: No such task in this view.
            ValidationError: `scope` is not a message id.
        """
        if scope is not None:
            check_name(scope, "scope")
        return await self._level_messages(task_id, scope)

    async def _level_messages(self, task_id: str, scope: str | None) -> builtins.list[AnyMessage]:
        return await self._decode(
            task_id,
            await self._filtered(
                task_id, lambda query: pipelines.level_messages_pipeline(query, scope)
            ),
        )

    async def _filtered(
        self, task_id: str, build: Callable[[dict[str, Any]], builtins.list[Any]]
    ) -> builtins.list[Any]:
        """The stored messages a one-row `$filter` pipeline keeps (its `messages` field),
        over the open page and, for a paged task, over the sealed pages (the same pipeline
        after its `$match`, pending changes applied), in history order."""
        for _attempt in range(STALE_READS):
            rows = await self._aggregate_task(
                task_id, lambda query: with_fields(build(query), PAGING_FIELDS)
            )
            paging = Paging.of(rows[0])
            if not paging.pages:
                return list(rows[0]["messages"])
            # a page with nothing kept sends no row (one per page would grow with the
            # pages, not with what is kept), unless it changed after the task was read
            kept = {"$or": [{"messages": {"$ne": []}}, {"version": {"$gt": paging.version}}]}
            tail = [*with_fields(build({})[1:], ("start", "version")), {"$match": kept}]
            try:
                pages = await self._sealed_rows(self._key(task_id), paging, tail)
            except StalePage:
                continue
            sealed = [message for row in pages for message in row.get("messages", [])]
            apply_pending(sealed, paging.pending)
            return [*sealed, *rows[0]["messages"]]
        raise kept_changing(task_id)

    async def _segments(
        self, task_id: str, stages: builtins.list[Any], open_stages: builtins.list[Any],
        *, keep: dict[str, Any] | None = None,
    ) -> tuple[Paging, builtins.list[Any], dict[str, Any]]:  # fmt: skip
        """A per-document pipeline over a task's segments: `stages` over each visible page
        (rows in page order, with `page`, `start`, `version`), `open_stages` over the task
        document (its row, with the paging fields). Task document first (`pages`).
        `keep`: a condition on a page's row; a page whose row fails it sends none (unless
        it changed after the task was read), so a pass over many pages that matter little
        does not send a row for each."""
        for _attempt in range(STALE_READS):
            rows = await self._aggregate_task(
                task_id, lambda query: [{"$match": query}, *with_fields(open_stages, PAGING_FIELDS)]
            )
            paging = Paging.of(rows[0])
            fields = ("page", "start", "version")
            tail = with_fields(stages, fields)
            if keep is not None:
                tail.append({"$match": {"$or": [keep, {"version": {"$gt": paging.version}}]}})
            try:
                pages = await self._sealed_rows(self._key(task_id), paging, tail)
            except StalePage:
                continue
            return paging, pages, rows[0]
        raise kept_changing(task_id)

    async def _page_rows(
        self, task_id: str, paging: Paging, pages: builtins.list[int], stages: builtins.list[Any]
    ) -> dict[int, Any]:
        """A per-document pipeline over some visible pages (by number), as of `paging`."""
        wanted = [page_key(self._key(task_id), n) for n in sorted(set(pages)) if n < paging.pages]
        if not wanted:
            return {}
        match = {"$match": {"_id": {"$in": wanted}, "tenant": self.tenant}}
        pipeline = [match, *with_fields(stages, ("page", "start", "version"))]
        rows = await (await self._pages.aggregate(pipeline)).to_list(length=None)
        self._checked(rows, paging)
        return {int(row["page"]): row for row in rows}

    async def current_task_messages(self, task_id: str) -> builtins.list[AnyMessage]:
        """The messages of the current level (the innermost sub-task without an exit, or the root).

        Args:
            task_id: The task.

        Returns:
            The level's messages, in order.

        Raises:
            NotFound: No such task in this view.
        """
        header = await self._scope_header(task_id)
        return await self._level_messages(task_id, header.current_scope)

    async def find_current_task_boundaries(self, task_id: str) -> tuple[int | None, int | None]:
        """Where the current level starts: `(entry index, None)` inside a sub-task, `(0, None)` at
        the root (the Mind Map's shape: the current level has no exit yet).

        Args:
            task_id: The task.

        Returns:
            `(start index, None)`.

        Raises:
            NotFound: No such task in this view.
        """
        header = await self._scope_header(task_id)
        if not header.scope_stack:
            return 0, None
        return header.scope_stack[-1].index, None

    async def task_boundaries(self, task_id: str, entry_id: str) -> tuple[int, int | None]:
        """The entry and exit indexes of any sub-task of the task.

        Args:
            task_id: The task.
            entry_id: The sub-task's entry message id.

        Returns:
            `(entry index, exit index or None while the sub-task is open)`.

        Raises:
            NotFound: No such task, or no entry `entry_id` in it.
            ValidationError: `entry_id` is not a message id.
        """
        check_name(entry_id, "entry id")
        paging = Paging.of(await self._find_task(task_id, dict.fromkeys(PAGING_FIELDS, 1)))
        rows = await (
            await self._tasks.aggregate(
                pipelines.boundaries_pipeline(self._filter(task_id), entry_id)
            )
        ).to_list(length=None)
        if paging.pages:  # entries and exits never change: no version check needed
            found = pipelines.boundaries_pipeline({}, entry_id, "$start")[1:]
            rows = [*await self._sealed_rows(self._key(task_id), paging, found), *rows]
        entry = [row["index"] for row in rows if row["role"] == "taskentry"]
        exits = [row["index"] for row in rows if row["role"] == "taskexit"]
        if not entry:
            raise NotFound(f"no task entry {entry_id!r} in task {task_id!r}")
        return int(entry[0]), (int(exits[0]) if exits else None)

    async def sub_task_spans(self, task_id: str) -> builtins.list[SubTaskSpan]:
        """Every sub-task of the task as a `SubTaskSpan` (entry and exit indexes, depth, parent,
        message count, times), from an aggregation pipeline over the messages.

        Args:
            task_id: The task.

        Returns:
            The spans, in entry order.

        Raises:
            NotFound: No such task in this view.
        """
        paging = Paging.of(await self._find_task(task_id, dict.fromkeys(PAGING_FIELDS, 1)))
        query = self._filter(task_id)
        rows = await (
            await self._tasks.aggregate(pipelines.spans_pipeline(query, partial=bool(paging.pages)))
        ).to_list(length=None)
        if paging.pages:  # what spans read (roles, scopes, start times) never changes
            sealed = pipelines.spans_pipeline({}, "$start", partial=True)[1:]
            rows = pipelines.merge_span_groups(
                await self._sealed_rows(self._key(task_id), paging, sealed), rows
            )
        return [
            SubTaskSpan(
                entry_id=row["_id"],
                entry_index=int(row["entry_index"]),
                exit_index=None if row.get("exit_index") is None else int(row["exit_index"]),
                depth=int(row["depth"]),
                parent_scope=row.get("parent_scope"),
                message_count=int(row["message_count"]),
                started_ts=row["started_ts"],
                finished_ts=row.get("finished_ts"),
            )
            for row in rows
        ]

    async def context_source(
        self, task_id: str
    ) -> tuple[TaskHeader, CheckpointRecord | None, builtins.list[AnyMessage]]:
        """The current level as the model should see it, filtered on the server.

        What `tasks.context` builds its window from: the level's messages minus compression
        messages and minus what the latest checkpoint dropped; the tool results it stubbed come
        back as skeletons (see `mindstore.compression.view`).

        Args:
            task_id: The task.

        Returns:
            `(header, the level's latest checkpoint or None, messages)`.

        Raises:
            NotFound: No such task in this view.
        """
        header = await self._scope_header(task_id)
        scope = header.current_scope
        marks = await self._filtered(
            task_id,
            lambda query: context_pipelines.latest_checkpoint_pipeline(query, scope, "messages"),
        )
        latest = None
        if marks:
            latest = CheckpointRecord.from_stored(unescape_keys(marks[-1]))
        excluded: list[str] = []
        stubbed: list[str] = []
        if latest is not None:
            stubbed = list(latest.metadata.get("stubbed_message_ids") or [])
            stubbed_set = set(stubbed)
            excluded = [mid for mid in latest.compressed_message_ids if mid not in stubbed_set]
        kept = await self._filtered(
            task_id,
            lambda query: context_pipelines.context_messages_pipeline(
                query, scope, excluded, stubbed
            ),
        )
        return header, latest, await self._decode(task_id, kept)

    async def current_task_config(self, task_id: str) -> TaskConfigPart:
        """The `TaskConfigPart` that applies now: the current sub-task's initial config, or the
        latest config message of the level.

        Args:
            task_id: The task.

        Returns:
            The config.

        Raises:
            MissingConfig: The task has no configuration (a `NotFound`).
            NotFound: No such task in this view.
        """
        header = await self._scope_header(task_id)
        location = header.current_config_index()
        if location is None:
            raise MissingConfig(f"task {task_id!r} has no task configuration")
        index, _kind = location
        message = (await self.read_range(task_id, index, index + 1))[0]
        entry = message.entry() if isinstance(message, TaskEntryMessage) else None
        if entry is not None:
            return entry.initial_task_config
        config = message.config() if isinstance(message, TaskConfigMessage) else None
        if config is not None:
            return config
        raise MissingConfig(f"task {task_id!r} has no task configuration")
