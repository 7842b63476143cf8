"""The task repository's reads: headers, listings, ranges of messages, levels, spans.

Reads never load more than they return. Every message read is a range of the message
array (`read_range`: ``$slice`` on the server) or a server-side filter (levels, spans,
the context view), so what lies beneath (the task document and its sealed pages) can
change without touching the features built on them. Scope (tenant, owner), the page reads
and decoding come from the port (`port.TaskPort`); `TaskRepository` exposes these reads
and documents them.
"""

from __future__ import annotations

import builtins
import re
from datetime import datetime
from typing import Any

from mindstore.crypto.fields import ENCRYPTED
from mindstore.errors import MissingConfig, NotFound, ValidationError
from mindstore.header_codec import header_from_document
from mindstore.ids import check_name, task_id_of
from mindstore.model.header import TaskHeader, TaskState
from mindstore.model.levels import SubTaskSpan
from mindstore.model.messages import AnyMessage, TaskConfigMessage, TaskEntryMessage
from mindstore.model.parts import TaskConfigPart
from mindstore.model.specs import resolve_alias
from mindstore.model.storage_form import unescape_keys
from mindstore.model.task import Task
from mindstore.pipelines import boundaries as pipelines
from mindstore.pipelines import context as context_pipelines
from mindstore.repositories.pages import (
    PAGING_FIELDS,
    STALE_READS,
    Paging,
    StalePage,
    kept_changing,
)
from mindstore.repositories.port import MAX_SLICE, TaskPort
from mindstore.repositories.records import (
    CheckpointRecord,
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
    check_optional_int,
    check_owner,
    check_text,
)

MAX_PAGE = 1000
MAX_TITLE_FILTER = 200
"""The longest title filter of `list` and `count` (characters)."""
MAX_COUNT = 10_000
"""The most tasks `count` counts: a count past it says 'at least' (one bounded query)."""


