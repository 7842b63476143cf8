"""Microsoft Agent Framework workflow checkpoints kept in mindstore tasks:
`MindstoreCheckpointStorage`, the workflows' `CheckpointStorage` protocol.

A checkpoint is loaded and deleted by its id alone, and listed by its workflow's name, so
the storage keeps two kinds of task per view:

* a **checkpoint task** per checkpoint id (``_:agent-framework-checkpoint:<digest>``):
  one informational message holding the checkpoint encoded as the framework's own file
  storage encodes it (`encode_checkpoint_value`: JSON, with pickled values for what JSON
  cannot say), checked to decode under the storage's allowed types before it is saved;
* a **workflow task** per workflow name (``_:agent-framework-workflow:<digest>``): one
  small message per saved checkpoint (its id and timestamp), in save order; a deleted
  checkpoint's entry is redacted (`tasks.redact`), so the list skips it.

Digests are 32 hex digits of BLAKE2b over the id or name: neither is interpreted, and no
application conversation id names these tasks (`task_id_for` keeps no id starting with
``_:``). Message ids are derived from the checkpoint id, so saves are exactly-once: a save
retried after a lost reply (or after a crash between its two writes) stores one checkpoint
and one entry. A checkpoint is immutable: saving another checkpoint under a stored id
raises `Conflict`, and a deleted id is not reused.

Being tasks, checkpoints are sealed under a keyring, and backup, restore, erase and
retention cover them like any conversation; a dedicated collection would save the task
header per checkpoint, at the price of its own lifecycle paths.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from agent_framework import WorkflowCheckpoint
from agent_framework._workflows._checkpoint_encoding import (
    decode_checkpoint_value,
    encode_checkpoint_value,
)
from agent_framework.exceptions import WorkflowCheckpointException

from mindstore.errors import Conflict, NotFound, ValidationError
from mindstore.integrations._derived_ids import derived_id
from mindstore.integrations._session import scoped_owner
from mindstore.integrations.conversation_ids import MAPPED_PREFIX, check_conversation_id
from mindstore.model.messages import AnyMessage, InformationalMessage
from mindstore.model.parts import InformationalPart
from mindstore.protocols import StateView

__all__ = ["MARKER", "MindstoreCheckpointStorage", "checkpoint_task_id", "workflow_task_id"]

logger = logging.getLogger(__name__)

MARKER = {"integration": "agent-framework-checkpoints"}
"""Task metadata of the storage's tasks."""
CHECKPOINT = "workflow-checkpoint"
ENTRY = "workflow-checkpoint-entry"


def _task_id(kind: str, value: Any, what: str) -> str:
    check_conversation_id(value, what)
    digest = hashlib.blake2b(value.encode("utf-8"), digest_size=16).hexdigest()
    return f"{MAPPED_PREFIX}agent-framework-{kind}:{digest}"


def checkpoint_task_id(checkpoint_id: str) -> str:
    """The task that holds a checkpoint.

    Raises:
        ValidationError: Not a non-empty string of at most 512 characters without control
            characters.
    """
    return _task_id("checkpoint", checkpoint_id, "checkpoint_id")


def workflow_task_id(workflow_name: str) -> str:
    """The task that lists a workflow's checkpoints.

    Raises:
        ValidationError: As `checkpoint_task_id`, for `workflow_name`.
    """
    return _task_id("workflow", workflow_name, "workflow_name")


def _message(message_id: str, kind: str, details: str) -> InformationalMessage:
    return InformationalMessage(
        id=message_id, content=[InformationalPart(informational_type=kind, details=details)]
    )


def _details(message: AnyMessage, kind: str) -> str | None:
    """The text a storage message holds (None: redacted, or not the storage's)."""
    for part in getattr(message, "content", ()):
        if isinstance(part, InformationalPart) and part.informational_type == kind:
            return part.details
    return None


