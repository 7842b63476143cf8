"""What `MindstoreSaver` stores through, as one object its helpers share: `ThreadStorage`.

The saver's pending writes (`langgraph_writes`) and its thread-wide operations
(`langgraph_admin`: delete, copy, prune) work on the same collections, tasks and keying
rules as the saver itself. They used to reach into the saver's private attributes and
methods; this is the seam they use instead, so the saver's own state stays its own and
what they depend on is named here: the tenant view's scope, the three collections (sealed
on a store with a keyring, `crypto.sealed_collection`), the tasks that hold the `messages`
channel, the serializer, the per-thread key rules and the cache of last-written heads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from mindstore.crypto.sealed_collection import ClearCollection, SealedCollection
from mindstore.errors import Conflict, NotFound, ValidationError
from mindstore.integrations import langgraph_keys as keys
from mindstore.integrations.conversation_ids import task_id_for
from mindstore.model.messages import AnyMessage, MessageBase, Origin
from mindstore.protocols import ConversationTasks

__all__ = ["Head", "ThreadStorage", "check_ours", "mark_copies"]

Collection = SealedCollection | ClearCollection
Head = tuple[str, dict[str, Any]]
"""(checkpoint id, its document's ms / b / iv): what a child inherits from its parent."""


@dataclass
class ThreadStorage:
    """One saver's collections, tasks and keying rules (see the module doc). The saver
    builds it once; its writes and admin helpers take it instead of the saver."""

    tenant: str
    owner: str | None
    checkpoints: Collection
    writes: Collection
    blobs: Collection
    tasks: ConversationTasks
    serde: SerializerProtocol
    messages_channel: str
    heads: dict[str, Head] = field(default_factory=dict)
    """Per (thread, namespace) key prefix, the checkpoint this saver wrote last and what a
    child inherits from it: a put that follows it reads nothing (`MindstoreSaver._around`)."""

    def scope(self) -> dict[str, Any]:
        """The filter every read of a checkpoint starts from: the tenant, and the owner on
        an owner-scoped view."""
        query: dict[str, Any] = {"tenant": self.tenant}
        if self.owner is not None:
            query["o"] = self.owner
        return query

    def ident(self, thread: str) -> str:
        """What keys are derived from: the thread id, with the owner on an owner-scoped view
        (two owners of a tenant may use the same thread id)."""
        return thread if self.owner is None else f"{self.owner}\x00{thread}"

    def home(self, thread: str, ident: str, ns: str) -> str:
        """The task a (thread, namespace) appends its messages to: the root namespace's is
        `task_id_for(thread)`, the same on every view, so mindstore's API finds it."""
        return task_id_for(thread, "thread_id") if ns == "" else keys.messages_task_id(ident, ns)

    def forget_heads(self, prefix: str | None = None) -> None:
        """Drop the cached heads under a key prefix (all of them: None), after documents
        were deleted or re-keyed behind the saver's back."""
        if prefix is None:
            self.heads.clear()
        else:
            self.heads = {k: v for k, v in self.heads.items() if not k.startswith(prefix)}

    async def create_messages_task(
        self, task: str, thread: str, ns: str, messages: list[Any]
    ) -> None:
        """A messages task holding `messages` (copies of another task's are re-homed, and
        the tasks they were copied from named in `copied_from`). Created before with these
        messages (a retry): nothing happens; another owner's task, or one holding other
        messages: NotFound, ValidationError."""
        metadata: dict[str, Any] = {
            "integration": keys.MARKER, "thread_id": thread, "checkpoint_ns": ns,
        }  # fmt: skip
        sources = sorted(
            {m.origin.task_id for m in messages if isinstance(m, MessageBase) and m.origin}
        )
        if sources:
            metadata["copied_from"] = sources
        for message in messages:
            message.task_id = ""
        try:
            await self.tasks.create(task_id=task, messages=messages, replay=True, metadata=metadata)
        except Conflict:
            try:
                record = await self.tasks.get(task)
            except NotFound:
                raise NotFound(
                    f"thread_id {thread!r}: its messages task {task!r} is another owner's "
                    "(a conversation id names one task per tenant)"
                ) from None
            check_ours(task, record.metadata, thread)
            held = await self.tasks.messages(task, 0, len(messages)) if messages else []
            if [m.id for m in held] != [m.id for m in messages]:  # else: created before (a retry)
                raise ValidationError(f"task {task!r} already holds other messages") from None


def check_ours(task: str, metadata: dict[str, Any] | None, thread: str) -> None:
    """A messages task must be this thread's (never append to a task of the same id that
    the application made itself)."""
    found = metadata or {}
    if found.get("integration") != keys.MARKER or found.get("thread_id") != thread:
        raise Conflict(
            f"task {task!r} exists and does not hold LangGraph thread {thread!r}'s messages"
        )


def mark_copies(kept: list[AnyMessage], source: str) -> None:
    """The first messages of `source`, kept by a branch, are copies (`origin`, the first
    origin kept, as `dialogs.fork` does): analytics count each model call once."""
    for index, message in enumerate(kept):
        if isinstance(message, MessageBase) and message.origin is None:
            message.origin = Origin(task_id=source, index=index)
