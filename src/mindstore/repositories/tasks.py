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
from typing import Any

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
    ObserverResult,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolResultContent,
)
from mindstore.model.specs import ToolResultSpec, resolve_alias
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
        if self.cipher is not None:
            await self.cipher.ready(write=True)
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
            document = self.cipher.seal_task(document, task_id)
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
                document = await self._opened_task(document, task_id)
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


@dataclass(frozen=True)
class _Replayed:
    """A replayed exit, so its answer can be read after the write loop."""

    message: AnyMessage
