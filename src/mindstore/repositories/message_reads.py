"""The task repository's reads of a history: ranges of messages, levels, spans, context.

Reads never load more than they return. Every message read is a range of the message
array (`read_range`: ``$slice`` on the server) or a server-side filter (levels, spans,
the context view), so what lies beneath (the task document and its sealed pages) can
change without touching the features built on them. Scope (tenant, owner), the page reads
and decoding come from the port (`port.TaskPort`). Each read is documented here, once:
`TaskRepository` exposes it unchanged (`acme.tasks.tail` is `MessageReads.tail`).
"""

from __future__ import annotations

from typing import Any

from mindstore.errors import MissingConfig, NotFound
from mindstore.ids import check_name
from mindstore.model.header import TaskHeader
from mindstore.model.levels import SubTaskSpan
from mindstore.model.messages import AnyMessage, TaskConfigMessage, TaskEntryMessage
from mindstore.model.parts import TaskConfigPart
from mindstore.model.specs import resolve_alias
from mindstore.model.storage_form import unescape_keys
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
from mindstore.repositories.records import CheckpointRecord
from mindstore.validation import check_int, check_optional_int


class MessageReads:
    """The reads of a task's messages, over the port's primitives; no method here writes.
    `TaskRepository` exposes each one as `acme.tasks.<read>`."""

    def __init__(self, port: TaskPort) -> None:
        self.port = port
        self.scope = port.scope

    # ------------------------------------------------------------------ ranges
    async def read_range(
        self, task_id: str, start: int = 0, stop: int | None = None
    ) -> list[AnyMessage]:
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
        return await self.port.read_range(task_id, start, stop)

    async def messages(
        self, task_id: str, start: int = 0, limit: int | None = None
    ) -> list[AnyMessage]:
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
    ) -> tuple[int, list[AnyMessage], list[AnyMessage]]:
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

    async def tail(self, task_id: str, count: int = 50) -> list[AnyMessage]:
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
        found = await self.port.find_message(task_id, message_id)
        if found is None:
            return None
        return (await self.port.decode(task_id, [found[1]]))[0]

    async def get_updates(
        self, task_id: str, since_id: str | None = None, *, since_message_id: str | None = None
    ) -> list[AnyMessage]:
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
        found = await self.port.find_message(task_id, since_id)
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
        return (await self.scope.scope_header(task_id)).level

    async def level_messages(self, task_id: str, scope: str | None) -> list[AnyMessage]:
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

    async def _level_messages(self, task_id: str, scope: str | None) -> list[AnyMessage]:
        return await self.port.decode(
            task_id,
            await self.port.filtered(
                task_id, lambda query: pipelines.level_messages_pipeline(query, scope)
            ),
        )

    async def current_task_messages(self, task_id: str) -> list[AnyMessage]:
        """The messages of the current level (the innermost sub-task without an exit, or the root).

        Args:
            task_id: The task.

        Returns:
            The level's messages, in order.

        Raises:
            NotFound: No such task in this view.
        """
        header = await self.scope.scope_header(task_id)
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
        header = await self.scope.scope_header(task_id)
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

    async def sub_task_spans(self, task_id: str) -> list[SubTaskSpan]:
        """Every sub-task of the task as a `SubTaskSpan` (entry and exit indexes, depth, parent,
        message count, times), from an aggregation pipeline over the messages.

        Args:
            task_id: The task.

        Returns:
            The spans, in entry order.

        Raises:
            NotFound: No such task in this view.
        """
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
    ) -> tuple[TaskHeader, CheckpointRecord | None, list[AnyMessage]]:
        """The current level as the model should see it, filtered on the server.

        What `tasks.context` builds its window from: the level's messages minus compression
        messages and minus what the latest checkpoint dropped; the tool results it stubbed come
        back as skeletons (see `mindstore.compression.checkpoint_view`).

        Args:
            task_id: The task.

        Returns:
            `(header, the level's latest checkpoint or None, messages)`.

        Raises:
            NotFound: No such task in this view.
        """
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
        latest config message of the level.

        Args:
            task_id: The task.

        Returns:
            The config.

        Raises:
            MissingConfig: The task has no configuration (a `NotFound`).
            NotFound: No such task in this view.
        """
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
