"""The task repository's reads: headers, listings, ranges of messages, levels, spans.

Reads never load more than they return. Every message read is a range of the message
array (`read_range`: ``$slice`` on the server) or a server-side filter (levels, spans,
the context view), so what lies beneath (one document today) can change without touching
the features built on them. Scope (tenant, owner) comes from the engine's `_filter`.
"""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import Any

from mindstore.documents import header_from_document
from mindstore.errors import MissingConfig, NotFound, ValidationError
from mindstore.ids import check_name
from mindstore.model.header import TaskHeader, TaskState
from mindstore.model.messages import AnyMessage, TaskConfigMessage, TaskEntryMessage
from mindstore.model.parts import TaskConfigPart
from mindstore.model.specs import resolve_alias
from mindstore.model.storage_form import unescape_keys
from mindstore.model.task import Task
from mindstore.model.views import SubTaskSpan
from mindstore.pipelines import boundaries as pipelines
from mindstore.pipelines import context as context_pipelines
from mindstore.repositories.engine import MAX_SLICE, READ_FIELDS, TaskEngine
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
        document = await self._read_header_doc(task_id)
        return TaskRecord.from_document(document, header_from_document(document))

    async def header(self, task_id: str) -> TaskHeader:
        return header_from_document(await self._read_header_doc(task_id, tail=True))

    async def load(self, task_id: str) -> Task:
        """The whole task in memory (the Mind Map `Task`), e.g. to run Mind Map code over it."""
        document = await self._find_task(task_id)
        task = Task(
            id=task_id,
            state=document.get("state", "running"),
            content=document.get("content", []),
            messages=[],
        )
        task.messages.extend(await self._decode(task_id, document.get("messages", [])))
        task._header = header_from_document(document)
        return task

    async def list(
        self,
        *,
        owner: str | None = None,
        state: TaskState | str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        updated_after: datetime | None = None,
    ) -> Page[TaskRecord]:
        """Newest first, keyset-paginated on (updated_at, _id): stable and index-backed."""
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
        items = [TaskRecord.from_document(row, header_from_document(row)) for row in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_cursor = encode_cursor(last["updated_at"], last["_id"])
        return Page[TaskRecord](items=items, next_cursor=next_cursor)

    # ------------------------------------------------------------------ ranges
    async def read_range(
        self, task_id: str, start: int = 0, stop: int | None = None
    ) -> builtins.list[AnyMessage]:
        """Messages ``[start, stop)`` of the history (``stop=None``: to the end).

        The one primitive the range reads build on: a ``$slice`` of the array, so only
        the range travels.
        """
        check_int(start, "start")
        check_optional_int(stop, "stop")
        if stop is not None and stop <= start:
            await self._read_header_doc(task_id)  # NotFound still applies
            return []
        if start == 0 and stop is None:
            projection: dict[str, Any] = {"messages": 1}
        else:
            count = MAX_SLICE if stop is None else min(stop - start, MAX_SLICE)
            projection = {"messages": {"$slice": [min(start, MAX_SLICE), count]}, "seq": 1}
        document = await self._find_task(task_id, projection)
        return await self._decode(task_id, document.get("messages", []))

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
        """(message count, first `first` messages, last `last` messages) from one snapshot.

        One pipeline with two `$slice`s, so a trimmed fork of a long dialog reads only
        what it keeps, and the count matches the slices even under concurrent appends.
        """
        check_int(first, "first", maximum=MAX_SLICE)
        check_int(last, "last", minimum=1, maximum=MAX_SLICE)
        project: dict[str, Any] = {"_id": 0, "seq": 1, "tail": {"$slice": ["$messages", -last]}}
        if first:
            project["head"] = {"$slice": ["$messages", first]}
        rows = await self._aggregate_task(
            task_id, lambda query: [{"$match": query}, {"$project": project}]
        )
        row = rows[0]
        head = await self._decode(task_id, row.get("head", []))
        return int(row.get("seq", 0)), head, await self._decode(task_id, row["tail"])

    async def tail(self, task_id: str, count: int = 50) -> builtins.list[AnyMessage]:
        """The last `count` messages: only they travel over the wire."""
        check_int(count, "count", minimum=1)
        document = await self._find_task(
            task_id, {"seq": 1, "messages": {"$slice": -min(count, MAX_SLICE)}}
        )
        return await self._decode(task_id, document.get("messages", []))

    async def get_message(self, task_id: str, message_id: str) -> AnyMessage | None:
        """The message, or None if the task has no such message (as in the Mind Map)."""
        check_name(message_id, "message id")
        await self._read_header_doc(task_id)
        rows = await (
            await self._tasks.aggregate(
                pipelines.locate_message_pipeline(self._filter(task_id), message_id)
            )
        ).to_list(length=1)
        if not rows:
            return None
        return (await self._decode(task_id, [rows[0]["message"]]))[0]

    async def get_updates(
        self, task_id: str, since_id: str | None = None, *, since_message_id: str | None = None
    ) -> builtins.list[AnyMessage]:
        """Messages after `since_id` (the Mind Map's `since_message_id`); all of them if it
        is empty or unknown, as in the Mind Map."""
        since_id = resolve_alias(since_id, since_message_id, "since_id", "since_message_id")
        if since_id is None or since_id == "":
            return await self.messages(task_id)
        check_name(since_id, "since_id")
        rows = await (
            await self._tasks.aggregate(
                pipelines.locate_message_pipeline(self._filter(task_id), since_id, ("seq",))
            )
        ).to_list(length=1)
        if not rows:
            return await self.messages(task_id)
        index = int(rows[0]["index"])
        if index + 1 >= rows[0]["seq"]:
            return []
        return await self.messages(task_id, start=index + 1)

    # ------------------------------------------------------------------ levels
    async def current_task_level(self, task_id: str) -> int:
        return (await self._scope_header(task_id)).level

    async def level_messages(self, task_id: str, scope: str | None) -> builtins.list[AnyMessage]:
        """The messages of one level: `scope` is the entry id of a sub-task, None the root."""
        if scope is not None:
            check_name(scope, "scope")
        return await self._level_messages(task_id, scope)

    async def _level_messages(self, task_id: str, scope: str | None) -> builtins.list[AnyMessage]:
        rows = await self._aggregate_task(
            task_id, lambda query: pipelines.level_messages_pipeline(query, scope)
        )
        return await self._decode(task_id, rows[0]["messages"])

    async def current_task_messages(self, task_id: str) -> builtins.list[AnyMessage]:
        header = await self._scope_header(task_id)
        return await self._level_messages(task_id, header.current_scope)

    async def find_current_task_boundaries(self, task_id: str) -> tuple[int | None, int | None]:
        header = await self._scope_header(task_id)
        if not header.scope_stack:
            return 0, None
        return header.scope_stack[-1].index, None

    async def task_boundaries(self, task_id: str, entry_id: str) -> tuple[int, int | None]:
        """(entry index, exit index or None) of any sub-task of the task."""
        check_name(entry_id, "entry id")
        await self._read_header_doc(task_id)
        rows = await (
            await self._tasks.aggregate(
                pipelines.boundaries_pipeline(self._filter(task_id), entry_id)
            )
        ).to_list(length=None)
        entry = [row["index"] for row in rows if row["role"] == "taskentry"]
        exits = [row["index"] for row in rows if row["role"] == "taskexit"]
        if not entry:
            raise NotFound(f"no task entry {entry_id!r} in task {task_id!r}")
        return int(entry[0]), (int(exits[0]) if exits else None)

    async def sub_task_spans(self, task_id: str) -> builtins.list[SubTaskSpan]:
        await self._read_header_doc(task_id)
        rows = await (
            await self._tasks.aggregate(pipelines.spans_pipeline(self._filter(task_id)))
        ).to_list(length=None)
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

        Returns the header, the level's latest checkpoint (or None) and the level's messages
        minus compression messages and minus what that checkpoint dropped; the tool results
        it stubbed come back as skeletons (see `mindstore.compression.view`).
        """
        header = await self._scope_header(task_id)
        scope = header.current_scope
        rows = await self._aggregate_task(
            task_id, lambda query: context_pipelines.latest_checkpoint_pipeline(query, scope)
        )
        latest = None
        if rows[0].get("latest"):
            latest = CheckpointRecord.from_stored(unescape_keys(rows[0]["latest"][0]))
        excluded: list[str] = []
        stubbed: list[str] = []
        if latest is not None:
            stubbed = list(latest.metadata.get("stubbed_message_ids") or [])
            stubbed_set = set(stubbed)
            excluded = [mid for mid in latest.compressed_message_ids if mid not in stubbed_set]
        rows = await self._aggregate_task(
            task_id,
            lambda query: context_pipelines.context_messages_pipeline(
                query, scope, excluded, stubbed
            ),
        )
        return header, latest, await self._decode(task_id, rows[0]["messages"])

    async def current_task_config(self, task_id: str) -> TaskConfigPart:
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
