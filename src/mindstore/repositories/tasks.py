"""The task repository: every Mind Map verb as one guarded MongoDB update.

The mutation engine (`engine.py`: scope, plan, guard, retry, replay, header cache) and the
reads (`task_reads.py`) live beside this module; here are the lifecycle (create, import,
delete, state, title) and the verbs. Every argument is checked before the first write
(`mindstore.validation`), so a bad call raises a `ValidationError` naming the argument and
leaves the database as it was.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Unpack

from pymongo.errors import DuplicateKeyError

from mindstore.documents import header_from_document, header_to_fields, utcnow
from mindstore.errors import Conflict, ValidationError
from mindstore.ids import check_key, check_name, task_key
from mindstore.model import planner as plans
from mindstore.model.base import JSON, new_id, now_ts
from mindstore.model.header import TaskHeader, TaskState
from mindstore.model.messages import (
    AnyMessage,
    MessageBase,
    TaskConfigMessage,
    UnknownMessage,
    Usage,
    parse_message,
)
from mindstore.model.parts import (
    ImagePart,
    InformationalPart,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
)
from mindstore.model.specs import ToolResultOptions, ToolResultSpec, resolve_alias
from mindstore.model.storage_form import bson_size, escape_keys
from mindstore.model.task import Task, check_transition, exit_answer_id, tool_call_id_of
from mindstore.repositories.bulk_pages import confirm_pages, cut_history, write_pages
from mindstore.repositories.content_lifecycle import ContentLifecycle
from mindstore.repositories.engine import (
    MAX_DOCUMENT_BYTES,
    READ_FIELDS,
    RetryPolicy,
    document_estimate,
)
from mindstore.repositories.records import TaskRecord
from mindstore.validation import (
    MAX_TITLE_CHARS,
    check_enum,
    check_optional_json,
    check_optional_text,
    check_owner,
)

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "READ_FIELDS",
    "RetryPolicy",
    "TaskRepository",
    "document_estimate",
]


def _check_messages(messages: Any) -> list[AnyMessage]:
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise ValidationError("messages must be a list of messages")
    for message in messages:
        if not isinstance(message, (MessageBase, UnknownMessage)):
            raise ValidationError(f"messages must hold messages, got {type(message).__name__}")
    return list(messages)


class TaskRepository(ContentLifecycle):
    """One tenant's tasks (one owner's, on an owner-scoped view)."""

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
        """Insert a new task, optionally with its config and first messages: all or nothing.

        A history that is due for a seal (or too large for one document) is stored as
        sealed pages first, then the task document that counts them, in one insert: until
        that insert nothing of it is visible (`repositories.bulk_pages`; a crash before it
        leaves pages no reader sees, overwritten by a retried create of the same id and
        removed by `dialogs.repair()`). A task id already in use is a `Conflict`.

        `replay=True` folds `messages` as an existing history (a fork's copies): their
        timestamps are kept and an exit whose entry was not kept is tolerated.
        """
        chosen = task_id is not None
        task_id = check_key(task_id, "task id") if chosen else new_id()
        owner = check_owner(owner)
        if self.owner is not None:
            if owner is not None and owner != self.owner:
                raise ValidationError(f"owner: this view is scoped to owner {self.owner!r}")
            owner = self.owner
        check_optional_text(title, "title", max_chars=MAX_TITLE_CHARS)
        check_optional_json(metadata, "metadata")
        if isinstance(content, str):
            parts: list[Any] = [TextPart(text=content)]
        elif content is None:
            parts = []
        elif isinstance(content, (list, tuple)):
            parts = list(content)
        else:
            raise ValidationError("content must be a string or a list of text and image parts")
        for part in parts:
            if not isinstance(part, (TextPart, ImagePart)):
                raise ValidationError("content parts must be text or image parts")
        if config is not None and not isinstance(config, TaskConfigPart):
            raise ValidationError(f"config must be a TaskConfigPart, got {type(config).__name__}")
        state_value = check_enum(state, TaskState, "state").value
        initial: list[AnyMessage] = []
        if config is not None:
            ts = now_ts()
            initial.append(
                TaskConfigMessage(task_id=task_id, started_ts=ts, finished_ts=ts, content=[config])
            )
        initial.extend(_check_messages(messages))
        if replay:
            for message in initial:
                plans.check_message_values(message)
        offloader = self._offloader(task_id)
        plan = plans.plan_add_messages(
            TaskHeader(), task_id, initial, transform=offloader.transform_document, replay=replay
        )
        now = utcnow()
        key = task_key(self.tenant, task_id)
        document: dict[str, Any] = {
            "_id": key,
            "tenant": self.tenant,
            "owner": owner,
            "title": title,
            "content": [offloader.transform_document(part.to_dict()) for part in parts],
            "state": state_value,
            "created_at": now,
            "updated_at": now,
            "version": 0,
            "metadata": escape_keys(metadata) if metadata is not None else None,
        }
        history = cut_history(
            task_id, plan.header, plan.appended_docs, policy=self.page_policy,
            head_bytes=bson_size({**document, **header_to_fields(plan.header)}),
            max_document_bytes=self.max_document_bytes,
        )  # fmt: skip
        header = plan.header if history is None else history.header
        document.update(header_to_fields(header))
        stored = plan.appended_docs if history is None else history.open
        if history is not None:
            document["id_filter"] = history.id_filter
        document["messages"] = stored
        if (chosen or history is not None) and await self._tasks.count_documents(
            {"_id": {"$in": [task_id, key]}, "tenant": self.tenant}, limit=1
        ):  # before any page is written: pages under a live task's ids are its own
            raise Conflict(f"task id {task_id!r} is already in use")
        await self._store_payloads(task_id, offloader)
        if history is not None:  # pages first, invisible until the insert counts them
            await write_pages(self._pages, tenant=self.tenant, key=key, born=now, history=history)
        try:
            await self._tasks.insert_one(document)
        except DuplicateKeyError as exc:
            raise Conflict(f"task id {task_id!r} is already in use") from exc
        if history is not None:
            await confirm_pages(
                self._pages, self._tasks, tenant=self.tenant, key=key, born=now, history=history
            )
        tail = stored[-1] if stored else None
        self._remember(task_id, 0, now, header, tail)
        return TaskRecord.from_document(document, header)

    async def import_task(
        self, task: Task, *, owner: str | None = None, title: str | None = None
    ) -> TaskRecord:
        """Store an in-memory task (with its whole history) as a new task, all or nothing
        (`create`: a long history's pages first, then the one insert that shows it)."""
        if not isinstance(task, Task):
            raise ValidationError(f"task must be a mindstore Task, got {type(task).__name__}")
        history = [message.model_copy(deep=True) for message in task.messages]
        return await self.create(
            owner=owner, title=title, content=list(task.content), task_id=task.id,
            state=task.state, messages=history, replay=True,
        )  # fmt: skip

    async def delete(self, task_id: str) -> bool:
        """Delete the task, its offloaded payloads, its sealed pages and its dialog-tree node.

        The task document goes first, so a crash part-way leaves only pages no reader sees
        (a re-created task of the same id tells them apart by `born` and overwrites them).

        A dialog with forks is refused (`Conflict`): deleting it would leave children
        pointing at a missing parent; `dialogs.delete(id, cascade=True)` removes the subtree.
        """
        query = self._filter(task_id)
        self._forget(task_id)
        await self._read_header_doc(task_id)  # NotFound outside the scope; adopts legacy
        if await self._nodes.count_documents(
            {"tenant": self.tenant, "parent_id": task_id}, limit=1
        ):
            raise Conflict(
                f"task {task_id!r} has forks; "
                "delete them first or use dialogs.delete(..., cascade=True)"
            )
        result = await self._tasks.delete_one(query)
        if result.deleted_count == 0:
            raise self._not_found(task_id)
        await self._payloads.delete_many({"tenant": self.tenant, "task_id": task_id})
        await self._pages.delete_many({"tenant": self.tenant, "task": query["_id"]})
        await self._nodes.delete_one({"_id": query["_id"], "tenant": self.tenant})
        return True

    async def set_state(self, task_id: str, state: TaskState | str) -> TaskRecord:
        """Allowed transitions only; guarded by the state read, so two racing changes
        cannot both succeed from the same starting state."""
        query = self._filter(task_id)
        check_enum(state, TaskState, "state")
        self._forget(task_id)
        for attempt in range(self.retry.attempts):
            document = await self._read_header_doc(task_id)
            target = check_transition(document.get("state", "running"), state)
            if target.value == document.get("state"):
                return TaskRecord.from_document(document, header_from_document(document))
            result = await self._tasks.update_one(
                {**query, "state": document.get("state")},
                {"$set": {"state": target.value, "updated_at": utcnow()}, "$inc": {"version": 1}},
            )
            if result.matched_count == 1:
                return await self.get(task_id)
            await asyncio.sleep(self.retry.delay(attempt))
        raise Conflict(f"task {task_id!r}: state kept changing under us")

    async def set_title(self, task_id: str, title: str | None) -> None:
        query = self._filter(task_id)
        check_optional_text(title, "title", max_chars=MAX_TITLE_CHARS)
        self._forget(task_id)
        result = await self._tasks.update_one(
            query, {"$set": {"title": title, "updated_at": utcnow()}}
        )
        if result.matched_count == 0:
            await self._read_header_doc(task_id)  # NotFound, or a legacy task adopted just now
            result = await self._tasks.update_one(
                query, {"$set": {"title": title, "updated_at": utcnow()}}
            )
            if result.matched_count == 0:
                raise self._not_found(task_id)

    # ------------------------------------------------------------------ verbs
    # The same names, defaults, replays and errors as the in-memory `Task` (docs/contract.md).
    async def add_message(self, task_id: str, message: AnyMessage | JSON) -> AnyMessage:
        """Any message, unknown roles included (kept as they are)."""
        if isinstance(message, dict):
            message = parse_message(message)
        message = _check_messages([message])[0]
        return await self._verb(task_id, plans.plan_add_message, message, ids=[message.id])

    async def add_messages(self, task_id: str, messages: Sequence[AnyMessage]) -> list[AnyMessage]:
        """Several messages in one atomic write (all or nothing)."""
        messages = _check_messages(messages)
        ids = [check_name(m.id, "message id") for m in messages]
        return await self._verb(
            task_id, plans.plan_add_messages, messages, ids=ids,
            replay=lambda stored: [stored[i] for i in ids],
        )  # fmt: skip

    async def add_task_config(
        self, task_id: str, part: TaskConfigPart, timestamp: float | None = None
    ) -> AnyMessage:
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
        self, task_id: str, text: str, message_id: str | None = None,
        timestamp: float | None = None, *, id: str | None = None,
    ) -> AnyMessage:  # fmt: skip
        message_id = resolve_alias(message_id, id, "message_id", "id")
        return await self._verb(
            task_id, plans.plan_add_system_message, text, message_id, timestamp, ids=[message_id]
        )

    async def add_assistant_message(
        self, task_id: str, message_id: str | None = None, timestamp: float | None = None,
        *, id: str | None = None,
    ) -> AnyMessage:  # fmt: skip
        message_id = resolve_alias(message_id, id, "message_id", "id")
        return await self._verb(
            task_id, plans.plan_add_assistant_message, message_id, timestamp, ids=[message_id]
        )

    async def add_tool_result_message(
        self, task_id: str, tool_call_id: str, tool_name: str, result: Any, *args: Any,
        **options: Unpack[ToolResultOptions],
    ) -> AnyMessage:  # fmt: skip
        """A tool result; the optional block (`observer_results`, flags, contents, error,
        `timestamp`, `message_id`, `terminate`, `metadata`) is `ToolResultSpec`."""
        spec = ToolResultSpec.from_call(args, dict(options))
        return await self._verb(
            task_id, plans.plan_add_tool_result_message, tool_call_id, tool_name, result, spec,
            ids=[spec.message_id],
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
        # the ids must be stored: the write's filter requires them (`$all`), no read first
        referenced = plans.compression_ids(compressed_message_ids, kept_message_ids)
        return await self._verb(
            task_id, plans.plan_add_compression_message, start_idx, end_idx, reason, strategies,
            compressed_message_ids, kept_message_ids, cache, metadata, timestamp, message_id,
            ids=[message_id], require_ids=sorted(referenced),
        )  # fmt: skip

    async def answer_tool_call(
        self, task_id: str, tool_call: ToolCallPart | str, result: Any, *args: Any,
        **options: Unpack[ToolResultOptions],
    ) -> AnyMessage:  # fmt: skip
        """Flip the call's flags and append its result, in one write."""
        tool_call_id = check_name(tool_call_id_of(tool_call), "tool_call_id")
        spec = ToolResultSpec.from_call(args, dict(options))
        return await self._verb(
            task_id, plans.plan_answer_tool_call, tool_call_id, result, spec, ids=[spec.message_id]
        )

    async def add_task_entry(
        self,
        task_id: str,
        task_description: Sequence[TextPart | ImagePart | InformationalPart],
        initial_task_config: TaskConfigPart,
        entry_id: str | None = None,
        timestamp: float | None = None,
        trigger_call_id: str | None = None,
    ) -> AnyMessage:
        """Entry, config, hidden context and informational messages: one write. The entry
        records the open call its exit will answer (`trigger_call_id` names it)."""
        return await self._verb(
            task_id, plans.plan_add_task_entry, task_description, initial_task_config,
            entry_id, timestamp, trigger_call_id, ids=[entry_id],
        )  # fmt: skip

    async def add_task_exit(
        self,
        task_id: str,
        handoff_description: Sequence[TextPart | ImagePart],
        payload_key: str = "task_result",
        timestamp: float | None = None,
        exit_id: str | None = None,
        result_message_id: str | None = None,
        *,
        payloadKey: str | None = None,  # the Mind Map's spelling, an alias
    ) -> tuple[AnyMessage, AnyMessage | None]:
        """The exit and the answer to its triggering tool call: one write. A replay returns
        the stored exit and the answer it wrote."""
        payload_key = resolve_alias(
            payload_key, payloadKey, "payload_key", "payloadKey", "task_result"
        )
        result = await self._verb(
            task_id, plans.plan_add_task_exit, handoff_description, payload_key, timestamp,
            exit_id, result_message_id, ids=[exit_id], also_guard=[result_message_id],
            replay=lambda stored: _Replayed(stored[exit_id]) if exit_id in stored else None,
        )  # fmt: skip
        if isinstance(result, _Replayed):
            answer_id = exit_answer_id(result.message)
            answer = await self.get_message(task_id, answer_id) if answer_id else None
            return result.message, answer
        return result

    async def add_text_part(self, task_id: str, message_id: str, text: str) -> AnyMessage:
        return await self._part_verb(task_id, message_id, plans.plan_add_text_part, text)

    async def add_reasoning_part(
        self, task_id: str, message_id: str, reasoning: str, signature: str | None = None
    ) -> AnyMessage:
        return await self._part_verb(
            task_id, message_id, plans.plan_add_reasoning_part, reasoning, signature
        )

    async def add_tool_call_part(
        self, task_id: str, message_id: str, tool_call: ToolCallPart
    ) -> AnyMessage:
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


@dataclass(frozen=True)
class _Replayed:
    """A replayed exit, so its answer can be read after the write loop."""

    message: AnyMessage
