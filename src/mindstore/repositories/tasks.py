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
from typing import Any

from pymongo.errors import DuplicateKeyError

from mindstore.documents import header_from_document, header_to_fields, utcnow
from mindstore.errors import Conflict, ValidationError
from mindstore.ids import check_key, task_key
from mindstore.model import planner as plans
from mindstore.model import verbs
from mindstore.model.base import JSON, new_id, now_ts
from mindstore.model.header import TaskHeader, TaskState
from mindstore.model.messages import (
    AnyMessage,
    TaskConfigMessage,
)
from mindstore.model.parts import (
    ImagePart,
    TaskConfigPart,
    TextPart,
)
from mindstore.model.storage_form import bson_size, escape_keys
from mindstore.model.task import Task, check_transition
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

        A history that is due for a seal (or too large for one document) is stored as sealed
        pages first, then the task document that counts them, in one insert: until that insert
        nothing of it is visible (`repositories.bulk_pages`; a crash before it leaves pages no
        reader sees, overwritten by a retried create of the same id and removed by
        `dialogs.repair()`).

        Args:
            owner: Who the task belongs to (a name, docs/limits.md); on an owner-scoped view it
                defaults to, and must equal, the view's owner.
            title: A label for people (at most 4,096 characters).
            content: The task's own description: a string, or text and image parts.
            config: The root level's `TaskConfigPart` (model, tools, compression), stored as
                the first message. A task needs one before its first assistant turn.
            messages: A first history, folded as if appended in order (one insert).
            task_id: Choose the id (default: a new random one); unique per tenant.
            state: The initial `TaskState` (default `running`).
            metadata: JSON-like dict with string keys (at most 64 KiB encoded).
            replay: Fold `messages` as an existing history (a fork's copies): their
                timestamps are kept and an exit whose entry was not kept is tolerated.

        Returns:
            The stored task's record (header, usage, counts).

        Raises:
            ValidationError: A bad argument (nothing written).
            Conflict: `task_id` is already in use in this tenant.
            TaskTooLarge: One message cannot fit a document even alone.

        Example:
            ```python
            config = TaskConfigPart(model_name="openai/gpt-4o")
            task = await acme.tasks.create(owner="alice", title="Trip", config=config)
            ```
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
        initial.extend(verbs.check_messages(messages))
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
        """Store an in-memory `mindstore.Task` (with its whole history) as a new task.

        All or nothing, as `create` with `replay=True`: a long history's pages first, then the
        one insert that shows it. The task keeps its id.

        Args:
            task: The in-memory task (the Mind Map's `Task`).
            owner: The new task's owner (see `create`).
            title: The new task's title.

        Returns:
            The stored task's record.

        Raises:
            ValidationError: `task` is not a `mindstore.Task`, or a bad owner or title.
            Conflict: A task with the same id already exists in this tenant.
        """
        if not isinstance(task, Task):
            raise ValidationError(f"task must be a mindstore Task, got {type(task).__name__}")
        history = [message.model_copy(deep=True) for message in task.messages]
        return await self.create(
            owner=owner, title=title, content=list(task.content), task_id=task.id,
            state=task.state, messages=history, replay=True,
        )  # fmt: skip

    async def delete(self, task_id: str) -> bool:
        """Delete the task, its offloaded payloads, its sealed pages and its dialog-tree node.

        The task document goes first, so a crash part-way leaves only pages no reader sees (a
        re-created task of the same id tells them apart by `born` and overwrites them).

        Args:
            task_id: The task to delete.

        Returns:
            True (a missing task raises instead).

        Raises:
            NotFound: No such task in this view.
            Conflict: The task is a dialog with forks: deleting it would leave children pointing
                at a missing parent; `dialogs.delete(id, cascade=True)` removes the subtree.
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
        """Move the task to another `TaskState`, along the allowed transitions only.

        Guarded by the state read, so two racing changes cannot both succeed from the same
        starting state. Setting the current state again is a no-op.

        Args:
            task_id: The task.
            state: The target state, as a `TaskState` or its value (`"completed"`, ...).

        Returns:
            The task's record after the change.

        Raises:
            ValidationError: `state` is not a state.
            InvalidTransition: The transition is not allowed (e.g. out of `completed`).
            NotFound: No such task in this view.
            Conflict: The state kept changing under us for `RetryPolicy.attempts` tries.
        """
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
        """Set (or clear, with None) the task's title.

        Args:
            task_id: The task.
            title: The new title (at most 4,096 characters), or None.

        Raises:
            ValidationError: A title that is not a string or is too long.
            NotFound: No such task in this view.
        """
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
    # Each declared once (`model/verbs.py`): the same names, defaults, docstrings, checks,
    # replays and errors as the in-memory `Task` (docs/contract.md); each reaches the store
    # through `_verb` / `_part_verb`, one guarded update.
    add_message = verbs.in_store(verbs.add_message)
    add_messages = verbs.in_store(verbs.add_messages)
    add_task_config = verbs.in_store(verbs.add_task_config)
    add_human_message = verbs.in_store(verbs.add_human_message)
    add_system_message = verbs.in_store(verbs.add_system_message)
    add_assistant_message = verbs.in_store(verbs.add_assistant_message)
    add_tool_result_message = verbs.in_store(verbs.add_tool_result_message)
    add_informational_message = verbs.in_store(verbs.add_informational_message)
    add_compression_message = verbs.in_store(verbs.add_compression_message)
    answer_tool_call = verbs.in_store(verbs.answer_tool_call)
    add_task_entry = verbs.in_store(verbs.add_task_entry)
    add_task_exit = verbs.in_store(verbs.add_task_exit)
    add_text_part = verbs.in_store(verbs.add_text_part)
    add_reasoning_part = verbs.in_store(verbs.add_reasoning_part)
    add_tool_call_part = verbs.in_store(verbs.add_tool_call_part)
    finish_assistant_message = verbs.in_store(verbs.finish_assistant_message)