class TaskReads:
    """Everything that reads tasks, over the port's primitives; no method here writes
    (legacy adoption aside). `TaskRepository` exposes each read, documented there."""

    def __init__(self, port: TaskPort) -> None:
        self.port = port
        self.scope = port.scope

    # ------------------------------------------------------------------ headers
    async def get(self, task_id: str) -> TaskRecord:
        """The task's record: owner, title, state, counts, level, usage totals, timestamps."""
        document = await self.port.header_document(task_id)
        document = await self.scope.opened_task(document, task_id)
        return TaskRecord.from_document(document, header_from_document(document))

    async def header(self, task_id: str) -> TaskHeader:
        """The task's full header (`TaskHeader`): what the planner folds a verb from (sequence,
        scope stack, open tool calls, usage, paging fields)."""
        document = await self.port.header_document(task_id, tail=True)
        self.scope.require_keyring_to_read(document)  # its tail is a message
        return header_from_document(document)

    async def load(self, task_id: str) -> Task:
        """The whole task in memory as a `mindstore.Task` (the Mind Map's API), e.g. to run Mind
        Map code over it. Reads every message: for long tasks prefer the range reads."""
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
        """One page of the tenant's tasks, newest first (oldest first with `oldest_first`)."""
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
        """How many tasks `list` would page through with these filters, up to `at_most`."""
        check_int(at_most, "at_most", minimum=1, maximum=MAX_COUNT)
        query = self._listing(owner, state, updated_after, updated_before, owner_prefix, title)
        if query is None:
            return 0
        return int(await self.scope.tasks.count_documents(query, limit=at_most))

    # ------------------------------------------------------------------ ranges

    async def read_range(
        self, task_id: str, start: int = 0, stop: int | None = None
    ) -> builtins.list[AnyMessage]:
        """Messages `[start, stop)` of the history (`stop=None`: to the end)."""
        return await self.port.read_range(task_id, start, stop)

    async def messages(
        self, task_id: str, start: int = 0, limit: int | None = None
    ) -> builtins.list[AnyMessage]:
        """A window of the history, sliced on the server."""
        check_int(start, "start")
        check_optional_int(limit, "limit", minimum=1)
        return await self.read_range(task_id, start, None if limit is None else start + limit)

    async def ends(
        self, task_id: str, first: int, last: int
    ) -> tuple[int, builtins.list[AnyMessage], builtins.list[AnyMessage]]:
        """The message count, the first `first` and the last `last` messages, from one snapshot."""
        check_int(first, "first", maximum=MAX_SLICE)
        check_int(last, "last", minimum=1, maximum=MAX_SLICE)
        key, guess = self.scope.key(task_id), self.port.sealed_guess(task_id)
        for _attempt in range(STALE_READS):
            project: dict[str, Any] = {"_id": 0, **dict.fromkeys(PAGING_FIELDS, 1),
                                       "tail": {"$slice": ["$messages", -last]}}  # fmt: skip
            if first > guess:
                project["head"] = {"$slice": ["$messages", first - guess]}

            def build(query: dict[str, Any], project: dict[str, Any] = project) -> list[Any]:
                return [{"$match": query}, {"$project": project}]

            rows = await self.scope.aggregate_task(task_id, build)
            self.scope.require_keyring_to_read(rows[0])
            row, paging = rows[0], Paging.of(rows[0])
            if paging.sealed != guess:
                guess = paging.sealed
                continue
            try:
                head = await self.port.sealed.messages(key, paging, 0, min(first, paging.sealed))
                tail = row["tail"]
                if len(tail) < last:
                    older = max(paging.seq - last, 0)
                    older_part = await self.port.sealed.messages(key, paging, older, paging.sealed)
                    tail = [*older_part, *tail]
            except StalePage:
                continue
            head = [*head, *row.get("head", [])]
            decode = self.port.decode
            return paging.seq, await decode(task_id, head), await decode(task_id, tail)
        raise kept_changing(task_id)

    async def tail(self, task_id: str, count: int = 50) -> builtins.list[AnyMessage]:
        """The last `count` messages: only they travel over the wire."""
        check_int(count, "count", minimum=1)
        key = self.scope.key(task_id)
        projection = {**dict.fromkeys(PAGING_FIELDS, 1),
                      "messages": {"$slice": -min(count, MAX_SLICE)}}  # fmt: skip
        for _attempt in range(STALE_READS):
            document = await self.scope.find_task(task_id, projection)
            self.scope.require_keyring_to_read(document)
            paging, stored = Paging.of(document), document.get("messages") or []
            if len(stored) < count and paging.sealed:
                older = max(paging.sealed - (count - len(stored)), 0)
                try:
                    older_part = await self.port.sealed.messages(key, paging, older, paging.sealed)
                    stored = [*older_part, *stored]
                except StalePage:
                    continue
            return await self.port.decode(task_id, stored)
        raise kept_changing(task_id)

    async def get_message(self, task_id: str, message_id: str) -> AnyMessage | None:
        """One message by id, or None if the task has no such message (as in the Mind Map)."""
        check_name(message_id, "message id")
        found = await self.port.find_message(task_id, message_id)
        if found is None:
            return None
        return (await self.port.decode(task_id, [found[1]]))[0]

    async def get_updates(
        self, task_id: str, since_id: str | None = None, *, since_message_id: str | None = None
    ) -> builtins.list[AnyMessage]:
        """The messages after `since_id`: what a client that has seen up to it is missing. All of
        them when `since_id` is empty or unknown, as in the Mind Map."""
        since_id = resolve_alias(since_id, since_message_id, "since_id", "since_message_id")
        if since_id is None or since_id == "":
            return await self.messages(task_id)
        check_name(since_id, "since_id")
        found = await self.port.find_message(task_id, since_id)
        if found is None:
            return await self.messages(task_id)
        return await self.read_range(task_id, found[0] + 1)

    # ------------------------------------------------------------------ levels
    async def current_task_level(self, task_id: str) -> int:
        """How deep the task is: 0 at the root, 1 inside a sub-task, and so on."""
        return (await self.scope.scope_header(task_id)).level

    async def level_messages(self, task_id: str, scope: str | None) -> builtins.list[AnyMessage]:
        """The messages of one level, filtered on the server."""
        if scope is not None:
            check_name(scope, "scope")
        return await self._level_messages(task_id, scope)

    async def _level_messages(self, task_id: str, scope: str | None) -> builtins.list[AnyMessage]:
        return await self.port.decode(
            task_id,
            await self.port.filtered(
                task_id, lambda query: pipelines.level_messages_pipeline(query, scope)
            ),
        )

    async def current_task_messages(self, task_id: str) -> builtins.list[AnyMessage]:
        """The messages of the current level (the innermost sub-task without an exit, or the
        root)."""
        header = await self.scope.scope_header(task_id)
        return await self._level_messages(task_id, header.current_scope)

    async def find_current_task_boundaries(self, task_id: str) -> tuple[int | None, int | None]:
        """Where the current level starts: `(entry index, None)` inside a sub-task, `(0, None)` at
        the root (the Mind Map's shape: the current level has no exit yet)."""
        header = await self.scope.scope_header(task_id)
        if not header.scope_stack:
            return 0, None
        return header.scope_stack[-1].index, None

    async def task_boundaries(self, task_id: str, entry_id: str) -> tuple[int, int | None]:
        """The entry and exit indexes of any sub-task of the task."""
        check_name(entry_id, "entry id")
        paging = Paging.of(await self._read_paging(task_id))
        rows = await (
            await self.scope.tasks.aggregate(
                pipelines.boundaries_pipeline(self.scope.filter(task_id), entry_id)
            )
        ).to_list(length=None)
        if paging.pages:  # entries and exits never change: no version check needed
            found = pipelines.boundaries_pipeline({}, entry_id, "$start")[1:]
            rows = [*await self.port.sealed.rows(self.scope.key(task_id), paging, found), *rows]
        entry = [row["index"] for row in rows if row["role"] == "taskentry"]
        exits = [row["index"] for row in rows if row["role"] == "taskexit"]
        if not entry:
            raise NotFound(f"no task entry {entry_id!r} in task {task_id!r}")
        return int(entry[0]), (int(exits[0]) if exits else None)

    async def _read_paging(self, task_id: str) -> dict[str, Any]:
        """The task's paging fields, for a read (refused without a keyring when marked)."""
        document = await self.scope.find_task(task_id, dict.fromkeys(PAGING_FIELDS, 1))
        self.scope.require_keyring_to_read(document)
        return document

    async def sub_task_spans(self, task_id: str) -> builtins.list[SubTaskSpan]:
        """Every sub-task of the task as a `SubTaskSpan` (entry and exit indexes, depth, parent,
        message count, times), from an aggregation pipeline over the messages."""
        paging = Paging.of(await self._read_paging(task_id))
        query = self.scope.filter(task_id)
        rows = await (
            await self.scope.tasks.aggregate(
                pipelines.spans_pipeline(query, partial=bool(paging.pages))
            )
        ).to_list(length=None)
        if paging.pages:  # what spans read (roles, scopes, start times) never changes
            sealed = pipelines.spans_pipeline({}, "$start", partial=True)[1:]
            rows = pipelines.merge_span_groups(
                await self.port.sealed.rows(self.scope.key(task_id), paging, sealed), rows
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
        """The current level as the model should see it, filtered on the server."""
        header = await self.scope.scope_header(task_id)
        scope = header.current_scope
        marks = await self.port.filtered(
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
        kept = await self.port.filtered(
            task_id,
            lambda query: context_pipelines.context_messages_pipeline(
                query, scope, excluded, stubbed
            ),
        )
        return header, latest, await self.port.decode(task_id, kept)

    async def current_task_config(self, task_id: str) -> TaskConfigPart:
        """The `TaskConfigPart` that applies now: the current sub-task's initial config, or the
        latest config message of the level."""
        header = await self.scope.scope_header(task_id)
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
