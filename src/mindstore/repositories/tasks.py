"""The task repository: every seed-000 verb as one guarded MongoDB update.

A verb reads the task header (a projection that leaves the message array on the server),
asks the pure planner what to write, and applies the plan with one `update_one` whose
filter pins the header `version` and, for patches, the id of each patched message. A lost
race matches nothing: the verb re-reads and re-plans (bounded, jittered) and finally
raises `Conflict`. Multi-message verbs (task entry, task exit with its tool answer) are a
single update, so a reader never sees half of one.

Within one process, writers to the same task queue on a per-task lock first, so the
optimistic retry loop only pays for races with *other* processes.
"""

from __future__ import annotations

import asyncio
import logging
import random
import weakref
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Awaitable, Callable, Sequence

from pymongo.errors import DuplicateKeyError

from mindstore.documents import DIALOG_NODES, PAYLOADS, header_from_document, utcnow
from mindstore.errors import Conflict, MindstoreError, NotFound, TaskTooLarge, ValidationError
from mindstore.model import planner as plans
from mindstore.model.base import JSON, new_id, now_ts
from mindstore.model.header import HEADER_FIELDS, TaskHeader, TaskState
from mindstore.model.messages import AnyMessage, TaskConfigMessage, Usage, parse_message, parse_messages
from mindstore.model.parts import (
    ImagePart,
    InformationalPart,
    ObserverResult,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolResultContent,
)
from mindstore.model.planner import Plan, check_id, check_message_id
from mindstore.model.storage_form import bson_size, escape_keys, unescape_keys
from mindstore.model.task import Task, check_transition
from mindstore.model.views import SubTaskSpan
from mindstore.payloads import Offloader, find_markers, replace_markers
from mindstore.pipelines import boundaries as pipelines
from mindstore.pipelines import context as context_pipelines
from mindstore.repositories.header_cache import CachedHeader, HeaderCache
from mindstore.repositories.records import (
    CheckpointRecord,
    Page,
    TaskRecord,
    decode_cursor,
    encode_cursor,
)
from mindstore.repositories.updates import build_task_update

MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
# Room kept for the header fields and the array's index keys, which `size_bytes` excludes.
HEADER_BUDGET_BYTES = 64 * 1024
READ_FIELDS: tuple[str, ...] = (
    "_id", "tenant", "owner", "title", "state", "created_at", "updated_at", "version",
    "metadata", *HEADER_FIELDS,
)  # fmt: skip

PlanFn = Callable[[TaskHeader, dict[str, Any] | None], Plan]


logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded optimistic retries with jittered exponential backoff."""

    attempts: int = 30
    base_delay: float = 0.0005
    max_delay: float = 0.05

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.max_delay, self.base_delay * (2**attempt)))


def document_estimate(header: TaskHeader) -> int:
    """Upper estimate of the stored document size: messages, their array keys, the header."""
    return header.size_bytes + header.seq * 8 + HEADER_BUDGET_BYTES


class TaskRepository:
    def __init__(
        self,
        database: Any,
        tenant: str,
        *,
        owner: str | None = None,
        locks: weakref.WeakValueDictionary | None = None,
        retry: RetryPolicy | None = None,
        offload_threshold: int = 256 * 1024,
        max_document_bytes: int = MAX_DOCUMENT_BYTES,
        headers: HeaderCache | None = None,
    ) -> None:
        self.tenant = check_id(tenant, "tenant")
        self.owner = owner
        self._tasks = database["tasks"]
        self._payloads = database[PAYLOADS]
        self._nodes = database[DIALOG_NODES]
        self._locks = locks if locks is not None else weakref.WeakValueDictionary()
        self.retry = retry or RetryPolicy()
        self.offload_threshold = offload_threshold
        self.max_document_bytes = max_document_bytes
        self._headers = headers if headers is not None else HeaderCache()

    # ------------------------------------------------------------------ plumbing
    def _lock(self, task_id: str) -> asyncio.Lock:
        key = (self.tenant, task_id)
        lock = self._locks.get(key)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[key] = lock
        return lock

    def _filter(self, task_id: str) -> dict[str, Any]:
        query: dict[str, Any] = {"_id": check_id(task_id, "task id"), "tenant": self.tenant}
        if self.owner is not None:
            query["owner"] = self.owner
        return query

    async def _read_header_doc(self, task_id: str, *, tail: bool = False) -> dict[str, Any]:
        projection: dict[str, Any] = {field: 1 for field in READ_FIELDS}
        if tail:
            projection["messages"] = {"$slice": [-1, 1]}
        document = await self._tasks.find_one(self._filter(task_id), projection)
        if document is None:
            raise NotFound(f"no task {task_id!r} for tenant {self.tenant!r}")
        return document

    async def _locate(self, task_id: str, message_id: str) -> tuple[dict[str, Any], int, AnyMessage]:
        """The header and one message (with its index) from the same document snapshot."""
        check_message_id(message_id)
        document = await self._read_header_doc(task_id, tail=True)
        tail = document.get("tail") or {}
        if tail.get("id") == message_id and document.get("messages"):
            return document, tail["index"], self._decode_raw(document["messages"])[0]
        cursor = await self._tasks.aggregate(
            pipelines.locate_message_pipeline(task_id, self.tenant, message_id, READ_FIELDS)
        )
        rows = await cursor.to_list(length=1)
        if not rows:
            raise NotFound(f"no message {message_id!r} in task {task_id!r}")
        row = rows[0]
        row["_id"] = task_id
        if self.owner is not None and row.get("owner") != self.owner:
            raise NotFound(f"no task {task_id!r} for tenant {self.tenant!r}")
        return row, int(row["index"]), self._decode_raw([row["message"]])[0]

    def _decode_raw(self, documents: list[dict[str, Any]]) -> list[AnyMessage]:
        """Stored message documents -> messages, without payload rehydration (planning)."""
        return parse_messages([unescape_keys(doc) for doc in documents])

    async def _decode(self, documents: list[dict[str, Any]]) -> list[AnyMessage]:
        """Stored message documents -> messages as the caller stored them."""
        markers: set[str] = set()
        find_markers(documents, markers)
        if markers:
            found: dict[str, Any] = {}
            cursor = self._payloads.find(
                {"_id": {"$in": sorted(markers)}, "tenant": self.tenant}, {"data": 1}
            )
            async for payload in cursor:
                found[payload["_id"]] = payload["data"]
            documents = replace_markers(documents, found)
        return parse_messages([unescape_keys(doc) for doc in documents])

    async def _store_payloads(self, task_id: str, offloader: Offloader) -> None:
        for payload in offloader.pending.values():
            await self._payloads.update_one(
                {"_id": payload.id, "tenant": self.tenant},
                {
                    "$setOnInsert": {
                        "task_id": task_id,
                        "message_id": payload.message_id,
                        "path": payload.path,
                        "sha256": payload.sha256,
                        "size": payload.size,
                        "data": payload.data,
                        "created_at": utcnow(),
                    }
                },
                upsert=True,
            )

    async def _stored_messages_by_id(self, task_id: str, ids: Sequence[str]) -> dict[str, AnyMessage]:
        pipeline = [
            {"$match": self._filter(task_id)},
            {
                "$project": {
                    "_id": 0,
                    "messages": {
                        "$filter": {
                            "input": "$messages",
                            "as": "m",
                            "cond": {"$or": [{"$eq": ["$$m.id", i]} for i in ids]},
                        }
                    },
                }
            },
        ]
        rows = await (await self._tasks.aggregate(pipeline)).to_list(length=1)
        if not rows:
            return {}
        return {message.id: message for message in await self._decode(rows[0]["messages"])}

    async def _replayed(self, task_id: str, ids: Sequence[str]) -> dict[str, AnyMessage] | None:
        """If every given id is already stored, this call is a replay: return the stored ones."""
        ids = [i for i in ids if i]
        if not ids:
            return None
        query = {**self._filter(task_id), "messages.id": {"$in": ids}}
        if await self._tasks.count_documents(query, limit=1) == 0:
            return None  # the usual case after a lost race: nothing of ours is stored
        stored = await self._stored_messages_by_id(task_id, ids)
        if not all(i in stored for i in ids):
            taken = sorted(i for i in ids if i in stored)
            raise ValidationError(f"message ids already stored in task {task_id!r}: {taken}")
        return stored

    def _remember(self, task_id: str, version: int, updated_at: datetime, header: TaskHeader) -> None:
        self._headers.put((self.tenant, task_id), CachedHeader(version, updated_at, header))

    def _forget(self, task_id: str) -> None:
        self._headers.forget((self.tenant, task_id))

    async def _mutate(
        self,
        task_id: str,
        plan_fn: PlanFn,
        *,
        locate: str | None = None,
        explicit_ids: Sequence[str | None] = (),
        on_replay: Callable[[dict[str, AnyMessage]], Any] | None = None,
    ) -> Any:
        """Plan from the header, apply one guarded update; retry lost races; detect replays.

        The header is the one this process last wrote (`HeaderCache`) when it has it, else
        a fresh read. A cached header is only a guess: if planning from it fails or the
        guarded update matches nothing, it is dropped and the verb goes on from a read.
        """
        check_id(task_id, "task id")
        ids = [i for i in explicit_ids if i]
        for i in ids:
            check_message_id(i)
        async with self._lock(task_id):
            attempt = 0
            while attempt < self.retry.attempts:
                cached = self._headers.get((self.tenant, task_id)) if locate is None else None
                if cached is not None:
                    document: dict[str, Any] = {"version": cached.version}
                    header, located = cached.header, None
                elif locate is not None:
                    document, index, message = await self._locate(task_id, locate)
                    located = {"index": index, "message": message}
                    header = header_from_document(document)
                else:
                    document, located = await self._read_header_doc(task_id), None
                    header = header_from_document(document)
                offloader = Offloader(task_id, self.offload_threshold)
                try:
                    plan = plan_fn(header, located, offloader)  # type: ignore[call-arg]
                except MindstoreError:
                    if cached is not None:  # maybe stale: decide on what is stored
                        self._forget(task_id)
                        continue
                    replay = await self._replayed(task_id, ids)
                    if replay is not None and on_replay is not None:
                        return on_replay(replay)
                    raise
                if plan.is_empty:
                    return plan.result
                if document_estimate(plan.header) > self.max_document_bytes:
                    if cached is not None:
                        self._forget(task_id)
                        continue
                    added = plan.header.size_bytes - header.size_bytes
                    raise TaskTooLarge(task_id, header.size_bytes, added, self.max_document_bytes)
                now = utcnow()
                version = document.get("version", 0)
                query, update = build_task_update(
                    plan,
                    task_id=task_id,
                    tenant=self.tenant,
                    version=version,
                    now=now,
                    transform=offloader.transform_value,
                )
                if cached is not None:
                    query["updated_at"] = cached.updated_at
                if self.owner is not None:
                    query["owner"] = self.owner
                await self._store_payloads(task_id, offloader)
                try:
                    result = await self._tasks.update_one(query, update)
                except BaseException:
                    self._forget(task_id)  # applied or not, the cached header is now a guess
                    raise
                if result.matched_count == 1:
                    self._remember(task_id, version + 1, now, plan.header)
                    return plan.result
                self._forget(task_id)
                replay = await self._replayed(task_id, ids or plan.new_ids)
                if replay is not None:
                    return on_replay(replay) if on_replay is not None else plan.result
                if cached is None:  # a cache miss is not a lost race: no backoff for it
                    logger.debug("task %r: lost a race to another writer (attempt %d of %d)",
                                 task_id, attempt + 1, self.retry.attempts)
                    await asyncio.sleep(self.retry.delay(attempt))
                    attempt += 1
        logger.debug("task %r: conflict, all %d attempts lost to concurrent writers",
                     task_id, self.retry.attempts)
        raise Conflict(
            f"task {task_id!r}: gave up after {self.retry.attempts} attempts lost to concurrent writers"
        )

    async def _verb(self, task_id: str, planner_fn: Any, *args: Any, ids: Sequence[str | None] = (),
                    replay: Callable[[dict[str, AnyMessage]], Any] | None = None, **kwargs: Any) -> Any:
        def plan(header: TaskHeader, _located: Any, offloader: Offloader) -> Plan:
            return planner_fn(
                header, task_id, *args, transform=offloader.transform_document, **kwargs
            )

        if replay is None and ids:
            first = ids[0]
            replay = (lambda stored: stored.get(first)) if first else None
        return await self._mutate(task_id, plan, explicit_ids=ids, on_replay=replay)

    async def _part_verb(self, task_id: str, message_id: str, planner_fn: Any, *args: Any, **kwargs: Any) -> Any:
        def plan(header: TaskHeader, located: dict[str, Any], offloader: Offloader) -> Plan:
            return planner_fn(
                header, task_id, located["index"], located["message"], *args,
                transform=offloader.transform_document, **kwargs,
            )  # fmt: skip

        return await self._mutate(task_id, plan, locate=message_id)

    # ------------------------------------------------------------------ lifecycle
    async def create(
        self,
        *,
        owner: str | None = None,
        title: str | None = None,
        content: str | Sequence[TextPart | ImagePart] | None = None,
        config: TaskConfigPart | None = None,
        messages: Sequence[AnyMessage] = (),
        task_id: str | None = None,
        state: TaskState | str = TaskState.running,
        metadata: JSON | None = None,
        replay: bool = False,
    ) -> TaskRecord:
        """Insert a new task, optionally with its config and first messages, in one write.

        `replay=True` folds `messages` as an existing history (a fork's copies): their
        timestamps are kept and an exit whose entry was not kept is tolerated.
        """
        task_id = check_id(task_id, "task id") if task_id is not None else new_id()
        owner = owner if owner is not None else self.owner
        if owner is not None and not isinstance(owner, str):
            raise ValidationError("owner must be a string")
        if isinstance(content, str):
            parts: list[Any] = [TextPart(text=content)]
        else:
            parts = list(content or [])
        for part in parts:
            if not isinstance(part, (TextPart, ImagePart)):
                raise ValidationError("task content parts must be text or image parts")
        state = TaskState(state).value
        initial: list[AnyMessage] = []
        if config is not None:
            ts = now_ts()
            initial.append(
                TaskConfigMessage(task_id=task_id, started_ts=ts, finished_ts=ts, content=[config])
            )
        initial.extend(messages)
        offloader = Offloader(task_id, self.offload_threshold)
        plan = plans.plan_add_messages(
            TaskHeader(), task_id, initial, transform=offloader.transform_document, replay=replay
        )
        if document_estimate(plan.header) > self.max_document_bytes:
            raise TaskTooLarge(task_id, 0, plan.header.size_bytes, self.max_document_bytes)
        now = utcnow()
        document = {
            "_id": task_id,
            "tenant": self.tenant,
            "owner": owner,
            "title": title,
            "content": [part.to_dict() for part in parts],
            "state": state,
            "created_at": now,
            "updated_at": now,
            "version": 0,
            "metadata": escape_keys(metadata) if metadata is not None else None,
            **plan.header.to_dict(),
            "messages": plan.appended_docs,
        }
        await self._store_payloads(task_id, offloader)
        try:
            await self._tasks.insert_one(document)
        except DuplicateKeyError as exc:
            raise Conflict(f"task id {task_id!r} is already in use") from exc
        self._remember(task_id, 0, now, plan.header)
        return TaskRecord.from_document(document, plan.header)

    async def import_task(self, task: Task, *, owner: str | None = None, title: str | None = None) -> TaskRecord:
        """Store an in-memory task (with its whole history) as a new task."""
        history = [message.model_copy(deep=True) for message in task.messages]
        header = plans.derive_header(task.id, history)
        record = await self.create(
            owner=owner, title=title, content=list(task.content), task_id=task.id, state=task.state
        )
        if history:
            offloader = Offloader(task.id, self.offload_threshold)
            docs = [offloader.transform_document(plans.stored_doc(m)) for m in history]
            header = header.model_copy(
                update={"size_bytes": sum(bson_size(d) for d in docs)}
            )
            if document_estimate(header) > self.max_document_bytes:
                await self._tasks.delete_one(self._filter(task.id))
                raise TaskTooLarge(task.id, 0, header.size_bytes, self.max_document_bytes)
            await self._store_payloads(task.id, offloader)
            await self._tasks.update_one(
                {**self._filter(task.id), "version": 0},
                {"$set": {**header.to_dict(), "messages": docs}, "$inc": {"version": 1}},
            )
            self._forget(task.id)
        return await self.get(record.id)

    async def get(self, task_id: str) -> TaskRecord:
        document = await self._read_header_doc(task_id)
        return TaskRecord.from_document(document, header_from_document(document))

    async def header(self, task_id: str) -> TaskHeader:
        return header_from_document(await self._read_header_doc(task_id))

    async def load(self, task_id: str) -> Task:
        """The whole task in memory (seed 000 `Task`), e.g. to run seed code over it."""
        document = await self._tasks.find_one(self._filter(task_id))
        if document is None:
            raise NotFound(f"no task {task_id!r} for tenant {self.tenant!r}")
        task = Task(
            id=document["_id"],
            state=document.get("state", "running"),
            content=document.get("content", []),
            messages=[],
        )
        task.messages.extend(await self._decode(document.get("messages", [])))
        task._header = header_from_document(document)
        return task

    async def delete(self, task_id: str) -> bool:
        """Delete the task, its offloaded payloads and its dialog-tree node.

        A dialog with forks is refused (`Conflict`): deleting it would leave children
        pointing at a missing parent; `dialogs.delete(id, cascade=True)` removes the subtree.
        """
        task_id = check_id(task_id, "task id")
        self._forget(task_id)
        if await self._nodes.count_documents({"tenant": self.tenant, "parent_id": task_id}, limit=1):
            raise Conflict(
                f"task {task_id!r} has forks; delete them first or use dialogs.delete(..., cascade=True)"
            )
        result = await self._tasks.delete_one(self._filter(task_id))
        if result.deleted_count == 0:
            raise NotFound(f"no task {task_id!r} for tenant {self.tenant!r}")
        await self._payloads.delete_many({"tenant": self.tenant, "task_id": task_id})
        await self._nodes.delete_one({"_id": task_id, "tenant": self.tenant})
        return True

    async def set_state(self, task_id: str, state: TaskState | str) -> TaskRecord:
        """Allowed transitions only; guarded by the state read, so two racing changes
        cannot both succeed from the same starting state."""
        self._forget(task_id)
        for attempt in range(self.retry.attempts):
            document = await self._read_header_doc(task_id)
            target = check_transition(document.get("state", "running"), state)
            if target.value == document.get("state"):
                return TaskRecord.from_document(document, header_from_document(document))
            result = await self._tasks.update_one(
                {**self._filter(task_id), "state": document.get("state")},
                {"$set": {"state": target.value, "updated_at": utcnow()}, "$inc": {"version": 1}},
            )
            if result.matched_count == 1:
                return await self.get(task_id)
            await asyncio.sleep(self.retry.delay(attempt))
        raise Conflict(f"task {task_id!r}: state kept changing under us")

    async def set_title(self, task_id: str, title: str | None) -> None:
        if title is not None and not isinstance(title, str):
            raise ValidationError("title must be a string")
        self._forget(task_id)
        result = await self._tasks.update_one(
            self._filter(task_id), {"$set": {"title": title, "updated_at": utcnow()}}
        )
        if result.matched_count == 0:
            raise NotFound(f"no task {task_id!r} for tenant {self.tenant!r}")

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
        if not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise ValidationError("limit must be an integer between 1 and 1000")
        query: dict[str, Any] = {"tenant": self.tenant}
        owner = owner if owner is not None else self.owner
        if owner is not None:
            if not isinstance(owner, str):
                raise ValidationError("owner must be a string")
            query["owner"] = owner
        if state is not None:
            query["state"] = TaskState(state).value
        if updated_after is not None:
            query["updated_at"] = {"$gt": updated_after}
        if cursor is not None:
            cursor_time, cursor_id = decode_cursor(cursor)
            query["$or"] = [
                {"updated_at": {"$lt": cursor_time}},
                {"updated_at": cursor_time, "_id": {"$lt": cursor_id}},
            ]
        projection = {field: 1 for field in READ_FIELDS}
        rows = await self._tasks.find(query, projection).sort(
            [("updated_at", -1), ("_id", -1)]
        ).limit(limit + 1).to_list(length=limit + 1)
        items = [TaskRecord.from_document(row, header_from_document(row)) for row in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_cursor = encode_cursor(last["updated_at"], last["_id"])
        return Page[TaskRecord](items=items, next_cursor=next_cursor)

    # ------------------------------------------------------------------ reads
    async def messages(self, task_id: str, start: int = 0, limit: int | None = None) -> list[AnyMessage]:
        """A window of the history, sliced on the server."""
        if start < 0 or (limit is not None and limit < 1):
            raise ValidationError("start must be >= 0 and limit >= 1")
        if start == 0 and limit is None:
            projection: dict[str, Any] = {"messages": 1}
        else:
            projection = {"messages": {"$slice": [start, limit if limit is not None else 2**31 - 1]}, "seq": 1}
        document = await self._tasks.find_one(self._filter(task_id), projection)
        if document is None:
            raise NotFound(f"no task {task_id!r} for tenant {self.tenant!r}")
        return await self._decode(document.get("messages", []))

    async def ends(self, task_id: str, first: int, last: int) -> tuple[int, list[AnyMessage], list[AnyMessage]]:
        """(message count, first `first` messages, last `last` messages) from one snapshot.

        One pipeline with two `$slice`s, so a trimmed fork of a long dialog reads only
        what it keeps, and the count matches the slices even under concurrent appends.
        """
        if first < 0 or last < 1:
            raise ValidationError("first must be >= 0 and last >= 1")
        project: dict[str, Any] = {"_id": 0, "seq": 1, "tail": {"$slice": ["$messages", -last]}}
        if first:
            project["head"] = {"$slice": ["$messages", first]}
        rows = await (
            await self._tasks.aggregate([{"$match": self._filter(task_id)}, {"$project": project}])
        ).to_list(length=1)
        if not rows:
            raise NotFound(f"no task {task_id!r} for tenant {self.tenant!r}")
        row = rows[0]
        return int(row.get("seq", 0)), await self._decode(row.get("head", [])), await self._decode(row["tail"])

    async def tail(self, task_id: str, count: int = 50) -> list[AnyMessage]:
        """The last `count` messages: only they travel over the wire."""
        if count < 1:
            raise ValidationError("count must be >= 1")
        document = await self._tasks.find_one(
            self._filter(task_id), {"seq": 1, "messages": {"$slice": -count}}
        )
        if document is None:
            raise NotFound(f"no task {task_id!r} for tenant {self.tenant!r}")
        return await self._decode(document.get("messages", []))

    async def get_message(self, task_id: str, message_id: str) -> AnyMessage | None:
        """The message, or None if the task has no such message (seed 000)."""
        check_message_id(message_id)
        await self._read_header_doc(task_id)
        rows = await (
            await self._tasks.aggregate(
                pipelines.locate_message_pipeline(task_id, self.tenant, message_id)
            )
        ).to_list(length=1)
        if not rows:
            return None
        return (await self._decode([rows[0]["message"]]))[0]

    async def get_updates(self, task_id: str, since_id: str | None = None) -> list[AnyMessage]:
        """Messages after `since_id` (all if it is empty or unknown, as in seed 000)."""
        if not since_id:
            return await self.messages(task_id)
        check_message_id(since_id)
        rows = await (
            await self._tasks.aggregate(
                pipelines.locate_message_pipeline(task_id, self.tenant, since_id, ("seq",))
            )
        ).to_list(length=1)
        if not rows:
            return await self.messages(task_id)
        index = int(rows[0]["index"])
        if index + 1 >= rows[0]["seq"]:
            await self._read_header_doc(task_id)
            return []
        return await self.messages(task_id, start=index + 1)

    async def current_task_level(self, task_id: str) -> int:
        return (await self.header(task_id)).level

    async def level_messages(self, task_id: str, scope: str | None) -> list[AnyMessage]:
        rows = await (
            await self._tasks.aggregate(pipelines.level_messages_pipeline(task_id, self.tenant, scope))
        ).to_list(length=1)
        if not rows:
            raise NotFound(f"no task {task_id!r} for tenant {self.tenant!r}")
        return await self._decode(rows[0]["messages"])

    async def current_task_messages(self, task_id: str) -> list[AnyMessage]:
        header = await self.header(task_id)
        return await self.level_messages(task_id, header.current_scope)

    async def find_current_task_boundaries(self, task_id: str) -> tuple[int | None, int | None]:
        header = await self.header(task_id)
        if not header.scope_stack:
            return 0, None
        return header.scope_stack[-1].index, None

    async def task_boundaries(self, task_id: str, entry_id: str) -> tuple[int, int | None]:
        """(entry index, exit index or None) of any sub-task of the task."""
        check_message_id(entry_id)
        await self._read_header_doc(task_id)
        rows = await (
            await self._tasks.aggregate(pipelines.boundaries_pipeline(task_id, self.tenant, entry_id))
        ).to_list(length=None)
        entry = [row["index"] for row in rows if row["role"] == "taskentry"]
        exits = [row["index"] for row in rows if row["role"] == "taskexit"]
        if not entry:
            raise NotFound(f"no task entry {entry_id!r} in task {task_id!r}")
        return int(entry[0]), (int(exits[0]) if exits else None)

    async def sub_task_spans(self, task_id: str) -> list[SubTaskSpan]:
        await self._read_header_doc(task_id)
        rows = await (
            await self._tasks.aggregate(pipelines.spans_pipeline(task_id, self.tenant))
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
    ) -> tuple[TaskHeader, CheckpointRecord | None, list[AnyMessage]]:
        """The current level as the model should see it, filtered on the server.

        Returns the header, the level's latest checkpoint (or None) and the level's messages
        minus compression messages and minus what that checkpoint dropped; the tool results
        it stubbed come back as skeletons (see `mindstore.compression.view`).
        """
        header = await self.header(task_id)
        scope = header.current_scope
        rows = await (
            await self._tasks.aggregate(
                context_pipelines.latest_checkpoint_pipeline(task_id, self.tenant, scope)
            )
        ).to_list(length=1)
        latest = None
        if rows and rows[0].get("latest"):
            latest = CheckpointRecord.from_stored(unescape_keys(rows[0]["latest"][0]))
        excluded: list[str] = []
        stubbed: list[str] = []
        if latest is not None:
            stubbed = list(latest.metadata.get("stubbed_message_ids") or [])
            stubbed_set = set(stubbed)
            excluded = [mid for mid in latest.compressed_message_ids if mid not in stubbed_set]
        rows = await (
            await self._tasks.aggregate(
                context_pipelines.context_messages_pipeline(
                    task_id, self.tenant, scope, excluded, stubbed
                )
            )
        ).to_list(length=1)
        if not rows:
            raise NotFound(f"no task {task_id!r} for tenant {self.tenant!r}")
        return header, latest, await self._decode(rows[0]["messages"])

    async def context(
        self,
        task_id: str,
        *,
        max_tokens: int | None = None,
        strategy: Any = None,
        summarizer: Any = None,
        token_counter: Any = None,
        auto_compress: bool = True,
        safety_buffer: int = 0,
    ) -> Any:
        """The messages to send to the model for the current level (a `ContextWindow`).

        Filtering runs on the server; a level past its `CompressionConfig.token_limit` is
        compressed first; `max_tokens` then trims the view (seed 002's manager) without
        touching the stored history. See docs/compression.md.
        """
        from mindstore.compression.context import build_context
        from mindstore.compression.tokens import estimate_tokens

        return await build_context(
            self, task_id, max_tokens=max_tokens, strategy=strategy, summarizer=summarizer,
            token_counter=token_counter or estimate_tokens, auto_compress=auto_compress,
            safety_buffer=safety_buffer,
        )  # fmt: skip

    async def current_task_config(self, task_id: str) -> TaskConfigPart:
        header = await self.header(task_id)
        location = header.current_config_index()
        if location is None:
            raise NotFound(f"task {task_id!r} has no task configuration")
        index, _kind = location
        message = (await self.messages(task_id, start=index, limit=1))[0]
        entry = getattr(message, "entry", None)
        if callable(entry) and entry() is not None:
            return entry().initial_task_config
        config = getattr(message, "config", None)
        if callable(config) and config() is not None:
            return config()
        raise NotFound(f"task {task_id!r} has no task configuration")

    # ------------------------------------------------------------------ verbs
    async def add_message(self, task_id: str, message: AnyMessage | JSON) -> AnyMessage:
        if isinstance(message, dict):
            message = parse_message(message)
        return await self._verb(task_id, plans.plan_add_message, message, ids=[message.id])

    async def add_messages(self, task_id: str, messages: Sequence[AnyMessage]) -> list[AnyMessage]:
        """Several messages in one atomic write (all or nothing)."""
        messages = list(messages)
        ids = [m.id for m in messages]
        return await self._verb(
            task_id, plans.plan_add_messages, messages, ids=ids,
            replay=lambda stored: [stored[i] for i in ids],
        )  # fmt: skip

    async def add_task_config(self, task_id: str, part: TaskConfigPart, timestamp: float | None = None) -> AnyMessage:
        return await self._verb(task_id, plans.plan_add_task_config, part, timestamp)

    async def add_human_message(
        self,
        task_id: str,
        text: str | Sequence[str] | None = None,
        images: Sequence[ImagePart] | None = None,
        is_ui_hidden: bool = False,
        timestamp: float | None = None,
        message_id: str | None = None,
    ) -> AnyMessage | None:
        return await self._verb(
            task_id, plans.plan_add_human_message, text, images, is_ui_hidden, timestamp,
            message_id, ids=[message_id],
        )  # fmt: skip

    async def add_system_message(
        self, task_id: str, text: str, message_id: str | None = None, timestamp: float | None = None
    ) -> AnyMessage:
        return await self._verb(
            task_id, plans.plan_add_system_message, text, message_id, timestamp, ids=[message_id]
        )

    async def add_assistant_message(
        self, task_id: str, message_id: str | None = None, timestamp: float | None = None
    ) -> AnyMessage:
        return await self._verb(
            task_id, plans.plan_add_assistant_message, message_id, timestamp, ids=[message_id]
        )

    async def add_tool_result_message(
        self,
        task_id: str,
        tool_call_id: str,
        tool_name: str,
        result: Any,
        observer_results: Sequence[ObserverResult] | None = None,
        is_error: bool = False,
        is_approved: bool = True,
        tool_result_contents: Sequence[ToolResultContent] | None = None,
        error_message: str | None = None,
        is_loading: bool = False,
        has_feedback: bool = False,
        timestamp: float | None = None,
        message_id: str | None = None,
        terminate: bool = False,
        metadata: JSON | None = None,
    ) -> AnyMessage:
        return await self._verb(
            task_id, plans.plan_add_tool_result_message, tool_call_id, tool_name, result,
            observer_results, is_error, is_approved, tool_result_contents, error_message,
            is_loading, has_feedback, timestamp, message_id, terminate, metadata,
            ids=[message_id],
        )  # fmt: skip

    async def add_informational_message(
        self,
        task_id: str,
        informational_type: str,
        details: str,
        is_visible_ai: bool = False,
        is_visible_ui: bool = False,
        additional_data: JSON | list[JSON] | None = None,
        timestamp: float | None = None,
        message_id: str | None = None,
    ) -> AnyMessage:
        return await self._verb(
            task_id, plans.plan_add_informational_message, informational_type, details,
            is_visible_ai, is_visible_ui, additional_data, timestamp, message_id, ids=[message_id],
        )  # fmt: skip

    async def add_compression_message(
        self,
        task_id: str,
        start_idx: int,
        end_idx: int,
        reason: str,
        strategies: Sequence[str],
        compressed_message_ids: Sequence[str],
        kept_message_ids: Sequence[str],
        cache: JSON | None = None,
        metadata: JSON | None = None,
        timestamp: float | None = None,
        message_id: str | None = None,
    ) -> AnyMessage:
        return await self._verb(
            task_id, plans.plan_add_compression_message, start_idx, end_idx, reason, strategies,
            compressed_message_ids, kept_message_ids, cache, metadata, timestamp, message_id,
            ids=[message_id],
        )  # fmt: skip

    async def answer_tool_call(
        self,
        task_id: str,
        tool_call: ToolCallPart | str,
        result: Any,
        observer_results: Sequence[ObserverResult] | None = None,
        is_error: bool = False,
        is_approved: bool = True,
        tool_result_contents: Sequence[ToolResultContent] | None = None,
        error_message: str | None = None,
        is_loading: bool = False,
        has_feedback: bool = False,
        timestamp: float | None = None,
        message_id: str | None = None,
        terminate: bool = False,
        metadata: JSON | None = None,
    ) -> AnyMessage:
        """Flip the call's flags and append its result, in one write."""
        if isinstance(tool_call, ToolCallPart):
            tool_call_id = tool_call.tool_call_id
        elif isinstance(tool_call, str):
            tool_call_id = tool_call
        else:
            raise ValidationError("answer_tool_call expects a ToolCallPart or its id")
        check_message_id(tool_call_id)
        return await self._verb(
            task_id, plans.plan_answer_tool_call, tool_call_id, result, observer_results,
            is_error, is_approved, tool_result_contents, error_message, is_loading,
            has_feedback, timestamp, message_id, terminate, metadata, ids=[message_id],
        )  # fmt: skip

    async def add_task_entry(
        self,
        task_id: str,
        task_description: Sequence[TextPart | ImagePart | InformationalPart],
        initial_task_config: TaskConfigPart,
        entry_id: str | None = None,
        timestamp: float | None = None,
    ) -> AnyMessage:
        """Entry, config, hidden context and informational messages: one write."""
        return await self._verb(
            task_id, plans.plan_add_task_entry, task_description, initial_task_config,
            entry_id, timestamp, ids=[entry_id],
        )  # fmt: skip

    async def add_task_exit(
        self,
        task_id: str,
        handoff_description: Sequence[TextPart | ImagePart],
        payload_key: str = "task_result",
        timestamp: float | None = None,
        exit_id: str | None = None,
        result_message_id: str | None = None,
    ) -> tuple[AnyMessage, AnyMessage | None]:
        """The exit and the answer to its triggering tool call: one write."""
        return await self._verb(
            task_id, plans.plan_add_task_exit, handoff_description, payload_key, timestamp,
            exit_id, result_message_id, ids=[exit_id],
            replay=lambda stored: (stored[exit_id], None) if exit_id in stored else None,
        )  # fmt: skip

    async def add_text_part(self, task_id: str, message_id: str, text: str) -> AnyMessage:
        return await self._part_verb(task_id, message_id, plans.plan_add_text_part, text)

    async def add_reasoning_part(
        self, task_id: str, message_id: str, reasoning: str, signature: str | None = None
    ) -> AnyMessage:
        return await self._part_verb(
            task_id, message_id, plans.plan_add_reasoning_part, reasoning, signature
        )

    async def add_tool_call_part(self, task_id: str, message_id: str, tool_call: ToolCallPart) -> AnyMessage:
        return await self._part_verb(task_id, message_id, plans.plan_add_tool_call_part, tool_call)

    async def finish_assistant_message(
        self,
        task_id: str,
        message_id: str,
        status: str = "completed",
        usage: Usage | None = None,
        tokens_in: int | None = None,
        tokens_out: int | None = None,
        cache_reads: int | None = None,
        cache_writes: int | None = None,
        cost: float | None = None,
        finished_ts: float | None = None,
    ) -> AnyMessage:
        """Close an assistant turn; its usage rolls up into the task in the same write."""
        return await self._part_verb(
            task_id, message_id, plans.plan_finish_assistant_message, status, usage, tokens_in,
            tokens_out, cache_reads, cache_writes, cost, finished_ts,
        )  # fmt: skip
