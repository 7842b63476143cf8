"""A task document's lifecycle: create (and import), delete, state and title.

The task repository's lifecycle verbs, one part of its composition
(docs/architecture.md, "The task repository"): `TaskRepository` holds a `TaskLifecycle`
and documents each verb; the writes here go through the port's scope (tenant and owner
filter, collections read at each call, the header cache), never through the writer's
plan loop, since none of them appends to the history. A create writes a long history's
sealed pages before its one insert (`bulk_pages`); a delete removes the task document
first, then what hangs off it (payloads, pages, its dialog node, its search postings).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from pymongo.errors import DuplicateKeyError

from mindstore import operations
from mindstore.clock import utcnow
from mindstore.crypto.fields import ENCRYPTED
from mindstore.draws import current_tape
from mindstore.errors import Conflict, NotFound, ValidationError
from mindstore.header_codec import header_from_document, header_to_fields
from mindstore.ids import check_key, derived_name, task_key
from mindstore.model import plans, verbs
from mindstore.model.base import JSON, new_id, now_ts
from mindstore.model.header import TaskHeader, TaskState
from mindstore.model.messages import AnyMessage, TaskConfigMessage
from mindstore.model.parts import ImagePart, TaskConfigPart, TextPart
from mindstore.model.storage_form import bson_size, escape_keys
from mindstore.model.task import Task, check_transition
from mindstore.repositories.bulk_pages import (
    confirm_pages,
    create_deadline,
    cut_history,
    write_pages,
)
from mindstore.repositories.port import TaskPort
from mindstore.repositories.records import TaskRecord
from mindstore.repositories.task_reads import TaskReads
from mindstore.search.index import forget_task
from mindstore.validation import (
    MAX_TITLE_CHARS,
    check_enum,
    check_optional_json,
    check_optional_text,
    check_owner,
)

UNNAMED_CREATE = (
    "this create named no task_id: retried from this process it is exactly-once (the "
    "store keeps the id it drew), retried from another one it may create a second task; "
    "pass task_id to make every retry exactly-once"
)
"""What `Unavailable` says of a create whose id the store drew."""


class TaskLifecycle:
    """Create, import, delete, state and title of one view's tasks (`TaskRepository`
    documents each: `create`, `import_task`, `delete`, `set_state`, `set_title`)."""

    def __init__(self, port: TaskPort, reads: TaskReads) -> None:
        self.port = port
        self.reads = reads

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
        """Insert a new task, its config and first messages: all or nothing."""
        scope = self.port.scope
        chosen = task_id is not None
        task_id = check_key(task_id, "task id") if chosen else new_id()
        running = operations.current()
        if running is not None and not chosen:
            running.note = UNNAMED_CREATE
        owner = check_owner(owner)
        if scope.owner is not None:
            if owner is not None and owner != scope.owner:
                raise ValidationError(f"owner: this view is scoped to owner {scope.owner!r}")
            owner = scope.owner
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
            # with a history (which may be cut into pages) and a chosen id: named by the
            # task id, so a create retried after a crash writes the same pages
            # (docs/write-paths.md, "Creating a long history")
            named = derived_name(task_id, "config") if chosen and messages else new_id()
            initial.append(TaskConfigMessage(id=named, task_id=task_id, started_ts=ts,
                                             finished_ts=ts, content=[config]))  # fmt: skip
        initial.extend(verbs.check_messages(messages))
        if replay:
            for message in initial:
                plans.check_message_values(message)
        if scope.cipher is not None:
            await scope.cipher.ready(write=True)
        else:
            await scope.require_unencrypted_tenant()
        offloader = scope.offloader(task_id)
        plan = plans.plan_add_messages(
            TaskHeader(), task_id, initial, transform=offloader.transform_document, replay=replay
        )
        now = utcnow()
        key = task_key(scope.tenant, task_id)
        document: dict[str, Any] = {
            "_id": key,
            "tenant": scope.tenant,
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
            task_id, plan.header, plan.appended_docs, policy=scope.page_policy,
            head_bytes=bson_size({**document, **header_to_fields(plan.header)}),
            max_document_bytes=scope.max_document_bytes,
        )  # fmt: skip
        header = plan.header if history is None else history.header
        document.update(header_to_fields(header))
        plain = document
        if scope.cipher is not None:  # title and metadata values sealed (mindstore.crypto)
            document = {**scope.cipher.seal_task(document, task_id), ENCRYPTED: True}
        stored = plan.appended_docs if history is None else history.open
        if history is not None:
            document["id_filter"] = history.id_filter
        document["messages"] = stored
        deadline = create_deadline()
        tape, noted = current_tape(), ("create", key)
        # an earlier attempt of this call sent this insert (same ids, same times): if it
        # landed, this is its retry and the task is the one it made
        if (
            tape is not None
            and tape.replaying
            and tape.recall(noted) == now
            and await scope.tasks.count_documents(
                {"_id": key, "tenant": scope.tenant, "created_at": now}, limit=1
            )
        ):
            tape.note(noted, now)
            if history is not None:
                await confirm_pages(scope.pages, scope.tasks, tenant=scope.tenant, key=key,
                                    born=now, history=history)  # fmt: skip
            return TaskRecord.from_document(plain, header)
        if (chosen or history is not None) and await scope.tasks.count_documents(
            {"_id": {"$in": [task_id, key]}, "tenant": scope.tenant}, limit=1
        ):  # before any page is written: pages under a live task's ids are its own
            raise Conflict(f"task id {task_id!r} is already in use")
        await self.port.store_payloads(task_id, offloader)
        if history is not None:  # pages first, invisible until the insert counts them
            await write_pages(
                scope.pages, tenant=scope.tenant, key=key, born=now, history=history,
                deadline=deadline,
            )  # fmt: skip
        if tape is not None:
            tape.note(noted, now)
        try:
            await scope.tasks.insert_one(document)
        except DuplicateKeyError as exc:
            raise Conflict(f"task id {task_id!r} is already in use") from exc
        if history is not None:
            await confirm_pages(
                scope.pages, scope.tasks, tenant=scope.tenant, key=key, born=now, history=history
            )
        tail = stored[-1] if stored else None
        scope.remember(task_id, 0, now, header, tail)
        return TaskRecord.from_document(plain, header)

    async def import_task(
        self, task: Task, *, owner: str | None = None, title: str | None = None
    ) -> TaskRecord:
        """Store an in-memory `Task` (with its whole history) as a new task, as `create`."""
        if not isinstance(task, Task):
            raise ValidationError(f"task must be a mindstore Task, got {type(task).__name__}")
        history = [message.model_copy(deep=True) for message in task.messages]
        return await self.create(
            owner=owner, title=title, content=list(task.content), task_id=task.id,
            state=task.state, messages=history, replay=True,
        )  # fmt: skip

    async def delete(self, task_id: str) -> bool:
        """Delete the task, its payloads, its sealed pages, its node and its postings."""
        scope = self.port.scope
        query = scope.filter(task_id)
        scope.forget(task_id)
        tape, noted = current_tape(), ("delete", query["_id"])
        retried = tape is not None and tape.recall(noted) is not None
        try:
            await self.port.header_document(task_id)  # NotFound outside the scope; adopts legacy
        except NotFound:
            if not retried:
                raise
            # an earlier attempt of this call deleted it, its reply lost: finish after it
        else:
            if await scope.nodes.count_documents(
                {"tenant": scope.tenant, "parent_id": task_id}, limit=1
            ):
                raise Conflict(
                    f"task {task_id!r} has forks; "
                    "delete them first or use dialogs.delete(..., cascade=True)"
                )
        if tape is not None:
            tape.note(noted, True)
        result = await scope.tasks.delete_one(query)
        if result.deleted_count == 0 and not retried:
            raise scope.not_found(task_id)
        await scope.payloads.delete_many({"tenant": scope.tenant, "task_id": task_id})
        await scope.pages.delete_many({"tenant": scope.tenant, "task": query["_id"]})
        await scope.nodes.delete_one({"_id": query["_id"], "tenant": scope.tenant})
        await forget_task(scope.database, scope.tenant, task_id)  # its search index entries
        return True

    async def set_state(self, task_id: str, state: TaskState | str) -> TaskRecord:
        """Move the task to another state, guarded by the state read."""
        scope = self.port.scope
        query = scope.filter(task_id)
        check_enum(state, TaskState, "state")
        scope.forget(task_id)
        for attempt in range(scope.retry.attempts):
            document = await self.port.header_document(task_id)
            target = check_transition(document.get("state", "running"), state)
            if target.value == document.get("state"):
                document = await scope.opened_task(document, task_id)
                return TaskRecord.from_document(document, header_from_document(document))
            result = await scope.tasks.update_one(
                {**query, "state": document.get("state")},
                {"$set": {"state": target.value, "updated_at": utcnow()}, "$inc": {"version": 1}},
            )
            if result.matched_count == 1:
                return await self.reads.get(task_id)
            await asyncio.sleep(scope.retry.delay(attempt))
        raise Conflict(f"task {task_id!r}: state kept changing under us")

    async def set_title(self, task_id: str, title: str | None) -> None:
        """Set (or clear, with None) the task's title (sealed under a keyring)."""
        scope = self.port.scope
        query = scope.filter(task_id)
        check_optional_text(title, "title", max_chars=MAX_TITLE_CHARS)
        scope.forget(task_id)
        if scope.cipher is not None:  # sealed (mindstore.crypto)
            await scope.cipher.ready(write=True)
            title = scope.cipher.seal_task({"title": title}, task_id)["title"]
        else:  # never a title in the clear into an encrypted task
            query[ENCRYPTED] = {"$ne": True}
        result = await scope.tasks.update_one(
            query, {"$set": {"title": title, "updated_at": utcnow()}}
        )
        if result.matched_count == 0:
            # NotFound, an encrypted task (KeyringRequired), or a legacy task adopted now
            stored = await self.port.header_document(task_id, write=True)
            scope.require_keyring([stored], "write to")
            result = await scope.tasks.update_one(
                query, {"$set": {"title": title, "updated_at": utcnow()}}
            )
            if result.matched_count == 0:
                raise scope.not_found(task_id)