class MindstoreCheckpointStorage:
    """Agent Framework's `CheckpointStorage` kept in mindstore tasks (see the module doc).

    Args:
        view: A `TenantStore` (`store.scoped(tenant)`, optionally with an owner).
        owner: The owner new tasks get (an owner-scoped view's own by default).
        allowed_checkpoint_types: Types beyond the framework's safe set that a checkpoint
            may hold (``"module:qualname"``), as for `FileCheckpointStorage`.

    Example:
        ```python
        storage = MindstoreCheckpointStorage(acme)
        workflow = WorkflowBuilder(start_executor=first, checkpoint_storage=storage).build()
        ```
    """

    def __init__(
        self,
        view: StateView,
        *,
        owner: str | None = None,
        allowed_checkpoint_types: Iterable[str] | None = None,
    ) -> None:
        self.view = view
        self.owner = scoped_owner(view, owner)
        self._allowed = frozenset(allowed_checkpoint_types or ())

    def _encoded(self, checkpoint: WorkflowCheckpoint) -> str:
        try:
            encoded = encode_checkpoint_value(checkpoint.to_dict())
            decode_checkpoint_value(encoded, allowed_types=self._allowed)
            return json.dumps(encoded, ensure_ascii=False, sort_keys=True)
        except WorkflowCheckpointException:
            raise
        except Exception as error:
            raise WorkflowCheckpointException(
                f"Checkpoint {checkpoint.checkpoint_id} cannot be encoded or restored under "
                "this storage's allowed types; refusing to save."
            ) from error

    def _decoded(self, text: str) -> WorkflowCheckpoint:
        decoded = decode_checkpoint_value(json.loads(text), allowed_types=self._allowed)
        return WorkflowCheckpoint.from_dict(decoded)

    async def _append(self, task_id: str, message: InformationalMessage, name: str) -> None:
        """Append (exactly-once by message id), creating the task on the first save."""
        tasks = self.view.tasks
        try:
            await tasks.add_messages(task_id, [message])
        except NotFound:
            try:
                await tasks.create(
                    task_id=task_id, owner=self.owner, metadata={**MARKER, "name": name},
                    messages=[message],
                )  # fmt: skip
            except Conflict:  # created meanwhile: a racing writer, a retry that landed
                await tasks.get(task_id)  # NotFound if it is another owner's
                await tasks.add_messages(task_id, [message])

    async def _stored(self, checkpoint_id: str) -> str | None:
        task_id = checkpoint_task_id(checkpoint_id)
        try:
            message = await self.view.tasks.get_message(
                task_id, derived_id(CHECKPOINT, checkpoint_id)
            )
        except NotFound:
            return None
        return _details(message, CHECKPOINT) if message is not None else None

    async def save(self, checkpoint: WorkflowCheckpoint) -> str:
        """Store a checkpoint (exactly-once by its id) and list it under its workflow.

        Returns:
            The checkpoint's id.

        Raises:
            ValidationError: Not a `WorkflowCheckpoint`, or a bad id or workflow name.
            WorkflowCheckpointException: It cannot be encoded, or would not decode under the
                allowed types (nothing is written).
            Conflict: Another checkpoint is stored under its id, or it was deleted.
            NotFound: Its task, or its workflow's, is another owner's (owner-scoped view).
        """
        if not isinstance(checkpoint, WorkflowCheckpoint):
            got = type(checkpoint).__name__
            raise ValidationError(f"invalid checkpoint: expected a WorkflowCheckpoint, got {got}")
        checkpoint_id, name = checkpoint.checkpoint_id, checkpoint.workflow_name
        index_id = workflow_task_id(name)
        text = self._encoded(checkpoint)
        stored = await self._stored(checkpoint_id)
        if stored is not None and stored != text:
            raise Conflict(f"checkpoint_id {checkpoint_id!r}: another checkpoint is stored")
        message_id = derived_id(CHECKPOINT, checkpoint_id)
        if stored is None and await self._was_deleted(index_id, message_id):
            raise Conflict(f"checkpoint_id {checkpoint_id!r}: deleted, and ids are not reused")
        if stored is None:
            await self._append(
                checkpoint_task_id(checkpoint_id), _message(message_id, CHECKPOINT, text),
                checkpoint_id,
            )  # fmt: skip
        entry = json.dumps({"id": checkpoint_id, "timestamp": checkpoint.timestamp})
        await self._append(index_id, _message(message_id, ENTRY, entry), name)
        return checkpoint_id

    async def _was_deleted(self, index_id: str, message_id: str) -> bool:
        try:
            entry = await self.view.tasks.get_message(index_id, message_id)
        except NotFound:
            return False
        return entry is not None and _details(entry, ENTRY) is None

    async def load(self, checkpoint_id: str) -> WorkflowCheckpoint:
        """The checkpoint stored under this id.

        Raises:
            ValidationError: A bad id.
            WorkflowCheckpointException: None is stored, or it cannot be decoded.
        """
        text = await self._stored(checkpoint_id)
        if text is None:
            raise WorkflowCheckpointException(f"No checkpoint found with ID {checkpoint_id}")
        return self._decoded(text)

    async def _entries(self, workflow_name: str) -> list[tuple[str, str]]:
        """(checkpoint id, timestamp) of the workflow's stored checkpoints, in save order."""
        try:
            messages = await self.view.tasks.messages(workflow_task_id(workflow_name))
        except NotFound:
            return []
        entries: list[tuple[str, str]] = []
        for message in messages:
            text = _details(message, ENTRY)
            if text is not None:
                entry = json.loads(text)
                entries.append((str(entry["id"]), str(entry["timestamp"])))
        return entries

    async def list_checkpoint_ids(self, *, workflow_name: str) -> list[str]:
        """The ids of the workflow's stored checkpoints, in save order.

        One read of the workflow's list, then one header read per entry: a checkpoint
        erased by retention or by an erase of its owner is not listed.
        """
        found: list[str] = []
        for checkpoint_id, _ in await self._entries(workflow_name):
            try:
                await self.view.tasks.get(checkpoint_task_id(checkpoint_id))
            except NotFound:
                continue
            found.append(checkpoint_id)
        return found

    async def list_checkpoints(self, *, workflow_name: str) -> list[WorkflowCheckpoint]:
        """The workflow's stored checkpoints, in save order.

        One that does not decode under this storage's allowed types is skipped with a
        warning in the log, as the framework's file and Cosmos storages skip it.
        """
        found: list[WorkflowCheckpoint] = []
        for checkpoint_id, _ in await self._entries(workflow_name):
            text = await self._stored(checkpoint_id)
            if text is None:
                continue
            try:
                found.append(self._decoded(text))
            except WorkflowCheckpointException as error:
                logger.warning("checkpoint %s skipped: %s", checkpoint_id, error)
        return found

    async def get_latest(self, *, workflow_name: str) -> WorkflowCheckpoint | None:
        """The workflow's checkpoint with the latest timestamp (None: it has none)."""
        entries = await self._entries(workflow_name)
        for checkpoint_id, _ in sorted(
            entries, key=lambda e: datetime.fromisoformat(e[1]), reverse=True
        ):
            text = await self._stored(checkpoint_id)
            if text is not None:
                return self._decoded(text)
        return None

    async def delete(self, checkpoint_id: str) -> bool:
        """Delete a checkpoint: its entry is redacted from its workflow's list, then its task
        is deleted (a retry after a crash between the two finishes the job).

        Returns:
            True if a checkpoint was stored under this id.

        Raises:
            ValidationError: A bad id.
        """
        text = await self._stored(checkpoint_id)
        if text is None:
            return False
        name = str(json.loads(text)["workflow_name"])  # read without decoding its values
        with contextlib.suppress(NotFound):  # listed nowhere: a save crashed before its entry
            await self.view.tasks.redact(
                workflow_task_id(name), derived_id(CHECKPOINT, checkpoint_id), reason="deleted"
            )
        try:
            return await self.view.tasks.delete(checkpoint_task_id(checkpoint_id))
        except NotFound:
            return False
