"""In-memory values as the documents the store keeps: a task (with its messages in the lean
stored form) and a dialog-tree node. Used where documents are written whole, outside the
verbs' guarded updates: imports, restores, generated workloads, test fixtures."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from mindstore.clock import utcnow
from mindstore.header_codec import header_to_fields
from mindstore.ids import task_key
from mindstore.model.dialog import DialogNode
from mindstore.model.plans import stored_doc
from mindstore.model.task import Task

__all__ = ["node_document", "task_document"]


def node_document(
    node: DialogNode, tenant: str, created_at: datetime | None = None
) -> dict[str, Any]:
    """The stored document of a dialog-tree node (forks, imports, generated workloads)."""
    return {
        "_id": task_key(tenant, node.dialog_id),
        "tenant": tenant,
        **node.model_dump(exclude={"dialog_id", "created_at"}),
        "created_at": created_at or utcnow(),
    }


def task_document(
    task: Task,
    tenant: str,
    owner: str | None = None,
    title: str | None = None,
    created_at: datetime | None = None,
    updated_at: datetime | None = None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The stored document of an in-memory task (imports, restores, test fixtures)."""
    created = created_at or utcnow()
    return {
        "_id": task_key(tenant, task.id),
        "tenant": tenant,
        "owner": owner,
        "title": title,
        "content": [part.to_dict() for part in task.content],
        "state": task.state if isinstance(task.state, str) else task.state.value,
        "created_at": created,
        "updated_at": updated_at or created,
        "version": 0,
        "metadata": metadata,
        **header_to_fields(task.header),
        "messages": [stored_doc(message, task.id) for message in task.messages],
    }
