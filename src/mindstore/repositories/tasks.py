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
from datetime import datetime
from typing import Any

from pymongo.errors import DuplicateKeyError

from mindstore import operations
from mindstore.clock import utcnow
from mindstore.crypto.fields import ENCRYPTED
from mindstore.crypto.tenant import TenantCipher
from mindstore.draws import current_tape
from mindstore.errors import Conflict, NotFound, ValidationError
from mindstore.formats import agent_state as formats_agent_state
from mindstore.formats.agent_state import MAX_AGENT_STATE_BYTES, agent_state_document
from mindstore.header_codec import header_from_document, header_to_fields
from mindstore.ids import check_key, derived_name, task_key
from mindstore.ids import check_name as check_key_name
from mindstore.model import plans, verbs
from mindstore.model.base import JSON, new_id, now_ts
from mindstore.model.header import TaskHeader, TaskState
from mindstore.model.levels import SubTaskSpan
from mindstore.model.messages import (
    AnyMessage,
    TaskConfigMessage,
)
from mindstore.model.paging import DEFAULT_POLICY, PagePolicy
from mindstore.model.parts import (
    ImagePart,
    TaskConfigPart,
    TextPart,
)
from mindstore.model.plans.agent_step import plan_agent_step
from mindstore.model.plans.core import Plan
from mindstore.model.storage_form import bson_size, escape_keys, unescape_keys
from mindstore.model.task import Task, check_transition
from mindstore.operations import InDoubt, Resilience, RetryPolicy
from mindstore.payloads import Offloader
from mindstore.repositories.bulk_pages import (
    confirm_pages,
    create_deadline,
    cut_history,
    write_pages,
)
from mindstore.repositories.content_lifecycle import ContentLifecycle
from mindstore.repositories.engine import (
    MAX_DOCUMENT_BYTES,
    READ_FIELDS,
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

__all__ = [
    "MAX_AGENT_STATE_BYTES",
    "MAX_DOCUMENT_BYTES",
    "READ_FIELDS",
    "RetryPolicy",
    "TaskRepository",
    "agent_state_document",
    "document_estimate",
    "plan_agent_step",
]


@operations.operations("tasks")
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
        in_doubt: InDoubt | None = None,
    ) -> None:
        scope = TaskScope(
            database, tenant, owner=owner, locks=locks, retry=retry,
            offload_threshold=offload_threshold, max_document_bytes=max_document_bytes,
            headers=headers, notifier=notifier, page_policy=page_policy, in_doubt=in_doubt,
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
    def resilience(self) -> Resilience:
        """The retry policy and the store's ledger of calls in doubt, which every method
        here runs under (`mindstore.operations`: each is an operation)."""
        return self.port.scope.resilience

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

    @property
    def cipher(self) -> TenantCipher | None:
        """The tenant's encryption (`mindstore.crypto`), set by a store with a keyring."""
        return self.port.scope.cipher

    @cipher.setter
    def cipher(self, value: TenantCipher | None) -> None:
        self.port.scope.cipher = value

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
        running = operations.current()
        if running is not None and not chosen:
            running.note = UNNAMED_CREATE
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
        if self.cipher is not None:
            await self.cipher.ready(write=True)
        else:
            await self.port.scope.require_unencrypted_tenant()
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
        plain = document
        if self.cipher is not None:  # title and metadata values sealed (mindstore.crypto)
            document = {**self.cipher.seal_task(document, task_id), ENCRYPTED: True}
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
            and await self._tasks.count_documents(
                {"_id": key, "tenant": self.tenant, "created_at": now}, limit=1
            )
        ):
            tape.note(noted, now)
            if history is not None:
                await confirm_pages(self._pages, self._tasks, tenant=self.tenant, key=key,
                                    born=now, history=history)  # fmt: skip
            return TaskRecord.from_document(plain, header)
        if (chosen or history is not None) and await self._tasks.count_documents(
            {"_id": {"$in": [task_id, key]}, "tenant": self.tenant}, limit=1
        ):  # before any page is written: pages under a live task's ids are its own
            raise Conflict(f"task id {task_id!r} is already in use")
        await self._store_payloads(task_id, offloader)
        if history is not None:  # pages first, invisible until the insert counts them
            await write_pages(
                self._pages, tenant=self.tenant, key=key, born=now, history=history,
                deadline=deadline,
            )  # fmt: skip
        if tape is not None:
            tape.note(noted, now)
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
        return TaskRecord.from_document(plain, header)

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
        tape, noted = current_tape(), ("delete", query["_id"])
        retried = tape is not None and tape.recall(noted) is not None
        try:
            await self._read_header_doc(task_id)  # NotFound outside the scope; adopts legacy
        except NotFound:
            if not retried:
                raise
            # an earlier attempt of this call deleted it, its reply lost: finish after it
        else:
            if await self._nodes.count_documents(
                {"tenant": self.tenant, "parent_id": task_id}, limit=1
            ):
                raise Conflict(
                    f"task {task_id!r} has forks; "
                    "delete them first or use dialogs.delete(..., cascade=True)"
                )
        if tape is not None:
            tape.note(noted, True)
        result = await self._tasks.delete_one(query)
        if result.deleted_count == 0 and not retried:
            raise self._not_found(task_id)
        await self._payloads.delete_many({"tenant": self.tenant, "task_id": task_id})
        await self._pages.delete_many({"tenant": self.tenant, "task": query["_id"]})
        await self._nodes.delete_one({"_id": query["_id"], "tenant": self.tenant})
        await forget_task(self.database, self.tenant, task_id)  # its search index entries
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
                document = await self.port.scope.opened_task(document, task_id)
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
        if self.cipher is not None:  # sealed (mindstore.crypto)
            await self.cipher.ready(write=True)
            title = self.cipher.seal_task({"title": title}, task_id)["title"]
        else:  # never a title in the clear into an encrypted task
            query[ENCRYPTED] = {"$ne": True}
        result = await self._tasks.update_one(
            query, {"$set": {"title": title, "updated_at": utcnow()}}
        )
        if result.matched_count == 0:
            # NotFound, an encrypted task (KeyringRequired), or a legacy task adopted now
            stored = await self._read_header_doc(task_id, write=True)
            self.port.scope.require_keyring([stored], "write to")
            result = await self._tasks.update_one(
                query, {"$set": {"title": title, "updated_at": utcnow()}}
            )
            if result.matched_count == 0:
                raise self._not_found(task_id)

    # ------------------------------------------------------------------ agent-graph state
    async def save_agent_state(
        self,
        task_id: str,
        state: formats_agent_state.AgentState,
        *,
        messages: Sequence[AnyMessage] = (),
    ) -> None:
        """Store an agent-graph run's state (`mindstore.formats.agent_state.AgentState`:
        context summary, current node, step, interrupt, status) with the step's messages,
        in one guarded update: after a crash both are stored or neither, so the run
        resumes where it stopped. A replay (the same message ids, all stored) writes
        nothing. The state lives in the task document (`agent_state`), beside the header.

        Args:
            task_id: The task.
            state: The `formats.agent_state.AgentState` after this step (not the agent map
                `mindstore.model.agents.AgentState`); at most 1 MiB stored.
            messages: The step's messages, in order; each with the caller's id (the
                replay guard).

        Raises:
            ValidationError: `state` is not a `formats.agent_state.AgentState`, cannot be
                stored, or is too large; a malformed message or id.
            NotFound: No such task in this view.
            InvalidTransition: The task's state or level does not allow a message.
            Conflict: Writers kept racing.

        Example:
            ```python
            state.advance_step()
            await acme.tasks.save_agent_state(task.id, state, messages=[reply])
            ```
        """
        document = agent_state_document(state)
        checked = verbs.check_messages(messages)
        ids = [check_key_name(m.id, "message id") for m in checked]
        if self.cipher is not None:  # sealed whole (mindstore.crypto.task_fields)
            await self.cipher.ready(write=True)
            document = self.cipher.seal_task({"agent_state": document}, task_id)["agent_state"]
        await self._verb(
            task_id, plan_agent_step, checked, {"agent_state": document}, ids=ids,
            replay=lambda stored: None,
        )  # fmt: skip

    async def agent_state(self, task_id: str) -> formats_agent_state.AgentState | None:
        """The agent-graph state last stored by `save_agent_state` (one projected read).

        Args:
            task_id: The task.

        Returns:
            The `formats.agent_state.AgentState`, or None if none was saved.

        Raises:
            NotFound: No such task in this view.
            KeyShredded: The tenant's keys were shredded (a state sealed under a keyring).
            CryptoError: The stored state was not sealed for this tenant and task.
        """
        document = await self.port.scope.find_task(task_id, {"agent_state": 1, ENCRYPTED: 1})
        self.port.scope.require_keyring_to_read(document)
        if self.cipher is not None:  # opened (mindstore.crypto.task_fields)
            await self.cipher.ready()
            document = self.cipher.open_task(document, task_id)
        stored = document.get("agent_state")
        if stored is None:
            return None
        return formats_agent_state.AgentState.model_validate(unescape_keys(stored))

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
        return await self.reads.list(
            owner=owner, state=state, limit=limit, cursor=cursor, updated_after=updated_after,
            updated_before=updated_before, owner_prefix=owner_prefix, title=title,
            oldest_first=oldest_first,
        )  # fmt: skip

    async def count(
        self,
        *,
        owner: str | None = None,
        state: TaskState | str | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        owner_prefix: str | None = None,
        title: str | None = None,
        at_most: int = 10_000,
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
        return await self.reads.count(
            owner=owner, state=state, updated_after=updated_after, updated_before=updated_before,
            owner_prefix=owner_prefix, title=title, at_most=at_most,
        )  # fmt: skip

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
        back as skeletons (see `mindstore.compression.checkpoint_view`).

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
