"""The task repository: every Mind Map verb as one guarded MongoDB update.

`TaskRepository` is a facade over parts composed in its constructor, each with one job:

* the port (`port.TaskPort`): scope (tenant, owner, keys, locks, header cache), the
  collections, sealed pages and decoding, with the public reads the others share;
* the writer (`engine.TaskWriter`): a plan run as one guarded update (retry, replay,
  fold and seal after the write);
* the lifecycle (`task_lifecycle.TaskLifecycle`: create, import, delete, state, title) and
  the agent-graph state (`agent_states.AgentStates`);
* the reads (`task_reads.TaskReads`: records and listings; `message_reads.MessageReads`:
  ranges, levels, spans, the context source), retraction (`retraction.Retraction`) and
  the content lifecycle (`content_lifecycle.ContentLifecycle`: redact, watch).

Here are the documented entries of the writes (the lifecycle, the agent state, retraction,
redaction and the live feed), the verbs, which enter the writer through `_verb` and
`_part_verb`, and the reads, each documented once on its part and exposed unchanged
(`exposed`). Every argument is checked before the first write (`mindstore.validation`), so
a bad call raises a `ValidationError` naming the argument and leaves the database as it was.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import aclosing
from typing import Any, Concatenate, ParamSpec, TypeVar

from mindstore import operations
from mindstore.crypto.tenant import TenantCipher
from mindstore.formats import agent_state as formats_agent_state
from mindstore.formats.agent_state import MAX_AGENT_STATE_BYTES, agent_state_document
from mindstore.model import verbs
from mindstore.model.base import JSON
from mindstore.model.header import TaskState
from mindstore.model.messages import AnyMessage
from mindstore.model.paging import DEFAULT_POLICY, PagePolicy
from mindstore.model.parts import ImagePart, TaskConfigPart, TextPart
from mindstore.model.plans.agent_step import plan_agent_step
from mindstore.model.plans.core import Plan
from mindstore.model.task import Task
from mindstore.operations import InDoubt, Resilience, RetryPolicy
from mindstore.repositories.agent_states import AgentStates
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
from mindstore.repositories.message_reads import MessageReads
from mindstore.repositories.port import TaskPort
from mindstore.repositories.records import TaskRecord
from mindstore.repositories.retraction import Retraction
from mindstore.repositories.scope import TaskScope
from mindstore.repositories.task_lifecycle import UNNAMED_CREATE, TaskLifecycle
from mindstore.repositories.task_reads import TaskReads

__all__ = [
    "MAX_AGENT_STATE_BYTES",
    "MAX_DOCUMENT_BYTES",
    "READ_FIELDS",
    "UNNAMED_CREATE",
    "RetryPolicy",
    "TaskRepository",
    "agent_state_document",
    "document_estimate",
    "exposed",
    "plan_agent_step",
]

Part = TypeVar("Part")
P = ParamSpec("P")
R = TypeVar("R")


def exposed(
    attribute: str, method: Callable[Concatenate[Part, P], Coroutine[Any, Any, R]]
) -> Callable[Concatenate[object, P], Coroutine[Any, Any, R]]:
    """A part's documented coroutine method as the facade's own, calling the part held in
    `attribute`: its name, docstring and signature come along (`functools.wraps`), so
    `help()`, `inspect.signature` and the API docstring checks see the part's method, and
    the documentation is written once, beside the code it describes."""

    async def call(self: object, /, *args: P.args, **kwargs: P.kwargs) -> R:
        part: Part = getattr(self, attribute)
        return await method(part, *args, **kwargs)

    functools.update_wrapper(call, method)
    return call


@operations.operations("tasks")
class TaskRepository:
    """One tenant's tasks (one owner's, on an owner-scoped view).

    A facade: the parts it composes (see the module docstring) hold the logic; each public
    method here is the entry to one of them (a write documented here, a read documented on
    its part and exposed unchanged), so a verb or a read is found in one place and no part
    reaches into another's private helpers.
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
        self.reads = TaskReads(self.port)  # whole tasks: records, headers, listings
        self.message_reads = MessageReads(self.port)  # ranges, levels, spans, context source
        self.task_lifecycle = TaskLifecycle(self.port, self.reads)  # create, delete, state, title
        self.agent_states = AgentStates(self.port, self.writer)  # an agent graph's run state
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

    # ------------------------------------------------------------------ the verbs' entries
    # What `verbs.in_store` calls (`model.verb_homes.StoreHome`): the writer's two entries.
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
        return await self.task_lifecycle.create(
            owner=owner, title=title, content=content, config=config, messages=messages,
            task_id=task_id, state=state, metadata=metadata, replay=replay,
        )  # fmt: skip

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
        return await self.task_lifecycle.import_task(task, owner=owner, title=title)

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
        return await self.task_lifecycle.delete(task_id)

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
        return await self.task_lifecycle.set_state(task_id, state)

    async def set_title(self, task_id: str, title: str | None) -> None:
        """Set (or clear, with None) the task's title.

        Args:
            task_id: The task.
            title: The new title (at most 4,096 characters), or None.

        Raises:
            ValidationError: A title that is not a string or is too long.
            NotFound: No such task in this view.
        """
        await self.task_lifecycle.set_title(task_id, title)

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
        await self.agent_states.save(task_id, state, messages=messages)

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
        return await self.agent_states.load(task_id)

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
    # Each documented once, on the part that does it, and exposed here unchanged; after the
    # verbs: `list` below would otherwise shadow the builtin in their annotations.
    get = exposed("reads", TaskReads.get)
    header = exposed("reads", TaskReads.header)
    load = exposed("reads", TaskReads.load)
    list = exposed("reads", TaskReads.list)
    count = exposed("reads", TaskReads.count)
    read_range = exposed("message_reads", MessageReads.read_range)
    messages = exposed("message_reads", MessageReads.messages)
    ends = exposed("message_reads", MessageReads.ends)
    tail = exposed("message_reads", MessageReads.tail)
    get_message = exposed("message_reads", MessageReads.get_message)
    get_updates = exposed("message_reads", MessageReads.get_updates)
    current_task_level = exposed("message_reads", MessageReads.current_task_level)
    level_messages = exposed("message_reads", MessageReads.level_messages)
    current_task_messages = exposed("message_reads", MessageReads.current_task_messages)
    find_current_task_boundaries = exposed(
        "message_reads", MessageReads.find_current_task_boundaries
    )
    task_boundaries = exposed("message_reads", MessageReads.task_boundaries)
    sub_task_spans = exposed("message_reads", MessageReads.sub_task_spans)
    context_source = exposed("message_reads", MessageReads.context_source)
    current_task_config = exposed("message_reads", MessageReads.current_task_config)

    # ------------------------------------------------------------------ retraction and content
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
