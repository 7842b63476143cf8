"""The task repository: every Mind Map verb as one guarded MongoDB update.

`TaskRepository` is a facade over parts composed in its constructor, each with one job:

* the port (`port.TaskPort`): scope (tenant, owner, keys, locks, header cache), the
  collections, sealed pages and decoding, with the public reads the others share;
* the writer (`engine.TaskWriter`): a plan run as one guarded update (retry, replay,
  fold and seal after the write);
* the reads (`task_reads.TaskReads`), retraction (`retraction.Retraction`) and the
  content lifecycle (`content_lifecycle.ContentLifecycle`: redact, watch).

Here are the lifecycle (create, import, delete, state, title) and the verbs, which enter
the writer through `_verb` and `_part_verb`, and the reads, exposed and documented here.
Every argument is checked before the first write (`mindstore.validation`), so a bad call
raises a `ValidationError` naming the argument and leaves the database as it was.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pymongo.errors import DuplicateKeyError

from mindstore.documents import header_from_document, header_to_fields, utcnow
from mindstore.errors import Conflict, NotFound, ValidationError
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
from mindstore.model.paging import DEFAULT_POLICY, PagePolicy
from mindstore.model.parts import (
    ImagePart,
    InformationalPart,
    ObserverResult,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolResultContent,
)
from mindstore.model.planning import Plan
from mindstore.model.specs import ToolResultSpec, resolve_alias
from mindstore.model.storage_form import bson_size, escape_keys
from mindstore.model.task import Task, check_transition, exit_answer_id, tool_call_id_of
from mindstore.model.views import SubTaskSpan
from mindstore.payloads import Offloader
from mindstore.repositories.bulk_pages import confirm_pages, cut_history, write_pages
from mindstore.repositories.content_lifecycle import ContentLifecycle
from mindstore.repositories.engine import (
    MAX_DOCUMENT_BYTES,
    READ_FIELDS,
    PlanFn,
    RetryPolicy,
    TaskWriter,
    document_estimate,
)
from mindstore.repositories.feed import FeedEvent, Notifier
from mindstore.repositories.header_cache import HeaderCache
from mindstore.repositories.locks import TaskLocks
from mindstore.repositories.port import TaskPort
from mindstore.repositories.records import CheckpointRecord, Page, TaskRecord
from mindstore.repositories.retraction import Retraction
from mindstore.repositories.scope import TaskScope
from mindstore.repositories.task_reads import TaskReads
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


class TaskRepository:
    """One tenant's tasks (one owner's, on an owner-scoped view).

    A facade: the parts it composes (see the module docstring) hold the logic; each public
    method here is the documented entry to one of them, so a verb or a read is found in
    one place and no part reaches into another's private helpers.
    """

    def __init__(
        self,
        database: Any,
        tenant: str,
        *,
        owner: str | None = None,
        locks: TaskLocks | None = None,
        retry: RetryPolicy | None = None,
        offload_threshold: int = 256 * 1024,
        max_document_bytes: int = MAX_DOCUMENT_BYTES,
        headers: HeaderCache | None = None,
        notifier: Notifier | None = None,
        page_policy: PagePolicy | None = DEFAULT_POLICY,
    ) -> None:
        scope = TaskScope(
            database, tenant, owner=owner, locks=locks, retry=retry,
            offload_threshold=offload_threshold, max_document_bytes=max_document_bytes,
            headers=headers, notifier=notifier, page_policy=page_policy,
        )  # fmt: skip
        # the parts (docs/architecture.md, "The task repository"); public, so tests and the
        # layers above (the context window) use their public surfaces, never a private one
        self.port = TaskPort(scope)  # scope, collections, sealed pages, decoding, shared reads
        self.writer = TaskWriter(self.port)  # a verb's plan run as one guarded update
        self.reads = TaskReads(self.port)
        self.retraction = Retraction(self.port)
        self.lifecycle = ContentLifecycle(self.port, self.writer)

    # ------------------------------------------------------------------ the view's settings
    @property
    def tenant(self) -> str:
        """The tenant this view reads and writes."""
        return self.port.scope.tenant

    @property
    def owner(self) -> str | None:
        """The owner an owner-scoped view is limited to (None: the whole tenant)."""
        return self.port.scope.owner

    @property
    def database(self) -> Any:
        """The database the view's collections live in (the dialogs and agents share it)."""
        return self.port.scope.database

    @property
    def retry(self) -> RetryPolicy:
        """How often, and after which pauses, a write that lost a race is tried again."""
        return self.port.scope.retry

    @retry.setter
    def retry(self, value: RetryPolicy) -> None:
        self.port.scope.retry = value

    @property
    def offload_threshold(self) -> int:
        """Values larger than this many bytes are stored as payloads, not inline."""
        return self.port.scope.offload_threshold

    @offload_threshold.setter
    def offload_threshold(self, value: int) -> None:
        self.port.scope.offload_threshold = value

    @property
    def max_document_bytes(self) -> int:
        """The size a task document must stay under (the server's limit: 16 MiB)."""
        return self.port.scope.max_document_bytes

    @max_document_bytes.setter
    def max_document_bytes(self, value: int) -> None:
        self.port.scope.max_document_bytes = value

    @property
    def page_policy(self) -> PagePolicy | None:
        """How large sealed pages are (`model.paging`); None: never seal."""
        return self.port.scope.page_policy

    @page_policy.setter
    def page_policy(self, value: PagePolicy | None) -> None:
        self.port.scope.page_policy = value

    # ------------------------------------------------------------------ the verbs' helpers
    # The lifecycle verbs below use the port's scope and collections through these names;
    # the collections are read at each call, so a proxy swapped into the scope is seen.
    @property
    def _tasks(self) -> Any:
        return self.port.scope.tasks

    @property
    def _pages(self) -> Any:
        return self.port.scope.pages

    @property
    def _payloads(self) -> Any:
        return self.port.scope.payloads

    @property
    def _nodes(self) -> Any:
        return self.port.scope.nodes

    def _filter(self, task_id: Any) -> dict[str, Any]:
        return self.port.scope.filter(task_id)

    def _not_found(self, task_id: str) -> NotFound:
        return self.port.scope.not_found(task_id)

    def _offloader(self, task_id: str) -> Offloader:
        return self.port.scope.offloader(task_id)

    def _remember(
        self, task_id: str, version: int, updated_at: datetime, header: TaskHeader,
        tail: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        self.port.scope.remember(task_id, version, updated_at, header, tail)

    def _forget(self, task_id: str) -> None:
        self.port.scope.forget(task_id)

    async def _read_header_doc(
        self, task_id: str, *, tail: bool = False, write: bool = False
    ) -> dict[str, Any]:
        return await self.port.header_document(task_id, tail=tail, write=write)

    async def _store_payloads(self, task_id: str, offloader: Offloader) -> None:
        await self.port.store_payloads(task_id, offloader)

    async def _verb(
        self,
        task_id: str,
        planner_fn: Callable[..., Plan],
        *args: Any,
        ids: Sequence[str | None] = (),
        replay: Callable[[dict[str, AnyMessage]], Any] | None = None,
        also_guard: Sequence[str | None] = (),
        require_ids: Sequence[str] = (),
        **kwargs: Any,
    ) -> Any:
        """The verbs' entry to the writer (`TaskWriter.verb`)."""
        return await self.writer.verb(
            task_id, planner_fn, *args, ids=ids, replay=replay, also_guard=also_guard,
            require_ids=require_ids, **kwargs,
        )  # fmt: skip

    async def _part_verb(
        self,
        task_id: str,
        message_id: str,
        planner_fn: Callable[..., Plan],
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        """The part verbs' entry to the writer (`TaskWriter.part_verb`)."""
        return await self.writer.part_verb(task_id, message_id, planner_fn, *args, **kwargs)

    async def _message_at(self, task_id: str, message_id: str) -> tuple[int, AnyMessage]:
        """`TaskPort.message_at`, for `repositories.streaming` (which still calls it here)."""
        return await self.port.message_at(task_id, message_id)

    async def _mutate(self, task_id: str, plan_fn: PlanFn, **options: Any) -> Any:
        """`TaskWriter.mutate`, for `repositories.streaming` (which still calls it here)."""
        return await self.writer.mutate(task_id, plan_fn, **options)

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
    # The same names, defaults, replays and errors as the in-memory `Task` (docs/contract.md).
    async def add_message(self, task_id: str, message: AnyMessage | JSON) -> AnyMessage:
        """Append any message, unknown roles included (kept as they are).

        The general form of every `add_*` verb: the message is checked against its role's
        rules (`model/roles.py`), planned like the specific verbs and written in one guarded
        update. With a message id the call is exactly-once: a replay returns the stored message.

        Args:
            task_id: The task.
            message: A message model (`UserMessage`, `AssistantMessage`, ...) or its dict form
                (`{"role": "user", "content": [...]}`).

        Returns:
            The stored message (with `scope`, `depth`, `task_id` and timestamps filled in).

        Raises:
            ValidationError: A malformed message or a part its role may not hold.
            NotFound: No such task in this view.
            InvalidTransition: The task's state or level does not allow it.
            TaskTooLarge: The message cannot fit a document even alone.
            Conflict: Writers kept racing for `RetryPolicy.attempts` tries.
        """
        if isinstance(message, dict):
            message = parse_message(message)
        message = _check_messages([message])[0]
        return await self._verb(task_id, plans.plan_add_message, message, ids=[message.id])

    async def add_messages(self, task_id: str, messages: Sequence[AnyMessage]) -> list[AnyMessage]:
        """Append several messages in one atomic write (all or nothing).

        Args:
            task_id: The task.
            messages: The messages, in order; each needs an id (they are the replay guard).

        Returns:
            The stored messages, in order (on a replay, the ones already stored).

        Raises:
            ValidationError: Not a list of messages, a malformed message or id.
            NotFound: No such task in this view.
            InvalidTransition: The task's state or level does not allow one of them.
            TaskTooLarge: A message cannot fit a document even alone.
            Conflict: Writers kept racing.

        Example:
            ```python
            from mindstore.formats import from_openai_chat
            await acme.tasks.add_messages(task.id, from_openai_chat(body["messages"]))
            ```
        """
        messages = _check_messages(messages)
        ids = [check_name(m.id, "message id") for m in messages]
        return await self._verb(
            task_id, plans.plan_add_messages, messages, ids=ids,
            replay=lambda stored: [stored[i] for i in ids],
        )  # fmt: skip

    async def add_task_config(
        self, task_id: str, part: TaskConfigPart, timestamp: float | None = None
    ) -> AnyMessage:
        """Append a task-config message: the model, tools and compression settings that apply to
        the current level from here on.

        Args:
            task_id: The task.
            part: The `TaskConfigPart`.
            timestamp: Epoch seconds of the message (default: now).

        Returns:
            The stored `TaskConfigMessage`.

        Raises:
            ValidationError: `part` is not a `TaskConfigPart`, or a bad timestamp.
            NotFound: No such task in this view.
            InvalidTransition: The task's state does not allow appends.
        """
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
        """Append what the person said: a message with role `user`.

        "Human" is the Mind Map's word for the verb; the stored role is `user`, the role every
        provider format (OpenAI, Anthropic, Gemini) and framework uses for the person's turn, so
        exports and analytics need no mapping (docs/glossary.md).

        Args:
            task_id: The task.
            text: The text, or several texts (one text part each); None with `images` only.
            images: `ImagePart`s to attach after the text.
            is_ui_hidden: Keep the message out of the user interface (still sent to the model).
            timestamp: Epoch seconds of the message (default: now).
            message_id: Choose the message id; a replay with the same id returns the stored
                message and writes nothing (exactly-once).

        Returns:
            The stored `UserMessage`, or None when there is nothing to add (no text, no images),
            as the Mind Map returns.

        Raises:
            ValidationError: A bad text, image, id or timestamp.
            NotFound: No such task in this view.
            InvalidTransition: The task's state does not allow appends.
            TaskTooLarge: The message cannot fit a document even alone.

        Example:
            ```python
            await acme.tasks.add_human_message(task.id, "A hotel in Lisbon", message_id="u-1")
            ```
        """
        return await self._verb(
            task_id, plans.plan_add_human_message, text, images, is_ui_hidden, timestamp,
            message_id, ids=[message_id],
        )  # fmt: skip

    async def add_system_message(
        self, task_id: str, text: str, message_id: str | None = None,
        timestamp: float | None = None, *, id: str | None = None,
    ) -> AnyMessage:  # fmt: skip
        """Append a system message (instructions for the model).

        Args:
            task_id: The task.
            text: The instructions.
            message_id: Choose the message id (exactly-once, as `add_human_message`).
            timestamp: Epoch seconds of the message (default: now).
            id: The Mind Map's spelling of `message_id` (an alias; give one of the two).

        Returns:
            The stored `SystemMessage`.

        Raises:
            ValidationError: A bad text, id or timestamp, or `id` and `message_id` disagree.
            NotFound: No such task in this view.
            InvalidTransition: The task's state does not allow appends.
        """
        message_id = resolve_alias(message_id, id, "message_id", "id")
        return await self._verb(
            task_id, plans.plan_add_system_message, text, message_id, timestamp, ids=[message_id]
        )

    async def add_assistant_message(
        self, task_id: str, message_id: str | None = None, timestamp: float | None = None,
        *, id: str | None = None,
    ) -> AnyMessage:  # fmt: skip
        """Open an assistant turn: an empty assistant message that part verbs then fill.

        The model comes from the current level's config. Fill the turn with `add_text_part`,
        `add_reasoning_part` and `add_tool_call_part` (or stream it: `tasks.stream`), and close
        it with `finish_assistant_message`.

        Args:
            task_id: The task.
            message_id: Choose the message id (exactly-once, as `add_human_message`).
            timestamp: Epoch seconds of the message (default: now).
            id: The Mind Map's spelling of `message_id` (an alias).

        Returns:
            The stored, still open `AssistantMessage`.

        Raises:
            NoConfigForTurn: The task has no config yet (an `InvalidTransition` and a
                `MissingConfig`).
            ValidationError: A bad id or timestamp.
            NotFound: No such task in this view.

        Example:
            ```python
            reply = await acme.tasks.add_assistant_message(task.id)
            await acme.tasks.add_text_part(task.id, reply.id, "Two hotels fit.")
            await acme.tasks.finish_assistant_message(task.id, reply.id, tokens_in=412)
            ```
        """
        message_id = resolve_alias(message_id, id, "message_id", "id")
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
        *,
        id: str | None = None,
    ) -> AnyMessage:
        """Append a tool result for a call, without flipping the call's flags.

        Most callers want `answer_tool_call`, which also marks the call answered in the same
        write; this verb stores a result as given (the Mind Map's lower-level verb). The
        optional arguments after `result` may also be given by position, in this order (the
        Mind Map's).

        Args:
            task_id: The task.
            tool_call_id: The id of the call the result belongs to.
            tool_name: The tool's name.
            result: The tool's output: any JSON-like value (large ones are offloaded).
            observer_results: Results of observers that watched the call (`ObserverResult`s).
            is_error: The tool failed; `result` describes the failure.
            is_approved: The call was approved (False: a refused call's result).
            tool_result_contents: Rich result contents (`ToolResultContent`: images, files).
            error_message: A short error text for people.
            is_loading: The result is still being produced (a placeholder to update).
            has_feedback: The user left feedback on the result.
            timestamp: Epoch seconds of the message (default: now).
            message_id: Choose the result message's id (exactly-once: a replay returns the
                stored result).
            terminate: The result ends the agent's run (the caller's signal, stored).
            metadata: JSON-like dict kept on the message.
            id: The Mind Map's spelling of `message_id` (an alias).

        Returns:
            The stored `ToolMessage`.

        Raises:
            ValidationError: A bad argument (a flag that is not a bool, metadata that is not
                a dict with string keys, ...), or `id` and `message_id` disagree.
            NotFound: No such task in this view.
            InvalidTransition: The task's state does not allow appends.
            TaskTooLarge: The result is above the payload limit (15 MiB).
        """
        spec = ToolResultSpec.from_call((), {
            "observer_results": observer_results, "is_error": is_error, "is_approved": is_approved,
            "tool_result_contents": tool_result_contents, "error_message": error_message,
            "is_loading": is_loading, "has_feedback": has_feedback, "timestamp": timestamp,
            "message_id": message_id, "terminate": terminate, "metadata": metadata, "id": id,
        })  # fmt: skip
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
        """Append an informational message: a note about the run (a status, a warning, a
        progress event) that is shown or sent only where its flags say.

        Args:
            task_id: The task.
            informational_type: What kind of note (free text, e.g. `"status"`).
            details: The note.
            is_visible_ai: Send it to the model as context.
            is_visible_ui: Show it in the user interface.
            additional_data: JSON-like data kept with the note.
            timestamp: Epoch seconds of the message (default: now).
            message_id: Choose the message id (exactly-once).

        Returns:
            The stored `InformationalMessage`.

        Raises:
            ValidationError: A bad argument.
            NotFound: No such task in this view.
            InvalidTransition: The task's state does not allow appends.
        """
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
        """Record a compression of the current level: which messages a summary replaces and
        which stay (a checkpoint; docs/compression.md). The context window reads it; the stored
        history itself is never shortened.

        Usually written by the context window (`tasks.context`), not by hand.

        Args:
            task_id: The task.
            start_idx: Index of the first message the compression covers.
            end_idx: Index of the last message it covers.
            reason: Why it ran (e.g. `"token_limit"`).
            strategies: The names of the strategies applied, in order.
            compressed_message_ids: Ids of the messages the compression replaces (stored).
            kept_message_ids: Ids of the messages kept as they are (stored).
            cache: The strategies' reusable state (JSON-like).
            metadata: JSON-like dict kept on the message.
            timestamp: Epoch seconds of the message (default: now).
            message_id: Choose the message id (exactly-once).

        Returns:
            The stored `CompressionMessage`.

        Raises:
            ValidationError: A bad argument.
            NotFound: No such task, or a referenced message id is not stored (the write's
                filter requires every one).
            InvalidTransition: The task's state does not allow appends.
        """
        referenced = plans.compression_ids(compressed_message_ids, kept_message_ids)
        return await self._verb(
            task_id, plans.plan_add_compression_message, start_idx, end_idx, reason, strategies,
            compressed_message_ids, kept_message_ids, cache, metadata, timestamp, message_id,
            ids=[message_id], require_ids=sorted(referenced),
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
        *,
        id: str | None = None,
    ) -> AnyMessage:
        """Answer an open tool call: flip the call's flags and append its result, in one write.

        The optional arguments after `result` may also be given by position, in this order
        (the Mind Map's: `observer_results, is_error, is_approved, ...`).

        Args:
            task_id: The task.
            tool_call: The open call, as its `ToolCallPart` or its `tool_call_id`.
            result: The tool's output: any JSON-like value (large ones are offloaded).
            observer_results: Results of observers that watched the call (`ObserverResult`s).
            is_error: The tool failed; `result` describes the failure.
            is_approved: The call was approved (False: a refused call's result).
            tool_result_contents: Rich result contents (`ToolResultContent`: images, files).
            error_message: A short error text for people.
            is_loading: The result is still being produced (a placeholder to update).
            has_feedback: The user left feedback on the result.
            timestamp: Epoch seconds of the message (default: now).
            message_id: Choose the result message's id (exactly-once: a replay returns the
                stored result).
            terminate: The result ends the agent's run (the caller's signal, stored).
            metadata: JSON-like dict kept on the message.
            id: The Mind Map's spelling of `message_id` (an alias).

        Returns:
            The stored `ToolMessage`.

        Raises:
            UnknownToolCall: No open call with that id (never made, or already answered; a
                replay with the same `message_id` returns the stored result instead).
            WrongType: `tool_call` is neither a `ToolCallPart` nor a string.
            ValidationError: A bad argument, or `id` and `message_id` disagree.
            NotFound: No such task in this view.
            TaskTooLarge: The result is above the payload limit (15 MiB).

        Example:
            ```python
            await acme.tasks.answer_tool_call(task.id, "c-1", {"hits": 3}, message_id="r-1")
            await acme.tasks.answer_tool_call(task.id, "c-2", "timeout", is_error=True)
            ```
        """
        tool_call_id = check_name(tool_call_id_of(tool_call), "tool_call_id")
        spec = ToolResultSpec.from_call((), {
            "observer_results": observer_results, "is_error": is_error, "is_approved": is_approved,
            "tool_result_contents": tool_result_contents, "error_message": error_message,
            "is_loading": is_loading, "has_feedback": has_feedback, "timestamp": timestamp,
            "message_id": message_id, "terminate": terminate, "metadata": metadata, "id": id,
        })  # fmt: skip
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
        """Enter a sub-task (one level deeper): the entry, its config, hidden context and
        informational messages, in one write.

        The entry records the open tool call its exit will answer (the newest open call of a
        tool with `is_task_entry`, or the one `trigger_call_id` names), so `add_task_exit`
        answers exactly that call.

        Args:
            task_id: The task.
            task_description: What the sub-task is to do (text, image or informational parts).
            initial_task_config: The sub-task level's `TaskConfigPart`.
            entry_id: Choose the entry message's id; it names the new level (its `scope`).
            timestamp: Epoch seconds of the message (default: now).
            trigger_call_id: The open tool call that started the sub-task (default: the newest
                open call of an entry tool).

        Returns:
            The stored `TaskEntryMessage`.

        Raises:
            ValidationError: A bad argument.
            NotFound: No such task, or `trigger_call_id` names no open call.
            InvalidTransition: The task's state does not allow appends.

        Example:
            ```python
            await acme.tasks.add_task_entry(task.id, [TextPart(text="compare two hotels")], config)
            await acme.tasks.current_task_level(task.id)  # 1
            ```
        """
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
        """Leave the current sub-task: the exit and the answer to its triggering tool call, in
        one write. A replay returns the stored exit and the answer it wrote.

        Args:
            task_id: The task.
            handoff_description: What the sub-task hands back (text or image parts); the
                answer to the triggering call carries it under `payload_key`.
            payload_key: The key of the handoff in the answer's result.
            timestamp: Epoch seconds of the message (default: now).
            exit_id: Choose the exit message's id (exactly-once).
            result_message_id: Choose the id of the answer to the triggering call.
            payloadKey: The Mind Map's spelling of `payload_key` (an alias).

        Returns:
            `(exit, answer)`: the stored exit message and the tool result that answers the
            triggering call (None when the entry had no trigger).

        Raises:
            InvalidTransition: The task is at its root level (nothing to exit).
            ValidationError: A bad argument.
            NotFound: No such task in this view.
        """
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
        """Append a text part to an open assistant message.

        Args:
            task_id: The task.
            message_id: The assistant message (from `add_assistant_message`).
            text: The text.

        Returns:
            The updated message.

        Raises:
            NotFound: No such task or message.
            InvalidTransition: The message is not an assistant message.
            ValidationError: `text` is not a string MongoDB can store.
        """
        return await self._part_verb(task_id, message_id, plans.plan_add_text_part, text)

    async def add_reasoning_part(
        self, task_id: str, message_id: str, reasoning: str, signature: str | None = None
    ) -> AnyMessage:
        """Append a reasoning part (the model's visible thinking) to an open assistant message.

        Args:
            task_id: The task.
            message_id: The assistant message.
            reasoning: The reasoning text.
            signature: The provider's signature of the reasoning, kept so it can be sent back.

        Returns:
            The updated message.

        Raises:
            NotFound: No such task or message.
            InvalidTransition: The message is not an assistant message.
            ValidationError: A bad text or signature.
        """
        return await self._part_verb(
            task_id, message_id, plans.plan_add_reasoning_part, reasoning, signature
        )

    async def add_tool_call_part(
        self, task_id: str, message_id: str, tool_call: ToolCallPart
    ) -> AnyMessage:
        """Append a tool call to an open assistant message; the call is open until answered
        (`answer_tool_call`, or `add_task_exit` for a sub-task's trigger).

        Args:
            task_id: The task.
            message_id: The assistant message.
            tool_call: The `ToolCallPart`.

        Returns:
            The updated message.

        Raises:
            NotFound: No such task or message.
            InvalidTransition: The message is not an assistant message.
            ValidationError: Not a `ToolCallPart`.

        Example:
            ```python
            await acme.tasks.add_tool_call_part(
                task.id, reply.id, ToolCallPart(tool_call_id="c-1", tool_name="research"))
            ```
        """
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
        """Close an assistant turn; its usage rolls up into the task's totals in the same write.

        Give the usage either as a `Usage` or as the separate counts.

        Args:
            task_id: The task.
            message_id: The assistant message.
            status: How the turn ended: `"completed"`, `"error"`, `"interrupted"` or
                `"loading"` (still streaming).
            usage: Token and cost figures as one `Usage`.
            tokens_in: Input tokens.
            tokens_out: Output tokens.
            cache_reads: Input tokens read from the provider's cache.
            cache_writes: Input tokens written to the provider's cache.
            cost: Cost in dollars (finite, >= 0).
            finished_ts: Epoch seconds the turn ended (default: now).

        Returns:
            The finished message.

        Raises:
            NotFound: No such task or message.
            InvalidTransition: The message is not an assistant message.
            ValidationError: A negative, NaN or infinite count or cost, or an unknown status.
        """
        return await self._part_verb(
            task_id, message_id, plans.plan_finish_assistant_message, status, usage, tokens_in,
            tokens_out, cache_reads, cache_writes, cost, finished_ts,
        )  # fmt: skip

    # ------------------------------------------------------------------ reads
    # After the verbs: `list` below would otherwise shadow the builtin in their annotations.
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
        return await self.reads.get(task_id)

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
        return await self.reads.header(task_id)

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
        return await self.reads.load(task_id)

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
        return await self.reads.list(
            owner=owner, state=state, limit=limit, cursor=cursor, updated_after=updated_after
        )

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
        return await self.reads.read_range(task_id, start, stop)

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
        return await self.reads.messages(task_id, start, limit)

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
        return await self.reads.ends(task_id, first, last)

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
        return await self.reads.tail(task_id, count)

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
        return await self.reads.get_message(task_id, message_id)

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
        return await self.reads.get_updates(task_id, since_id, since_message_id=since_message_id)

    async def current_task_level(self, task_id: str) -> int:
        """How deep the task is: 0 at the root, 1 inside a sub-task, and so on.

        Args:
            task_id: The task.

        Returns:
            The level.

        Raises:
            NotFound: No such task in this view.
        """
        return await self.reads.current_task_level(task_id)

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
        return await self.reads.level_messages(task_id, scope)

    async def current_task_messages(self, task_id: str) -> builtins.list[AnyMessage]:
        """The messages of the current level (the innermost sub-task without an exit, or the root).

        Args:
            task_id: The task.

        Returns:
            The level's messages, in order.

        Raises:
            NotFound: No such task in this view.
        """
        return await self.reads.current_task_messages(task_id)

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
        return await self.reads.find_current_task_boundaries(task_id)

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
        return await self.reads.task_boundaries(task_id, entry_id)

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
        return await self.reads.sub_task_spans(task_id)

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
        return await self.reads.context_source(task_id)

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
        return await self.reads.current_task_config(task_id)

    async def retract_last(self, task_id: str, expected_id: str | None = None) -> AnyMessage | None:
        """Remove the task's last message in one guarded write and return it.

        The header loses what the message added (`mindstore.model.retract`): size, usage, the
        calls it opened; a call it answered is open again. `expected_id` makes the call
        idempotent: the message is removed only while it is the last one, and a replay after it
        is gone returns None. Concurrent retracts each remove exactly one message (the update is
        guarded by the header `version` and the message's id).

        Args:
            task_id: The task.
            expected_id: Remove the last message only if it has this id.

        Returns:
            The removed message, or None when nothing was removed (an empty task, or a replay
            with `expected_id`).

        Raises:
            InvalidTransition: `expected_id` is stored but not last, or the last message cannot
                be retracted (e.g. a sub-task's entry or exit).
            NotFound: No such task in this view.
            Conflict: Writers kept racing.
        """
        return await self.retraction.retract_last(task_id, expected_id)

    async def redact(self, task_id: str, message_id: str, reason: str | None = None,
                     part_index: int | None = None) -> AnyMessage:  # fmt: skip
        """Remove one message's content (or one part's), keeping a tombstone: id, role, tool
        pairing and usage stay, so the conversation's shape and analytics stay consistent.

        One guarded update; the message records when and why (never what). Payloads the
        redacted content referenced are deleted after the update; calling again (a replay, or
        after a crash between the two) finishes that and writes nothing else. docs/lifecycle.md.

        Args:
            task_id: The task.
            message_id: The message to redact.
            reason: Why (kept on the message; never the content).
            part_index: Redact only this part (0-based); None: the whole content.

        Returns:
            The redacted message.

        Raises:
            NotFound: No such task or message.
            ValidationError: A bad reason or part index (past the message's parts).

        Example:
            ```python
            await acme.tasks.redact(task.id, "u-1", reason="user asked")
            ```
        """
        return await self.lifecycle.redact(task_id, message_id, reason, part_index)

    async def watch(self, task_id: str, since_id: str | None = None, *,
                    heartbeat: float | None = None) -> AsyncIterator[FeedEvent]:  # fmt: skip
        """The task's new messages and part updates, in order (`FeedEvent`s), forever.

        Resumable: `since_id` starts after that message (all messages if it is None or unknown,
        as `get_updates`). Wakes on this process's writes (embedded and server), and on a server
        also on other processes' writes through a change stream; `heartbeat` (seconds) adds a
        periodic re-check for servers without change streams.

        Args:
            task_id: The task.
            since_id: Start after this message.
            heartbeat: Seconds between re-checks when no change stream is available.

        Yields:
            `FeedEvent`s: `kind` (`"new"` or `"updated"`), `index` and `message`.

        Raises:
            NotFound: No such task in this view.
            ValidationError: `since_id` is not a message id.

        Example:
            ```python
            async for event in acme.tasks.watch(task.id, since_id="u-1"):
                print(event.kind, event.message.text())
            ```
        """
        async with aclosing(self.lifecycle.watch(task_id, since_id, heartbeat=heartbeat)) as events:
            async for event in events:
                yield event


@dataclass(frozen=True)
class _Replayed:
    """A replayed exit, so its answer can be read after the write loop."""

    message: AnyMessage
